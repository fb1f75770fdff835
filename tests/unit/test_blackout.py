"""Blackouts (core/blackout.py, and plan(), the ledger and the key webhook around them): whole days, ranges of
days and weekly windows in the task's zone; a fire inside one is blacked out (counted, not missed, its run
refused), and the cost is O(windows), not O(fires). Europe/Berlin's transitions of 2026 (29 March: 02:00 ->
03:00; 25 October: 03:00 -> 02:00) and hours with several fires are in every time test."""

from __future__ import annotations

import copy
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from appschedule.core import blackout, naming, schedule
from appschedule.core.admission import blackout_refusal, check_appschedule
from appschedule.core.models import AppScheduleSpec
from appschedule.core.reconcile import plan
from appschedule.core.schedule import fires_between, parse
from appschedule.core.view import project_appschedule, project_calendar
from appschedule.plugin import describe, history, history_text, text
from appschedule.shell.store import Store
from tests.kit.worlds import world_of

BERLIN = schedule.check_time_zone("Europe/Berlin")


def z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def windows(*raw: dict[str, Any]) -> tuple[blackout.Window, ...]:
    spec = AppScheduleSpec.model_validate(
        {
            "deploymentRef": {"name": "web"},
            "blackouts": list(raw),
            "tasks": [{"name": "a", "schedule": "* * * * *", "command": ["x"]}],
        }
    )
    return blackout.of(spec.blackouts or [])


HOLIDAYS = windows(
    {"name": "spring-forward", "dates": ["2026-03-29"], "reason": "the short day"},
    {"name": "fall-back", "dates": ["2026-10-25"]},
    {"name": "christmas", "from": "2026-12-24", "to": "2026-12-26", "reason": "office closed"},
    {"name": "nights", "weekly": {"days": ["FRI", "SAT"], "from": "22:00", "to": "06:00"}},
    {"name": "two-am", "weekly": {"days": ["SUN"], "from": "02:00", "to": "03:00"}},
)


# -- the spans


def test_a_day_is_the_zone_s_day_23_and_25_hours_at_the_transitions() -> None:
    day = windows({"name": "d", "dates": ["2026-03-29", "2026-10-25", "2026-06-01"]})
    found = blackout.spans(day, BERLIN, z("2026-01-01T00:00:00Z"), z("2027-01-01T00:00:00Z"))
    assert [(s, e - s) for s, e, _ in found] == [
        (z("2026-03-28T23:00:00Z"), timedelta(hours=23)),
        (z("2026-05-31T22:00:00Z"), timedelta(hours=24)),
        (z("2026-10-24T22:00:00Z"), timedelta(hours=25)),
    ]


def test_a_weekly_window_of_the_hour_the_clock_skips_is_empty_and_of_the_repeated_hour_is_two() -> None:
    sundays = windows({"name": "two-am", "weekly": {"days": ["SUN"], "from": "02:00", "to": "03:00"}})
    spring = blackout.spans(sundays, BERLIN, z("2026-03-28T00:00:00Z"), z("2026-03-30T00:00:00Z"))
    assert spring == []  # 02:00-03:00 did not happen on 29 March
    fall = blackout.spans(sundays, BERLIN, z("2026-10-24T00:00:00Z"), z("2026-10-26T00:00:00Z"))
    assert [(s, e) for s, e, _ in fall] == [(z("2026-10-25T00:00:00Z"), z("2026-10-25T02:00:00Z"))]


def test_a_weekly_window_in_the_repeated_hour_holds_both_of_its_times() -> None:
    """02:40 to 02:50 comes twice on the fall-back night: a run at the second 02:45 starts inside the window."""
    sundays = windows({"name": "q", "weekly": {"days": ["SUN"], "from": "02:40", "to": "02:50"}})
    fall = blackout.spans(sundays, BERLIN, z("2026-10-24T00:00:00Z"), z("2026-10-26T00:00:00Z"))
    assert [(s, e) for s, e, _ in fall] == [
        (z("2026-10-25T00:40:00Z"), z("2026-10-25T00:50:00Z")),  # 02:40 to 02:50 CEST
        (z("2026-10-25T01:40:00Z"), z("2026-10-25T01:50:00Z")),  # 02:40 to 02:50 CET
    ]
    every = parse("*/5 * * * *", "Europe/Berlin")
    assert blackout.covering(sundays, BERLIN, z("2026-10-25T01:45:00Z")) is not None
    assert blackout.next_allowed(every, sundays, z("2026-10-25T01:38:00Z")) == z("2026-10-25T01:50:00Z")


ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago"]  # Lord Howe: 30 minutes
WEEKLY = [("02:40", "02:50"), ("02:00", "03:00"), ("02:30", "03:30"), ("01:30", "02:30"), ("01:45", "02:15"),
          ("22:00", "02:30"), ("02:30", "01:00"), ("23:30", "00:30"), ("00:00", "24:00")]  # fmt: skip


