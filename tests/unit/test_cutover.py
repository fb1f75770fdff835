"""The cut-over from an existing CronJob (core/cutover.py, and plan() around it): every fire is run by one side,
the old CronJob's up to the cut, the task's after it; the old one is suspended only after its last fire; a
CronJob nobody handed over is never touched. Times include Europe/Berlin's transitions of 2026 (29 March, 25
October) and an hour with several fires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from appschedule.core import cutover, naming
from appschedule.core.reconcile import plan
from appschedule.core.schedule import parse
from appschedule.core.view import project_cronjob
from tests.kit.worlds import world_of


def z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def old_cronjob(
    schedule: str,
    zone: str | None = "Europe/Berlin",
    *,
    last: str | None = None,
    suspend: bool = False,
    labelled: bool = True,
    name: str = "nightly",
    controller: str | None = None,
) -> dict[str, Any]:
    labels = cutover.labels_for("shop") if labelled else {"app": "legacy"}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "shop",
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "creationTimestamp": "2025-01-01T00:00:00Z",
        "labels": labels,
    }
    if controller:
        metadata["ownerReferences"] = [{"kind": "AppSchedule", "name": "other", "uid": controller, "controller": True}]
    spec: dict[str, Any] = {"schedule": schedule, "suspend": suspend, "jobTemplate": {"spec": {"template": {}}}}
    if zone:
        spec["timeZone"] = zone
    return {"metadata": metadata, "spec": spec, "status": {"lastScheduleTime": last} if last else {}}


def ours_cronjob(created: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "shop-report", "namespace": "shop", "uid": "uid-ours", "creationTimestamp": created},
        "spec": {},
    }


def step_at(now: str, schedule: str, old: dict[str, Any] | None, ours: dict[str, Any] | None = None) -> cutover.Step:
    return cutover.step(
        task="report",
        source="nightly",
        schedule=parse(schedule, "Europe/Berlin"),
        old=project_cronjob(old) if old else None,
        ours=project_cronjob(ours) if ours else None,
        now=z(now),
    )


def test_an_old_cronjob_nobody_handed_over_keeps_every_fire() -> None:
    step = step_at("2026-03-27T12:00:30Z", "*/5 * * * *", None)
    assert (step.state, step.make, step.suspend) == ("Waiting", False, False)
    assert "not labelled" in step.message and "import cronjob nightly --cut-over" in step.message


@pytest.mark.parametrize(
    ("now", "schedule", "next_fire"),
    [
        ("2026-03-27T11:59:52Z", "* * * * *", "2026-03-27T12:00:00Z"),  # a fire 8 s away
        ("2026-03-27T12:14:55Z", "*/15 13 * * *", "2026-03-27T12:15:00Z"),  # an hour with several fires (CET)
        ("2026-10-25T01:29:51Z", "30 2 * * *", "2026-10-25T01:30:00Z"),  # the repeated 02:30 of the fall-back
        ("2026-03-29T00:59:55Z", "0 * * * *", "2026-03-29T01:00:00Z"),  # 03:00 CEST, just after the spring gap
    ],
)
def test_no_cut_seconds_before_a_fire(now: str, schedule: str, next_fire: str) -> None:
    """The task's CronJob made now could be created after the fire: it waits for the fire to pass."""
    step = step_at(now, schedule, old_cronjob(schedule))
    assert (step.state, step.make, step.suspend) == ("Holding", False, False)
    assert step.wake_at == z(next_fire) + timedelta(seconds=1)


def test_the_cut_is_made_between_fires() -> None:
    step = step_at("2026-03-27T12:00:30Z", "* * * * *", old_cronjob("* * * * *", last="2026-03-27T12:00:00Z"))
    assert (step.state, step.make, step.suspend) == ("Handing", True, False)


