"""The functional core: pure functions and value types, with `now` passed in.

Invariant (enforced by import-linter, `.importlinter`): nothing here imports the shell, a client of the
cluster, kopf, asyncio, threads or the clock, and nothing here reads the clock (`datetime.now`); every
function gives the same answer for the same arguments, so each is unit-tested without a cluster.
"""
