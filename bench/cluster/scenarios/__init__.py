"""The scenarios, one module each (``--scenarios``); each function takes the run's ``Bench``."""

from . import admission, change, cold, fires, idle, restart, rollout, shares

__all__ = ["admission", "change", "cold", "fires", "idle", "restart", "rollout", "shares"]
