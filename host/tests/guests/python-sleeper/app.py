"""Hostile Python guest: `time.sleep(30)` in `resume`, a blocking `wasi:io/poll` far longer
than any tier's wall clock, where fuel cannot reach it. A sleep that ever returns is a
failure of the host: the guest then fails its activation saying so."""

import time

from ahp_agent import Agent, export


class Sleeper(Agent):
    def resume(self):
        started = time.monotonic()
        time.sleep(30)
        raise RuntimeError(f"slept {time.monotonic() - started:.1f} s: the host did not stop the turn")


WitWorld = export(Sleeper)