@pytest.mark.parametrize(
    ("schedule", "created", "last_fire", "next_fire"),
    [
        ("* * * * *", "2026-03-27T12:00:30Z", "2026-03-27T12:00:00Z", "2026-03-27T12:01:00Z"),
        ("*/20 2 * * *", "2026-10-25T00:25:00Z", "2026-10-25T00:20:00Z", "2026-10-25T00:40:00Z"),  # 02:25 CEST
        # 02:45 CEST of the fall-back: the last fire is the first 02:30, the next the second one (the same key)
        ("30 2 * * *", "2026-10-25T00:45:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z"),
        # 03:10 CEST on the spring-forward day: 02:30 did not happen; the last fire is the day before
        ("30 2 * * *", "2026-03-29T01:10:00Z", "2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z"),
    ],
)
def test_the_old_cronjob_is_suspended_only_after_its_last_fire(
    schedule: str, created: str, last_fire: str, next_fire: str
) -> None:
    ours = ours_cronjob(created)
    before = (z(last_fire) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    waiting = step_at(created, schedule, old_cronjob(schedule, last=before), ours)
    assert (waiting.state, waiting.suspend, waiting.at, waiting.wake_at) == ("Handing", False, z(created), z(next_fire))
    ran = step_at(created, schedule, old_cronjob(schedule, last=last_fire), ours)
    assert (ran.state, ran.suspend) == ("Handing", True)
    # its controller never started that fire (an outage, a deadline): at the first fire after the cut it is
    # suspended anyway; a fire both sides run carries one key
    late = step_at(next_fire, schedule, old_cronjob(schedule, last=before), ours)
    assert late.suspend


def test_a_suspended_or_gone_old_cronjob_is_done() -> None:
    ours = ours_cronjob("2026-03-27T12:00:30Z")
    assert step_at("2026-03-27T12:05:00Z", "* * * * *", old_cronjob("* * * * *", suspend=True), ours).state == "Done"
    assert step_at("2026-03-27T12:05:00Z", "* * * * *", None, ours).state == "Done"
    not_yet = step_at("2026-03-27T12:00:30Z", "* * * * *", old_cronjob("* * * * *", suspend=True))
    assert (not_yet.state, not_yet.make) == ("Done", True)


def test_the_old_cronjobs_own_schedule_decides_its_last_fire() -> None:
    """The import copies the schedule; a task edited since still hands over at the old one's last fire."""
    ours = ours_cronjob("2026-03-27T12:10:00Z")
    old = old_cronjob("0 12 * * *", zone=None, last="2026-03-26T12:00:00Z")  # no timeZone: UTC
    step = step_at("2026-03-27T12:10:00Z", "*/5 * * * *", old, ours)
    assert not step.suspend  # its 12:00 UTC fire of today is not run yet
    assert step_at(
        "2026-03-27T12:10:00Z", "*/5 * * * *", {**old, "status": {"lastScheduleTime": "2026-03-27T12:00:00Z"}}, ours
    ).suspend


# -- plan(): the task's CronJob, the status, the Events, the ledger through the old CronJob


def appschedule(status: dict[str, Any] | None = None) -> dict[str, Any]:
    task = {"name": "report", "schedule": "*/5 * * * *", "command": ["run"], "cutOverFrom": "nightly"}
    body: dict[str, Any] = {
        "metadata": {"name": "shop", "namespace": "shop", "uid": "uid-shop", "generation": 1,
                     "creationTimestamp": "2026-03-27T11:00:00Z"},
        "spec": {"deploymentRef": {"name": "web"}, "timeZone": "Europe/Berlin", "tasks": [task]},
    }  # fmt: skip
    if status is not None:
        body["status"] = status
    return body


def test_plan_waits_for_a_cronjob_nobody_handed_over(deployment: dict[str, Any]) -> None:
    unlabelled = old_cronjob("*/5 * * * *", labelled=False)
    other = old_cronjob("*/5 * * * *", controller="uid-other")  # another AppSchedule's: never taken
    for old in (unlabelled, other):
        result = plan(world_of(appschedule(), deployment, [old]), z("2026-03-27T12:02:00Z"))
        assert result.apply == [] and result.suspend == []
        assert "cronJob" not in result.status["tasks"][0]  # not run here, nor counted through a CronJob not handed over
        assert [(e.type, e.reason) for e in result.write_events if e.reason.startswith("CutOver")] == [
            ("Warning", "CutOverWaiting")
        ]


def test_plan_hands_over(deployment: dict[str, Any]) -> None:
    old = old_cronjob("*/5 * * * *", last="2026-03-27T12:00:00Z")
    held = plan(world_of(appschedule(), deployment, [old]), z("2026-03-27T12:04:55Z"))
    assert held.apply == [] and held.suspend == [] and held.wake_at == z("2026-03-27T12:05:01Z")
    assert held.status["tasks"][0]["cronJob"] == "nightly"  # counted through the old CronJob until the cut

    made = plan(world_of(appschedule(), deployment, [old]), z("2026-03-27T12:02:00Z"))
    assert [m["metadata"]["name"] for m in made.apply] == ["shop-report"] and made.suspend == []
    assert made.wake_at == z("2026-03-27T12:02:01Z")
    assert [e.reason for e in made.write_events if e.reason.startswith("CutOver")] == ["CutOverStarted"]

    ours = {**made.apply[0], "metadata": {**made.apply[0]["metadata"], "uid": "uid-ours",
                                          "creationTimestamp": "2026-03-27T12:02:01Z"}}  # fmt: skip
    ours["metadata"]["ownerReferences"] = [{**ours["metadata"]["ownerReferences"][0], "uid": "uid-shop"}]
    after = plan(world_of(appschedule(made.status), deployment, [old, ours]), z("2026-03-27T12:02:02Z"))
    assert after.suspend == [("nightly", "2026-03-27T12:02:01Z")]
    assert after.status["tasks"][0]["cronJob"] == naming.cronjob_name("shop", "report")
    assert [e.reason for e in after.write_events if e.reason.startswith("CutOver")] == ["CutOver"]

    suspended = {**old, "spec": {**old["spec"], "suspend": True}}
    done = plan(world_of(appschedule(after.status), deployment, [suspended, ours]), z("2026-03-27T12:02:03Z"))
    assert done.suspend == [] and done.apply == []
    assert [e.reason for e in done.write_events if e.reason.startswith("CutOver")] == []


def test_the_ledger_counts_the_old_cronjobs_jobs_around_the_cut(deployment: dict[str, Any]) -> None:
    """Its Jobs carry the task's labels (the import puts them on its job template): one task, no gap. Tracking
    starts while the old CronJob still runs the task (Holding: a fire seconds away); its Job for that fire is
    the task's run."""
    old = old_cronjob("*/5 * * * *", last="2026-03-27T11:55:00Z")
    first = plan(world_of(appschedule(), deployment, [old]), z("2026-03-27T11:59:52Z"))
    assert first.apply == [] and first.status["tasks"][0]["cronJob"] == "nightly"  # Holding: the old one runs it
    job = {
        "metadata": {
            "name": "nightly-29573760",
            "namespace": "shop",
            "uid": "uid-job",
            "creationTimestamp": "2026-03-27T12:00:01Z",
            "labels": {naming.LABEL_APPSCHEDULE: "shop", naming.LABEL_TASK: "report"},
            "annotations": {naming.CRONJOB_SCHEDULED_TIMESTAMP: "2026-03-27T12:00:00Z"},
        },
        "status": {"active": 1},
    }
    fired = {**old, "status": {"lastScheduleTime": "2026-03-27T12:00:00Z"}}
    result = plan(world_of(appschedule(first.status), deployment, [fired], jobs=[job]), z("2026-03-27T12:00:03Z"))
    assert result.status["tasks"][0]["counts"]["runs"] == 1
    assert [m["metadata"]["name"] for m in result.apply] == ["shop-report"]
