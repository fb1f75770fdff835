"""The run ledger (ledger.py) and the key (keys.py), with a fixed ``now``: DESIGN "The ledger"."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from appschedule.core import blackout, keys, naming
from appschedule.core.keys import rfc3339 as stamp
from appschedule.core.ledger import ACTIVE_MAX, LedgerUpdate, TaskConfig, advance, stands
from appschedule.core.models import TaskStatus
from appschedule.core.schedule import parse
from appschedule.core.view import JobOutcome, JobView

T0 = datetime(2026, 9, 11, 15, 0, 0, tzinfo=UTC)  # a Friday, 15:00 UTC
CRONJOB = "shop-report"


def config(schedule: str = "* * * * *", zone: str = "UTC", **extra: Any) -> TaskConfig:
    return TaskConfig(task="report", cronjob=CRONJOB, schedule=parse(schedule, zone), **extra)


def job(
    scheduled: datetime | None,
    *,
    created: datetime | None = None,
    name: str | None = None,
    outcome: JobOutcome | None = None,
    reason: str | None = None,
    active: int = 1,
    injected: bool = True,
    finalizer: bool = True,
    deleting: bool = False,
) -> JobView:
    """A Job as the watch would show it: the controller's timestamp annotation when ``scheduled`` is
    given (a scheduled Job), none for a Job made by hand."""
    created = created or (scheduled + timedelta(seconds=1) if scheduled else T0)
    annotations = {}
    if scheduled is not None:
        annotations[naming.CRONJOB_SCHEDULED_TIMESTAMP] = stamp(scheduled)
        if injected:
            annotations[naming.ANNOTATION_IDEMPOTENCY_KEY] = keys.key_of("report", scheduled)
    name = name or (f"{CRONJOB}-{int(scheduled.timestamp()) // 60}" if scheduled else f"{CRONJOB}-manual")
    finished = outcome is not None
    return JobView(
        namespace="shop",
        name=name,
        uid=name,
        resource_version="1",
        appschedule="shop",
        task="report",
        created=stamp(created),
        annotations=annotations,
        finalizer=finalizer,
        deleting=deleting,
        active=0 if finished else active,
        succeeded=1 if outcome == "Complete" else 0,
        failed=1 if outcome == "Failed" else 0,
        outcome=outcome,
        reason=reason,
        finish_time=stamp(created + timedelta(seconds=5)) if finished else None,
    )


def step(
    progress: TaskStatus | None, cfg: TaskConfig, jobs: list[JobView], now: datetime
) -> tuple[TaskStatus, LedgerUpdate]:
    result = advance(progress, cfg, jobs, now)
    assert_quiet_stands(progress, cfg, jobs, now, result)
    return result.status, result


def assert_quiet_stands(
    progress: TaskStatus | None, cfg: TaskConfig, jobs: list[JobView], now: datetime, result: LedgerUpdate
) -> None:
    """The promise a plan relies on to reuse a step (ledger.stands, reconcile.Quiets): with the same inputs, every
    step before its wake_at is the same, and wakes no earlier; every step of every test here checks it at later
    times."""
    if not stands(result, progress, cfg):
        return
    until = result.wake_at or now + timedelta(days=2)
    span = (until - now).total_seconds()
    for later in {now + timedelta(seconds=s) for s in (1, span / 3, span / 2, span - 1) if 0 < s < span}:
        again = advance(progress, cfg, jobs, later)
        same = [(u.status, u.events, u.release, u.finished, u.starts, u.problems) for u in (again, result)]
        assert same[0] == same[1], (now, later, until)
        if result.wake_at is None:  # time alone changes nothing: nor later
            assert again.wake_at is None, (now, later, again.wake_at)
        else:  # the reused step wakes its AppSchedule no later than a step taken then would
            assert again.wake_at is None or again.wake_at >= result.wake_at, (now, later, again.wake_at, result.wake_at)


def counts(status: TaskStatus) -> dict[str, int]:
    assert status.counts is not None
    return {k: v for k, v in status.counts.model_dump().items() if v}


def start(cfg: TaskConfig, at: datetime = T0 - timedelta(seconds=30)) -> TaskStatus:
    status, _ = step(None, cfg, [], at)
    return status


# -- keys


def test_key_is_task_and_scheduled_time() -> None:
    assert keys.key_of("report", T0) == "report@2026-09-11T15:00:00Z"


def test_scheduled_time_sources_in_order_of_trust() -> None:
    schedule = parse("0 17 * * 5")
    friday = datetime(2026, 9, 11, 17, 0, tzinfo=UTC)
    by_controller = keys.scheduled_time(
        annotations={naming.CRONJOB_SCHEDULED_TIMESTAMP: "2026-09-11T17:00:00Z"},
        job_name="x",
        cronjob=CRONJOB,
        created=friday + timedelta(minutes=3),
        schedule=schedule,
    )
    assert (by_controller.time, by_controller.source) == (friday, "controller")
    by_name = keys.scheduled_time(
        annotations={},
        job_name=f"{CRONJOB}-{int(friday.timestamp()) // 60}",
        cronjob=CRONJOB,
        created=friday,
        schedule=schedule,
    )
    assert (by_name.time, by_name.source) == (friday, "name")
    by_hand = keys.scheduled_time(
        annotations={},
        job_name="rerun",
        cronjob=CRONJOB,
        created=friday + timedelta(days=4, hours=2),
        schedule=schedule,
    )
    assert (by_hand.time, by_hand.source) == (friday, "created")  # the Tuesday re-run carries Friday's key


def test_dst_fall_back_second_fire_takes_the_first_ones_key() -> None:
    schedule = parse("30 1 * * *", "America/New_York")
    first = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
    second = datetime(2026, 11, 1, 6, 30, tzinfo=UTC)  # 01:30 EST, an hour later
    got = keys.scheduled_time(
        annotations={naming.CRONJOB_SCHEDULED_TIMESTAMP: stamp(second)},
        job_name="x",
        cronjob=CRONJOB,
        created=second,
        schedule=schedule,
    )
    assert got.time == first


def test_key_from_the_environment_matches_the_webhooks() -> None:
    fire = datetime(2026, 9, 11, 17, 0, tzinfo=UTC)
    cronjob = naming.cronjob_name("shop", "report")
    job_name = f"{cronjob}-{int(fire.timestamp()) // 60}"
    env = {
        "APPSCHEDULE_NAME": "shop",
        "APPSCHEDULE_TASK": "report",
        "APPSCHEDULE_SCHEDULE": "0 17 * * 5",
        "APPSCHEDULE_TIME_ZONE": "UTC",
        "APPSCHEDULE_JOB_NAME": job_name,
    }
    assert keys.from_environment(env, fire + timedelta(minutes=1)).key("report") == "report@2026-09-11T17:00:00Z"
    manual = {**env, "APPSCHEDULE_JOB_NAME": "by-hand"}
    assert keys.from_environment(manual, fire + timedelta(days=2)).key("report") == "report@2026-09-11T17:00:00Z"
    with pytest.raises(ValueError, match="APPSCHEDULE_TASK"):
        keys.from_environment({"APPSCHEDULE_NAME": "x"}, fire)


# -- the ledger


def test_on_time_run_is_counted_once_and_its_outcome_when_it_ends() -> None:
    cfg = config()
    status = start(cfg)
    running = job(T0)
    status, result = step(status, cfg, [running], T0 + timedelta(seconds=5))
    assert counts(status) == {"runs": 1}
    assert status.last_run is not None and status.last_run.state == "Active"
    assert result.release == []  # held until its outcome is counted
    done = job(T0, outcome="Complete")
    status, result = step(status, cfg, [done], T0 + timedelta(seconds=20))
    assert counts(status) == {"runs": 1, "succeeded": 1}
    assert result.release == [done.name]
    assert status.last_successful_time == stamp(T0)
    assert status.recent and status.recent[0].key == "report@2026-09-11T15:00:00Z"
    status, _ = step(status, cfg, [done], T0 + timedelta(seconds=40))  # seen again: nothing counted twice
    assert counts(status) == {"runs": 1, "succeeded": 1}


def test_late_within_grace_is_only_a_late_run() -> None:
    cfg = config(grace=120)
    status = start(cfg)
    status, result = step(status, cfg, [], T0 + timedelta(seconds=30))  # not yet: within grace
    assert not result.problems and counts(status) == {}
    status, result = step(status, cfg, [], T0 + timedelta(seconds=50))
    assert not [e for e in result.events if e.reason == "RunLate"]
    late = job(T0, created=T0 + timedelta(seconds=55))
    status, _ = step(status, cfg, [late], T0 + timedelta(seconds=58))
    assert counts(status) == {"runs": 1}  # 55 s is within the 120 s grace
    assert status.recent and status.recent[0].delay_seconds == 55


def test_past_grace_is_reported_late_then_counted_a_late_run() -> None:
    cfg = config("0 * * * *", grace=120)
    status = start(cfg)
    status, result = step(status, cfg, [], T0 + timedelta(seconds=130))
    assert [e.reason for e in result.events] == ["RunLate"]
    assert result.problems and result.problems[0][0] == "RunLate"
    status, result = step(status, cfg, [], T0 + timedelta(seconds=140))
    assert result.events == []  # said once
    status, _ = step(status, cfg, [job(T0, created=T0 + timedelta(seconds=150))], T0 + timedelta(seconds=151))
    assert counts(status) == {"runs": 1, "late": 1}


def test_missed_when_a_later_fire_has_come() -> None:
    cfg = config()
    status = start(cfg)
    second = T0 + timedelta(minutes=1)
    status, result = step(status, cfg, [job(second)], second + timedelta(seconds=20))
    assert counts(status) == {"runs": 1, "missed": 1}
    assert status.missed_times == [stamp(T0)]
    assert [e.reason for e in result.events] == ["MissedRun"]
    assert ("MissedRun", "task 'report': missed report@2026-09-11T15:00:00Z") in result.problems


def test_missed_when_the_starting_deadline_passed() -> None:
    cfg = config("0 * * * *", starting_deadline=60)
    status = start(cfg)
    status, _ = step(status, cfg, [], T0 + timedelta(seconds=70))  # deadline passed, within the slack
    assert counts(status) == {}
    status, _ = step(status, cfg, [], T0 + timedelta(seconds=80))
    assert counts(status) == {"missed": 1}
    status, _ = step(status, cfg, [], T0 + timedelta(seconds=500))
    assert counts(status) == {"missed": 1}  # never twice


def test_three_fires_missed_during_an_operator_outage() -> None:
    cfg = config("*/10 * * * *")
    status = start(cfg)
    fires = [T0 + timedelta(minutes=10 * i) for i in range(5)]
    # the operator was down from T0 to fires[4]; the controller ran fires[0] and fires[4] only
    jobs = [job(fires[0], outcome="Complete"), job(fires[4])]
    status, result = step(status, cfg, jobs, fires[4] + timedelta(seconds=30))
    assert counts(status) == {"runs": 2, "succeeded": 1, "missed": 3}
    assert status.missed_times == [stamp(f) for f in reversed(fires[1:4])]
    assert [e.message for e in result.events if e.reason == "MissedRun"] == [
        "task 'report': 3 missed (last report@2026-09-11T15:30:00Z)"
    ]


def test_suspended_times_are_skipped_not_missed() -> None:
    cfg = config(suspend=True)
    status = start(cfg)
    status, result = step(status, cfg, [], T0 + timedelta(minutes=5))
    assert counts(status) == {"skipped": 4}  # 15:04 waits: on resume the controller may still start it
    assert not result.problems


def test_forbid_overlap_is_skipped_and_a_run_without_a_pod_is_reported_at_once() -> None:
    cfg = config(concurrency="Forbid", grace=30)
    status = start(cfg)
    hanging = job(T0, active=0)  # its pod was refused
    now = T0 + timedelta(minutes=3, seconds=20)
    status, result = step(status, cfg, [hanging], now)
    assert counts(status) == {"runs": 1, "skipped": 2}  # 15:03 may still start late if the Job ends in time
    assert [e.reason for e in result.events] == ["RunNotStarted"]  # not RunLate: it is blocked, and said why
    assert [p[0] for p in result.problems] == ["RunNotStarted"]


def test_allow_overlap_of_a_hanging_run_does_not_skip() -> None:
    cfg = config(concurrency="Allow")
    status = start(cfg)
    jobs = [job(T0), job(T0 + timedelta(minutes=1))]
    status, _ = step(status, cfg, jobs, T0 + timedelta(minutes=2, seconds=20))
    assert counts(status) == {"runs": 2}  # 15:02 may still start (within startingDeadlineSeconds)
    status, _ = step(status, cfg, jobs, T0 + timedelta(minutes=3, seconds=20))
    assert counts(status) == {"runs": 2, "missed": 1}  # 15:03 has come: the controller will not start 15:02


def test_a_manual_run_maps_to_the_scheduled_key_and_counts_as_a_duplicate() -> None:
    cfg = config("0 17 * * 5")
    friday = datetime(2026, 9, 11, 17, 0, tzinfo=UTC)
    status = start(cfg, friday - timedelta(minutes=5))
    status, _ = step(status, cfg, [job(friday, outcome="Complete")], friday + timedelta(minutes=1))
    manual = job(None, created=friday + timedelta(days=4), name="report-rerun")
    status, result = step(status, cfg, [job(friday, outcome="Complete"), manual], friday + timedelta(days=4, seconds=5))
    assert counts(status) == {"runs": 1, "succeeded": 1, "duplicates": 1, "unkeyed": 1}
    assert [e.reason for e in result.events] == ["KeyNotInjected", "DuplicateRun"]
    assert "report@2026-09-11T17:00:00Z" in next(e.message for e in result.events if e.reason == "DuplicateRun")


def test_two_jobs_with_one_key_are_one_run_and_one_duplicate() -> None:
    cfg = config()
    status = start(cfg)
    first, second = job(T0, name="a"), job(T0, name="b", created=T0 + timedelta(seconds=2))
    status, result = step(status, cfg, [second, first], T0 + timedelta(seconds=10))
    assert counts(status) == {"runs": 1, "duplicates": 1}
    assert status.recent and status.recent[0].job == "a" and status.recent[0].duplicates == 1
    assert ("DuplicateRun", "task 'report': report@2026-09-11T15:00:00Z ran 2 times") in result.problems
    status, _ = step(status, cfg, [first, second], T0 + timedelta(seconds=15))
    assert counts(status) == {"runs": 1, "duplicates": 1}


def test_dst_fall_back_double_fire_is_one_run_and_one_duplicate_never_a_miss() -> None:
    cfg = config("30 1 * * *", "America/New_York")
    first = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    second = datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    status = start(cfg, first - timedelta(minutes=10))
    jobs = [job(first, outcome="Complete"), job(second, outcome="Complete")]
    status, _ = step(status, cfg, jobs, second + timedelta(minutes=5))
    assert counts(status) == {"runs": 1, "succeeded": 1, "duplicates": 1}
    status, _ = step(status, cfg, jobs, second + timedelta(days=1, hours=1))  # settled past the next day's fire
    assert counts(status)["missed"] == 1 and counts(status)["duplicates"] == 1  # the next day's, no Job


def test_dst_fall_back_repeat_is_never_reported_late() -> None:
    cfg = config("30 1 * * *", "America/New_York", starting_deadline=None)
    first = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    second = datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    status = start(cfg, first - timedelta(minutes=10))
    jobs = [job(first, outcome="Complete"), job(second, outcome="Complete")]
    for minute in range(1, 240, 7):
        status, result = step(status, cfg, jobs, second + timedelta(minutes=minute))
        assert "RunLate" not in {e.reason for e in result.events}
        assert "RunLate" not in {p[0] for p in result.problems}


def test_each_run_keeps_its_own_state() -> None:
    cfg = config()
    status = start(cfg)
    jobs = [job(T0, outcome="Complete"), job(T0 + timedelta(minutes=1))]
    for now in (T0 + timedelta(minutes=1, seconds=5), T0 + timedelta(minutes=1, seconds=6)):
        status, _ = step(TaskStatus.model_validate(status.model_dump(by_alias=True, mode="json")), cfg, jobs, now)
        assert [(r.scheduled_time, r.state) for r in status.recent or []] == [
            (stamp(T0 + timedelta(minutes=1)), "Active"),
            (stamp(T0), "Succeeded"),
        ]


def test_a_schedule_change_restarts_tracking_and_keeps_counts() -> None:
    hourly = config("0 * * * *")
    status = start(hourly)
    status, _ = step(status, hourly, [job(T0, outcome="Complete")], T0 + timedelta(minutes=1))
    later = T0 + timedelta(minutes=30)
    minutely = config("*/5 * * * *")
    status, _ = step(status, minutely, [job(T0, outcome="Complete")], later)
    assert status.schedule == "*/5 * * * *" and status.tracking_since == stamp(later)
    assert counts(status) == {"runs": 1, "succeeded": 1}  # the old schedule's unsettled times are not counted
    status, _ = step(status, minutely, [job(T0, outcome="Complete")], later + timedelta(minutes=10, seconds=20))
    assert counts(status) == {"runs": 1, "succeeded": 1, "missed": 1}  # 15:35; 15:40 may still start


def test_ten_thousand_missed_fires_are_one_fast_step_and_one_event() -> None:
    cfg = config()
    status = start(cfg)
    began = time.perf_counter()
    status, result = step(status, cfg, [], T0 + timedelta(minutes=10_000, seconds=30))
    assert time.perf_counter() - began < 0.5
    assert counts(status) == {"missed": 10_000}
    assert len(status.missed_times or []) == 10
    missed_events = [e for e in result.events if e.reason == "MissedRun"]
    assert len(missed_events) == 1 and missed_events[0].count == 10_000
    assert "10000 missed" in missed_events[0].message


def test_failed_and_stuck_runs_are_counted_and_released() -> None:
    cfg = config("0 * * * *", active_deadline=600)
    status = start(cfg)
    failed = job(T0, outcome="Failed", reason="BackoffLimitExceeded")
    status, result = step(status, cfg, [failed], T0 + timedelta(minutes=1))
    assert counts(status) == {"runs": 1, "failed": 1}
    assert [e.reason for e in result.events] == ["RunFailed"] and result.release == [failed.name]
    hour = T0 + timedelta(hours=1)
    stuck = job(hour, outcome="Failed", reason="DeadlineExceeded")
    status, result = step(status, cfg, [failed, stuck], hour + timedelta(minutes=11))
    assert counts(status) == {"runs": 2, "failed": 2, "stuck": 1}
    assert {e.reason for e in result.events} == {"RunFailed", "StuckRun"}


def test_a_run_past_its_active_deadline_is_stuck_while_still_active() -> None:
    cfg = config("0 * * * *", active_deadline=60)
    status = start(cfg)
    status, _ = step(status, cfg, [job(T0)], T0 + timedelta(seconds=90))
    assert counts(status) == {"runs": 1, "stuck": 1}
    status, _ = step(status, cfg, [job(T0, outcome="Failed", reason="DeadlineExceeded")], T0 + timedelta(minutes=2))
    assert counts(status) == {"runs": 1, "failed": 1, "stuck": 1}  # stuck once


def test_a_restart_neither_loses_nor_double_counts() -> None:
    cfg = config()
    status = start(cfg)
    jobs = [job(T0, outcome="Complete"), job(T0 + timedelta(minutes=1))]
    status, _ = step(status, cfg, jobs, T0 + timedelta(minutes=1, seconds=5))
    saved = TaskStatus.model_validate(status.model_dump(by_alias=True, mode="json"))  # through the API server
    again, _ = step(saved, cfg, jobs, T0 + timedelta(minutes=1, seconds=6))
    assert counts(again) == counts(status) == {"runs": 2, "succeeded": 1}


def test_a_job_deleted_while_held_is_recorded_then_released() -> None:
    cfg = config()
    status = start(cfg)
    status, _ = step(status, cfg, [job(T0)], T0 + timedelta(seconds=5))
    deleted = job(T0, outcome="Complete", deleting=True)
    status, result = step(status, cfg, [deleted], T0 + timedelta(minutes=5))
    assert counts(status)["succeeded"] == 1 and result.release == [deleted.name]
    status, _ = step(status, cfg, [], T0 + timedelta(minutes=6))  # gone: forgotten once settled
    assert not status.jobs and counts(status)["succeeded"] == 1


def test_jobs_from_before_tracking_are_not_counted_but_released() -> None:
    cfg = config()
    old = job(T0 - timedelta(hours=1), outcome="Complete")
    status, result = step(None, cfg, [old], T0)
    assert counts(status) == {} and result.release == [old.name]


def test_wake_up_when_time_alone_changes_something() -> None:
    cfg = config("0 * * * *", grace=120)
    status = start(cfg)
    _, result = step(status, cfg, [], T0 + timedelta(seconds=10))
    assert result.wake_at == T0 + timedelta(seconds=120)


def test_a_time_that_got_its_job_settles_at_once_not_a_period_later() -> None:
    """Found by the soak: seen just after its fire, a run's time waited for the next fire to settle. It is
    settled in the step that sees its Job (one status write records the run and the settled time)."""
    cfg = config("*/5 * * * *")
    status = start(cfg)
    ran = job(T0, created=T0 + timedelta(seconds=2), outcome="Complete")
    status, result = step(status, cfg, [ran], T0 + timedelta(seconds=3))
    assert status.checked_until == stamp(T0) and result.wake_at == T0 + timedelta(minutes=5, seconds=15)
    assert counts(status) == {"runs": 1, "succeeded": 1}


def test_a_time_suspended_but_settled_after_the_resume_is_skipped_not_missed() -> None:
    """Found by the soak: suspended over a fire, resumed before that fire was settled (the operator was
    restarting), the time was counted missed; the span is now remembered until its times are settled."""
    cfg = config()
    suspended = dataclasses.replace(cfg, suspend=True)
    status = start(cfg)
    first = job(T0, created=T0 + timedelta(seconds=1), outcome="Complete")
    status, _ = step(status, cfg, [first], T0 + timedelta(seconds=2))
    status, _ = step(status, suspended, [first], T0 + timedelta(seconds=30))
    assert status.suspensions and status.suspensions[0].until is None
    status, _ = step(status, cfg, [first], T0 + timedelta(seconds=90))  # resumed; T0+60 is not settled yet
    assert status.checked_until is not None and status.checked_until < stamp(T0 + timedelta(seconds=60))
    later = job(T0 + timedelta(minutes=2), created=T0 + timedelta(seconds=121), outcome="Complete")
    status, _ = step(status, cfg, [first, later], T0 + timedelta(seconds=140))
    assert status.checked_until == stamp(T0 + timedelta(minutes=2))
    assert counts(status) == {"runs": 2, "succeeded": 2, "skipped": 1}
    assert status.suspensions is None  # settled: forgotten


def hung_job() -> JobView:
    """The Job of T0 that hung and was stopped by activeDeadlineSeconds at T0 + 91 s (blocking 15:01 under Forbid)."""
    return dataclasses.replace(
        job(T0, created=T0 + timedelta(seconds=1), outcome="Failed", reason="DeadlineExceeded"),
        finish_time=stamp(T0 + timedelta(seconds=91)),
    )


def test_a_fire_blocked_under_forbid_stays_skipped_after_the_blocking_job_is_gone() -> None:
    """Found by the soak (issue 19): a hanging Job blocked the next fire, was recorded, released and deleted
    by the history limit before that fire was settled, and the fire was counted missed: the record now keeps
    the span the Job was active until its fires are settled."""
    cfg = config(concurrency="Forbid")
    status = start(cfg)
    hang = hung_job()
    status, result = step(status, cfg, [hang], T0 + timedelta(seconds=95))
    assert result.release == [hang.name]
    later = job(T0 + timedelta(minutes=2), outcome="Complete")
    status, _ = step(status, cfg, [later], T0 + timedelta(seconds=140))  # the hanging Job is gone
    assert status.checked_until == stamp(T0 + timedelta(minutes=2))
    assert counts(status) == {"runs": 2, "succeeded": 1, "failed": 1, "skipped": 1, "stuck": 1}
    assert [r.name for r in status.jobs or []] == [later.name]  # its span settled: forgotten
    # without Forbid the same time is missed
    allow = config(concurrency="Allow")
    status = start(allow)
    status, _ = step(status, allow, [hang], T0 + timedelta(seconds=95))
    status, _ = step(status, allow, [later], T0 + timedelta(seconds=140))
    assert counts(status)["missed"] == 1


def test_a_filed_job_keeps_its_record_until_the_fires_its_span_blocked_are_settled() -> None:
    """Found by the soak (seed 3) once finished Jobs were marked filed: the record of a filed Job went as soon
    as the view showed the mark, so when a history limit then deleted the Job before the fire its span blocked
    (Forbid) was settled, that fire counted missed. A filed Job's record now goes only once it is settled."""
    cfg = config(concurrency="Forbid")
    status = start(cfg)
    hang = hung_job()
    status, result = step(status, cfg, [hang], T0 + timedelta(seconds=95))
    assert result.release == [hang.name]
    marked = {**hang.annotations, naming.ANNOTATION_FILED: "true"}
    filed = dataclasses.replace(hang, finalizer=False, annotations=marked)
    status, result = step(status, cfg, [filed], T0 + timedelta(seconds=100))  # the view shows it filed
    assert result.release == [] and [r.name for r in status.jobs or []] == [hang.name]  # kept: its span is open
    later = job(T0 + timedelta(minutes=2), outcome="Complete")
    status, _ = step(status, cfg, [later], T0 + timedelta(seconds=140))  # then deleted by the history limit
    assert counts(status) == {"runs": 2, "succeeded": 1, "failed": 1, "skipped": 1, "stuck": 1}


