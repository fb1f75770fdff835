"""Catch-up (a task's catchUpWindow) in the ledger, and backfills (runs.py): pure, with a fixed ``now``.

Every time-related test includes a zone with daylight saving and the days around its transitions."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from appschedule.core import admission, keys, naming, runs
from appschedule.core.keys import rfc3339 as stamp
from appschedule.core.models import CATCH_UP_MAX, AppScheduleSpec, duration_seconds
from appschedule.core.schedule import parse
from appschedule.core.view import JobOutcome, JobView

from .test_ledger import T0, config, counts, job, start, step

BERLIN = ZoneInfo("Europe/Berlin")


def kinded(base: JobView, kind: str, *, backfill: str | None = None) -> JobView:
    """``base`` as the operator or the plugin makes it: our scheduled-time annotation and a run kind."""
    scheduled = base.annotations[naming.CRONJOB_SCHEDULED_TIMESTAMP]
    annotations = {
        naming.ANNOTATION_SCHEDULED_TIME: scheduled,
        naming.ANNOTATION_RUN_KIND: kind,
        naming.ANNOTATION_IDEMPOTENCY_KEY: base.annotations[naming.ANNOTATION_IDEMPOTENCY_KEY],
    }
    if backfill:
        annotations[naming.ANNOTATION_BACKFILL] = backfill
    return dataclasses.replace(base, annotations=annotations)


def test_durations() -> None:
    assert [duration_seconds(t) for t in ("0s", "45s", "30m", "2h", "1h30m", None, "")] == [
        0,
        45,
        1800,
        7200,
        5400,
        0,
        0,
    ]
    for bad in ("5", "m", "1x", "1h5"):
        with pytest.raises(ValueError, match="is not a duration"):
            duration_seconds(bad)
    with pytest.raises(ValueError, match="longer than 24h"):
        AppScheduleSpec.model_validate(
            {
                "deploymentRef": {"name": "web"},
                "tasks": [{"name": "t", "schedule": "* * * * *", "command": ["x"], "catchUpWindow": "25h"}],
            }
        )


# -- catch-up


def test_without_a_window_missed_fires_stay_missed() -> None:
    cfg = config("*/10 * * * *")
    status = start(cfg)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(4)]
    status, result = step(status, cfg, [job(fires[3])], fires[3] + timedelta(seconds=30))
    assert counts(status) == {"runs": 1, "missed": 3} and status.catch_up is None and result.starts == []


def test_fires_missed_within_the_window_are_started_oldest_first_one_at_a_time_under_forbid() -> None:
    """The controller was down from T0 to fires[3]: fires[0..2] wait, the oldest starts; its run is counted
    caught up (a run, not late, not missed); the next starts only when it ended; nothing is missed."""
    cfg = config("*/10 * * * *", catch_up=3600)
    status = start(cfg)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(4)]
    current = job(fires[3])  # the controller is back and ran the latest fire: Forbid waits for it
    now = fires[3] + timedelta(seconds=30)
    status, result = step(status, cfg, [current], now)
    assert counts(status) == {"runs": 1}
    assert status.catch_up == [stamp(f) for f in fires[:3]] and result.starts == []
    done = job(fires[3], outcome="Complete")
    status, result = step(status, cfg, [done], now + timedelta(seconds=60))
    assert result.starts == [fires[0]]
    first = kinded(job(fires[0], created=now + timedelta(seconds=61)), "catch-up")
    status, result = step(status, cfg, [done, first], now + timedelta(seconds=62))
    assert counts(status) == {"runs": 2, "succeeded": 1, "caught_up": 1}
    assert status.catch_up == [stamp(f) for f in fires[1:3]] and result.starts == []  # fires[0] runs: Forbid
    recent = {r.scheduled_time: r for r in status.recent or []}
    assert recent[stamp(fires[0])].caught_up is True and recent[stamp(fires[0])].key == keys.key_of("report", fires[0])
    first_done = kinded(job(fires[0], created=now + timedelta(seconds=61), outcome="Complete"), "catch-up")
    status, result = step(status, cfg, [done, first_done], now + timedelta(seconds=90))
    assert result.starts == [fires[1]] and counts(status)["succeeded"] == 2


def test_allow_starts_every_waiting_fire_at_once_and_a_suspended_task_none() -> None:
    cfg = config("*/10 * * * *", catch_up=3600, concurrency="Allow")
    status = start(cfg)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(4)]
    now = fires[3] + timedelta(seconds=30)
    _, result = step(status, cfg, [job(fires[3])], now)
    assert result.starts == fires[:3]
    _, paused = step(status, dataclasses.replace(cfg, suspend=True), [job(fires[3])], now)
    assert paused.starts == []


def test_a_fire_older_than_the_window_is_missed_and_one_whose_window_passes_while_waiting_too() -> None:
    cfg = config("*/10 * * * *", catch_up=25 * 60)  # 25 minutes
    status = start(cfg)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(4)]
    now = fires[3] + timedelta(seconds=30)
    running = job(fires[3])  # active all along: Forbid keeps the waiting fires waiting
    status, _ = step(status, cfg, [running], now)
    assert counts(status) == {"runs": 1, "missed": 1}  # fires[0] is 30 minutes old: outside the window
    assert status.catch_up == [stamp(fires[1]), stamp(fires[2])]
    status, result = step(status, cfg, [running], fires[1] + timedelta(minutes=25, seconds=1))
    assert counts(status) == {"runs": 1, "missed": 2} and status.catch_up == [stamp(fires[2])]
    assert any("not caught up within catchUpWindow" in e.message for e in result.events if e.reason == "MissedRun")
    assert stamp(fires[1]) in (status.missed_times or [])


def test_at_most_catch_up_max_fires_wait_the_older_are_missed() -> None:
    cfg = config("* * * * *", catch_up=24 * 3600)
    status = start(cfg)
    now = T0 + timedelta(minutes=30, seconds=30)
    status, _ = step(status, cfg, [job(T0 + timedelta(minutes=30))], now)
    assert len(status.catch_up or []) == CATCH_UP_MAX
    assert counts(status) == {"runs": 1, "missed": 30 - CATCH_UP_MAX}
    assert status.catch_up == [stamp(T0 + timedelta(minutes=m)) for m in range(30 - CATCH_UP_MAX, 30)]


@pytest.mark.parametrize("day", ["2026-03-28", "2026-03-29", "2026-03-30", "2026-10-24", "2026-10-25", "2026-10-26"])
def test_catch_up_across_berlins_transitions_never_starts_a_fire_twice(day: str) -> None:
    """A `30 * * * *` task in Europe/Berlin whose controller was down from 01:00 to 04:00 local on the days
    around both transitions: the fires it starts are the schedule's, each once, with its own key."""
    cfg = config("30 * * * *", "Europe/Berlin", catch_up=24 * 3600, concurrency="Allow")
    begin = datetime.fromisoformat(f"{day}T01:00:00").replace(tzinfo=BERLIN).astimezone(UTC)
    status = start(cfg, begin)
    schedule = parse("30 * * * *", "Europe/Berlin")
    expected = runs.backfill_fires(schedule, begin, begin + timedelta(hours=3))
    latest = expected[-1]
    now = latest + timedelta(minutes=5)
    status, result = step(status, cfg, [job(latest)], now)
    assert result.starts == expected[:-1] and len(set(result.starts)) == len(result.starts)
    made = [kinded(job(t, created=now), "catch-up") for t in result.starts]
    status, again = step(status, cfg, [job(latest), *made], now + timedelta(seconds=5))
    assert again.starts == [] and not status.catch_up
    assert counts(status) == {"runs": len(expected), "caught_up": len(expected) - 1}


