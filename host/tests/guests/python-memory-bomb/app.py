"""Hostile Python guest: allocates (and touches) one MiB after another in `resume` until the
host's memory ceiling stops it. A `MemoryError` is caught and the hoarding goes on, so only
the host can end it."""

from ahp_agent import Agent, export


class MemoryBomb(Agent):
    def resume(self):
        hoard = []
        while True:
            try:
                hoard.append(bytearray(b"\xa5" * (1 << 20)))
            except MemoryError:
                pass


WitWorld = export(MemoryBomb)