def test_a_fire_just_before_a_suspension_waits_for_a_late_job_instead_of_being_missed() -> None:
    """Found by the soak (issue 19): a lagging CronJob controller made the Job of 15:00 at 15:00:33, just
    before it saw the suspension written at 15:00:34; the ledger had settled 15:00 as missed at once (the
    task was suspended) and then counted the Job as a run too. A fire before the suspension began now
    waits SETTLE_SLACK after it for such a Job."""
    cfg = config(concurrency="Forbid")
    suspended = dataclasses.replace(cfg, suspend=True)
    status = start(cfg)
    status, _ = step(status, suspended, [], T0 + timedelta(seconds=34))  # no Job for T0 in our view yet
    assert status.checked_until is not None and status.checked_until < stamp(T0)
    late = job(T0, created=T0 + timedelta(seconds=33), outcome="Complete")
    status, _ = step(status, suspended, [late], T0 + timedelta(seconds=40))
    status, _ = step(status, suspended, [late], T0 + timedelta(seconds=50))
    assert status.checked_until == stamp(T0)
    assert counts(status) == {"runs": 1, "succeeded": 1}
    # found by the soak (seed 3): with no Job by then it stays pending while suspended, for when the CronJob
    # resumes the controller starts its most recent missed fire within the starting deadline: here, late, a run
    every_two = config("*/2 * * * *", concurrency="Forbid")
    held = dataclasses.replace(every_two, suspend=True)
    status = start(every_two)
    status, _ = step(status, held, [], T0 + timedelta(seconds=34))
    status, _ = step(status, held, [], T0 + timedelta(seconds=80))
    assert status.checked_until is not None and status.checked_until < stamp(T0)
    resumed = job(T0, created=T0 + timedelta(seconds=91), outcome="Complete")
    status, _ = step(status, every_two, [resumed], T0 + timedelta(seconds=100))
    assert counts(status) == {"runs": 1, "succeeded": 1}
    # with no Job when the next fire has come, it is missed (it was not suspended at its time), later ones are
    # skipped, and the latest waits for a resume
    status = start(cfg)
    status, _ = step(status, suspended, [], T0 + timedelta(seconds=34))
    status, _ = step(status, suspended, [], T0 + timedelta(minutes=3))
    assert counts(status) == {"missed": 1, "skipped": 1}