def test_catch_up_job_name_is_the_controllers_own_for_that_fire() -> None:
    assert naming.catch_up_job_name("shop-report", T0.timestamp()) == job(T0).name


# -- backfill


def request(start: datetime, end: datetime, parallel: int = 2, name: str = "fill") -> runs.BackfillRequest:
    return runs.BackfillRequest.read(
        {"name": name, "task": "report", "from": stamp(start), "to": stamp(end), "parallel": parallel}, 0
    )


def test_backfill_starts_oldest_first_at_most_parallel_and_knows_what_ran_from_its_jobs() -> None:
    schedule = parse("*/10 * * * *")
    begin = T0 - timedelta(hours=2)
    ask = request(begin, begin + timedelta(minutes=90))  # ten fires
    first = runs.backfill_step(ask, schedule, [], T0)
    assert (
        first.status.fires == 10
        and first.status.state == "Running"
        and first.starts == [begin, begin + timedelta(minutes=10)]
    )
    made = [kinded(job(t, created=T0), "backfill", backfill=ask.identity) for t in first.starts]
    second = runs.backfill_step(ask, schedule, made, T0)
    assert second.starts == [] and second.status.active == 2 and second.status.started == 2
    outcomes: tuple[JobOutcome, JobOutcome] = ("Complete", "Failed")
    ended = [kinded(job(t, created=T0, outcome=o), "backfill", backfill=ask.identity)
             for t, o in zip(first.starts, outcomes, strict=True)]  # fmt: skip
    third = runs.backfill_step(ask, schedule, ended, T0)
    assert third.starts == [begin + timedelta(minutes=20), begin + timedelta(minutes=30)]
    assert (third.status.succeeded, third.status.failed, third.status.next) == (
        1,
        1,
        stamp(begin + timedelta(minutes=20)),
    )
    other = [kinded(job(t, created=T0), "backfill", backfill="another") for t in third.starts]
    assert runs.backfill_step(ask, schedule, [*ended, *other], T0).starts == third.starts  # not its Jobs
    again = request(begin, begin + timedelta(minutes=80))  # the same name, another range: a new backfill
    assert again.identity != ask.identity and runs.backfill_step(again, schedule, ended, T0).status.started == 0
    every = [kinded(job(begin + timedelta(minutes=10 * i), created=T0, outcome="Complete"), "backfill",
                    backfill=ask.identity) for i in range(10)]  # fmt: skip
    done = runs.backfill_step(ask, schedule, every, T0)
    assert done.status.state == "Complete" and done.starts == [] and done.status.next is None


