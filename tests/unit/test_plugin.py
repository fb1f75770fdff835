"""`kubectl appschedule status` (plugin.py): what it shows, computed without a cluster, in 80 columns."""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from appschedule.plugin import (
    PluginError,
    _api,
    asked_time,
    backfill_entry,
    describe,
    history,
    history_text,
    job_for,
    text,
)

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)  # the day before Europe/Berlin springs forward


def appschedule(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": "shop"},
        "spec": {"deploymentRef": {"name": "web"}, "tasks": [{"name": "nightly"}, {"name": "report"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "RunsHealthy", "status": "False"}],
            "tasks": [
                {
                    "name": "nightly",
                    "schedule": "30 2 * * *",  # 2:30 local: no such time on 29 March
                    "timeZone": "Europe/Berlin",
                    "lastRun": {"scheduledTime": "2026-03-28T01:30:00Z", "state": "Succeeded", "job": "j"},
                    "counts": {"runs": 40, "missed": 2, "duplicates": 1, "unkeyed": 1},
                    "recent": [
                        {"state": "Succeeded"},
                        {"state": "Missed"},
                        {"state": "Failed"},
                        {"state": "Succeeded", "duplicates": 1},
                    ],
                },
            ],
            **status,
        },
    }


def test_next_fires_are_the_controllers_across_daylight_saving_local_and_utc() -> None:
    (nightly, report) = describe(appschedule(), NOW)["tasks"]
    assert [f["utc"] for f in nightly["next"]] == [
        "2026-03-30T00:30:00Z",  # 29 March has no 2:30 in Berlin: the controller skips that day
        "2026-03-31T00:30:00Z",
        "2026-04-01T00:30:00Z",
    ]
    assert nightly["next"][0]["local"] == "2026-03-30 02:30 CEST"
    assert nightly["health"] == "1 missed, 1 failed, 1 duplicated among the last 4 runs"
    assert nightly["counts"]["unkeyed"] == 1 and nightly["lastRun"]["state"] == "Succeeded"
    assert report["health"] == "not tracked yet" and isinstance(report["next"], str)


def test_the_text_fits_80_columns_and_says_each_part() -> None:
    long = appschedule()
    long["status"]["tasks"][0]["name"] = "n" * 63
    long["spec"]["tasks"][0]["name"] = "n" * 63
    long["status"]["tasks"][0]["schedule"] = "0,5,10,15,20,25,30,35,40,45,50,55 0-23 1,8,15,22,29 1-12 0-6"
    shown = text([describe(long, NOW), describe(appschedule(), NOW)])
    assert max(len(line) for line in shown.splitlines()) <= 80
    block = text([describe(appschedule(), NOW)])
    assert "shop/shop  deployment web  ready True  runs healthy False" in block
    assert "    counts    runs 40  missed 2  duplicates 1  failed 0  stuck 0  unkeyed 1" in block
    assert "    next      2026-03-30 02:30 CEST   2026-03-30T00:30:00Z" in block
    assert "  report  schedule not known yet" in block


@pytest.mark.parametrize(
    "odd",
    [{}, {"metadata": None, "spec": "x", "status": []}, {"status": {"tasks": [{"name": 3, "schedule": 5}]}},
     {"status": {"tasks": [{"name": "t", "schedule": "61 * * * *", "timeZone": "Mars/Base"}]}}],
)  # fmt: skip
def test_odd_objects_are_shown_not_raised(odd: dict[str, Any]) -> None:
    described = describe(odd, NOW)
    json.dumps(described)
    assert max((len(line) for line in text([described]).splitlines()), default=0) <= 80