def asked(kind: str, scheduled: datetime, created: datetime, name: str, *, done: bool = True) -> JobView:
    """A Job made by kubectl appschedule run/rerun: its time in our annotation, its kind, keyed."""
    made = job(None, created=created, name=name, outcome="Complete" if done else None)
    notes = {
        naming.ANNOTATION_SCHEDULED_TIME: stamp(scheduled),
        naming.ANNOTATION_IDEMPOTENCY_KEY: keys.key_of("report", scheduled),
        naming.ANNOTATION_RUN_KIND: kind,
    }
    return dataclasses.replace(made, annotations=notes)


def test_runs_asked_for_are_counted_as_what_they_are_never_as_duplicates_also_across_restarts() -> None:
    cfg = config(zone="Europe/Berlin")  # * * * * * in a zone with daylight saving, on its spring-forward day
    t0 = datetime(2026, 3, 29, 0, 58, tzinfo=UTC)  # 01:58 CET; 02:00 local does not exist, 03:00 CEST follows
    status = start(cfg, t0 - timedelta(seconds=30))
    fires = [t0, t0 + timedelta(minutes=1), t0 + timedelta(minutes=2)]
    jobs = [job(f, outcome="Complete") for f in fires]
    manual = asked("manual", t0 + timedelta(minutes=1, seconds=17), t0 + timedelta(minutes=1, seconds=17), "m1")
    rerun = asked("rerun", fires[0], t0 + timedelta(minutes=2, seconds=5), "r1")
    now = t0 + timedelta(minutes=2, seconds=20)
    status, result = step(status, cfg, [*jobs, manual, rerun], now)
    assert counts(status) == {"runs": 3, "succeeded": 3, "manual": 1, "reruns": 1}
    assert not any(e.reason == "DuplicateRun" for e in result.events)
    again, _ = step(status, cfg, [*jobs, manual, rerun], now + timedelta(seconds=10))  # a restart sees them again
    assert counts(again) == counts(status)
    assert status.recent is not None
    first = next(r for r in status.recent if r.scheduled_time == stamp(fires[0]))
    assert first.reruns == 1 and first.duplicates is None  # shown against the fire it ran again
    plain = job(fires[0], name="by-hand", created=t0 + timedelta(minutes=2, seconds=6))  # no kind: a duplicate
    dup, _ = step(status, cfg, [*jobs, manual, rerun, plain], now + timedelta(seconds=20))
    assert counts(dup)["duplicates"] == 1 and counts(dup)["reruns"] == 1


