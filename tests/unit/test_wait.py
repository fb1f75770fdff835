"""The one wait helper (tests/kit/wait.py) the tests, the benchmark and the local cluster share."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.kit.wait import Timeout, until, wait_for


def test_wait_for_returns_what_held_and_names_what_it_awaited_when_it_did_not() -> None:
    calls = iter([None, 0, "ready"])
    assert wait_for(lambda: next(calls), timeout=5, what="ready", interval=0.01) == "ready"
    with pytest.raises(Timeout, match=r"timed out after 0s waiting for the thing \(last: False\)"):
        wait_for(lambda: False, timeout=0.05, what="the thing", interval=0.01)


def test_until_woken_by_an_event_checks_at_once_not_after_its_interval() -> None:
    async def scenario() -> float:
        event, state = asyncio.Event(), {"done": False}

        async def check() -> bool:
            return state["done"]

        async def wake(_: float) -> None:
            await event.wait()

        async def later() -> None:
            await asyncio.sleep(0.05)
            state["done"] = True
            event.set()

        started = time.monotonic()
        helper = asyncio.create_task(later())
        await until(check, timeout=10, what="done", interval=5, wake=wake)
        await helper
        return time.monotonic() - started

    assert asyncio.run(scenario()) < 2  # not the 5 s interval


def test_until_stops_at_its_deadline_even_when_nothing_wakes_it() -> None:
    async def never(_: float) -> None:
        await asyncio.Event().wait()

    async def check() -> bool:
        return False

    with pytest.raises(Timeout, match="waiting for nothing"):
        asyncio.run(until(check, timeout=0.2, what="nothing", interval=5, wake=never))
