"""ledger.advance's phases one by one: each is a pure function of a Book (the step's working state)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from appschedule.core import ledger
from appschedule.core.keys import rfc3339 as stamp
from appschedule.core.ledger import Book, Note, Seen, Tally
from appschedule.core.models import Counts, JobRecord, RunRecord, Suspension, TaskStatus

from .test_ledger import T0, config, job

BERLIN = ZoneInfo("Europe/Berlin")


def book(
    cfg: ledger.TaskConfig | None = None,
    *,
    now: datetime = T0,
    checked: datetime | None = None,
    records: Sequence[JobRecord] = (),
    recent: Sequence[RunRecord] = (),
) -> Book:
    cfg = cfg or config()
    since = T0 - timedelta(hours=1)
    base = TaskStatus(
        name=cfg.task,
        schedule=cfg.schedule.expression,
        time_zone=cfg.schedule.time_zone,
        tracking_since=stamp(since),
        checked_until=stamp(checked or since),
    )
    return Book(
        config=cfg,
        now=now,
        base=base,
        since=since,
        checked=checked or since,
        tally=Tally(),
        recent={r.scheduled_time: r for r in recent},
        records={r.name: r for r in records},
    )


def test_a_tally_is_the_counts_it_came_from() -> None:
    counts = Counts(runs=3, succeeded=2, failed=1, missed=4, late=1, skipped=2, duplicates=1, stuck=1)
    assert Tally.of(counts).counts() == counts
    assert Tally.of(None).counts() == Counts()


def test_tracking_restarts_when_the_schedule_or_zone_changes_and_keeps_counts() -> None:
    now = T0
    first = ledger.tracked(None, config(), now)
    assert first.tracking_since == first.checked_until == stamp(now)
    later = first.model_copy(update={"counts": Counts(runs=5), "checked_until": stamp(now + timedelta(hours=1))})
    assert ledger.tracked(later, config(), now + timedelta(hours=2)) is later  # nothing changed
    moved = ledger.tracked(later, config(zone="Europe/Berlin"), now + timedelta(hours=2))
    assert moved.tracking_since == stamp(now + timedelta(hours=2)) and moved.counts == Counts(runs=5)


def test_admit_counts_a_run_once_and_a_second_job_of_its_time_as_a_duplicate() -> None:
    b = book(now=T0 + timedelta(minutes=1))
    first = job(T0)
    second = job(T0, name="shop-report-by-hand", created=T0 + timedelta(seconds=30), injected=False)
    run_times, waiting = ledger.admit(b, Seen.of([first, second], b.config))
    assert run_times == {stamp(T0)} and waiting == set()
    assert (b.tally.runs, b.tally.duplicates, b.tally.unkeyed) == (1, 1, 1)
    assert b.recent[stamp(T0)].duplicates == 1 and set(b.records) == {first.name, second.name}
    assert [n.text for n in b.notes["DuplicateRun"]] == [f"shop-report-by-hand (report@{stamp(T0)})"]
    assert "KeyNotInjected" in b.notes
    again = ledger.admit(b, Seen.of([first, second], b.config))  # seen again: nothing more is counted
    assert again[0] == {stamp(T0)} and (b.tally.runs, b.tally.duplicates, b.tally.unkeyed) == (1, 1, 1)


def test_admit_lets_a_job_wait_when_the_status_has_no_room() -> None:
    records = [
        JobRecord(name=f"j{i}", scheduled_time=stamp(T0 - timedelta(minutes=i + 1)), run=True)
        for i in range(ledger.ACTIVE_MAX)
    ]
    b = book(now=T0 + timedelta(minutes=1), records=records)
    _, waiting = ledger.admit(b, Seen.of([job(T0)], b.config))
    assert waiting == {T0} and b.tally.runs == 0  # an active Job beyond ACTIVE_MAX waits
    _, waiting = ledger.admit(b, Seen.of([job(T0, outcome="Complete")], b.config))
    assert waiting == set() and b.tally.runs == 1  # a finished one always gets in


def test_follow_counts_an_outcome_once_and_releases_the_job() -> None:
    b = book(now=T0 + timedelta(minutes=1))
    done = job(T0, outcome="Failed", reason="BackoffLimitExceeded")
    seen = Seen.of([done], b.config)
    ledger.admit(b, seen)
    ledger.follow(b, seen)
    assert (b.tally.failed, b.release) == (1, [done.name])
    assert b.records[done.name].finished and b.recent[stamp(T0)].state == "Failed"
    assert b.finished == [("failed", 5.0)]
    ledger.follow(b, seen)  # the next step: counted already, only released again (the finalizer is still on)
    assert b.tally.failed == 1


def test_follow_reports_a_run_stuck_past_its_deadline_once() -> None:
    b = book(config(active_deadline=60), now=T0 + timedelta(minutes=3))
    hung = job(T0)
    seen = Seen.of([hung], b.config)
    ledger.admit(b, seen)
    ledger.follow(b, seen)
    ledger.follow(b, seen)
    assert b.tally.stuck == 1 and b.records[hung.name].stuck
    assert [reason for reason, _ in b.problems] == ["StuckRun", "StuckRun"]  # said while it stays stuck


def test_suspension_spans_open_and_close_with_the_cronjob() -> None:
    base = TaskStatus(name="report")
    opened = ledger.suspension_spans(base, config(suspend=True), T0)
    assert opened == [(T0, None)]
    later = base.model_copy(update={"suspensions": [Suspension(since=stamp(T0))]})
    assert ledger.suspension_spans(later, config(suspend=True), T0 + timedelta(hours=1)) == [(T0, None)]
    assert ledger.suspension_spans(later, config(), T0 + timedelta(hours=1)) == [(T0, T0 + timedelta(hours=1))]


def test_settled_until_waits_for_the_latest_fire_until_it_ran_or_its_deadline_passed() -> None:
    cfg = config(starting_deadline=300)
    now = T0 + timedelta(seconds=30)  # T0's Job may still come (within the slack and the deadline)
    before = T0 - timedelta(minutes=1)
    assert ledger.settled_until(cfg, T0 - timedelta(minutes=10), set(), now) == before
    assert ledger.settled_until(cfg, T0 - timedelta(minutes=10), {T0}, now) == T0
    assert ledger.settled_until(cfg, T0, set(), now) == T0  # nothing new
    # with no Job for the latest fire, the fire before it is settled; the latest only once its deadline passed
    assert ledger.settled_until(cfg, T0, set(), T0 + timedelta(minutes=6)) == T0 + timedelta(minutes=4)
    short = config(starting_deadline=10)
    assert ledger.settled_until(short, T0 - timedelta(minutes=10), set(), now) == T0


def test_blocked_spans_are_suspensions_and_forbid_jobs_merged() -> None:
    b = book(config(concurrency="Forbid"), now=T0 + timedelta(minutes=10))
    running = job(T0, created=T0 + timedelta(seconds=1))  # active: blocks until now
    spans = [(T0 + timedelta(minutes=2), T0 + timedelta(minutes=4))]
    blocked = ledger.blocked_spans(b, Seen.of([running], b.config), [running], spans)
    assert blocked == [(T0 + timedelta(seconds=1), T0 + timedelta(minutes=10))]
    allow = book(config(concurrency="Allow"), now=T0 + timedelta(minutes=10))
    assert ledger.blocked_spans(allow, Seen.of([running], allow.config), [running], spans) == spans


def test_settle_counts_missed_and_skipped_and_moves_checked() -> None:
    b = book(checked=T0, now=T0 + timedelta(minutes=11))
    blocked = [(T0 + timedelta(minutes=2, seconds=30), T0 + timedelta(minutes=4, seconds=30))]  # skips :03, :04
    ran = {T0 + timedelta(minutes=1)}
    ledger.settle(b, Seen.of([], b.config), T0 + timedelta(minutes=10), ran, blocked)
    assert (b.tally.missed, b.tally.skipped) == (7, 2) and b.checked == T0 + timedelta(minutes=10)
    assert b.notes["MissedRun"] == [Note(f"7 missed (last report@{stamp(T0 + timedelta(minutes=10))})", 7)]
    assert b.base.missed_times is not None and len(b.base.missed_times) == 7


def test_settle_on_a_daylight_saving_day_counts_the_repeated_hour_once() -> None:
    # Europe/Berlin, 2026-10-25: 02:00-03:00 local happens twice; `30 2 * * *` fires once (robfig)
    cfg = config("30 2 * * *", "Europe/Berlin")
    start = datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN).astimezone(UTC)
    end = datetime(2026, 10, 26, 12, 0, tzinfo=BERLIN).astimezone(UTC)
    b = book(cfg, checked=start, now=end)
    ledger.settle(b, Seen.of([], cfg), end, set(), [])
    assert b.tally.missed == 2  # 25 and 26 October, each once


def test_look_ahead_says_late_once_and_wakes_at_the_next_change() -> None:
    b = book(checked=T0 - timedelta(minutes=1), now=T0 + timedelta(minutes=3), cfg=config(grace=120))
    late = ledger.look_ahead(b, set(), [])
    assert late == stamp(T0) and [n.text for n in b.notes["RunLate"]] == [
        f"report@{stamp(T0)}: no Job 180s after its time"
    ]
    again = book(checked=T0 - timedelta(minutes=1), now=T0 + timedelta(minutes=3), cfg=config(grace=120))
    again.base = again.base.model_copy(update={"late_since": late})
    assert ledger.look_ahead(again, set(), []) == late and "RunLate" not in again.notes  # said once
    quiet = book(checked=T0, now=T0 + timedelta(seconds=20))
    assert ledger.look_ahead(quiet, {T0}, []) is None
    assert quiet.wake_at == T0 + timedelta(minutes=1) + ledger.SETTLE_SLACK


def test_health_names_each_problem_of_the_recent_runs() -> None:
    runs = [
        RunRecord(key="report@b", scheduled_time="2026-09-11T15:02:00Z", state="Missed"),
        RunRecord(key="report@a", scheduled_time="2026-09-11T15:01:00Z", state="Failed", duplicates=1, stuck=True),
        RunRecord(key="report@0", scheduled_time="2026-09-11T15:00:00Z", state="Active", stuck=True),
    ]
    assert ledger.health("report", runs) == [
        ("MissedRun", "task 'report': missed report@b"),
        ("RunFailed", "task 'report': run report@a failed"),
        ("DuplicateRun", "task 'report': report@a ran 2 times"),
        ("StuckRun", "task 'report': run report@a was stuck"),
    ]


def test_an_event_counts_what_its_notes_count_not_what_their_text_says() -> None:
    event = ledger._event("MissedRun", "report", [Note("3 missed (last report@x)", 3), Note("oops", 2)])
    assert (event.count, event.message) == (5, "task 'report': 5 missed")
    many = ledger._event("RunFailed", "report", [Note(f"j{i}: failed") for i in range(5)])
    assert many.count == 5 and many.message.endswith("j0: failed; j1: failed; j2: failed; and 2 more")