def test_backfill_refuses_what_it_cannot_run() -> None:
    schedule = parse("* * * * *")
    future = runs.backfill_step(request(T0, T0 + timedelta(minutes=5)), schedule, [], T0)
    assert future.status.state == "Invalid" and "in the future" in (future.status.message or "")
    many = runs.backfill_step(request(T0 - timedelta(days=1), T0), schedule, [], T0)
    assert many.status.state == "Invalid" and "more than 1000 fires" in (many.status.message or "")
    backwards = runs.backfill_step(request(T0, T0 - timedelta(hours=1)), schedule, [], T0)
    assert "is before from" in (backwards.status.message or "")
    no_task = runs.backfill_step(request(T0 - timedelta(hours=1), T0), None, [], T0)
    assert "has no CronJob" in (no_task.status.message or "")
    odd = runs.backfill_step(
        runs.BackfillRequest.read({"name": "x", "task": "report", "from": "soon", "to": 3}, 4), schedule, [], T0
    )
    assert odd.status.message == "spec.backfills[4].from: not an RFC 3339 time: 'soon'"


@pytest.mark.parametrize("day", ["2026-03-28", "2026-03-29", "2026-03-30", "2026-10-24", "2026-10-25", "2026-10-26"])
def test_backfill_fires_across_berlins_transitions(day: str) -> None:
    """`30 * * * *` in Europe/Berlin over a local day: 23 fires on the spring-forward day (02:30 does not
    exist), 25 on the fall-back day (02:30 happens twice, an hour apart: two fires, two keys), 24 on the
    others; and `30 2 * * *`, whose 02:30 repeats at fall-back, fires once that day (the repeat is not a fire
    of its own: its key is the first one's)."""
    schedule = parse("30 * * * *", "Europe/Berlin")
    begin = datetime.fromisoformat(f"{day}T00:00:00").replace(tzinfo=BERLIN).astimezone(UTC)
    end = datetime.fromisoformat(f"{day}T23:59:59").replace(tzinfo=BERLIN).astimezone(UTC)
    fires = runs.backfill_fires(schedule, begin, end)
    assert len(fires) == {"2026-03-29": 23, "2026-10-25": 25}.get(day, 24)
    assert len({keys.key_of("t", f) for f in fires}) == len(fires)
    daily = runs.backfill_fires(parse("30 2 * * *", "Europe/Berlin"), begin, end)
    assert len(daily) == (0 if day == "2026-03-29" else 1)


