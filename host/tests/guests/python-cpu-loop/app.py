"""Hostile Python guest: spins in a pure-Python loop in `resume` until the host's fuel (or
wall-clock) ceiling stops it."""

from ahp_agent import Agent, export


class CpuLoop(Agent):
    def resume(self):
        n = 0
        while True:
            n += 1


WitWorld = export(CpuLoop)
