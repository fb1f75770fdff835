"""A plan that reuses quiet ledger steps (reconcile.Quiets) plans exactly what one that steps every ledger does: an
AppSchedule of three tasks in Berlin through the two nights its clocks change (an hour of several fires that never
comes, and one that comes twice), the Jobs appearing, running and ending as the CronJob controller and the Job
controller would, planned every 13 seconds, its status written back as the shell writes it."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from appschedule.core import keys, naming
from appschedule.core.reconcile import Plan, Quiets, plan
from appschedule.core.schedule import fires_between, parse
from tests.kit.worlds import world_of

TASKS = [("beat", "* * * * *"), ("sweep", "*/20 * * * *"), ("nightly", "30 2 * * *")]
# 02:00 in Berlin, an hour before it changes its clocks: in spring 02:00 to 03:00 never comes (no 02:30), in autumn
# it comes twice (02:30 twice, with one key)
NIGHTS = [datetime(2026, 3, 29, 0, 0, tzinfo=UTC), datetime(2026, 10, 25, 0, 0, tzinfo=UTC)]


def appschedule(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "shop", "namespace": "shop", "uid": "uid-shop", "generation": 1,
                     "creationTimestamp": "2026-10-01T00:00:00Z"},
        "spec": {"deploymentRef": {"name": "web"}, "timeZone": "Europe/Berlin",
                 "tasks": [{"name": n, "schedule": s, "command": ["run"]} for n, s in TASKS]},
        "status": status,
    }  # fmt: skip


def job(task: str, fire: datetime, now: datetime, released: set[str]) -> dict[str, Any] | None:
    """A fire's Job as the watch shows it at ``now``: made 2 s after its time, running for 40 s (the nightly one
    fails), its finalizer gone once the operator released it; None before it is made."""
    created = fire + timedelta(seconds=2)
    if now < created:
        return None
    name = f"shop-{task}-{int(fire.timestamp()) // 60}"
    ended = created + timedelta(seconds=40)
    status: dict[str, Any] = {"active": 1}
    if now >= ended:
        kind = "Failed" if task == "nightly" else "Complete"
        at = keys.rfc3339(ended)
        status = {"failed" if kind == "Failed" else "succeeded": 1, "completionTime": at,
                  "conditions": [{"type": kind, "status": "True", "lastTransitionTime": at}]}  # fmt: skip
    return {
        "metadata": {
            "name": name, "namespace": "shop", "uid": name, "resourceVersion": "1",
            "creationTimestamp": keys.rfc3339(created),
            "labels": naming.labels("shop", task),
            "annotations": {naming.CRONJOB_SCHEDULED_TIMESTAMP: keys.rfc3339(fire),
                            naming.ANNOTATION_IDEMPOTENCY_KEY: keys.key_of(task, fire),
                            **({naming.ANNOTATION_FILED: "true"} if name in released else {})},
            "finalizers": [] if name in released else [naming.LEDGER_FINALIZER],
        },
        "spec": {"completions": 1},
        "status": status,
    }  # fmt: skip


def night(
    deployment: dict[str, Any], start: datetime
) -> tuple[datetime, dict[str, Any], dict[str, list[datetime]], Plan, list[dict[str, Any]]]:
    """The night from ``start``: when it ends, the Deployment, each task's fires, the first plan, and the CronJobs
    it applied as the API server holds them."""
    end = start + timedelta(hours=2, minutes=10)
    deployment = {**deployment, "metadata": {**deployment["metadata"], "name": "web", "namespace": "shop"}}
    fires = {n: list(fires_between(parse(s, "Europe/Berlin"), start - timedelta(minutes=1), end)) for n, s in TASKS}
    first = plan(world_of(appschedule({}), deployment), start)
    made = {"creationTimestamp": "2026-10-01T00:00:00Z"}
    cronjobs = [{**m, "metadata": {**m["metadata"], "uid": f"cj-{m['metadata']['name']}", **made}} for m in first.apply]
    return end, deployment, fires, first, cronjobs


def done(result: Plan) -> dict[str, Any]:
    """What a plan decides, all of it the shell acts on, but when it wakes next (below)."""
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.name != "wake_at"}


@pytest.mark.parametrize("start", NIGHTS, ids=["spring", "autumn"])
def test_a_plan_reusing_quiet_steps_is_the_plan_that_steps_every_ledger(
    deployment: dict[str, Any], start: datetime
) -> None:
    end, deployment, fires, first, cronjobs = night(deployment, start)
    status, quiets = first.status, Quiets()
    released: set[str] = set()
    now, steps, earlier = start, 0, 0
    while now < end:
        jobs = [j for n, times in fires.items() for f in times if (j := job(n, f, now, released)) is not None]
        world = world_of(appschedule(status), deployment, cronjobs, jobs=jobs)
        reused, stepped = plan(world, now, quiets=quiets), plan(world, now)
        assert done(reused) == done(stepped), now
        # a reused step wakes at its own wake_at: no later than stepping again would (then it is stepped again)
        assert reused.wake_at is not None and (stepped.wake_at is None or reused.wake_at <= stepped.wake_at), now
        earlier += reused.wake_at != stepped.wake_at
        if stepped.status_changed:  # written, and the Jobs it records let go
            status = stepped.status
            released |= set(stepped.release)
        steps += 1
        now += timedelta(seconds=13)
    assert steps > 550 and quiets.hits > steps  # most of the tasks' steps were reused, and nothing differed
    assert earlier < steps / 4, earlier


def test_the_steps_kept_stay_within_their_bound_and_the_ones_in_use_stay() -> None:
    """At most ``size`` steps (about 12 KiB each); the least recently planned go first, and a step reused counts as
    planned (so the steps in use are not the ones evicted)."""
    quiets = Quiets(size=3)
    kept = object()
    for name in ("a", "b", "c"):
        quiets.put(("shop", name, "t"), kept)  # type: ignore[arg-type]
    assert quiets.get(("shop", "a", "t")) is kept  # reused: now the most recent
    quiets.put(("shop", "d", "t"), kept)
    assert len(quiets) == 3 and quiets.get(("shop", "b", "t")) is None  # b, the least recent, went
    assert quiets.get(("shop", "a", "t")) is kept
    quiets.put(("shop", "a", "t"), None)  # a step that does not stand replaces it with nothing
    assert quiets.get(("shop", "a", "t")) is None and len(quiets) == 2