def test_backfill_job_names_are_stable_unique_and_valid() -> None:
    one = naming.backfill_job_name("shop", "fill", "report", T0.timestamp())
    assert one == naming.backfill_job_name("shop", "fill", "report", T0.timestamp())
    assert one != naming.backfill_job_name("shop-fill", "x", "report", T0.timestamp())
    assert one != naming.backfill_job_name("shop", "fill", "report", (T0 + timedelta(minutes=1)).timestamp())
    long = naming.backfill_job_name("a" * 63, "b" * 30, "c" * 63, T0.timestamp())
    assert len(long) <= 63 and naming.DNS_LABEL.match(long)


def test_job_from_a_cronjob_carries_kind_time_and_owner() -> None:
    cronjob = {"metadata": {"name": "shop-report", "namespace": "shop", "uid": "u1"},
               "spec": {"jobTemplate": {"metadata": {"labels": {naming.LABEL_TASK: "report"}},
                                        "spec": {"backoffLimit": 0}}}}  # fmt: skip
    owner = {"apiVersion": naming.API_VERSION, "kind": naming.KIND, "name": "shop", "uid": "u2"}
    made = runs.job_from(cronjob, "backfill", T0, name="n", owner=owner, backfill="fill")
    assert made["metadata"]["name"] == "n" and made["metadata"]["ownerReferences"] == [owner]
    assert made["metadata"]["annotations"] == {naming.ANNOTATION_SCHEDULED_TIME: stamp(T0),
                                               naming.ANNOTATION_RUN_KIND: "backfill",
                                               naming.ANNOTATION_BACKFILL: "fill"}  # fmt: skip
    assert made["spec"] == {"backoffLimit": 0} and made["metadata"]["labels"] == {naming.LABEL_TASK: "report"}
    plain = runs.job_from(cronjob, "manual", T0)
    assert plain["metadata"]["generateName"] == "shop-report-manual-"
    assert plain["metadata"]["ownerReferences"][0]["uid"] == "u1"


def test_backfilled_runs_are_counted_as_such_also_before_tracking_began_and_never_missed_or_duplicates() -> None:
    cfg = config("*/10 * * * *")
    status = start(cfg, T0 - timedelta(seconds=30))
    old = T0 - timedelta(hours=1)  # before tracking began
    ran = job(T0)
    again = kinded(job(T0, name="fill-t0", created=T0 + timedelta(seconds=20)), "backfill", backfill="f")
    before = kinded(job(old, name="fill-old", created=T0 + timedelta(seconds=20)), "backfill", backfill="f")
    status, _ = step(status, cfg, [ran, again, before], T0 + timedelta(seconds=30))
    assert counts(status) == {"runs": 1, "backfilled": 2}
    recent = {r.scheduled_time: r for r in status.recent or []}
    assert recent[stamp(T0)].reruns == 1  # shown against its fire


def test_admission_refuses_a_backfill_of_an_undeclared_task_or_of_the_future() -> None:
    body: dict[str, Any] = {"metadata": {"name": "shop"}, "spec": {"deploymentRef": {"name": "web"},
            "tasks": [{"name": "report", "schedule": "0 * * * *", "command": ["x"]}]}}  # fmt: skip
    fill = {"name": "f", "task": "report", "from": stamp(T0 - timedelta(days=1)), "to": stamp(T0)}
    body["spec"]["backfills"] = [fill]
    assert admission.check_appschedule(body, T0) is None
    body["spec"]["backfills"] = [{**fill, "task": "nope"}]
    assert "spec.backfills[0].task: 'nope' is not a task" in (admission.check_appschedule(body, T0) or "")
    body["spec"]["backfills"] = [{**fill, "to": stamp(T0 + timedelta(hours=1))}]
    assert "is in the future" in (admission.check_appschedule(body, T0) or "")


