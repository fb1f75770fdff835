"""plan() on cases an independent review reproduced (rendering, Events, failures that are ours, status, task
ownership), each decided without a cluster."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from appschedule.core.reconcile import plan
from appschedule.core.render import render
from tests.kit.worlds import world_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)


def appschedule(name: str, tasks: list[dict[str, Any]], created: str = "2026-03-01T00:00:00Z") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "generation": 1,
            "creationTimestamp": created,
        },
        "spec": {"deploymentRef": {"name": "web"}, "tasks": tasks},
    }


def task(name: str, schedule: str = "0 17 * * 5", **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "command": ["run"], **extra}


def applied(manifests: list[dict[str, Any]], uid: str) -> list[dict[str, Any]]:
    existing = copy.deepcopy(manifests)
    for cronjob in existing:
        cronjob["metadata"]["uid"] = f"cj-{cronjob['metadata']['name']}"
        cronjob["metadata"]["ownerReferences"][0]["uid"] = uid
    return existing


def test_empty_resources_inherit_the_containers(deployment: dict[str, Any]) -> None:
    empties: list[dict[str, Any]] = [{}, {"limits": {}, "requests": {}}]
    for empty in empties:
        result = render(appschedule("shop", [task("report", resources=empty)]), deployment)
        container = result.cronjobs["report"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        assert container["resources"] == deployment["spec"]["template"]["spec"]["containers"][0]["resources"]


def test_a_run_is_one_pod(deployment: dict[str, Any]) -> None:
    job = render(appschedule("shop", [task("report")]), deployment).cronjobs["report"]["spec"]["jobTemplate"]["spec"]
    assert (job["parallelism"], job["completions"]) == (1, 1)
    first = plan(world_of(appschedule("shop", [task("report")]), deployment), NOW)
    cronjobs = applied(first.apply, "uid-shop")
    cronjobs[0]["spec"]["jobTemplate"]["spec"]["parallelism"] = 5  # kubectl patch
    settled = {**appschedule("shop", [task("report")]), "status": first.status}
    assert [m["metadata"]["name"] for m in plan(world_of(settled, deployment, cronjobs), NOW).apply] == ["shop-report"]


def test_an_env_variable_added_by_hand_is_not_a_difference(deployment: dict[str, Any]) -> None:
    first = plan(world_of(appschedule("shop", [task("report")]), deployment), NOW)
    cronjobs = applied(first.apply, "uid-shop")
    container = cronjobs[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    container["env"].append({"name": "EXTRA", "value": "1"})  # kubectl set env
    settled = {**appschedule("shop", [task("report")]), "status": first.status}
    assert plan(world_of(settled, deployment, cronjobs), NOW).apply == []
    container["env"][0]["value"] = "changed"  # but one of ours changed is put back
    assert len(plan(world_of(settled, deployment, cronjobs), NOW).apply) == 1


def test_one_bad_time_zone_of_100_tasks_is_one_bounded_event(deployment: dict[str, Any]) -> None:
    bad = appschedule("shop", [task(f"t{i}") for i in range(100)])
    bad["spec"]["timeZone"] = "Mars/Phobos"
    result = plan(world_of(bad, deployment), NOW)
    assert [(e.reason, e.type) for e in result.events] == [("InvalidSpec", "Warning")]
    message = result.status["conditions"][0]["message"]
    assert len(message) <= 1024 and len(result.events[0].message) <= 1024
    assert "tasks 't0', 't1', 't2' and 97 more (spec.timeZone)" in message


def test_a_write_that_failed_for_our_reasons_is_reported_as_ours(deployment: dict[str, Any]) -> None:
    obj = appschedule("shop", [task("report"), task("other")])
    result = plan(world_of(obj, deployment), NOW, failed={"report": "the operator could not write CronJob (403)"})
    ready = result.status["conditions"][0]
    assert (ready["reason"], ready["status"]) == ("WriteFailed", "False")
    assert [m["metadata"]["name"] for m in result.apply] == ["shop-other"]


def test_status_tells_what_runs(deployment: dict[str, Any]) -> None:
    obj = appschedule("shop", [task("report"), task("sync", "0 * * * *")])
    first = plan(world_of(obj, deployment), NOW)
    cronjobs = applied(first.apply, "uid-shop")
    settled = {**obj, "status": first.status}
    settled["spec"] = {**obj["spec"], "tasks": [task("report", "0 17 * * 7"), task("sync", "0 * * * *")]}  # invalid
    tasks = {t["name"]: t for t in plan(world_of(settled, deployment, cronjobs), NOW).status["tasks"]}
    assert tasks["report"]["cronJob"] == "shop-report"  # still runs, with its old schedule
    assert tasks["report"]["nextRunTime"] == "2026-03-27T17:00:00Z"
    settled["spec"] = {**obj["spec"], "deploymentRef": {"name": "web", "container": "nope"}}  # spec-level error
    tasks = {t["name"]: t for t in plan(world_of(settled, deployment, cronjobs), NOW).status["tasks"]}
    assert set(tasks) == {"report", "sync"} and tasks["sync"]["nextRunTime"] == "2026-03-27T13:00:00Z"


def test_a_task_is_taken_over_only_when_no_cronjob_for_it_exists(deployment: dict[str, Any]) -> None:
    blue = appschedule("blue", [task("report")], created="2026-02-01T00:00:00Z")
    green = appschedule("green", [task("report")])
    blue_cronjobs = applied(plan(world_of(blue, deployment), NOW).apply, "uid-blue")
    # blue is deleted; its CronJob waits for garbage collection: green must not start a second one
    assert plan(world_of(green, deployment, blue_cronjobs), NOW).apply == []
    assert [m["metadata"]["name"] for m in plan(world_of(green, deployment), NOW).apply] == ["green-report"]
    # an older sibling's *invalid* declaration claims nothing
    broken = appschedule("blue", [task("report", "61 * * * *")], created="2026-02-01T00:00:00Z")
    assert [m["metadata"]["name"] for m in plan(world_of(green, deployment, [], [broken]), NOW).apply] == [
        "green-report"
    ]


def test_of_several_older_appschedules_sharing_a_cronjob_name_the_oldest_keeps_it(deployment: dict[str, Any]) -> None:
    """shop/weekly-sales-report, shop-weekly/sales-report and shop-weekly-sales/report are all CronJob
    shop-weekly-sales-report: the youngest names the oldest, whatever order the store lists them in."""
    from appschedule.core import ownership
    from appschedule.core.view import Holder

    oldest = appschedule("shop", [task("weekly-sales-report")], "2026-01-01T00:00:00Z")
    middle = appschedule("shop-weekly", [task("sales-report")], "2026-02-01T00:00:00Z")
    youngest = appschedule("shop-weekly-sales", [task("report")], "2026-03-01T00:00:00Z")
    for siblings in ([oldest, middle], [middle, oldest]):
        built = world_of(youngest, deployment, siblings=siblings)
        assert ownership.name_claimants(built) == {"shop-weekly-sales-report": Holder("shop", "weekly-sales-report")}
        (conflict,) = ownership.conflicts(built, {"report": 0}).values()
        assert "AppSchedule 'shop'" in conflict.message
