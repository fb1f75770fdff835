"""The work queue and the workers: lanes, one retry timer per failing key, workers that never die."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from appschedule.core.view import project_appschedule
from appschedule.shell.api import Cluster
from appschedule.shell.controller import Controller, Options, Outcome, Result
from appschedule.shell.workqueue import WorkQueue


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=20))


def controller(workers: int = 2, resync: float = 3600) -> Controller:
    made = Controller(cluster=None, options=Options(resync_seconds=resync, workers=workers))  # type: ignore[arg-type]
    made.listed.set()
    return made


def test_failing_key_gets_one_timer_and_the_workers_survive(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    async def failing(self: Controller, key: tuple[str, str], now: datetime) -> Result:
        calls.append(key)
        if key[1] == "bad":
            raise RuntimeError("boom")
        if key[1] == "worse":
            raise SystemExit("a BaseException from deep inside")
        return Result(Outcome())

    monkeypatch.setattr(Controller, "reconcile", failing)

    async def scenario() -> None:
        made = controller()
        await made.start()
        for _ in range(50):  # a storm of resyncs of the failing keys while they back off
            made.queue.add(("ns", "bad"), urgent=False)
            made.queue.add(("ns", "worse"), urgent=False)
            await asyncio.sleep(0.01)
        assert len(made.queue.backoff) <= 2  # one timer per failing key, never a pile
        made.queue.add(("ns", "good"))
        while ("ns", "good") not in calls:
            await asyncio.sleep(0.01)
        assert all(not task.done() for task in made.tasks)  # no worker died
        await made.stop()

    run(scenario)
    assert calls.count(("ns", "bad")) <= 3  # 0.5 s, then 1 s of back-off within half a second of storm


def test_a_real_change_retries_a_backing_off_key_at_once() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        key = ("ns", "x")
        queue.add(key)
        assert await queue.get() == key
        queue.failures[key] = 6
        queue.done(key, retry_in=queue.failed(key))  # 32 s of back-off
        queue.add(key, urgent=False)  # a resync waits for the timer
        assert len(queue) == 0
        queue.add(key)  # a watch event: the user fixed it
        assert len(queue) == 1 and key not in queue.backoff
        assert await asyncio.wait_for(queue.get(), 1) == key

    run(scenario)


def test_events_go_before_resyncs() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        for i in range(100):
            queue.add(("ns", f"resync-{i}"), urgent=False)
        queue.add(("ns", "edited"))
        queue.add(("ns", "resync-50"))  # an event for a key waiting in the background lane moves it
        assert [await queue.get(), await queue.get()] == [("ns", "edited"), ("ns", "resync-50")]
        assert len(queue) == 99

    run(scenario)


def test_a_key_changed_while_processed_is_processed_again_after() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add(("ns", "x"))
        key = await queue.get()
        queue.add(key)
        assert len(queue) == 0  # never twice at once
        queue.done(key)
        assert await asyncio.wait_for(queue.get(), 1) == key

    run(scenario)


def test_backoff_is_capped() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.failures[("ns", "x")] = 5000
        assert queue.failed(("ns", "x")) <= 60

    run(scenario)


def test_liveness_fails_when_a_worker_is_stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        made = controller()
        made.cluster = Cluster(client.ApiClient())  # makes no request here
        assert made.health()["active"] == 0
        made.queue.add(("ns", "x"))
        await made.queue.get()
        made.queue.active[("ns", "x")] -= 1000  # taken 1000 s ago and not done
        with pytest.raises(RuntimeError, match="stuck"):
            made.health()

    run(scenario)


def test_a_paused_replica_takes_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    async def record(self: Controller, key: tuple[str, str], now: datetime) -> Result:
        calls.append(key)
        return Result(Outcome())

    monkeypatch.setattr(Controller, "reconcile", record)

    async def scenario() -> None:
        made = controller(resync=0.05)
        await made.start()
        made.running.clear()  # kopf peering paused this replica
        await asyncio.sleep(0.05)
        made.queue.add(("ns", "x"))
        await asyncio.sleep(0.3)
        assert calls == []
        made.running.set()
        while not calls:
            await asyncio.sleep(0.01)
        await made.stop()

    run(scenario)


def test_a_resync_replans_only_what_time_changed_except_on_a_full_round() -> None:
    async def scenario() -> None:
        made = controller()
        for name, upcoming in (("later", "2026-03-27T13:00:00Z"), ("passed", "2026-03-27T11:00:00Z")):
            body = {
                "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": "1"},
                "spec": {"deploymentRef": {"name": "web"}, "tasks": []},
                "status": {"nextRunTime": upcoming},
            }
            made.store.put_appschedule(project_appschedule(body))
        now = datetime(2026, 3, 27, 12, tzinfo=UTC)
        assert made.due(now, full=False) == [("ns", "passed")]
        assert sorted(made.due(now, full=True)) == [("ns", "later"), ("ns", "passed")]

    run(scenario)


def test_the_first_full_resync_comes_a_full_period_after_the_start_planned_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def scenario() -> None:
        made = Controller(cluster=None, options=Options(resync_seconds=0.05, workers=0, full_resync_every=4))  # type: ignore[arg-type]
        body = {
            "metadata": {"name": "later", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
            "spec": {"deploymentRef": {"name": "web"}, "tasks": []},
            "status": {"nextRunTime": "2999-01-01T00:00:00Z"},  # time alone changes nothing: only full rounds
        }
        made.store.put_appschedule(project_appschedule(body))
        rounds: list[float] = []
        clock = asyncio.get_running_loop().time
        monkeypatch.setattr(made.queue, "add", lambda key, urgent=True: rounds.append(clock()))
        made.listed.set()
        await made.start()
        started = asyncio.get_running_loop().time()
        while len(rounds) < 2:
            await asyncio.sleep(0.01)
        await made.stop()
        # three periods without a re-plan (the start planned it), then one full round every four periods
        assert rounds[0] - started >= 3 * 0.05 - 0.01
        assert rounds[1] - rounds[0] >= 4 * 0.05 - 0.01

    run(scenario)


def test_an_api_server_outage_grows_no_long_back_off_and_its_return_retries_every_key_at_once() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        away = [("ns", f"app-{i}") for i in range(3)]
        for key in away:  # two minutes of outage: many failures each
            queue.failures[key] = 40
            queue.add(key)
            assert await queue.get() == key
            delay = queue.failed(key, transient=True)
            assert delay <= 5  # not the 60 s a real error of the object would earn
            queue.done(key, retry_in=delay)
        broken = ("ns", "broken")  # a real error: keeps its back-off
        queue.add(broken)
        assert await queue.get() == broken
        queue.failures[broken] = 6
        queue.done(broken, retry_in=queue.failed(broken))
        assert len(queue) == 0
        ok = ("ns", "other")  # the first reconcile that succeeds: the API server is back
        queue.add(ok)
        assert await queue.get() == ok
        queue.done(ok)
        assert sorted([await asyncio.wait_for(queue.get(), 1) for _ in away]) == away
        assert len(queue) == 0 and broken in queue.backoff and not queue.transient

    run(scenario)


def test_a_burst_of_job_events_is_one_add() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        for _ in range(5):  # created, pod started, finished, filed... within the moment
            queue.add_soon(("ns", "x"), delay=0.05)
        assert len(queue) == 0  # not yet
        assert await asyncio.wait_for(queue.get(), 1) == ("ns", "x")
        queue.done(("ns", "x"))
        await asyncio.sleep(0.1)
        assert len(queue) == 0 and not queue.soon  # the burst was one add
        queue.add(("ns", "y"))
        queue.add_soon(("ns", "y"), delay=0.01)  # already queued: covered
        assert not queue.soon

    run(scenario)


def test_a_key_taken_for_another_cause_drops_its_waiting_burst_add() -> None:
    """A Job's event waits for its burst (add_soon); the CronJob's change queues the key at once, and that
    reconcile reads the Job's event from the store: no second reconcile when the burst's moment is up. An event
    after the key was taken waits for a reconcile of its own."""

    async def scenario() -> None:
        queue, key = WorkQueue(), ("ns", "x")
        queue.add_soon(key, delay=0.05)
        queue.add(key)
        assert await asyncio.wait_for(queue.get(), 1) == key and not queue.soon
        queue.add_soon(key, delay=0.05)  # came while it was reconciled
        queue.done(key)
        await asyncio.sleep(0.1)
        assert len(queue) == 1 and await asyncio.wait_for(queue.get(), 1) == key
        queue.done(key)
        await asyncio.sleep(0.1)
        assert len(queue) == 0 and not queue.soon

    run(scenario)