def test_history_marks_each_fire_oldest_first_what_went_wrong_before_what_went_right() -> None:
    obj = appschedule()
    obj["spec"]["tasks"][0]["missedRunGraceSeconds"] = 30
    obj["status"]["tasks"][0]["recent"] = [  # newest first, as the status keeps them
        {"scheduledTime": "2026-03-28T01:35:00Z", "state": "Active"},
        {"scheduledTime": "2026-03-28T01:34:00Z", "state": "Succeeded", "keyInjected": False},
        {"scheduledTime": "2026-03-28T01:33:00Z", "state": "Failed", "delaySeconds": 90},
        {"scheduledTime": "2026-03-28T01:32:00Z", "state": "Succeeded", "delaySeconds": 45},
        {"scheduledTime": "2026-03-28T01:31:00Z", "state": "Missed"},
        {"scheduledTime": "2026-03-28T01:30:00Z", "state": "Succeeded", "duplicates": 1},
        {"scheduledTime": "2026-03-28T01:29:00Z", "state": "Unknown"},
        {"scheduledTime": "2026-03-28T01:28:00Z", "state": "Failed", "stuck": True},
        {"scheduledTime": "2026-03-28T01:27:00Z", "state": "Succeeded", "delaySeconds": 10},
        {"scheduledTime": "2026-03-28T01:26:00Z", "state": "Failed", "reruns": 1},
        {"state": "Succeeded"},  # no time: not a fire it can place
    ]
    found = history(obj)
    (nightly,) = found["tasks"]
    assert [f["mark"] for f in nightly["fires"]] == list("F.S?DMLFKA")  # a failed fire run again is still F
    shown = history_text(found)
    assert "  nightly              F . S ? D M L F K A  2026-03-28T01:26:00Z .. 01:35:00Z" in shown
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert history(obj, "report")["tasks"] == [] and history(obj, "nightly")["tasks"] == [nightly]


def test_what_claims_came_to_and_why_runs_failed_are_shown() -> None:
    """A duplicate the claim absorbed is marked d (it did nothing) and is no health problem; one that did the work
    is D. Why a failed fire failed is listed under its marks; the last run says its claim and failure."""
    obj = appschedule()
    entry = obj["status"]["tasks"][0]
    entry["lastRun"] = {"scheduledTime": "2026-03-28T01:33:00Z", "state": "Failed", "failure": "OOMKilled",
                        "claim": "won"}  # fmt: skip
    entry["counts"] = {"runs": 4, "duplicates": 2, "absorbed": 1, "unclaimed": 1, "failed": 1}
    entry["recent"] = [
        {"scheduledTime": "2026-03-28T01:33:00Z", "state": "Failed", "failure": "OOMKilled"},
        {"scheduledTime": "2026-03-28T01:32:00Z", "state": "Succeeded", "duplicates": 1, "absorbed": 1},
        {"scheduledTime": "2026-03-28T01:31:00Z", "state": "Succeeded", "duplicates": 1},
        {"scheduledTime": "2026-03-28T01:30:00Z", "state": "Failed", "failure": "exit 3"},
    ]
    (nightly,) = history(obj)["tasks"]
    assert [f["mark"] for f in nightly["fires"]] == list("FDdF")
    shown = history_text(history(obj))
    assert "    failed: 01:30 exit 3, 01:33 OOMKilled" in shown and "d duplicate absorbed" in shown
    described = describe(obj, NOW)["tasks"][0]
    assert described["health"] == "2 failed, 1 duplicated among the last 4 runs"  # the absorbed one is not
    block = text([describe(obj, NOW)])
    assert "    last run  Failed (OOMKilled), fire 2026-03-28T01:33:00Z, claim won" in block
    assert "    claims    absorbed 1 of 2 duplicates  runs that claimed nothing 1" in block
    assert max(len(line) for line in block.splitlines()) <= 80


def test_history_of_odd_objects_is_shown_not_raised() -> None:
    odds: list[dict[str, Any]] = [
        {},
        {"status": {"tasks": [{"name": "t", "recent": "x"}, 5]}},
        {"spec": [], "status": None},
    ]
    for odd in odds:
        shown = history_text(history(odd))
        assert max(len(line) for line in shown.splitlines()) <= 80


