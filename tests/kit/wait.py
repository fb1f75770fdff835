"""Waiting on a condition with a deadline: poll, fail naming what was awaited and what was last seen."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class Timeout(AssertionError):
    """A condition did not hold within its deadline (an AssertionError: a test fails, it does not error)."""


def wait_for(
    check: Callable[[], T | None],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    ignore: tuple[type[BaseException], ...] = (),
    guard: Callable[[], None] | None = None,
) -> T:
    """Poll ``check`` until it returns something truthy, and return that. ``ignore``: exceptions that
    count as "not yet" (an API server that is away on purpose); ``guard`` raises when waiting is pointless
    (the process awaited has exited). Fails with ``Timeout`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        if guard is not None:
            guard()
        try:
            last = check()
        except ignore as error:
            last = None
            if time.monotonic() > deadline:
                raise Timeout(f"timed out after {timeout:.0f}s waiting for {what} (last: {error!r})") from error
        if last:
            return last
        if time.monotonic() > deadline:
            raise Timeout(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


async def until(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    ignore: tuple[type[BaseException], ...] = (),
    guard: Callable[[], None] | None = None,
    wake: Callable[[float], Awaitable[object]] | None = None,
) -> T:
    """``wait_for`` on an event loop, for a ``check`` that awaits: the loop keeps running meanwhile. ``wake``:
    instead of sleeping ``interval``, await ``wake(at_most)`` (an event that says the answer may have changed,
    as a watch's events do), so the check runs as soon as it can hold."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        if guard is not None:
            guard()
        try:
            last = await check()
        except ignore:
            last = None
        if last:
            return last
        if time.monotonic() > deadline:
            raise Timeout(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        if wake is None:
            await asyncio.sleep(interval)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake(interval), max(0.0, min(interval, deadline - time.monotonic())))


def seconds_to_next_minute(now: float | None = None) -> float:
    """Seconds to the next wall-clock minute boundary, where CronJobs fire."""
    now = time.time() if now is None else now
    return 60 - now % 60