def test_ten_finished_backfill_runs_are_all_counted_at_once_though_the_status_remembers_six_jobs() -> None:
    """A finished run asked for blocks no fire: its record goes as soon as its Job says it is filed, so a
    backfill faster than the schedule's fires is counted without waiting for the next fire to settle."""
    cfg = config("*/5 * * * *")
    status = start(cfg, T0 + timedelta(seconds=10))
    old = [T0 - timedelta(hours=2) + timedelta(minutes=5 * i) for i in range(10)]
    made = [kinded(job(t, name=f"fill-{i}", created=T0 + timedelta(seconds=20), outcome="Complete"), "backfill",
                   backfill="f") for i, t in enumerate(old)]  # fmt: skip
    now = T0 + timedelta(seconds=30)
    for _ in range(4):  # each step files what the previous released (the shell's patch), as the watch shows it
        status, result = step(status, cfg, made, now)
        made = [
            dataclasses.replace(j, annotations={**j.annotations, naming.ANNOTATION_FILED: "true"}, finalizer=False)
            if j.name in result.release else j
            for j in made
        ]  # fmt: skip
        now += timedelta(seconds=2)
    assert counts(status) == {"backfilled": 10} and not status.jobs


def test_a_waiting_fire_whose_own_job_arrives_late_is_its_run_not_also_missed() -> None:
    """The controller's Job for a fire already waiting (its watch event came late): the fire's run; it waits
    no more, blocks nothing, and is never counted missed when the window passes."""
    cfg = config("*/10 * * * *", catch_up=1500)
    status = start(cfg)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(3)]
    now = fires[2] + timedelta(seconds=30)
    status, _ = step(status, cfg, [job(fires[2], outcome="Complete")], now)
    assert status.catch_up == [stamp(fires[0]), stamp(fires[1])]
    late = job(fires[0], created=fires[0] + timedelta(seconds=2), outcome="Complete")
    status, result = step(status, cfg, [job(fires[2], outcome="Complete"), late], now + timedelta(seconds=5))
    assert status.catch_up == [stamp(fires[1])] and result.starts == [fires[1]]
    status, _ = step(status, cfg, [job(fires[2], outcome="Complete"), late], fires[1] + timedelta(minutes=26))
    assert counts(status)["runs"] == 2 and counts(status)["missed"] == 1  # fires[1] expired, fires[0] ran


def test_a_waiting_fire_with_a_job_does_not_expire_while_the_job_waits_to_be_counted() -> None:
    cfg = config("*/10 * * * *", catch_up=900, concurrency="Allow")
    status = start(cfg)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(2)]
    status, _ = step(status, cfg, [job(fires[1])], fires[1] + timedelta(seconds=30))
    assert status.catch_up == [stamp(fires[0])]
    made = kinded(job(fires[0], created=fires[1] + timedelta(seconds=30)), "catch-up")
    # the task's records are full of other active runs: the catch-up Job waits for a slot past its window
    busy = [job(None, created=fires[1] + timedelta(seconds=s), name=f"hand-{s}") for s in range(1, 7)]
    status, _ = step(status, cfg, [job(fires[1]), *busy, made], fires[0] + timedelta(minutes=16))
    assert status.catch_up == [stamp(fires[0])] and "missed" not in counts(status)


def test_waiting_fires_are_counted_missed_when_the_schedule_changes_or_catch_up_is_turned_off() -> None:
    cfg = config("*/10 * * * *", catch_up=3600)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(3)]
    waiting, _ = step(start(cfg), cfg, [job(fires[2])], fires[2] + timedelta(seconds=30))
    assert waiting.catch_up == [stamp(fires[0]), stamp(fires[1])]
    off, _ = step(waiting, dataclasses.replace(cfg, catch_up=0), [job(fires[2])], fires[2] + timedelta(seconds=40))
    assert not off.catch_up and counts(off)["missed"] == 2
    moved = config("*/15 * * * *", catch_up=3600)
    changed, result = step(waiting, moved, [job(fires[2])], fires[2] + timedelta(seconds=40))
    assert not changed.catch_up and counts(changed)["missed"] == 2 and result.starts == []