@pytest.mark.parametrize("zone", ZONES)
def test_a_weekly_window_holds_every_minute_whose_wall_clock_is_in_it_around_every_transition(zone: str) -> None:
    """Minute by minute through the three days around each of the zone's transitions of 2026: a minute is blacked
    out exactly when its wall-clock time, each time it comes, is in the window (the hour the clock skips: never)."""
    tz = schedule.check_time_zone(zone)
    days = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]
    moments = [z("2026-01-01T00:00:00Z") + timedelta(hours=h) for h in range(0, 366 * 24)]
    changes = [
        b for a, b in itertools.pairwise(moments) if a.astimezone(tz).utcoffset() != b.astimezone(tz).utcoffset()
    ]
    assert len(changes) == 2
    for start, end in WEEKLY:
        for change in changes:
            day = days[change.astimezone(tz).weekday()]
            window = windows({"name": "w", "weekly": {"days": [day], "from": start, "to": end}})
            low, high = change - timedelta(days=1, hours=12), change + timedelta(days=1, hours=12)
            found = blackout.spans(window, tz, low, high)
            lo, hi = blackout.minutes(start), blackout.minutes(end)
            t = low
            while t < high:
                wall = t.astimezone(tz)
                minute, weekday = wall.hour * 60 + wall.minute, days[wall.weekday()]
                previous = days[(wall.weekday() - 1) % 7]
                if hi > lo:
                    inside = weekday == day and lo <= minute < hi
                else:  # past midnight, into the next day
                    inside = (weekday == day and minute >= lo) or (previous == day and minute < hi)
                held = any(s <= t < e for s, e, _ in found)
                assert held == inside, (zone, start, end, t, wall)
                t += timedelta(minutes=1)


def test_a_weekly_window_runs_past_midnight_and_24_00_ends_the_day() -> None:
    nights = windows({"name": "n", "weekly": {"days": ["FRI"], "from": "22:00", "to": "06:00"}})
    found = blackout.spans(nights, BERLIN, z("2026-10-23T00:00:00Z"), z("2026-10-26T00:00:00Z"))
    assert [(s, e) for s, e, _ in found] == [(z("2026-10-23T20:00:00Z"), z("2026-10-24T04:00:00Z"))]
    whole = windows({"name": "w", "weekly": {"days": ["SAT", "SUN"], "from": "00:00", "to": "24:00"}})
    span = blackout.covering(whole, BERLIN, z("2026-10-24T12:00:00Z"))
    assert span is not None and span[:2] == (z("2026-10-23T22:00:00Z"), z("2026-10-25T23:00:00Z"))  # 49 hours


# -- counts and the next fire, against one step per fire


