"""Small helpers for tests that talk to a real API server: waiting with a deadline, fresh namespaces."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Timeout(AssertionError):
    pass


def wait_for(check: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.25) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise Timeout(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def seconds_to_next_minute(now: float | None = None) -> float:
    now = time.time() if now is None else now
    return 60 - now % 60