CRONJOB: dict[str, Any] = {
    "metadata": {"name": "shop-nightly", "namespace": "shop", "uid": "u-1"},
    "spec": {
        "schedule": "30 2 * * *",
        "timeZone": "Europe/Berlin",
        "jobTemplate": {
            "metadata": {"labels": {"appschedule.dev/appschedule": "shop", "appschedule.dev/task": "nightly"}},
            "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "web:1"}]}}},
        },
    },
}


def test_a_manual_run_is_now_to_the_second_and_never_a_fires_time() -> None:
    assert asked_time("manual", datetime(2026, 3, 28, 12, 0, 7, 500, tzinfo=UTC), CRONJOB) == datetime(
        2026, 3, 28, 12, 0, 7, tzinfo=UTC
    )
    assert asked_time("manual", datetime(2026, 3, 28, 12, 0, 0, tzinfo=UTC), CRONJOB).second == 1


def test_a_rerun_must_name_a_past_fire_and_is_told_the_nearest_across_daylight_saving() -> None:
    now = datetime(2026, 3, 31, 12, 0, tzinfo=UTC)
    fire = datetime(2026, 3, 28, 1, 30, tzinfo=UTC)  # 02:30 CET
    assert asked_time("rerun", now, CRONJOB, fire) == fire
    with pytest.raises(PluginError) as wrong:  # 29 March has no 02:30 in Berlin
        asked_time("rerun", now, CRONJOB, datetime(2026, 3, 29, 0, 30, tzinfo=UTC))
    assert "is not a fire of '30 2 * * *' (Europe/Berlin); the nearest: 2026-03-28T01:30:00Z and " in str(wrong.value)
    assert "2026-03-30T00:30:00Z" in str(wrong.value)
    with pytest.raises(PluginError, match="has not fired yet"):
        asked_time("rerun", now, CRONJOB, datetime(2026, 4, 1, 0, 30, tzinfo=UTC))


def test_the_job_is_the_cronjobs_template_owned_by_it_with_its_kind_and_time() -> None:
    job = job_for(CRONJOB, "rerun", datetime(2026, 3, 28, 1, 30, tzinfo=UTC))
    meta = job["metadata"]
    assert meta["generateName"] == "shop-nightly-rerun-" and meta["namespace"] == "shop"
    assert meta["labels"]["appschedule.dev/task"] == "nightly"
    assert meta["annotations"] == {"appschedule.dev/scheduled-time": "2026-03-28T01:30:00Z",
                                   "appschedule.dev/run-kind": "rerun"}  # fmt: skip
    assert meta["ownerReferences"][0]["uid"] == "u-1" and meta["ownerReferences"][0]["controller"] is True
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "web:1"


def test_a_rerun_of_the_fall_back_repeat_is_the_fire_itself_with_its_key() -> None:
    now = datetime(2026, 10, 26, 12, 0, tzinfo=UTC)
    first, repeat = datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
    assert asked_time("rerun", now, CRONJOB, repeat) == first == asked_time("rerun", now, CRONJOB, first)


def test_the_generated_name_is_a_valid_name_whatever_the_cronjob_is_called() -> None:
    odd = {**CRONJOB, "metadata": {**CRONJOB["metadata"], "name": "a" * 39 + ".b"}}
    assert (
        job_for(odd, "manual", datetime(2026, 3, 28, tzinfo=UTC))["metadata"]["generateName"] == "a" * 39 + "-manual-"
    )