def test_a_rerun_before_its_fires_own_job_leaves_that_job_the_run_and_a_fire_with_only_a_rerun_missed() -> None:
    cfg = config()
    status = start(cfg)
    rerun = asked("rerun", T0, T0 + timedelta(seconds=20), "r1")  # the controller is late: the rerun comes first
    status, _ = step(status, cfg, [rerun], T0 + timedelta(seconds=30))
    own = job(T0, created=T0 + timedelta(seconds=40), outcome="Complete")
    status, result = step(status, cfg, [rerun, own], T0 + timedelta(seconds=50))
    assert counts(status) == {"runs": 1, "succeeded": 1, "reruns": 1}
    assert not any(e.reason == "DuplicateRun" for e in result.events)
    second = T0 + timedelta(minutes=1)
    only = asked("rerun", second, second + timedelta(seconds=10), "r2")  # its fire never got a Job of its own
    status, _ = step(status, cfg, [rerun, own, only], T0 + timedelta(minutes=2, seconds=30))
    assert counts(status) == {"runs": 1, "succeeded": 1, "reruns": 2, "missed": 1}


def test_under_forbid_a_run_asked_for_never_blocks_a_fire_and_its_grace_runs_from_its_creation() -> None:
    cfg = config(concurrency="Forbid", grace=60)
    status = start(cfg)
    manual = asked("manual", T0 + timedelta(seconds=7), T0 + timedelta(seconds=7), "m1", done=False)  # a pod runs
    status, _ = step(status, cfg, [manual], T0 + timedelta(seconds=30))
    # a re-run of fire 15:00 made at 15:02:10, its pod not started yet: 20 s into its own grace, not 130 s
    rerun = dataclasses.replace(asked("rerun", T0, T0 + timedelta(minutes=2, seconds=10), "r1", done=False), active=0)
    status, result = step(status, cfg, [manual, rerun], T0 + timedelta(minutes=2, seconds=30))
    assert "RunNotStarted" not in [e.reason for e in result.events]
    assert counts(status) == {"manual": 1, "reruns": 1, "missed": 2}  # 15:00, 15:01 had no Job: missed, not skipped


