"""Several schedules for one task (issue 36 item 3): a minute several of them match is one fire with one key.

The union's time functions are checked against the parts' own chains (what the CronJobs do), in zones with daylight
saving across their transitions, with hours of several fires; then the CronJobs that carry it, the key webhook that
makes a later schedule's Job for a shared minute do no work, and the ledger that counts that minute once."""

from __future__ import annotations

import copy
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from appschedule import plugin
from appschedule.core import admission, cronjobs, naming, render
from appschedule.core.admission import check_appschedule, mutate_job
from appschedule.core.reconcile import plan
from appschedule.core.schedule import (
    ScheduleError,
    count_fires,
    fires_after,
    fires_between,
    is_fire,
    next_fire,
    parse,
    parse_union,
    previous_fire,
    repeat_of,
    repeats_between,
)
from tests.kit.worlds import world_of

# zones with daylight saving, and their 2026 transitions (UTC days): Berlin's whole hour at 01:00 UTC, New York's
# at 02:00 local, Lord Howe's half hour (where robfig's walk has quirks)
ZONES = {
    "Europe/Berlin": [datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 10, 25, tzinfo=UTC)],
    "America/New_York": [datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)],
    "Australia/Lord_Howe": [datetime(2026, 4, 4, 12, tzinfo=UTC), datetime(2026, 10, 3, 12, tzinfo=UTC)],
}
# hours with several fires, the hours a transition moves, midnight, days of the week and of the month
EXPRESSIONS = [
    "30 1 * * *",
    "0,30 2 * * *",
    "*/20 2 * * *",
    "0 * * * 0",
    "15 2 * * 1-5",
    "0 0 * * *",
    "0 2 1,15 * 0",
    "45 1 * * 0",
    "*/30 * * * *",
]


def union_by_parts(expressions: list[str], zone: str, start: datetime, end: datetime) -> list[datetime]:
    """What the parts' CronJobs fire, each chained as the controller does, a minute several fire taken once."""
    return sorted({f for e in expressions for f in fires_between(parse(e, zone), start, end)})