def test_odd_catch_up_entries_written_by_hand_are_dropped() -> None:
    cfg = config("*/10 * * * *", catch_up=3600)
    status = start(cfg).model_copy(
        update={"catch_up": ["9999-01-01T00:00:00Z", "2026-09-11T15:05:00Z", "2026-09-11T15:00:00+00:00"]}
    )
    status, result = step(status, cfg, [], T0 + timedelta(seconds=5))
    assert not status.catch_up and result.starts == []


def test_overlapping_backfills_of_a_task_are_refused_at_apply_and_never_run_a_fire_twice() -> None:
    """Refused by the webhook; stored anyway (the webhook bypassed), the later one leaves the earlier one's fires
    to it and says so. Europe/Berlin over the fall-back night: the repeat of 02:30 is one fire."""
    task = {"name": "report", "schedule": "30 2 * * *", "timeZone": "Europe/Berlin", "command": ["x"]}
    body: dict[str, Any] = {"metadata": {"name": "shop"}, "spec": {"deploymentRef": {"name": "web"}, "tasks": [task]}}
    night = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)
    first = {"name": "a", "task": "report", "from": stamp(night - timedelta(days=3)), "to": stamp(night)}
    second = {
        "name": "b",
        "task": "report",
        "from": stamp(night - timedelta(days=1)),
        "to": stamp(night + timedelta(days=2)),
    }
    body["spec"]["backfills"] = [first, second]
    refusal = admission.check_appschedule(body, night + timedelta(days=5)) or ""
    assert "spec.backfills[1]: its range overlaps backfill 'a' (spec.backfills[0])" in refusal
    body["spec"]["backfills"] = [first, {**second, "from": stamp(night + timedelta(hours=1))}]
    assert admission.check_appschedule(body, night + timedelta(days=5)) is None
    schedule = parse("30 2 * * *", "Europe/Berlin")
    a = runs.BackfillRequest.read({**first, "parallel": 10}, 0)
    b = runs.BackfillRequest.read({**second, "parallel": 10}, 1)
    now = night + timedelta(days=5)
    step_a = runs.backfill_step(a, schedule, [], now)
    assert a.start and a.end
    taken = {f: "a" for f in runs.backfill_fires(schedule, a.start, a.end)}
    step_b = runs.backfill_step(b, schedule, [], now, taken)
    started = [*step_a.starts, *step_b.starts]
    assert len(started) == len(set(started)) == 4  # 23, 24, 25 (once: 00:30 UTC, not its repeat), 26 October
    assert step_b.status.message and "1 of its fires are backfill 'a'" in step_b.status.message


def test_a_backfill_from_the_first_second_of_1970_is_planned() -> None:
    for zone in ("UTC", "Europe/Berlin"):
        request = runs.BackfillRequest.read(
            {"name": "f", "task": "report", "from": "1970-01-01T00:00:00Z", "to": "1970-01-03T00:00:00Z"}, 0
        )
        step = runs.backfill_step(request, parse("0 0 * * *", zone), [], T0)
        assert step.status.state == "Running", step.status.message
        assert step.status.fires == (3 if zone == "UTC" else 2)  # Berlin's midnight is 23:00 UTC the day before


def test_a_backfill_entry_holding_anything_is_invalid_in_ascii_within_the_bound() -> None:
    for odd in ({"name": "f\u00e9\n" * 40, "task": "r\u00e9", "from": "x" * 400, "to": "y"}, {"from": "\u00e9"}):
        step = runs.backfill_step(runs.BackfillRequest.read(odd, 0), parse("* * * * *"), [], T0)
        assert step.status.state == "Invalid" and step.status.message is not None