def test_a_fire_missed_just_before_a_blackout_is_settled_once_the_next_fire_is_past_the_slack() -> None:
    """The next fire settles the one before it, blacked out or not (the CronJob controller starts only the latest
    fire): the step wakes for it, not at the blackout's end (found by a review of the reuse of steps)."""
    windows = blackout.of([{"name": "x", "weekly": {"days": ["FRI"], "from": "15:05", "to": "16:00"}}])
    cfg = config(blackouts=windows, starting_deadline=None, grace=30)
    status = start(cfg, T0 + timedelta(minutes=3, seconds=30))
    status, late = step(status, cfg, [], T0 + timedelta(minutes=4, seconds=40))  # 15:04 has no Job: late
    assert [e.reason for e in late.events] == ["RunLate"]
    assert late.wake_at == T0 + timedelta(minutes=5, seconds=15)  # 15:05, blacked out, past the slack
    status, missed = step(status, cfg, [], late.wake_at)
    assert counts(status).get("missed") == 1 and [e.reason for e in missed.events] == ["MissedRun"]


def test_a_job_seen_before_its_time_settles_its_fire_at_that_time() -> None:
    """The API server's clock ahead of the operator's: the Job of 15:01 is in the view at 15:00:58; its fire is
    settled at 15:01, so the step wakes then (not 15 s later)."""
    cfg = config()
    status = start(cfg)
    early = job(T0 + timedelta(minutes=1), created=T0 + timedelta(seconds=58))
    status, result = step(status, cfg, [early], T0 + timedelta(seconds=58))
    assert result.wake_at == T0 + timedelta(minutes=1)
    status, _ = step(status, cfg, [early], result.wake_at)
    assert status.checked_until == stamp(T0 + timedelta(minutes=1))


def test_fires_waiting_for_a_record_with_their_jobs_started_never_wake_the_step_at_once() -> None:
    """Allow, a 10 minute catch-up window, the CronJob controller down: every waiting fire is started, only
    ACTIVE_MAX of their Jobs get a record and the others wait, never expiring. No step may wake at or before its
    own time for them: the controller would plan it again at once, over and over (a review found it)."""
    cfg = config(concurrency="Allow", catch_up=600, starting_deadline=None)
    status = start(cfg)
    jobs: list[JobView] = []
    now = T0 + timedelta(minutes=7, seconds=30)
    while now < T0 + timedelta(minutes=20):
        status, result = step(status, cfg, jobs, now)
        assert result.wake_at is None or result.wake_at > now, (now, result.wake_at)
        names = {j.name for j in jobs}
        jobs += [asked("catch-up", f, now + timedelta(seconds=1), f"cu-{f:%H%M}", done=False)
                 for f in result.starts if f"cu-{f:%H%M}" not in names]  # fmt: skip
        now = max(result.wake_at or now, now) + timedelta(seconds=1)
    assert len(jobs) > ACTIVE_MAX and status.catch_up  # some did wait for a record