@pytest.mark.parametrize(
    "expression",
    ["*/15 * * * *", "30 2 * * *", "0,20,40 1-3 * * *", "H 9 * * MON-FRI"],  # several fires an hour; 02:30 daily
)
@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("2026-03-26T00:00:00Z", "2026-04-01T00:00:00Z"),
        ("2026-10-22T00:00:00Z", "2026-10-28T00:00:00Z"),
        ("2026-12-20T00:00:00Z", "2026-12-29T00:00:00Z"),
    ],
)
def test_the_count_and_the_next_fire_agree_with_one_step_per_fire(expression: str, low: str, high: str) -> None:
    sched = parse(schedule.resolve_hashed(expression, "seed"), "Europe/Berlin")
    fires = list(fires_between(sched, z(low), z(high)))
    dark = [f for f in fires if blackout.blacked_out(HOLIDAYS, BERLIN, f) is not None]
    assert blackout.count(sched, HOLIDAYS, z(low), z(high)) == len(dark)
    lit = [f for f in fires if f not in dark]
    for at in [z(low), *fires[:: max(1, len(fires) // 40)]]:
        expected = next((f for f in lit if f > at), None)
        if expected is not None:
            assert blackout.next_allowed(sched, HOLIDAYS, at) == expected, at


class Steps:
    """How many times blackout.py asks the schedule for a next fire (each test's own count)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = schedule.next_fire

        def counted(s: schedule.Schedule, after: datetime) -> datetime | None:
            self.count += 1
            return real(s, after)

        monkeypatch.setattr(blackout, "next_fire", counted)


def test_a_year_long_blackout_costs_its_windows_not_its_fires(monkeypatch: pytest.MonkeyPatch) -> None:
    """An every-minute task dark for a year and every weekend: the next fire is found in a few steps."""
    year = windows(
        {"name": "year", "from": "2026-01-01", "to": "2027-01-01"},  # to a Friday: the weekend follows
        {"name": "weekends", "weekly": {"days": ["SAT", "SUN"], "from": "00:00", "to": "24:00"}},
    )
    sched = parse("* * * * *", "Europe/Berlin")
    steps = Steps(monkeypatch)
    assert blackout.next_allowed(sched, year, z("2026-01-01T10:00:00Z")) == z("2027-01-03T23:00:00Z")  # a Monday
    assert steps.count <= 3
    only = year[:1]  # 366 days of the zone, a 23-hour and a 25-hour one among them: every minute of them
    assert blackout.count(sched, only, z("2025-12-31T00:00:00Z"), z("2027-01-03T00:00:00Z")) == 366 * 24 * 60
    assert steps.count <= 3


# -- the spec


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"name": "x", "dates": ["2026-02-30"]}, "not a day of the calendar"),
        ({"name": "x", "from": "2026-12-26", "to": "2026-12-24"}, "is before from"),
        ({"name": "x", "from": "2026-12-26"}, "needs both from and to"),
        (
            {"name": "x", "dates": ["2026-12-24"], "weekly": {"days": ["MON"], "from": "01:00", "to": "02:00"}},
            "exactly one of",
        ),
        ({"name": "x", "weekly": {"days": ["MON"], "from": "09:00", "to": "09:00"}}, "the window is empty"),
        ({"name": "x", "weekly": {"days": ["MON"], "from": "24:00", "to": "09:00"}}, "blackouts[0].weekly.from"),
        ({"name": "x", "weekly": {"days": ["MONDAY"], "from": "08:00", "to": "09:00"}}, "blackouts[0].weekly.days"),
    ],
)
def test_a_bad_blackout_is_refused_at_apply_naming_the_field(entry: dict[str, Any], said: str) -> None:
    body: dict[str, Any] = {
        "metadata": {"name": "shop", "namespace": "shop"},
        "spec": {
            "deploymentRef": {"name": "web"},
            "tasks": [{"name": "a", "schedule": "* * * * *", "command": ["x"], "blackouts": [entry]}],
        },
    }
    refusal = check_appschedule(body)
    assert refusal is not None and said in refusal and "tasks[0]" in refusal, refusal
    twice = copy.deepcopy(body)
    twice["spec"]["tasks"][0]["blackouts"] = [{"name": "x", "dates": ["2026-12-24"]}] * 2
    assert "unique" in (check_appschedule(twice) or "")


# -- plan(): the CronJob suspended for the span, the ledger, the status, the Events


def appschedule(status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": "shop",
            "namespace": "shop",
            "uid": "uid-shop",
            "generation": 1,
            "creationTimestamp": "2026-10-01T00:00:00Z",
        },
        "spec": {
            "deploymentRef": {"name": "web"},
            "timeZone": "Europe/Berlin",
            "blackouts": [
                {
                    "name": "repeated-hour",
                    "reason": "the clocks go back",
                    "weekly": {"days": ["SUN"], "from": "02:00", "to": "03:00"},
                }
            ],
            "tasks": [{"name": "sync", "schedule": "*/20 * * * *", "command": ["sync"]}],
        },
    }
    if status is not None:
        body["status"] = status
    return body


def held(manifest: dict[str, Any]) -> dict[str, Any]:
    metadata = {**manifest["metadata"], "uid": "uid-cj", "creationTimestamp": "2026-10-01T00:00:00Z"}
    metadata["ownerReferences"] = [{**metadata["ownerReferences"][0], "uid": "uid-shop"}]
    return {**manifest, "metadata": metadata}


def job(manifest: dict[str, Any], fire: str) -> dict[str, Any]:
    """The Job the CronJob controller makes for ``fire`` from the CronJob ``manifest``."""
    template = manifest["spec"]["jobTemplate"]
    return {
        "metadata": {
            "name": f"shop-sync-{int(z(fire).timestamp()) // 60}",
            "namespace": "shop",
            "uid": f"uid-{fire}",
            "creationTimestamp": fire,
            "labels": dict(template["metadata"]["labels"]),
            "annotations": {**template["metadata"].get("annotations", {}), naming.CRONJOB_SCHEDULED_TIMESTAMP: fire},
            "ownerReferences": [{"kind": "CronJob", "name": manifest["metadata"]["name"], "uid": "uid-cj"}],
        },
        "spec": copy.deepcopy(template["spec"]),
        "status": {
            "succeeded": 1,
            "completionTime": fire,
            "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": fire}],
        },
    }


def test_the_fall_back_nights_repeated_hour_blacked_out(deployment: dict[str, Any]) -> None:
    """Sunday 02:00-03:00 in Berlin: on 25 October both 02:00-03:00 hours (six fires of */20, 00:00Z-01:40Z) are
    blacked out; the CronJob is suspended for the two hours, said, and runs again at 03:00 (02:00Z)."""
    before = plan(world_of(appschedule(), deployment), z("2026-10-24T23:50:00Z"))
    (manifest,) = before.apply
    assert json.loads(manifest["spec"]["jobTemplate"]["metadata"]["annotations"][blackout.ANNOTATION])[0]["name"] == (
        "repeated-hour"
    )
    assert (
        not manifest["spec"]["suspend"] and before.wake_at is not None and before.wake_at <= z("2026-10-25T00:00:00Z")
    )
    assert before.status["tasks"][0]["nextRunTime"] == "2026-10-25T02:00:00Z"  # past both 02:xx hours
    ran = job(manifest, "2026-10-24T23:40:00Z")

    inside = plan(
        world_of(appschedule(before.status), deployment, [held(manifest)], jobs=[ran]), z("2026-10-25T00:00:05Z")
    )
    (dark,) = inside.apply
    assert dark["spec"]["suspend"] is True and inside.wake_at == z("2026-10-25T02:00:00Z")
    said = dark["spec"]["jobTemplate"]["metadata"]["annotations"][blackout.ANNOTATION_NOW]
    assert said == "repeated-hour (the clocks go back) until 2026-10-25T02:00:00Z"
    assert [(e.reason, e.message) for e in inside.write_events] == [
        ("BlackoutStarted", "task 'sync': no run starts: blackout " + said)
    ]
    assert inside.status["tasks"][0]["nextRunTime"] == "2026-10-25T02:00:00Z"

    # the CronJob controller resumed within the starting deadline of 01:40Z: the webhook refuses that Job
    refusal = blackout_refusal(job(dark, "2026-10-25T01:40:00Z"))
    assert refusal is not None and "blackout repeated-hour (the clocks go back)" in refusal
    assert blackout_refusal(job(dark, "2026-10-25T02:00:00Z")) is None

    after = plan(world_of(appschedule(inside.status), deployment, [held(dark)], jobs=[ran]), z("2026-10-25T02:00:30Z"))
    (lit,) = after.apply
    assert (
        lit["spec"]["suspend"] is False
        and blackout.ANNOTATION_NOW not in lit["spec"]["jobTemplate"]["metadata"]["annotations"]
    )
    assert [e.reason for e in after.write_events] == ["BlackoutEnded"]
    counts = after.status["tasks"][0]["counts"]
    assert (counts["blackedOut"], counts["missed"], counts["skipped"]) == (6, 0, 0), counts
    assert not after.create  # nothing caught up


def test_a_blacked_out_fire_is_never_missed_nor_caught_up_after_an_outage(deployment: dict[str, Any]) -> None:
    """The operator was down across the blackout (no suspension ever written) and catchUpWindow is on: the
    fires inside are blacked out, the one after it with no Job is missed within the window and caught up."""
    body = appschedule()
    body["spec"]["tasks"][0]["catchUpWindow"] = "3h"
    first = plan(world_of(body, deployment), z("2026-10-24T23:50:00Z"))
    (manifest,) = first.apply
    later = {**appschedule(first.status), "spec": body["spec"]}
    late = plan(world_of(later, deployment, [held(manifest)]), z("2026-10-25T02:30:00Z"))
    counts = late.status["tasks"][0]["counts"]
    assert counts.get("blackedOut") == 6, counts
    started = [j["metadata"]["annotations"][naming.ANNOTATION_SCHEDULED_TIME] for j in late.create]
    assert "2026-10-25T00:00:00Z" not in started and "2026-10-25T01:40:00Z" not in started
    assert set(late.status["tasks"][0].get("catchUp") or []) | set(started) <= {
        "2026-10-24T23:40:00Z",
        "2026-10-25T02:00:00Z",
        "2026-10-25T02:20:00Z",
    }


def test_the_webhook_admits_what_it_cannot_read_and_every_run_asked_for(deployment: dict[str, Any]) -> None:
    (manifest,) = plan(world_of(appschedule(), deployment), z("2026-10-24T23:50:00Z")).apply
    inside = job(manifest, "2026-10-25T00:20:00Z")
    assert blackout_refusal(inside) is not None
    asked = copy.deepcopy(inside)
    asked["metadata"]["annotations"][naming.ANNOTATION_RUN_KIND] = "manual"
    garbled = copy.deepcopy(inside)
    garbled["metadata"]["annotations"][blackout.ANNOTATION] = '[{"name": "x", "dates": ["yesterday"]}]'
    stripped = copy.deepcopy(inside)
    del stripped["metadata"]["annotations"][naming.CRONJOB_SCHEDULED_TIMESTAMP]
    for admitted in (asked, garbled, stripped, {"metadata": "anything"}, {}):
        assert blackout_refusal(admitted) is None


def test_the_plugin_shows_the_blackout_and_the_fires_past_it(deployment: dict[str, Any]) -> None:
    before = plan(world_of(appschedule(), deployment), z("2026-10-24T23:50:00Z"))
    body = appschedule(before.status)
    body["status"]["tasks"][0]["counts"]["blackedOut"] = 6
    (shown,) = [t for t in describe(body, z("2026-10-25T00:30:00Z"))["tasks"]]
    assert shown["blackout"] == {
        "now": True,
        "name": "repeated-hour (the clocks go back)",
        "from": "2026-10-25 02:00 CEST",
        "until": "2026-10-25 03:00 CET",
    }
    assert [f["utc"] for f in shown["next"]] == ["2026-10-25T02:00:00Z", "2026-10-25T02:20:00Z", "2026-10-25T02:40:00Z"]
    printed = text([describe(body, z("2026-10-25T00:30:00Z"))])
    assert (
        "blackout  now repeated-hour (the clocks go back)\n              2026-10-25 02:00 CEST to 2026-10-25 03:00 CET"
        in printed
    )
    assert "blacked   6 fires inside blackouts" in printed
    ahead = describe(body, z("2026-10-25T03:00:00Z"))["tasks"][0]["blackout"]
    assert ahead["now"] is False and ahead["from"] == "2026-11-01 02:00 CET"


@pytest.mark.parametrize("include", [False, True])
def test_a_backfill_leaves_a_blackouts_fires_out_unless_asked(deployment: dict[str, Any], include: bool) -> None:
    first = plan(world_of(appschedule(), deployment), z("2026-10-25T03:00:00Z"))
    (manifest,) = first.apply
    body = appschedule(first.status)
    fill = {"name": "night", "task": "sync", "from": "2026-10-24T23:00:00Z", "to": "2026-10-25T02:40:00Z"}
    body["spec"]["backfills"] = [{**fill, "includeBlackouts": True} if include else fill]
    body["metadata"]["generation"] = 2
    result = plan(world_of(body, deployment, [held(manifest)]), z("2026-10-25T03:00:30Z"))
    (status,) = result.status["backfills"]
    assert status["fires"] == (12 if include else 6), status  # 23:00Z-02:40Z every 20 minutes; 6 of them dark
    if not include:
        assert status["message"].startswith("6 of its fires are inside blackouts: not run")
        assert status["next"] == "2026-10-24T23:00:00Z"
        assert "2026-10-25T00:00:00Z" not in [j["metadata"]["annotations"][naming.ANNOTATION_SCHEDULED_TIME]
                                              for j in result.create]  # fmt: skip


def test_a_schedule_whose_every_fire_is_dark_has_no_next_fire_and_is_asked_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """03:30 daily with nights and weekends dark: no fire can run. Found once for two years of spans; asked again
    by the next plan (a later now), the answer is the one kept."""
    dark = windows(
        {"name": "weekends", "weekly": {"days": ["SAT", "SUN"], "from": "00:00", "to": "24:00"}},
        {"name": "nights", "weekly": {"days": ["SUN", "MON", "TUE", "WED", "THU"], "from": "22:00", "to": "06:00"}},
    )
    sched = parse("30 3 * * *", "Europe/Berlin")
    assert blackout.next_allowed(sched, dark, z("2026-10-20T12:00:00Z")) is None
    steps = Steps(monkeypatch)
    assert blackout.next_allowed(sched, dark, z("2026-10-20T12:01:00Z")) is None
    assert steps.count == 1  # the schedule's own next fire, then the answer kept
    lit = windows({"name": "nights", "weekly": {"days": ["SUN", "MON", "TUE", "WED"], "from": "22:00", "to": "06:00"}})
    assert blackout.next_allowed(sched, lit, z("2026-10-20T12:00:00Z")) == z("2026-10-23T01:30:00Z")  # Friday
    assert blackout.next_allowed(sched, lit, z("2026-10-21T12:00:00Z")) == z("2026-10-23T01:30:00Z")  # kept
    assert blackout.next_allowed(sched, lit, z("2026-10-23T01:30:00Z")) == z("2026-10-24T01:30:00Z")  # asked anew


# -- AppScheduleCalendars: blackouts several AppSchedules of a namespace share


def calendar(name: str, *blackouts: dict[str, Any], version: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppScheduleCalendar",
        "metadata": {"name": name, "namespace": "shop", "resourceVersion": version},
        "spec": {"blackouts": list(blackouts)},
    }


HOLIDAY = {"name": "reformation-day", "dates": ["2026-10-31"], "reason": "public holiday"}


def test_a_calendar_s_blackouts_hold_for_every_task_between_the_spec_s_and_the_task_s(
    deployment: dict[str, Any],
) -> None:
    body = appschedule()
    body["spec"]["calendars"] = ["holidays"]
    body["spec"]["tasks"][0]["blackouts"] = [{"name": "own", "dates": ["2026-11-02"]}]
    result = plan(world_of(body, deployment, calendars=[calendar("holidays", HOLIDAY)]), z("2026-10-30T12:00:00Z"))
    (manifest,) = result.apply
    carried = json.loads(manifest["spec"]["jobTemplate"]["metadata"]["annotations"][blackout.ANNOTATION])
    assert [b["name"] for b in carried] == ["repeated-hour", "reformation-day", "own"]
    ready = next(c for c in result.status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready
    # the next run skips the calendar's day: Saturday 31 October in Berlin (CET) is dark from 30 Oct 23:00Z
    far = plan(world_of(body, deployment, calendars=[calendar("holidays", HOLIDAY)]), z("2026-10-30T22:50:00Z"))
    assert far.status["tasks"][0]["nextRunTime"] == "2026-10-31T23:00:00Z"


@pytest.mark.parametrize(
    ("calendars", "reason", "said"),
    [
        ([], "CalendarNotFound", "AppScheduleCalendar 'holidays' not found in namespace 'shop'"),
        ([calendar("holidays", {"name": "x", "from": "2026-12-26", "to": "2026-12-24"})], "CalendarInvalid",
         "AppScheduleCalendar 'holidays': spec.blackouts[0]: to (2026-12-24) is before from"),
    ],
)  # fmt: skip
def test_a_calendar_missing_or_invalid_is_said_and_the_tasks_run_without_it(
    deployment: dict[str, Any], calendars: list[dict[str, Any]], reason: str, said: str
) -> None:
    body = appschedule()
    body["spec"]["calendars"] = ["holidays"]
    result = plan(world_of(body, deployment, calendars=calendars), z("2026-10-30T12:00:00Z"))
    (manifest,) = result.apply  # the task's CronJob is made all the same, with the spec's own blackouts
    carried = json.loads(manifest["spec"]["jobTemplate"]["metadata"]["annotations"][blackout.ANNOTATION])
    assert [b["name"] for b in carried] == ["repeated-hour"]
    ready = next(c for c in result.status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", reason) and said in ready["message"], ready
    assert reason in [e.reason for e in result.events]


def test_a_calendar_s_change_wakes_the_appschedules_naming_it_and_no_other() -> None:
    store = Store()
    naming_it, other = appschedule(), appschedule()
    naming_it["spec"]["calendars"] = ["holidays"]
    other["metadata"] = {**other["metadata"], "name": "other", "uid": "uid-other"}
    store.put_appschedule(project_appschedule(naming_it))
    store.put_appschedule(project_appschedule(other))
    assert store.put_calendar(project_calendar(calendar("holidays", HOLIDAY))) == {("shop", "shop")}
    assert store.put_calendar(project_calendar(calendar("holidays", HOLIDAY, version="2"))) == set()  # the same
    assert store.put_calendar(project_calendar(calendar("holidays", version="3"))) == {("shop", "shop")}
    assert store.put_calendar(project_calendar(calendar("unnamed", HOLIDAY))) == set()
    assert store.calendars["shop", "holidays"].blackouts == ()  # the listing's newest
    assert store.drop_calendar("shop", "holidays") == {("shop", "shop")}
    assert store.replace("calendars", "shop", [project_calendar(calendar("holidays", HOLIDAY, version="4"))]) == {
        ("shop", "shop")
    }


def test_the_plugin_reads_the_calendars_blackouts(deployment: dict[str, Any]) -> None:
    body = appschedule(plan(world_of(appschedule(), deployment), z("2026-10-30T12:00:00Z")).status)
    body["spec"]["calendars"] = ["holidays"]
    shown = describe(body, z("2026-10-30T23:30:00Z"), {("shop", "holidays"): [HOLIDAY]})["tasks"][0]
    assert shown["blackout"]["name"] == "reformation-day (public holiday)" and shown["blackout"]["now"]
    assert shown["next"][0]["utc"] == "2026-10-31T23:00:00Z"


def test_the_plugin_history_says_the_fires_blackouts_took_and_a_pause(deployment: dict[str, Any]) -> None:
    body = appschedule(plan(world_of(appschedule(), deployment), z("2026-10-24T23:50:00Z")).status)
    body["spec"]["tasks"][0]["suspendAfterFailures"] = 1
    entry = body["status"]["tasks"][0]
    entry["counts"]["blackedOut"] = 6
    entry["recent"] = [{"key": "sync@2026-10-25T02:00:00Z", "scheduledTime": "2026-10-25T02:00:00Z",
                        "state": "Failed", "failure": "exit 3"}]  # fmt: skip
    found = history(body)
    assert found["tasks"][0]["blackedOut"] == 6 and found["tasks"][0]["paused"]["failures"] == 1
    printed = history_text(found)
    assert "paused after 1 failed runs in a row, the last sync@2026-10-25T02:00:00Z" in printed
    assert "blacked out: 6 fires inside blackouts" in printed


def test_every_list_of_blackouts_is_taken_at_its_bound_and_refused_past_it() -> None:
    """32 for every task, 8 a task's own, 64 dates an entry, 64 in a calendar: taken at the bound, refused one
    past it naming the list."""

    def days(n: int) -> list[str]:
        return [(datetime(2026, 1, 1) + timedelta(days=i)).strftime("%Y-%m-%d") for i in range(n)]

    def body(shared: int, own: int, dates: int) -> dict[str, Any]:
        entries = [{"name": f"b{i}", "dates": days(dates)} for i in range(shared)]
        task = {"name": "a", "schedule": "0 3 * * *", "command": ["x"],
                "blackouts": [{"name": f"t{i}", "dates": ["2026-12-24"]} for i in range(own)]}  # fmt: skip
        return {"metadata": {"name": "shop", "namespace": "shop"},
                "spec": {"deploymentRef": {"name": "web"}, "blackouts": entries, "tasks": [task]}}  # fmt: skip

    assert check_appschedule(body(32, 8, 64)) is None
    assert "spec.blackouts" in (check_appschedule(body(33, 8, 1)) or "")
    assert "spec.tasks[0].blackouts" in (check_appschedule(body(1, 9, 1)) or "")
    assert "spec.blackouts[0].dates" in (check_appschedule(body(1, 1, 65)) or "")
    full = [{"name": f"c{i}", "dates": ["2026-12-24"]} for i in range(64)]
    assert project_calendar(calendar("full", *full)).problem is None
    said = project_calendar(calendar("over", *full, {"name": "c64", "dates": ["2026-12-24"]})).problem
    assert said is not None and said.startswith("spec.blackouts:")