def test_the_namespace_is_the_named_contexts_even_without_a_current_one(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "shop", "context": {"cluster": "c", "user": "u", "namespace": "shop"}},
                     {"name": "plain", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    for context, namespace in (("shop", "shop"), ("plain", "default")):
        args = argparse.Namespace(kubeconfig=str(kubeconfig), context=context)
        assert _api(args)[1] == namespace


def test_a_backfill_lists_the_fires_across_daylight_saving_and_refuses_what_it_cannot_run() -> None:
    """`30 2 * * *` in Europe/Berlin from 27 to 31 March: no fire on the 29th (02:30 does not exist)."""
    now = datetime(2026, 4, 1, 12, 0, tzinfo=UTC)
    start, end = datetime(2026, 3, 27, tzinfo=UTC), datetime(2026, 3, 31, 23, 59, tzinfo=UTC)
    entry, fires = backfill_entry(CRONJOB, "nightly", start, end, 2, 100, now)
    assert [f"{f:%d %H:%M}" for f in fires] == ["27 01:30", "28 01:30", "30 00:30", "31 00:30"]
    assert entry == {"name": "nightly-202603270130", "task": "nightly", "from": "2026-03-27T00:00:00Z",
                     "to": "2026-03-31T23:59:00Z", "parallel": 2}  # fmt: skip
    with pytest.raises(PluginError, match=r"more than 3 fires .* raise --max"):
        backfill_entry(CRONJOB, "nightly", start, end, 1, 3, now)
    with pytest.raises(PluginError, match="is in the future"):
        backfill_entry(CRONJOB, "nightly", start, now.replace(day=2), 1, 100, now)
    with pytest.raises(PluginError, match="is before --from"):
        backfill_entry(CRONJOB, "nightly", end, start, 1, 100, now)
    with pytest.raises(PluginError, match="no fire of"):
        backfill_entry(
            CRONJOB, "nightly", datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 3, 29, 12, tzinfo=UTC), 1, 100, now
        )


def test_backfills_and_caught_up_runs_are_shown_in_80_columns() -> None:
    item = appschedule(backfills=[
        {"name": "b" * 30, "task": "n" * 63, "state": "Running", "fires": 1000, "started": 999, "active": 10,
         "succeeded": 988, "failed": 1, "next": "2026-03-28T01:30:00Z"},
        {"name": "odd", "task": "nightly", "state": "Invalid", "message": "x " * 128},
    ])  # fmt: skip
    item["status"]["tasks"][0]["counts"] |= {"backfilled": 3, "caughtUp": 2}
    item["status"]["tasks"][0]["recent"].append({"state": "Succeeded", "caughtUp": True, "scheduledTime": "z"})
    shown = text([describe(item, NOW)])
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "    asked     manual 0  reruns 0  backfilled 3  caughtUp 2" in shown
    assert "    started 999/1000  active 10  succeeded 988  failed 1" in shown
    assert "  backfill odd (nightly)  Invalid: x x" in shown
    assert history(item)["tasks"][0]["fires"][-1]["mark"] == "C"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("1970-01-01T00:00:00Z", None),  # the first second there is: a fire of a schedule at 01:00 Berlin (CET)
        ("1970-01-01T00:00:00+01:00", "give a time between 1970-01-01 and 9990-01-01"),
        ("9999-12-31T23:00:00Z", "give a time between 1970-01-01 and 9990-01-01"),
        ("0001-01-01T00:00:00Z", "give a time between 1970-01-01 and 9990-01-01"),
    ],
)
def test_times_at_the_edges_are_refused_clearly_or_answered_never_raised(given: str, said: str | None) -> None:
    """rerun --time and backfill --from/--to at the ends of time: a refusal naming the flag, never a traceback."""
    from appschedule.plugin import _time_arg

    at_one = {**CRONJOB, "spec": {**CRONJOB["spec"], "schedule": "0 1 * * *"}}
    if said is None:
        moment = _time_arg(given)
        assert asked_time("rerun", NOW, at_one, moment) == moment
        entry, fires = backfill_entry(at_one, "nightly", moment, _time_arg("1970-01-03T00:00:00Z"), 1, 10, NOW)
        assert entry["from"] == given and len(fires) == 3
        return
    with pytest.raises(PluginError, match=re.escape(f"--time '{given}': {said}")):
        _time_arg(given)
    with pytest.raises(PluginError, match=re.escape(f"--from '{given}': {said}")):
        _time_arg(given, "--from")
