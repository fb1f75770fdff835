"""The operator's work queue: one retry timer per failing key, and workers that never die."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest

from appschedule import handlers


def run(controller_test: Any) -> None:
    asyncio.run(asyncio.wait_for(controller_test(), timeout=20))


def test_failing_key_gets_one_timer_and_the_workers_survive(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    def failing(cluster: object, key: tuple[str, str], now: datetime) -> handlers.Outcome:
        calls.append(key)
        if key[1] == "bad":
            raise RuntimeError("boom")
        if key[1] == "worse":
            raise SystemExit("a BaseException from deep inside")
        return handlers.Outcome()

    monkeypatch.setattr(handlers, "reconcile", failing)

    async def scenario() -> None:
        controller = handlers.Controller(cluster=None, options=handlers.Options(resync_seconds=3600, workers=2))  # type: ignore[arg-type]
        await controller.start()
        for _ in range(50):  # a storm of events for the failing key while it backs off
            controller.enqueue(("ns", "bad"))
            controller.enqueue(("ns", "worse"))
            await asyncio.sleep(0.01)
        assert len(controller.backoff) <= 2  # one timer per failing key, never a pile
        controller.enqueue(("ns", "good"))
        while ("ns", "good") not in calls:
            await asyncio.sleep(0.01)
        assert all(not task.done() for task in controller.tasks)  # no worker died
        await controller.stop()

    run(scenario)
    assert calls.count(("ns", "bad")) <= 3  # 0.5 s, then 1 s of back-off within half a second of storm


def test_backoff_is_capped() -> None:
    async def scenario() -> None:
        controller = handlers.Controller(cluster=None, options=handlers.Options())  # type: ignore[arg-type]
        controller.failures[("ns", "x")] = 5000
        controller._retry(("ns", "x"), "still failing")
        timer = controller.backoff[("ns", "x")]
        assert timer.when() - asyncio.get_running_loop().time() <= 60.5
        timer.cancel()

    run(scenario)
