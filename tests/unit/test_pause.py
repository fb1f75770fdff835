"""A task paused after repeated failures (issue 36 item 2; core/pause.py and plan() around it): its CronJob is
suspended after N failed runs in a row, RunsHealthy and a TaskPaused Event say why, a success resets the count,
and `kubectl appschedule resume` runs it again. Fires of Europe/Berlin's fall-back night included."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from appschedule.core import pause
from appschedule.core.admission import check_appschedule
from appschedule.core.models import MESSAGE_MAX
from appschedule.core.reconcile import plan
from appschedule.plugin import describe, resumed_annotation, text
from tests.kit.worlds import world_of


def z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def run(time: str, state: str, failure: str | None = None) -> dict[str, Any]:
    entry = {"key": f"sync@{time}", "scheduledTime": time, "state": state}
    return {**entry, "failure": failure} if failure else entry


# the fall-back night in Europe/Berlin: 02:30 twice (00:30Z and 01:30Z, one key), newest first
FALL_BACK = [
    run("2026-10-25T03:30:00Z", "Active"),
    run("2026-10-25T02:30:00Z", "Failed", "exit 3"),
    run("2026-10-25T01:30:00Z", "Missed"),
    run("2026-10-25T00:30:00Z", "Failed", "OOMKilled"),
    run("2026-10-24T23:30:00Z", "Failed"),
    run("2026-10-24T22:30:00Z", "Succeeded"),
]


def test_n_failed_runs_in_a_row_pause_a_task() -> None:
    found = pause.paused("sync", 3, FALL_BACK, None)
    assert found == pause.Pause("sync", 3, "sync@2026-10-25T02:30:00Z", "exit 3")
    assert "paused after 3 failed runs in a row, the last sync@2026-10-25T02:30:00Z (exit 3)" in found.message()
    assert pause.paused("sync", 4, FALL_BACK, None) is None  # a success before the fourth: the count was reset
    assert pause.paused("sync", None, FALL_BACK, None) is None  # not asked
    assert pause.paused("sync", 1, [run("2026-10-25T02:30:00Z", "Succeeded"), *FALL_BACK[1:]], None) is None


def test_a_resume_counts_only_the_failures_after_it() -> None:
    assert pause.paused("sync", 3, FALL_BACK, z("2026-10-25T00:30:00Z")) is None
    later = [run("2026-10-25T05:30:00Z", "Failed"), run("2026-10-25T04:30:00Z", "Failed"), *FALL_BACK]
    assert pause.paused("sync", 2, later, z("2026-10-25T03:00:00Z")) is not None
    assert pause.paused("sync", 3, later, z("2026-10-25T03:00:00Z")) is None


def test_the_resume_annotation_is_read_and_never_trusted() -> None:
    good = json.dumps({"sync": "2026-10-25T03:00:00Z", "other": "2026-03-29T01:00:00+02:00"})
    assert pause.resumes(good) == ({"sync": z("2026-10-25T03:00:00Z"), "other": z("2026-03-28T23:00:00Z")}, None)
    assert pause.resumes("") == ({}, None)
    for bad, why in (("{", "not JSON"), ("[1]", "not a map"), ('{"sync": "yesterday"}', "not RFC 3339")):
        found, wrong = pause.resumes(bad)
        assert found == {} and why in str(wrong)


def appschedule(recent: list[dict[str, Any]], resumed: str | None = None, **task: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "shop", "namespace": "shop", "uid": "uid-shop", "generation": 1,
                     "creationTimestamp": "2026-10-01T00:00:00Z"},
        "spec": {"deploymentRef": {"name": "web"}, "timeZone": "Europe/Berlin",
                 "tasks": [{"name": "sync", "schedule": "30 * * * *", "command": ["sync"], **task}]},
        "status": {"observedGeneration": 1, "tasks": [{"name": "sync", "recent": recent}]},
    }  # fmt: skip
    if resumed is not None:
        body["metadata"]["annotations"] = {pause.ANNOTATION_RESUMED: resumed}
    return body


def cronjob_of(manifest: dict[str, Any], suspend: bool) -> dict[str, Any]:
    metadata = {**manifest["metadata"], "uid": "uid-cj", "creationTimestamp": "2026-10-01T00:00:00Z"}
    metadata["ownerReferences"] = [{**metadata["ownerReferences"][0], "uid": "uid-shop"}]
    return {**manifest, "metadata": metadata, "spec": {**manifest["spec"], "suspend": suspend}}


NOW = z("2026-10-25T03:40:00Z")


def test_plan_suspends_a_paused_task_and_says_why(deployment: dict[str, Any]) -> None:
    healthy = plan(world_of(appschedule(FALL_BACK, suspendAfterFailures=4), deployment), NOW)
    assert healthy.apply[0]["spec"]["suspend"] is False and healthy.paused == []
    running = cronjob_of(healthy.apply[0], suspend=False)

    paused = plan(world_of(appschedule(FALL_BACK, suspendAfterFailures=3), deployment, [running]), NOW)
    assert [m["spec"]["suspend"] for m in paused.apply] == [True] and paused.paused == ["sync"]
    assert [(e.type, e.reason) for e in paused.events if e.reason.startswith("Task")] == [("Warning", "TaskPaused")]
    runs_healthy = next(c for c in paused.status["conditions"] if c["type"] == "RunsHealthy")
    assert (runs_healthy["status"], runs_healthy["reason"]) == ("False", "TaskPaused")
    assert "kubectl appschedule resume <appschedule> sync" in runs_healthy["message"]

    suspended = cronjob_of(paused.apply[0], suspend=True)
    again = plan(world_of(appschedule(FALL_BACK, suspendAfterFailures=3), deployment, [suspended]), NOW)
    assert again.apply == [] and not [e for e in again.events if e.reason.startswith("Task")]  # said once

    resumed = json.dumps({"sync": "2026-10-25T03:35:00Z"})
    back = plan(world_of(appschedule(FALL_BACK, resumed, suspendAfterFailures=3), deployment, [suspended]), NOW)
    assert [m["spec"]["suspend"] for m in back.apply] == [False] and back.paused == []
    assert [e.reason for e in back.events if e.reason.startswith("Task")] == ["TaskResumed"]


def test_defaults_pause_every_task_and_a_bad_annotation_is_reported(deployment: dict[str, Any]) -> None:
    body = appschedule(FALL_BACK, "not json")
    body["spec"]["defaults"] = {"suspendAfterFailures": 2}
    result = plan(world_of(body, deployment), NOW)
    assert result.paused == ["sync"]
    runs_healthy = next(c for c in result.status["conditions"] if c["type"] == "RunsHealthy")
    assert "annotation appschedule.dev/resumed is not JSON" in runs_healthy["message"]


def test_the_threshold_is_bounded_at_apply() -> None:
    body = appschedule([], suspendAfterFailures=11)
    assert "suspendAfterFailures" in str(check_appschedule(body))
    assert check_appschedule(appschedule([], suspendAfterFailures=10)) is None


def test_resume_writes_the_task_and_keeps_the_others() -> None:
    current = appschedule([], json.dumps({"sync": "2026-10-20T00:00:00Z", "gone": "2026-10-20T00:00:00Z"}))
    assert json.loads(resumed_annotation(current, "sync", z("2026-10-25T03:35:00Z"))) == {
        "sync": "2026-10-25T03:35:00Z"  # a task no longer declared is dropped: the annotation stays bounded
    }
    assert json.loads(resumed_annotation(appschedule([], "garbage"), "sync", NOW)) == {"sync": "2026-10-25T03:40:00Z"}


def test_the_plugin_status_shows_a_paused_task_within_80_columns() -> None:
    body = appschedule(FALL_BACK, json.dumps({"other": "2026-10-25T03:35:00Z"}), suspendAfterFailures=3)
    described = describe(body, NOW)
    assert described["tasks"][0]["paused"] == {"failures": 3, "last": "sync@2026-10-25T02:30:00Z", "why": "exit 3"}
    shown = text([described])
    assert "paused    after 3 failed runs, the last sync@2026-10-25T02:30:00Z" in shown.replace("\n       ", "")
    assert "kubectl appschedule resume shop sync" in " ".join(shown.split())
    assert all(len(line) <= 80 for line in shown.splitlines())
    resumed = appschedule(FALL_BACK, json.dumps({"sync": "2026-10-25T03:35:00Z"}), suspendAfterFailures=3)
    assert describe(resumed, NOW)["tasks"][0]["paused"] is None


def test_runs_healthy_names_every_task_in_trouble_before_more_of_any_one() -> None:
    """A paused task's pause and its failures, another task's six failures, a third's one: all three are named
    first; what does not fit in the condition's message is counted."""
    from appschedule.core import status

    def failed(task: str, n: int) -> list[tuple[str, str]]:
        return [("RunFailed", f"task {task!r}: run {task}@2026-03-29T0{i}:00:00Z failed (exit 1)") for i in range(n)]

    flaky = [("TaskPaused", "task 'flaky' paused after 1 failed runs in a row"), *failed("flaky", 1)]
    groups = [flaky, failed("oom", 6), failed("boom", 1)]
    made = status.runs_healthy_condition(groups, 3, {}, 1, "2026-03-29T04:00:00Z")
    assert made.reason == "TaskPaused"
    parts = made.message.split("; ")
    assert [p.split("'")[1] for p in parts[:3]] == ["flaky", "oom", "boom"]
    assert len(parts) == 2 + 6 + 1 and " more" not in made.message  # everything fits
    many = status.runs_healthy_condition([failed(f"task-{i}", 9) for i in range(12)], 12, {}, 1, "now")
    assert len(many.message) <= MESSAGE_MAX and many.message.endswith(" more")
    shown = many.message.split("; ")[:-1]
    assert [p.split("'")[1] for p in shown[:12]] == [f"task-{i}" for i in range(12)]
    assert len(shown) + int(many.message.rsplit(" ", 2)[1]) == 12 * 9