@pytest.mark.parametrize("zone", sorted(ZONES))
def test_the_union_fires_counts_and_neighbours_are_the_parts_chains_around_each_transition(zone: str) -> None:
    pairs = list(itertools.combinations(EXPRESSIONS, 2))
    for transition in ZONES[zone]:
        for index, (a, b) in enumerate(pairs):
            union = parse(f"{a} | {b}", zone)
            start = transition - timedelta(hours=30) + timedelta(minutes=(index * 7) % 60)
            end = start + timedelta(hours=60)
            expected = union_by_parts([a, b], zone, start, end)
            assert list(fires_between(union, start, end)) == expected, (a, b, start)
            assert count_fires(union, start, end) == len(expected), (a, b, start)
            assert fires_after(union, start, min(5, len(expected))) == expected[:5]
            assert next_fire(union, start) == (expected[0] if expected else next_fire(union, start))
            for fire in expected[:: max(1, len(expected) // 6)]:
                assert is_fire(union, fire)
                assert previous_fire(union, fire) == fire
                assert previous_fire(union, fire - timedelta(seconds=1)) == max(
                    [f for f in expected if f < fire], default=previous_fire(union, fire - timedelta(seconds=1))
                )


def test_three_schedules_over_a_year_count_what_the_parts_fire_once_each() -> None:
    expressions = ["0 9 * * 1-5", "0 9,12 * * 0,6", "0 9 1 * *"]  # 09:00 on the 1st is matched by two or three
    union = parse_union(expressions, "Europe/Berlin")
    start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)
    expected = union_by_parts(expressions, "Europe/Berlin", start, end)
    assert count_fires(union, start, end) == len(expected)
    assert list(fires_between(union, start, end)) == expected
    parts_total = sum(count_fires(parse(e, "Europe/Berlin"), start, end) for e in expressions)
    assert parts_total > len(expected)  # the shared minutes are fires once


def test_a_fall_back_repeat_is_a_repeat_only_where_every_part_firing_then_repeats_it() -> None:
    union = parse("30 2 * * * | 0 * * * *", "Europe/Berlin")  # Berlin falls back at 01:00 UTC on 2026-10-25
    first_0230, second_0230 = datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
    first_0200, second_0200 = datetime(2026, 10, 25, 0, 0, tzinfo=UTC), datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    assert is_fire(union, second_0230) and is_fire(union, second_0200)
    assert repeat_of(union, second_0230) == first_0230  # one key for the fixed hour's two 02:30s
    assert repeat_of(union, second_0200) is None  # the hourly schedule's second 02:00 is an hour of its own
    assert repeat_of(union, first_0200) is None
    day = datetime(2026, 10, 24, tzinfo=UTC), datetime(2026, 10, 26, tzinfo=UTC)
    assert repeats_between(union, *day) == [second_0230]


def test_schedules_differing_in_one_field_run_as_one_cronjob_where_that_is_exact() -> None:
    assert parse("0 9 * * 1-5 | 0 17 * * 1-5", "Europe/Berlin").cronjob_expressions == ("0 9,17 * * 1-5",)
    assert parse("0 9 * * 1-5 | 0 9 * * 0,6").cronjob_expressions == ("0 9 * * 0-6",)
    assert parse("0 9 1 * * | 0 9 15 * *").cronjob_expressions == ("0 9 1,15 * *",)
    assert parse("*/2 * * * * | 1-59/2 * * * *").cronjob_expressions == ("* * * * *",)
    assert parse("0 9 * * * | 0 9 * * *").cronjob_expressions == ("0 9 * * *",)  # a copy
    # day of month and day of week restricted together are OR: joining a "*" there would change the days
    assert parse("0 9 * * 1 | 0 9 5 * 1").cronjob_expressions == ("0 9 * * 1", "0 9 5 * 1")
    assert parse("0 9 1 * 1 | 0 9 5 * 1").cronjob_expressions == ("0 9 1,5 * 1",)  # (1st or 5th) or Monday
    # differing in two fields: two CronJobs, in the order written (the first runs a minute both match)
    assert parse("*/2 * * * * | * * 7 * *").cronjob_expressions == ("*/2 * * * *", "* * 7 * *")
    # where robfig's walk has quirks (New York's fall-back next to 01:00, Lord Howe) nothing is joined
    assert parse("0 9 * * * | 0 17 * * *", "America/New_York").cronjob_expressions == ("0 9 * * *", "0 17 * * *")
    for zone in ("UTC", "Europe/Berlin"):
        for a, b in itertools.combinations(EXPRESSIONS, 2):
            union = parse(f"{a} | {b}", zone)
            start = datetime(2026, 10, 23, 22, tzinfo=UTC)
            joined = union_by_parts(list(union.cronjob_expressions), zone, start, start + timedelta(days=4))
            assert joined == union_by_parts([a, b], zone, start, start + timedelta(days=4)), (a, b, zone)


def test_a_bad_schedule_among_several_is_named() -> None:
    with pytest.raises(ScheduleError, match=r"schedules\[1\]: .*minute field"):
        parse("0 9 * * * | 61 * * * *")
    with pytest.raises(ScheduleError, match="at most 4"):
        parse(" | ".join(["0 9 * * *"] * 5))


# ---------------------------------------------------------------------------------------------------
# The API, the CronJobs, the key webhook, the ledger

DEPLOYMENT = {
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:1"}]}}},
}


def shop(**task: Any) -> dict[str, Any]:
    return {
        "apiVersion": naming.API_VERSION,
        "kind": naming.KIND,
        "metadata": {
            "name": "shop",
            "namespace": "shop",
            "uid": "u1",
            "generation": 1,
            "creationTimestamp": "2026-12-01T00:00:00Z",
        },
        "spec": {
            "deploymentRef": {"name": "web"},
            "timeZone": "Europe/Berlin",
            "tasks": [{"name": "sync", "command": ["sync"], **task}],
        },
    }


def test_validation_names_the_schedule_at_fault_and_refuses_both_forms() -> None:
    message = check_appschedule(shop(schedules=["0 9 * * *", "0 25 * * *"]))
    assert message and "spec.tasks[0].schedules[1]" in message and "hour" in message, message
    message = check_appschedule(shop(schedule="0 9 * * *", schedules=["0 9 * * *", "0 10 * * *"]))
    assert message and "spec.tasks[0].schedule" in message and "not both" in message, message
    message = check_appschedule(shop(schedule="0 9 * * * | 0 10 * * *"))
    assert message and "schedules: [...]" in message, message
    message = check_appschedule(shop(schedules=["0 9 * * *"]))
    assert message and "spec.tasks[0].schedules" in message, message
    assert check_appschedule(shop(schedules=["H 9 * * 1-5", "H 12 * * 6"])) is None


def test_a_task_with_several_schedules_runs_as_one_cronjob_per_part_each_saying_the_union() -> None:
    rendered = render.render(shop(schedules=["*/2 * * * *", "* * 7 * *"]), DEPLOYMENT)
    assert not rendered.errors
    first = cronjobs.with_hash(rendered.cronjobs["sync"])
    assert first["metadata"]["name"] == "shop-sync"
    assert first["spec"]["schedule"] == "*/2 * * * *"
    template = first["spec"]["jobTemplate"]
    assert template["metadata"]["annotations"][naming.ANNOTATION_SCHEDULES] == "*/2 * * * * | * * 7 * *"
    env = {v["name"]: v["value"] for v in template["spec"]["template"]["spec"]["containers"][0]["env"] if "value" in v}
    assert env["APPSCHEDULE_SCHEDULE"] == "*/2 * * * * | * * 7 * *"
    [second] = cronjobs.parts_of(first)
    assert second["metadata"]["name"] == "shop-sync-s1"
    assert second["spec"]["schedule"] == "* * 7 * *"
    assert render.part_of(second["metadata"]) == 1
    assert render.part_of(second["spec"]["jobTemplate"]["metadata"]) == 1
    assert (
        second["metadata"]["annotations"][cronjobs.HASH_ANNOTATION]
        != first["metadata"]["annotations"][cronjobs.HASH_ANNOTATION]
    )
    merged = render.render(shop(schedules=["0 9 * * 1-5", "0 17 * * 1-5"]), DEPLOYMENT).cronjobs["sync"]
    assert merged["spec"]["schedule"] == "0 9,17 * * 1-5" and not cronjobs.parts_of(cronjobs.with_hash(merged))
    assert render.schedule_text(merged["spec"]) == "0 9 * * 1-5 | 0 17 * * 1-5"


def test_a_part_whose_cronjob_name_is_another_tasks_is_refused() -> None:
    doc = shop(schedules=["*/2 * * * *", "* * 7 * *"])
    doc["spec"]["tasks"].append({"name": "sync-s1", "schedule": "0 1 * * *", "command": ["x"]})
    message = check_appschedule(doc)
    assert message and "shop-sync-s1" in message, message


def job_of(cronjob: dict[str, Any], fire: datetime) -> dict[str, Any]:
    """The Job the CronJob controller submits for a fire."""
    template = cronjob["spec"]["jobTemplate"]
    name = f"{cronjob['metadata']['name']}-{int(fire.timestamp() // 60)}"
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "creationTimestamp": (fire + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "labels": template["metadata"]["labels"],
            "annotations": {
                **template["metadata"].get("annotations", {}),
                naming.CRONJOB_SCHEDULED_TIMESTAMP: fire.strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "ownerReferences": [{"kind": "CronJob", "name": cronjob["metadata"]["name"], "uid": "c"}],
        },
        "spec": copy.deepcopy(template["spec"]),
    }


def test_the_key_webhook_makes_a_later_schedules_job_for_a_shared_minute_do_no_work() -> None:
    first = cronjobs.with_hash(render.render(shop(schedules=["*/2 * * * *", "* * 7 * *"]), DEPLOYMENT).cronjobs["sync"])
    [second] = cronjobs.parts_of(first)
    shared, own = datetime(2026, 12, 7, 9, 2, tzinfo=UTC), datetime(2026, 12, 7, 9, 3, tzinfo=UTC)
    now = shared + timedelta(seconds=2)
    runs_it = mutate_job(job_of(first, shared), now)
    assert runs_it["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY] == "sync@2026-12-07T09:02:00Z"
    assert "completions" not in runs_it["spec"] and runs_it["metadata"]["finalizers"] == [naming.LEDGER_FINALIZER]
    idle = mutate_job(job_of(second, shared), now)
    assert idle == {
        "metadata": {
            "annotations": {
                naming.ANNOTATION_IDEMPOTENCY_KEY: "sync@2026-12-07T09:02:00Z",
                naming.ANNOTATION_RUN_BY: "shop-sync",
            }
        },
        "spec": {"completions": 0, "parallelism": 0},
    }
    alone = mutate_job(job_of(second, own), own + timedelta(seconds=2))  # only the second schedule fires at :03
    assert alone["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY] == "sync@2026-12-07T09:03:00Z"
    assert "completions" not in alone["spec"]
    asked = job_of(second, shared)
    asked["metadata"]["annotations"][naming.ANNOTATION_RUN_KIND] = "rerun"  # a run asked for always runs
    assert "completions" not in mutate_job(asked, now)["spec"]


def test_the_plan_applies_every_part_counts_a_shared_minute_once_and_keeps_parts_on_an_error() -> None:
    doc = shop(schedules=["*/2 * * * *", "* * 7 * *"])
    result = plan(world_of(doc, DEPLOYMENT), datetime(2026, 12, 7, 9, 0, 30, tzinfo=UTC))  # tracking starts
    now = datetime(2026, 12, 7, 9, 12, tzinfo=UTC)
    assert [m["metadata"]["name"] for m in result.apply] == ["shop-sync", "shop-sync-s1"]
    existing = copy.deepcopy(result.apply)
    for cronjob in existing:
        cronjob["metadata"]["uid"] = f"cj-{cronjob['metadata']['name']}"
        cronjob["metadata"]["creationTimestamp"] = "2026-12-07T09:00:30Z"
    first, second = existing
    settled = {**doc, "status": result.status}
    jobs = []
    for minute in range(1, 9):
        fire = datetime(2026, 12, 7, 9, minute, tzinfo=UTC)
        for cronjob in (first, second) if minute % 2 == 0 else (second,):
            job = job_of(cronjob, fire)
            patch = mutate_job(job, fire + timedelta(seconds=1))
            job["metadata"]["annotations"].update(patch["metadata"]["annotations"])
            if "completions" in patch["spec"]:
                job["spec"].update(patch["spec"])
                job["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
            else:
                job["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
            job["metadata"]["uid"] = job["metadata"]["name"]
            jobs.append(job)
    after = plan(world_of(settled, DEPLOYMENT, existing, jobs=jobs), now)
    assert not after.apply and not after.delete
    [task] = after.status["tasks"]
    assert task["schedule"] == "*/2 * * * * | * * 7 * *"
    counts = task["counts"]
    assert counts["runs"] == 8 and counts["succeeded"] == 8, counts  # 09:01 to 09:08, a minute both fire once
    assert counts["duplicates"] == 0 and counts["missed"] == 0, counts
    # a spec error in the task keeps both its CronJobs rather than deleting the second
    broken = copy.deepcopy(settled)
    broken["spec"]["tasks"][0]["command"] = []
    kept = plan(world_of(broken, DEPLOYMENT, existing, jobs=jobs), now)
    assert kept.delete == []


def test_forbid_holds_across_the_cronjobs_a_fire_behind_another_ones_run_is_skipped_not_run() -> None:
    first = cronjobs.with_hash(render.render(shop(schedules=["*/2 * * * *", "* * 7 * *"]), DEPLOYMENT).cronjobs["sync"])
    [second] = cronjobs.parts_of(first)
    running = job_of(first, datetime(2026, 12, 7, 9, 2, tzinfo=UTC))  # still active (no condition)
    own = datetime(2026, 12, 7, 9, 3, tzinfo=UTC)
    job = job_of(second, own)
    assert admission.forbid_check(job, "shop") == ("shop", "shop", "sync")
    held = mutate_job(job, own + timedelta(seconds=1), [running, job])
    assert held == {
        "metadata": {
            "annotations": {
                naming.ANNOTATION_IDEMPOTENCY_KEY: "sync@2026-12-07T09:03:00Z",
                naming.ANNOTATION_BLOCKED_BY: running["metadata"]["name"],
            }
        },
        "spec": {"completions": 0, "parallelism": 0},
    }
    ended = copy.deepcopy(running)
    ended["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    asked = copy.deepcopy(running)
    asked["metadata"]["annotations"][naming.ANNOTATION_RUN_KIND] = "manual"
    for other in (ended, asked):  # an ended run, or a run asked for, holds nothing back
        assert "completions" not in mutate_job(job, own + timedelta(seconds=1), [other])["spec"]
    # Allow: nothing is read, nothing held back
    allowing = render.render(shop(schedules=["*/2 * * * *", "* * 7 * *"], concurrencyPolicy="Allow"), DEPLOYMENT)
    [loose] = cronjobs.parts_of(cronjobs.with_hash(allowing.cronjobs["sync"]))
    assert admission.forbid_check(job_of(loose, own), "shop") is None
    assert "completions" not in mutate_job(job_of(loose, own), own, [running])["spec"]


def test_the_ledger_counts_a_fire_held_back_behind_another_cronjobs_run_as_skipped() -> None:
    doc = shop(schedules=["*/2 * * * *", "* * 7 * *"])
    result = plan(world_of(doc, DEPLOYMENT), datetime(2026, 12, 7, 9, 0, 30, tzinfo=UTC))
    existing = copy.deepcopy(result.apply)
    for cronjob in existing:
        cronjob["metadata"]["uid"] = f"cj-{cronjob['metadata']['name']}"
        cronjob["metadata"]["creationTimestamp"] = "2026-12-07T09:00:30Z"
    first, second = existing
    long_run = job_of(first, datetime(2026, 12, 7, 9, 2, tzinfo=UTC))  # runs from 09:02:01 to 09:03:30
    long_run["metadata"]["uid"] = "long"
    long_run["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY] = "sync@2026-12-07T09:02:00Z"
    long_run["status"] = {"succeeded": 1, "completionTime": "2026-12-07T09:03:30Z",
                          "conditions": [{"type": "Complete", "status": "True",
                                          "lastTransitionTime": "2026-12-07T09:03:30Z"}]}  # fmt: skip
    behind = job_of(second, datetime(2026, 12, 7, 9, 3, tzinfo=UTC))
    behind["metadata"]["uid"] = "behind"
    active = copy.deepcopy(long_run)
    del active["status"]
    patch = mutate_job(behind, datetime(2026, 12, 7, 9, 3, 1, tzinfo=UTC), [active])
    behind["metadata"]["annotations"].update(patch["metadata"]["annotations"])
    behind["spec"].update(patch["spec"])
    behind["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    after = plan(world_of({**doc, "status": result.status}, DEPLOYMENT, existing, jobs=[long_run, behind]),
                 datetime(2026, 12, 7, 9, 5, 30, tzinfo=UTC))  # fmt: skip
    counts = after.status["tasks"][0]["counts"]
    assert counts["runs"] == 1 and counts["duplicates"] == 0, counts
    assert counts["skipped"] == 1 and counts["missed"] == 2, counts  # 09:03 held back; 09:01 and 09:04 had no Job


def test_catch_up_names_each_missed_fire_as_the_cronjob_that_runs_that_minute_would() -> None:
    doc = shop(schedules=["*/2 * * * *", "* * 7 * *"], catchUpWindow="10m", concurrencyPolicy="Allow")
    result = plan(world_of(doc, DEPLOYMENT), datetime(2026, 12, 7, 9, 0, 30, tzinfo=UTC))
    existing = copy.deepcopy(result.apply)
    for cronjob in existing:
        cronjob["metadata"]["uid"] = f"cj-{cronjob['metadata']['name']}"
        cronjob["metadata"]["creationTimestamp"] = "2026-12-07T09:00:30Z"
    after = plan(
        world_of({**doc, "status": result.status}, DEPLOYMENT, existing), datetime(2026, 12, 7, 9, 5, 30, tzinfo=UTC)
    )  # the controller started nothing: 09:01 to 09:04 missed, within the window
    made = [(j["metadata"]["name"], j["metadata"]["ownerReferences"][0]["name"]) for j in after.create]
    assert made == [
        ("shop-sync-s1-29943901", "shop-sync-s1"),
        ("shop-sync-29943902", "shop-sync"),
        ("shop-sync-s1-29943903", "shop-sync-s1"),
        ("shop-sync-29943904", "shop-sync"),
    ]
    assert all(j["metadata"]["annotations"][naming.ANNOTATION_RUN_KIND] == "catch-up" for j in after.create)


def test_a_backfill_and_a_rerun_take_the_union_of_the_schedules() -> None:
    first = cronjobs.with_hash(
        render.render(shop(schedules=["0 9 * * 1-5", "0 12 * * 0,6"]), DEPLOYMENT).cronjobs["sync"]
    )
    start, end = datetime(2026, 10, 23, tzinfo=UTC), datetime(2026, 10, 27, tzinfo=UTC)  # Berlin falls back on the 25th
    now = datetime(2026, 12, 7, tzinfo=UTC)
    _, fires = plugin.backfill_entry(first, "sync", start, end, 1, 100, now)
    assert fires == union_by_parts(["0 9 * * 1-5", "0 12 * * 0,6"], "Europe/Berlin", start, end)
    assert [f.hour for f in fires] == [7, 10, 11, 8]  # Friday 09:00 CEST, the weekend noons (CEST, CET), Monday (CET)
    assert plugin.asked_time("rerun", now, first, datetime(2026, 10, 25, 11, tzinfo=UTC)) == datetime(
        2026, 10, 25, 11, tzinfo=UTC
    )  # Sunday noon CET: a fire of the second schedule
    with pytest.raises(plugin.PluginError, match="not a fire"):
        plugin.asked_time("rerun", now, first, datetime(2026, 10, 25, 8, tzinfo=UTC))  # 09:00 on a Sunday


def made(doc: dict[str, Any], now: datetime) -> list[dict[str, Any]]:
    """The CronJobs a first plan applies, as the API server then holds them."""
    found = copy.deepcopy(plan(world_of(doc, DEPLOYMENT), now).apply)
    for cronjob in found:
        cronjob["metadata"]["uid"] = f"uid-{cronjob['metadata']['name']}"
    return found


def test_a_task_another_appschedule_keeps_loses_every_cronjob_and_part_names_are_reserved() -> None:
    now = datetime(2026, 12, 7, 9, 0, 30, tzinfo=UTC)
    older = shop(schedule="0 3 * * *")
    older["metadata"].update(name="other", uid="u0", creationTimestamp="2026-01-01T00:00:00Z")
    doc = shop(schedules=["*/2 * * * *", "* * 7 * *"])
    lost = plan(world_of(doc, DEPLOYMENT, [*made(doc, now), *made(older, now)], siblings=[older]), now)
    assert lost.delete == ["shop-sync", "shop-sync-s1"] and not lost.apply
    # AppSchedule shop-sync's task s1 would be named as shop's second schedule of sync: the older one keeps it
    named = shop(schedule="0 3 * * *")
    named["metadata"].update(name="shop-sync", uid="u2", creationTimestamp="2026-01-01T00:00:00Z")
    named["spec"]["tasks"][0]["name"] = "s1"
    younger = plan(world_of(doc, DEPLOYMENT, siblings=[named]), now)
    assert not younger.apply
    ready = next(c for c in younger.status["conditions"] if c["type"] == "Ready")
    assert "'shop-sync-s1'" in ready["message"] and "the older one keeps it" in ready["message"], ready
    assert [m["metadata"]["name"] for m in plan(world_of(named, DEPLOYMENT, siblings=[doc]), now).apply] == [
        "shop-sync-s1"
    ]


def test_an_odd_part_annotation_is_the_first_part_and_breaks_nothing() -> None:
    for value in ("²", "-1", "999", "", "1.0", "٣"):
        assert render.part_of({"annotations": {naming.ANNOTATION_PART: value}}) == 0, value
    now = datetime(2026, 12, 7, 9, 0, 30, tzinfo=UTC)
    doc = shop(schedules=["*/2 * * * *", "* * 7 * *"])
    existing = made(doc, now)
    existing[1]["metadata"]["annotations"][naming.ANNOTATION_PART] = "²"  # a hand edit
    again = plan(world_of(doc, DEPLOYMENT, existing), now)  # read, never raised
    assert again.status["tasks"][0]["cronJob"] == "shop-sync" and not again.delete


def test_what_several_schedules_cannot_be_is_refused_naming_the_field() -> None:
    replace = check_appschedule(shop(schedules=["0 9 * * *", "0 10 * * 1"], concurrencyPolicy="Replace"))
    assert replace and "spec.tasks[0].concurrencyPolicy" in replace and "Replace" in replace, replace
    piped = check_appschedule(shop(schedules=["0 9 * * * | 0 10 * * *", "0 11 * * *"]))
    assert piped and "spec.tasks[0].schedules[0]" in piped and "one expression" in piped, piped
    assert "required" not in (check_appschedule(shop(schedules=["0 9 * * *", "61 * * * *"])) or "")
    wide = ",".join(["H"] * 45) + " 1 * * *"  # 97 characters, each H two digits once resolved
    long = check_appschedule(shop(schedules=[wide] * 4))
    assert long and "spec.tasks[0].schedules" in long and "at most 409" in long, long


def test_hours_joined_into_every_hour_stay_apart_so_a_fall_back_keys_alike_in_every_zone() -> None:
    for zone in ("Europe/Berlin", "America/New_York"):
        union = parse("0 0-11 * * * | 0 12-23 * * *", zone)
        assert union.cronjob_expressions == ("0 0-11 * * *", "0 12-23 * * *")
    berlin = parse("0 0-11 * * * | 0 12-23 * * *", "Europe/Berlin")
    assert repeat_of(berlin, datetime(2026, 10, 25, 1, tzinfo=UTC)) == datetime(2026, 10, 25, 0, tzinfo=UTC)
