"""reconcile.plan: what one reconcile does, decided without a cluster."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from appschedule.core import status
from appschedule.core.cronjobs import HASH_ANNOTATION, holds
from appschedule.core.reconcile import plan
from tests.kit.worlds import world_of as world

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


@pytest.fixture
def appschedule() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / "appschedule.yaml").read_text())
    data["metadata"].update(uid="uid-shop", generation=1, creationTimestamp="2026-03-01T00:00:00Z")
    return data


def as_existing(manifests: list[dict[str, Any]], uid: str = "uid-shop") -> list[dict[str, Any]]:
    """What the API server would hand back after applying: ours, plus defaults it adds."""
    existing = copy.deepcopy(manifests)
    for cronjob in existing:
        cronjob["metadata"]["uid"] = f"cj-{cronjob['metadata']['name']}"
        cronjob["metadata"]["ownerReferences"][0]["uid"] = uid
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"  # a default
    return existing


def converge(appschedule: dict[str, Any], deployment: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    first = plan(world(appschedule, deployment, [], []), NOW)
    settled = {**appschedule, "status": first.status}
    return settled, as_existing(first.apply)


def test_first_reconcile_applies_everything_and_sets_status(
    appschedule: dict[str, Any], deployment: dict[str, Any]
) -> None:
    result = plan(world(appschedule, deployment, [], []), NOW)
    assert [m["metadata"]["name"] for m in result.apply] == [
        "shop-weekly-report",
        "shop-nightly-cleanup",
        "shop-sync-inventory",
    ]
    assert all(HASH_ANNOTATION in m["metadata"]["annotations"] for m in result.apply)
    assert result.delete == []
    assert result.status_changed
    status = result.status
    assert status["conditions"][0]["status"] == "True"
    assert status["observedGeneration"] == 1
    assert status["deployment"] == {"name": "web", "image": "registry.example.com/shop/web:1.4.2"}
    assert status["nextRunTime"] == "2026-03-27T12:05:00Z"  # the 5-minute sync
    assert {t["name"]: t["nextRunTime"] for t in status["tasks"]}["weekly-report"] == "2026-03-27T16:00:00Z"


def test_nothing_changed_means_nothing_to_write(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    again = plan(world(settled, deployment, cronjobs, []), NOW)
    assert again.apply == []
    assert again.delete == []
    assert not again.status_changed
    assert again.events == []


def test_hand_edit_and_rollout_are_reapplied(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    cronjobs[0]["spec"]["schedule"] = "* * * * *"
    assert [m["metadata"]["name"] for m in plan(world(settled, deployment, cronjobs, []), NOW).apply] == [
        "shop-weekly-report"
    ]
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example.com/shop/web:2"
    assert len(plan(world(settled, deployment, cronjobs, []), NOW).apply) == 3


def test_removed_task_deletes_only_our_cronjob(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    foreign = copy.deepcopy(cronjobs[0])
    foreign["metadata"].update(name="shop-someone-elses", uid="x")
    foreign["metadata"]["ownerReferences"][0]["uid"] = "another-appschedule"
    settled["spec"]["tasks"] = settled["spec"]["tasks"][1:]
    result = plan(world(settled, deployment, [*cronjobs, foreign], []), NOW)
    assert result.delete == ["shop-weekly-report"]


def test_missing_deployment_touches_no_cronjob(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    result = plan(world(settled, None, cronjobs, []), NOW)
    assert result.apply == []
    assert result.delete == []
    ready = result.status["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "DeploymentNotFound")
    assert result.status["deployment"]["image"] == "registry.example.com/shop/web:1.4.2"  # what still runs
    assert [e.reason for e in result.events] == ["DeploymentNotFound"]
    assert all("nextRunTime" in t for t in result.status["tasks"])  # the CronJobs still run


def test_invalid_task_keeps_its_old_cronjob_and_is_reported_once(
    appschedule: dict[str, Any], deployment: dict[str, Any]
) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    settled["spec"]["tasks"][0]["schedule"] = "0 17 * * 7"
    result = plan(world(settled, deployment, cronjobs, []), NOW)
    assert result.delete == []
    assert result.apply == []
    ready = result.status["conditions"][0]
    assert ready["reason"] == "InvalidSpec"
    assert "task 'weekly-report' (spec.tasks[0].schedule)" in ready["message"]
    assert [e.reason for e in result.events] == ["InvalidSpec"]
    repeat = plan(world({**settled, "status": result.status}, deployment, cronjobs), NOW)
    assert repeat.events == []
    assert not repeat.status_changed


def test_spec_level_error_deletes_nothing(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    settled["spec"]["deploymentRef"]["container"] = "nope"
    result = plan(world(settled, deployment, cronjobs, []), NOW)
    assert result.delete == []
    assert result.status["conditions"][0]["reason"] == "InvalidSpec"


def test_the_older_appschedule_keeps_a_task(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    older = copy.deepcopy(appschedule)
    older["metadata"].update(name="blue", uid="uid-blue", creationTimestamp="2026-02-01T00:00:00Z")
    older["spec"]["tasks"] = [appschedule["spec"]["tasks"][0]]
    result = plan(world(appschedule, deployment, [], [older]), NOW)
    assert "shop-weekly-report" not in [m["metadata"]["name"] for m in result.apply]
    ready = result.status["conditions"][0]
    assert ready["reason"] == "TaskConflict"
    assert "'blue'" in ready["message"]
    assert [t.get("cronJob") for t in result.status["tasks"]] == [None, "shop-nightly-cleanup", "shop-sync-inventory"]


def test_condition_keeps_its_transition_time_while_status_holds(
    appschedule: dict[str, Any], deployment: dict[str, Any]
) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    later = plan(world(settled, deployment, cronjobs, []), NOW.replace(minute=1))
    assert later.status["conditions"][0]["lastTransitionTime"] == "2026-03-27T12:00:00Z"


def test_holds_treats_empty_as_absent_and_allows_defaults() -> None:
    assert holds({"a": [], "b": {"c": 1}}, {"b": {"c": 1, "d": 2}})
    assert not holds({"a": [1]}, {"a": [1, 2]})
    assert not holds({"a": 1}, {"a": "1"})


def test_refused_cronjob_is_reported_and_keeps_what_it_had(
    appschedule: dict[str, Any], deployment: dict[str, Any]
) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example.com/shop/web:2"
    refused = {"weekly-report": "the API server refused CronJob 'shop-weekly-report': limits < requests"}
    result = plan(world(settled, deployment, cronjobs, []), NOW, rejected=refused)
    assert [m["metadata"]["name"] for m in result.apply] == ["shop-nightly-cleanup", "shop-sync-inventory"]
    assert result.delete == []
    ready = result.status["conditions"][0]
    assert ready["reason"] == "InvalidSpec"
    assert "task 'weekly-report' (spec.tasks[0]): the API server refused" in ready["message"]
    assert result.status["tasks"][0]["cronJob"] == "shop-weekly-report"  # the old one still runs


def test_cronjob_name_collision_with_an_older_sibling(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    older = copy.deepcopy(appschedule)
    older["metadata"].update(name="shop-weekly", uid="uid-older", creationTimestamp="2026-02-01T00:00:00Z")
    older["spec"]["tasks"] = [{"name": "report", "schedule": "0 1 * * *", "command": ["x"]}]  # shop-weekly-report
    result = plan(world(appschedule, deployment, [], [older]), NOW)
    assert "shop-weekly-report" not in [m["metadata"]["name"] for m in result.apply]
    assert "also that of AppSchedule 'shop-weekly' (task 'report')" in result.status["conditions"][0]["message"]


def test_removed_owner_reference_is_put_back(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    del cronjobs[1]["metadata"]["ownerReferences"]
    assert [m["metadata"]["name"] for m in plan(world(settled, deployment, cronjobs, []), NOW).apply] == [
        "shop-nightly-cleanup"
    ]


def test_server_normalised_quantities_and_empty_values_are_in_sync(
    appschedule: dict[str, Any], deployment: dict[str, Any]
) -> None:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": 1, "memory": "1024Mi"}, "limits": {"cpu": "0.5"}}
    container["env"].append({"name": "EMPTY", "value": ""})
    settled, cronjobs = converge(appschedule, deployment)
    for cronjob in cronjobs:  # what the API server hands back
        run = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        if run["resources"].get("limits", {}).get("cpu") == "0.5":
            run["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "500m"}}
        next(v for v in run["env"] if v["name"] == "EMPTY").pop("value")
    assert plan(world(settled, deployment, cronjobs, []), NOW).apply == []
    assert not holds({"limits": {"cpu": "1"}}, {"limits": {"cpu": "2"}})


def test_missing_deployment_keeps_the_image_status_and_reports_task_errors(
    appschedule: dict[str, Any], deployment: dict[str, Any]
) -> None:
    settled, cronjobs = converge(appschedule, deployment)
    settled["spec"]["deploymentRef"]["name"] = "renamed"
    settled["spec"]["tasks"][2]["schedule"] = "61 * * * *"
    result = plan(world(settled, None, cronjobs, []), NOW)
    assert result.status["deployment"] == {"name": "web", "image": "registry.example.com/shop/web:1.4.2"}
    message = result.status["conditions"][0]["message"]
    assert "'renamed' not found" in message
    assert "task 'sync-inventory' (spec.tasks[2].schedule)" in message


def test_records_let_go_ride_on_the_next_write_that_matters() -> None:
    record = {"name": "shop-report-1", "scheduledTime": "2026-09-11T15:00:00Z", "run": True, "finished": True}
    other = {"name": "shop-report-2", "scheduledTime": "2026-09-11T15:01:00Z", "run": True}
    task: dict[str, Any] = {
        "name": "report",
        "checkedUntil": "2026-09-11T15:01:00Z",
        "jobs": [record, other],
        "suspensions": [{"since": "x", "until": "y"}],
    }
    old = {"observedGeneration": 1, "tasks": [task]}

    def new(**fields: Any) -> dict[str, Any]:
        changed = {k: v for k, v in {**task, **fields}.items() if v is not None}
        return {"observedGeneration": 1, "tasks": [changed]}

    assert not status.changed(new(jobs=[other], suspensions=None), old)  # only let go: the next write carries it
    assert status.changed({**new(jobs=[other]), "observedGeneration": 2}, old)  # with anything else: written
    assert status.changed(new(checkedUntil="2026-09-11T15:02:00Z"), old)  # a settled time is written at once
    assert status.changed(new(jobs=[record, other, {**other, "name": "3"}]), old)  # a new record too
    assert status.changed(new(jobs=[record, {**other, "finished": True}]), old)  # and a record that changed
    assert status.changed({"tasks": [{"name": "new"}]}, {})


def test_a_status_of_a_fire_or_runs_that_started_may_wait_for_what_comes_next() -> None:
    active = {"key": "t@1", "job": "j1", "scheduledTime": "2026-09-11T15:01:00Z", "state": "Active", "attempts": 0}
    done = {"key": "t@0", "job": "j0", "scheduledTime": "2026-09-11T15:00:00Z", "state": "Succeeded", "attempts": 1}
    before: dict[str, Any] = {
        "lastRunTime": "2026-09-11T15:00:00Z",
        "nextRunTime": "2026-09-11T15:01:00Z",
        "tasks": [
            {
                "name": "t",
                "counts": {"runs": 1, "succeeded": 1},
                "recent": [done],
                "lastRun": done,
                "nextRunTime": "2026-09-11T15:01:00Z",
                "jobs": [{"name": "j0", "finished": True, "run": True}],
            }
        ],
    }
    fired = copy.deepcopy(before)
    fired["nextRunTime"] = fired["tasks"][0]["nextRunTime"] = "2026-09-11T15:02:00Z"
    assert status.changed(fired, before) and status.can_wait(fired, before) == "time"  # waits for its run
    started = copy.deepcopy(fired)
    started["lastRunTime"] = "2026-09-11T15:01:00Z"
    started["tasks"][0].update(
        counts={"runs": 2, "succeeded": 1},
        recent=[active, done],
        lastRun=active,
        jobs=[*before["tasks"][0]["jobs"], {"name": "j1", "run": True}],
        checkedUntil="2026-09-11T15:01:00Z",
    )
    # (its fire, which has its Job, is settled: the settled time moved over fires that ran)
    assert status.can_wait(started, before) == "starts"
    skipped = copy.deepcopy(started)
    skipped["tasks"][0]["counts"]["skipped"] = 1
    assert status.can_wait(skipped, before) == "now"  # a fire skipped on the way is written at once
    pod = copy.deepcopy(started)
    pod["tasks"][0]["recent"][0]["attempts"] = 1
    assert status.can_wait(pod, before) == status.can_wait(pod, started) == "starts"  # its pod started
    ended = copy.deepcopy(pod)
    ended["tasks"][0]["counts"]["succeeded"] = 2
    ended["tasks"][0]["recent"][0]["state"] = "Succeeded"
    ended["tasks"][0]["jobs"][1]["finished"] = True
    ended["tasks"][0]["lastRun"] = ended["tasks"][0]["recent"][0]
    ended["tasks"][0]["lastSuccessfulTime"] = "2026-09-11T15:01:00Z"
    # a success waits a moment for the rest of its fire (the other tasks' ends), with its start and its time
    assert status.can_wait(ended, before) == status.can_wait(ended, pod) == "ends"
    for bad in ("failed", "duplicates", "absorbed", "stuck", "skipped", "missed", "manual", "reruns", "caughtUp"):
        worse = copy.deepcopy(ended)
        worse["tasks"][0]["counts"][bad] = 1
        assert status.can_wait(worse, pod) == "now", bad  # anything but a success is written at once
    failed = copy.deepcopy(pod)
    failed["tasks"][0]["counts"]["failed"] = 1
    failed["tasks"][0]["recent"][0]["state"] = failed["tasks"][0]["lastRun"]["state"] = "Failed"
    assert status.can_wait(failed, pod) == "now"
    missed = copy.deepcopy(ended)
    missed["tasks"][0]["missedTimes"] = ["2026-09-11T14:59:00Z"]
    assert status.can_wait(missed, pod) == "now"
    second = {**ended, "tasks": [*ended["tasks"], {"name": "u", "counts": {"runs": 1}}]}
    assert status.can_wait(second, pod) == "now"  # a task new to the status: at once
    failing = copy.deepcopy(started)
    failing["conditions"] = [{"type": "RunsHealthy", "status": "False"}]
    assert status.can_wait(failing, before) == "now"  # so is a condition
    assert status.can_wait({**ended, "conditions": failing["conditions"]}, pod) == "now"  # with a success too


def test_backfills_at_the_schemas_bound_and_odd_entries_are_planned_not_raised(
    appschedule: dict[str, Any], deployment: dict[str, Any]
) -> None:
    """Ten backfills (spec.backfills' maxItems) over Berlin's fall-back night, plus an eleventh beyond the
    bound and entries holding anything: each valid one starts its oldest fires (parallel 1), each odd one is
    Invalid with a message naming its field, nothing raises, and the CronJobs are planned as always."""
    settled, cronjobs = converge(appschedule, deployment)
    task = "nightly-cleanup"  # 30 3 * * * UTC: one fire in the range
    assert task in [t["name"] for t in settled["spec"]["tasks"]]
    fills: list[Any] = [
        {"name": f"fall-{i}", "task": task, "from": "2026-10-24T22:00:00Z", "to": "2026-10-25T04:00:00Z"}
        for i in range(7)
    ]
    fills += [{"name": "odd-1", "task": task, "from": 5, "to": None}, "not a map", {"name": "odd-3", "task": 7}]
    fills.append({"name": "eleventh", "task": task, "from": "2026-10-24T22:00:00Z", "to": "2026-10-25T04:00:00Z"})
    settled["spec"]["backfills"] = fills
    later = datetime(2026, 10, 30, 12, 0, tzinfo=UTC)
    decided = plan(world(settled, deployment, cronjobs, []), later)
    shown = {b["name"]: b for b in decided.status["backfills"]}
    assert len(shown) == 10 and "eleventh" not in shown  # the bound
    assert shown[""]["state"] == "Invalid" and "spec.backfills[8]" in shown[""]["message"]  # "not a map"
    assert (shown["fall-0"]["state"], shown["fall-0"]["fires"]) == ("Running", 1), shown["fall-0"]
    for i in range(1, 7):  # the same range: its fire is fall-0's, never run twice
        assert (shown[f"fall-{i}"]["state"], shown[f"fall-{i}"]["fires"]) == ("Complete", 0), shown[f"fall-{i}"]
        assert "backfill 'fall-0'" in shown[f"fall-{i}"]["message"]
    assert shown["odd-1"]["state"] == "Invalid" and "spec.backfills[7].from" in shown["odd-1"]["message"]
    assert shown["odd-3"]["state"] == "Invalid"
    assert all(m["metadata"]["annotations"]["appschedule.dev/run-kind"] == "backfill" for m in decided.create)
    assert len(decided.create) == 1  # the one fire, once
    assert decided.apply == []


def test_how_long_a_status_may_wait_is_the_cores() -> None:
    """A next run time waits up to a minute for its fire's run; started runs 5 s for their end; successful ends
    2 s for the rest of their fire; anything else is written at once, and a status that waited its time is written
    whatever comes."""
    assert status.wait_left("time", 0) == 60 and status.wait_left("time", 59.5) == 0.5
    assert status.wait_left("starts", 0) == 5 and status.wait_left("starts", 7) == 0
    assert status.wait_left("ends", 0) == 2 and status.wait_left("ends", 2) == 0
    assert status.wait_left("now", 0) == 0
