"""The run ledger: the fire times a task's schedule expected against the Jobs observed (DESIGN "The ledger").

Pure: ``advance(progress, config, jobs, now)`` takes what the status remembers of a task, the task's
CronJob settings (what really runs), the task's Jobs from the watch-fed view and ``now``, and returns
the task's new ledger status, the Events to post, the Jobs whose finalizer may go once that status is
written, and when time alone will next change something.

How each expected time ends, exactly once:

* **run**: a Job has the time as its scheduled time (keys.py). Counted when the Job is first seen; its
  outcome (succeeded, failed, stuck) when it finishes. ``late`` counts runs created more than
  ``missedRunGraceSeconds`` after their time.
* **duplicate**: every Job beyond the first for one time (a manual re-run, a second controller, the
  second fire of a time repeated at a DST fall-back).
* **skipped**: no Job, for a stated reason: the CronJob was suspended at that time (the spans are kept in
  ``suspensions`` until settled, so a resume before a time is settled does not turn it into a miss), or
  ``Forbid`` and a Job of the task was active at that time (also one that never got a pod: it blocks
  every later fire).
* **missed**: no Job, no reason, and the CronJob controller can no longer start one: a later fire has
  come (the controller only starts the most recent missed time) or ``startingDeadlineSeconds`` passed.

A time is *settled* (missed or skipped) only when no Job can come for it any more; ``checkedUntil``
says how far that has got, so a restart neither loses nor counts again. Settling a window costs
arithmetic (``count_fires``), not one step per fire: a week of ``* * * * *`` is one step. Jobs already
counted are remembered by name in ``jobs`` until they are filed, so no Job is counted twice, and with the
span they were active until the fires in it are settled, so a fire a Job blocked under ``Forbid`` stays
skipped when a history limit deletes that Job before the fire is settled. The status lists at most
``JOBS_MAX`` Jobs (its size is bounded: models.py): a Job whose outcome is counted is *filed*, marked so on
itself (``appschedule.dev/filed``) in the patch that releases its finalizer, and its record goes once the view
shows the mark. When more Jobs are new than the records can hold (a backlog after an outage), the finished
ones whose time and span the step settles are counted with no record: the task's mark (``filedThrough``)
moves past them in the order the API server created them, and every Job before it is counted, so a backlog
of any size is counted in one step. Any other Job beyond what the status can remember waits, uncounted but
never counted missed, until a record is free (at most ``ACTIVE_MAX`` records go to active Jobs). A Job whose
time is older than ``trackingSince`` (before the task's schedule or time zone last changed) is not
counted at all.

A Job whose time cannot be read (an annotation that is not an RFC 3339 time, a name or time past the
years schedule.py computes in: keys.py says what) is not filed: it is reported once (``OddJob``, its
record says so while it exists) and its finalizer released, and every other Job and task goes on.

A step is a row of small pure functions over a ``Book`` (the step's working state: the status as it was,
the records, a typed ``Tally`` of the counts, the Events as ``Note`` values): ``tracked`` (counting
restarts on a new schedule or zone), ``Seen.of`` (the Jobs by record name, with their times), ``let_go``
(records nothing needs any more, dropped first so that new Jobs get them), ``admit``
(Jobs first seen), ``follow`` (their outcomes), ``suspension_spans``, ``blocked_spans`` (the stated
reasons), ``settled_until`` and ``settle`` (missed and skipped), ``look_ahead`` (late, and when to wake)
and ``health`` (what RunsHealthy says); tests/unit/test_ledger_steps.py tests each. Times are aware UTC
datetimes inside a step; the status stores them as RFC 3339 strings, written by one serializer
(``keys.rfc3339``) and read by one parser (``keys.parse_time``).

Known limits: a hand-made Job for a time already settled as missed counts as a run (the time stays
missed); a duplicate is recognised against the Jobs that still exist and the last 10 runs; the mark assumes
the API server's clock (creation times) and the operator's agree within ``SETTLE_SLACK``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from . import blackout, keys, naming
from .keys import parse_time, rfc3339
from .models import (
    CATCH_UP_MAX,
    COUNT_MAX,
    FAILURE_MAX,
    JOBS_MAX,
    NAME_MAX,
    RUN_COUNT_MAX,
    SUSPENSIONS_MAX,
    ClaimState,
    Counts,
    FiledThrough,
    JobRecord,
    LastRun,
    RunBase,
    RunRecord,
    Suspension,
    TaskStatus,
    printable,
)
from .schedule import Schedule, count_fires, earliest, next_fire, previous_fire, repeat_of, repeats_between
from .view import JobView, PodView

EventType = Literal["Normal", "Warning"]
# what the ledger reports, each as an Event reason (and, but for OddJob, in RunsHealthy)
LedgerReason = Literal[
    "MissedRun",
    "RunLate",
    "DuplicateRun",
    "DuplicateAbsorbed",
    "RunFailed",
    "StuckRun",
    "RunNotStarted",
    "KeyNotInjected",
    "OddJob",
]

SETTLE_SLACK = timedelta(seconds=15)  # how long after its time a Job may still appear in our view
# A Job that finished while a pod of it seen running has not said so yet (two watches, no order between them):
# its outcome waits this long for the pod's last state (its claim, why it failed), then is counted without it.
POD_WAIT = timedelta(seconds=10)
RECENT = 10
WALK_LIMIT = 500  # fires walked back to find the latest missed times
ACTIVE_MAX = JOBS_MAX - 2  # records for active Jobs: the rest are kept for Jobs that end, so they always get in


@dataclass(frozen=True)
class TaskConfig:
    """What the task's CronJob runs with (and the grace from the spec)."""

    task: str
    cronjob: str
    schedule: Schedule
    suspend: bool = False
    concurrency: str = "Forbid"
    starting_deadline: int | None = 300
    active_deadline: int | None = 3600
    grace: int = 120
    catch_up: int = 0  # seconds: catchUpWindow (0: off)
    blackouts: tuple[blackout.Window, ...] = ()  # the task's and spec.blackouts, as its CronJob carries them


@dataclass(frozen=True)
class LedgerEvent:
    type: EventType
    reason: LedgerReason
    task: str
    count: int
    message: str


@dataclass
class LedgerUpdate:
    """What one step of a task's ledger (``advance``) produced: the new status and what the shell must do."""

    status: TaskStatus
    events: list[LedgerEvent] = field(default_factory=list)
    release: list[str] = field(default_factory=list)  # Jobs whose finalizer may go once status is written
    finished: list[tuple[str, float]] = field(default_factory=list)  # (result, seconds) of runs that ended
    wake_at: datetime | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)  # (reason, message) for RunsHealthy
    starts: list[datetime] = field(default_factory=list)  # fires missed within catchUpWindow to start now


def record_name(name: str) -> str:
    """A Job's name as the status holds it: as it is up to 63 characters, else cut and given a hash."""
    if len(name) <= NAME_MAX and all(" " <= c <= "~" for c in name):  # what the status's pattern allows
        return name
    cut = "".join(c if " " <= c <= "~" else "?" for c in name[: NAME_MAX - 11])
    return f"{cut}-{hashlib.sha256(name.encode()).hexdigest()[:10]}"


def _clean(text: str | None) -> str | None:
    """A time read from a Job, written back only as the RFC 3339 it parses to (never as given)."""
    moment = parse_time(text)
    return None if moment is None else rfc3339(moment)


def job_time(job: JobView, config: TaskConfig) -> keys.Scheduled:
    created = parse_time(job.created) or datetime.fromtimestamp(0, UTC)
    return keys.scheduled_time(
        annotations=job.annotations,
        job_name=job.name,
        cronjob=config.cronjob,
        created=created,
        schedule=config.schedule,
    )


def _state(job: JobView) -> str:
    if job.outcome == "Complete":
        return "Succeeded"
    if job.outcome == "Failed":
        return "Failed"
    return "Active"


def _merge(intervals: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _within(moment: datetime, intervals: Sequence[tuple[datetime, datetime]]) -> bool:
    return any(start < moment <= end for start, end in intervals)


Position = tuple[datetime, str]  # a Job's place in the order the API server created them: (creation, record name)


@dataclass
class Tally:
    """The counts while a step changes them (``Counts`` is the status's copy)."""

    runs: int = 0
    succeeded: int = 0
    failed: int = 0
    missed: int = 0
    late: int = 0
    skipped: int = 0
    blacked_out: int = 0
    duplicates: int = 0
    stuck: int = 0
    manual: int = 0
    backfilled: int = 0
    caught_up: int = 0
    reruns: int = 0
    unkeyed: int = 0
    refused: int = 0
    absorbed: int = 0
    unclaimed: int = 0

    @classmethod
    def of(cls, counts: Counts | None) -> Tally:
        return cls(**(counts or Counts()).model_dump())

    def counts(self) -> Counts:
        return Counts(**{name: min(value, COUNT_MAX) for name, value in dataclasses.asdict(self).items()})


@dataclass(frozen=True)
class Note:
    """One thing an Event will say (``count`` things: a MissedRun note counts every time it names)."""

    text: str
    count: int = 1


@dataclass
class Book:
    """What one step works on: the task's status as it was, and its records as the phases change them."""

    config: TaskConfig
    now: datetime
    base: TaskStatus
    since: datetime  # tracking began: earlier times are not counted
    checked: datetime  # times up to here are settled
    tally: Tally
    recent: dict[str, RunRecord]  # by scheduled time
    records: dict[str, JobRecord]  # by record name
    notes: dict[LedgerReason, list[Note]] = field(default_factory=dict)  # by Event reason
    release: list[str] = field(default_factory=list)
    finished: list[tuple[str, float]] = field(default_factory=list)
    wake_at: datetime | None = None
    problems: list[tuple[str, str]] = field(default_factory=list)
    catch_up: list[str] = field(default_factory=list)  # fires missed within catchUpWindow, to start, oldest first
    starts: list[datetime] = field(default_factory=list)
    mark: Position | None = None  # filedThrough: every Job created up to here and not in a record is counted
    passed: set[str] = field(default_factory=set)  # Jobs counted past the mark: no record once the step ends
    claims: dict[str, ClaimState] = field(default_factory=dict)  # by scheduled time: runs that ended this step

    def note(self, reason: LedgerReason, text: str, count: int = 1) -> None:
        self.notes.setdefault(reason, []).append(Note(text, count))

    def wake(self, moment: datetime) -> None:
        self.wake_at = earliest(self.wake_at, moment)


@dataclass(frozen=True)
class Seen:
    """The task's Jobs in the view, by record name, with their times and whether they say they are filed."""

    by_name: dict[str, JobView]
    timed: dict[str, keys.Scheduled]
    filed: frozenset[str]
    pods: Mapping[str, Sequence[PodView]] = field(default_factory=dict)  # by Job name (not record name)

    @classmethod
    def of(
        cls, jobs: Sequence[JobView], config: TaskConfig, pods: Mapping[str, Sequence[PodView]] | None = None
    ) -> Seen:
        by_name = {record_name(job.name): job for job in jobs}
        filed = frozenset(name for name, job in by_name.items() if job.annotations.get(naming.ANNOTATION_FILED))
        return cls(by_name, {name: job_time(job, config) for name, job in by_name.items()}, filed, pods or {})


def advance(
    progress: TaskStatus | None,
    config: TaskConfig,
    jobs: Sequence[JobView],
    now: datetime,
    pods: Mapping[str, Sequence[PodView]] | None = None,
) -> LedgerUpdate:
    """One step of the task's ledger (see the module docstring): the phases below, in order. ``pods``: the pods
    of those Jobs, by Job name (what their claims came to, why they failed)."""
    now = now.replace(microsecond=0)
    base = tracked(progress, config, now)
    since = parse_time(base.tracking_since) or now
    book = Book(
        config=config,
        now=now,
        base=base,
        since=since,
        checked=parse_time(base.checked_until) or since,
        tally=Tally.of(base.counts),
        recent={r.scheduled_time: r for r in base.recent or []},
        records={r.name: r for r in base.jobs or []},
        catch_up=_waiting_fires(base, config.schedule),
        mark=_mark(base, now),
    )
    if base.filed_through is not None and book.mark is None:  # a mark after now (written by hand): true then
        marked = parse_time(base.filed_through.created)
        if marked is not None and marked > now:
            book.wake(marked)
    restarted = progress is not None and base.tracking_since != progress.tracking_since
    if restarted or not config.catch_up:  # the schedule changed, or catch-up was turned off: no fire waits any more
        stored = _waiting_fires(base, None)  # fires of the schedule they were missed under
        if stored:
            _count_missed(book, [parse_time(t) or now for t in stored])
        book.catch_up = []
    seen = Seen.of(jobs, config, pods)
    let_go(book, seen)
    run_times, waiting = admit(book, seen)
    follow(book, seen)
    spans = suspension_spans(base, config, now)
    job_times = (
        {parse_time(r.scheduled_time) for r in book.records.values() if _stands(r.kind)}
        | {parse_time(t) for t in run_times}
        | waiting
    )
    known = {t for t in job_times if t is not None}
    blocked = blocked_spans(book, seen, jobs, spans)
    settle(book, seen, settled_until(config, book.checked, known, now), known, blocked)
    catch_up(book, jobs)
    file_through(book)
    late_since = look_ahead(book, known, blocked)
    ordered = sorted(book.recent.values(), key=lambda r: r.scheduled_time, reverse=True)[:RECENT]
    book.problems += health(config.task, ordered)
    runs = [r for r in ordered if r.job]
    status = book.base.model_copy(
        update={
            "checked_until": rfc3339(book.checked),
            "late_since": late_since if late_since and (parse_time(late_since) or now) > book.checked else None,
            "counts": book.tally.counts(),
            "recent": ordered or None,
            "last_run": last_run(book, runs[0]) if runs else book.base.last_run,
            "jobs": sorted(book.records.values(), key=lambda r: (r.scheduled_time, r.name)) or None,
            "suspensions": [
                Suspension(since=rfc3339(start), until=rfc3339(end) if end else None)
                for start, end in spans
                if end is None or end > book.checked
            ][-SUSPENSIONS_MAX:]
            or None,
            "catch_up": book.catch_up or None,
            "filed_through": FiledThrough(created=rfc3339(book.mark[0]), name=book.mark[1]) if book.mark else None,
        }
    )
    return LedgerUpdate(
        status=status,
        events=[_event(reason, config.task, notes) for reason, notes in book.notes.items()],
        release=book.release,
        finished=book.finished,
        wake_at=book.wake_at,
        problems=book.problems,
        starts=book.starts,
    )


def stands(update: LedgerUpdate, progress: TaskStatus | None, config: TaskConfig) -> bool:
    """A step that stands until its ``wake_at``: with the same progress, settings, Jobs and pods, a step at any time
    before then is this one (the ledger's promise: ``wake_at`` is when time alone changes something next), so a plan
    may reuse it instead of stepping again (reconcile.Quiets); tests/unit/test_ledger.py ``step`` and
    test_properties.py check it. Not a step that reads the time itself: one with Events (a late run's says how late),
    one that starts tracking (from now), one that opens or closes a suspension (at now), one that ends a run (a Job
    without a finish time ends now), one of a task with blackouts (its fires blacked out are settled as time passes,
    and nothing wakes for each)."""
    return (
        progress is not None
        and not update.events
        and not update.finished
        and not config.blackouts
        and update.status.tracking_since == progress.tracking_since
        and update.status.suspensions == progress.suspensions
    )


def _waiting_fires(base: TaskStatus, schedule: Schedule | None) -> list[str]:
    """The fires waiting to be caught up, as stored: only times as the serializer writes them, of ``schedule``
    when given (the status can be written by anyone; anything else is dropped), oldest first, at most
    CATCH_UP_MAX."""
    found = set()
    for text in base.catch_up or []:
        moment = parse_time(text)
        if moment is None or rfc3339(moment) != text:
            continue
        if schedule is None or previous_fire(schedule, moment) == moment:
            found.add(text)
    return sorted(found)[-CATCH_UP_MAX:]


def tracked(progress: TaskStatus | None, config: TaskConfig, now: datetime) -> TaskStatus:
    """The status to go on from: counting (re)starts now when the task is first tracked or its schedule or
    time zone changed (what was settled under the old one stays settled; counts are kept)."""
    base = progress or TaskStatus(name=config.task)
    schedule = config.schedule
    if base.tracking_since is None or (base.schedule, base.time_zone) != (schedule.expression, schedule.time_zone):
        return base.model_copy(
            update={
                "schedule": schedule.expression,
                "time_zone": schedule.time_zone,
                "tracking_since": rfc3339(now),
                "checked_until": rfc3339(now),
                "late_since": None,
            }
        )
    return base


def let_go(book: Book, seen: Seen) -> None:
    """Before any Job is admitted: the records of finished Jobs that are filed (or gone) and whose time and span
    are settled go, so every free record is there for the Jobs waiting."""
    for name, record in list(book.records.items()):
        gone = name not in seen.by_name or name in seen.filed
        if gone and record.finished and _settled(record, book.checked, book.now):
            del book.records[name]


def _position(job: JobView) -> Position | None:
    created = parse_time(job.created)
    return None if created is None else (created, record_name(job.name))


def _mark(base: TaskStatus, now: datetime) -> Position | None:
    """``filedThrough`` as stored, if it can be true: a mark after now (a status written by hand) counts nothing."""
    mark = base.filed_through
    created = parse_time(mark.created) if mark is not None else None
    if mark is None or created is None or created > now:
        return None
    return created, mark.name


def _settles_by(config: TaskConfig, checked: datetime, now: datetime) -> datetime:
    """How far this step settles the times at least, whatever Jobs it sees (the least ``settled_until`` gives)."""
    latest = previous_fire(config.schedule, now - SETTLE_SLACK)
    if latest is None or latest <= checked:
        return checked
    before = previous_fire(config.schedule, latest - timedelta(seconds=1))
    return before if before is not None and before > checked else checked


def admit(book: Book, seen: Seen) -> tuple[set[str], set[datetime]]:
    """Jobs first seen, in the order they were created: each a run, or a duplicate of one. A Job the ledger is
    done with says so itself (ANNOTATION_FILED, set when its finalizer went) or sits before the mark
    (``filedThrough``: every Job created before it and not in a record is counted). The status remembers at most
    JOBS_MAX Jobs. When more are new than it can hold (a backlog), a Job that has finished, whose time and span
    this step settles and that the mark can pass (every Job before it is counted, and it is older than
    SETTLE_SLACK) is counted without a record and the mark moves past it, so a backlog of any size is counted
    in one step; the shell writes a status whose mark moved only from a view it has just listed
    (``status.needs_listed_view``), so no Job created before the mark can appear later. Any other Job gets a
    record, or waits, uncounted but not missed, until one is free. Returns the times that got a run (as
    stored) and the times of the Jobs that wait."""
    records, recent = book.records, book.recent
    mark, last = book.mark, datetime.max.replace(tzinfo=UTC)
    positions = {name: _position(job) for name, job in seen.by_name.items()}  # each creation time parsed once
    ordered = sorted(seen.by_name.items(), key=lambda item: positions[item[0]] or (last, item[0]))
    marked = {n for n, p in positions.items() if mark is not None and p is not None and p <= mark}
    marked -= records.keys()
    run_times = {r.scheduled_time for r in records.values() if _stands(r.kind)} | {
        t for t, r in recent.items() if r.state in ("Active", "Succeeded", "Failed", "Unknown")
    }
    for name in (seen.filed | marked) - records.keys():
        if not _stands(seen.by_name[name].annotations.get(naming.ANNOTATION_RUN_KIND)):  # never the run of its time
            continue
        if seen.timed[name].problem is None and seen.timed[name].time >= book.since:
            run_times.add(rfc3339(seen.timed[name].time))
    waiting: set[datetime] = set()
    known = seen.filed | marked | records.keys()
    passing = len(records) + sum(1 for n in seen.by_name if n not in known) > JOBS_MAX  # the mark takes the oldest
    settles_by = _settles_by(book.config, book.checked, book.now) if passing else book.checked  # a backlog only
    for name, job in ordered:
        position = positions[name]
        if name in marked:  # counted before: let go if it still holds (its release did not land)
            if name not in seen.filed and job.finalizer and (job.outcome or job.deleting):
                book.release.append(job.name)
            continue
        done = name in records or name in seen.filed or _take(book, seen, job, run_times, waiting, passing, settles_by)
        passing = passing and done and position is not None and position[0] <= book.now - SETTLE_SLACK
        if passing and name in book.passed:
            book.mark = position
    return run_times, waiting


def _take(
    book: Book,
    seen: Seen,
    job: JobView,
    run_times: set[str],
    waiting: set[datetime],
    passing: bool,
    settles_by: datetime,
) -> bool:
    """One Job first seen: counted (a record, or past the mark when ``passing``), let go uncounted, or left
    waiting; True unless it waits."""
    records, name = book.records, record_name(job.name)
    timed = seen.timed[name]
    if timed.problem is not None:
        if timed.refused is not None and timed.refused < book.since and timed.time < book.since:
            # a fire of the schedule before this one (it changed): not counted, let go when done
            if job.finalizer and (job.outcome or job.deleting):
                book.release.append(job.name)
            return True
        # the time is the author's, not the cluster's: never counted, never held; reported once (the release
        # marks it filed, so the next step does not see it again)
        book.tally.refused += 1
        book.note("OddJob", f"{job.name}: {timed.problem}")
        book.release.append(job.name)
        return True
    scheduled = timed.time
    kind = job.annotations.get(naming.ANNOTATION_RUN_KIND)
    asked = kind in naming.ASKED_KINDS
    if scheduled < book.since and not asked:  # before tracking began: not counted; let it go when it is done
        if job.finalizer and (job.outcome or job.deleting):
            book.release.append(job.name)
        return True
    ended = bool(job.outcome or job.deleting)
    created, finish = parse_time(job.created), parse_time(job.finish_time) or settles_by
    # as _settled will judge the record _count writes: one with a kind (a run asked for, the catch-up that is the
    # run of its time) once it ends, any other (a run, a duplicate) once its time and span are settled
    kept_kind = asked or (kind == "catch-up" and rfc3339(scheduled) not in run_times)
    settles = kept_kind or (scheduled <= settles_by and finish <= settles_by)
    if passing and ended and settles and created is not None and created <= book.now - SETTLE_SLACK:
        book.passed.add(name)  # counted now, its record let go at the end of the step: the mark passes it
    else:
        if passing and ended and settles and created is not None:  # too new for the mark: it may pass it then
            book.wake(created + SETTLE_SLACK)
        if len(records) - len(book.passed) >= JOBS_MAX or (
            not ended and sum(1 for n, r in records.items() if not r.finished and n not in book.passed) >= ACTIVE_MAX
        ):
            if _stands(kind):
                waiting.add(scheduled)  # its turn comes when a Job is filed; a finished one always gets through
            if ended and created is not None:  # once older than the slack, the mark can pass it
                book.wake(created + SETTLE_SLACK)
            return False
    _count(book, job, name, scheduled, run_times)
    return True


def _count(book: Book, job: JobView, name: str, scheduled: datetime, run_times: set[str]) -> None:
    """A Job first seen, counted: a run asked for (as what it is), a duplicate of its time, or the run of it."""
    config, records, recent = book.config, book.records, book.recent
    kind = job.annotations.get(naming.ANNOTATION_RUN_KIND)
    asked = kind in naming.ASKED_KINDS
    key = keys.key_of(config.task, scheduled)
    stamp = rfc3339(scheduled)
    injected = bool(job.annotations.get(naming.ANNOTATION_IDEMPOTENCY_KEY))
    if not injected:
        book.tally.unkeyed += 1
        book.note("KeyNotInjected", f"{job.name} ({key})")
    if asked:  # counted as what it is, never as a run or a duplicate; a re-run or backfill shown against its fire
        if kind == "manual":
            book.tally.manual += 1
        elif kind == "rerun":
            book.tally.reruns += 1
        else:
            book.tally.backfilled += 1
        if kind != "manual" and stamp in recent:  # run again: by hand or by a backfill
            old = recent[stamp]
            recent[stamp] = old.model_copy(update={"reruns": min(RUN_COUNT_MAX, (old.reruns or 0) + 1)})
        records[name] = JobRecord(name=name, scheduled_time=stamp, active_from=_clean(job.created), kind=kind)
        return
    if stamp in run_times:
        book.tally.duplicates += 1
        book.note("DuplicateRun", f"{job.name} ({key})")
        if stamp in recent:
            old = recent[stamp]
            recent[stamp] = old.model_copy(update={"duplicates": min(RUN_COUNT_MAX, (old.duplicates or 0) + 1)})
        records[name] = JobRecord(name=name, scheduled_time=stamp, active_from=_clean(job.created))
        return
    created_at = parse_time(job.created) or book.now
    delay = min(RUN_COUNT_MAX, max(0, int((created_at - scheduled).total_seconds())))
    book.tally.runs += 1
    caught_up = kind == "catch-up"
    book.catch_up = [t for t in book.catch_up if t != stamp]  # whoever ran it (the controller, a late watch)
    if caught_up:  # the run of a fire settled as waiting for it: late by design, not counted late
        book.tally.caught_up += 1
    elif delay > config.grace:
        book.tally.late += 1
    recent[stamp] = RunRecord(
        key=key,
        job=name,
        scheduled_time=stamp,
        state="Active",
        start_time=_clean(job.created),
        delay_seconds=delay,
        attempts=0,
        key_injected=None if injected else False,
        caught_up=True if caught_up else None,
    )
    records[name] = JobRecord(
        name=name,
        scheduled_time=stamp,
        run=True,
        active_from=_clean(job.created),
        kind="catch-up" if caught_up else None,
    )
    run_times.add(stamp)


def file_through(book: Book) -> None:
    """The end of a step: the records of the Jobs counted past the mark go (each has finished, and its time and
    span are settled by now: ``_settles_by``); the mark stands for them."""
    for name in book.passed:
        record = book.records.get(name)
        if record is not None and record.finished and _settled(record, book.checked, book.now):
            del book.records[name]


def follow(book: Book, seen: Seen) -> None:
    """The outcomes of the Jobs counted: finished (succeeded, failed, stuck at its deadline), gone unseen,
    or still active (stuck past activeDeadlineSeconds, no pod after the grace); records let go once settled."""
    config, records, recent, now = book.config, book.records, book.recent, book.now
    for name, record in list(records.items()):
        job = seen.by_name.get(name)
        if job is not None and name in seen.filed and record.finished:
            if _settled(record, book.checked, now):  # the Job says it is filed, and nothing of it is left to settle
                del records[name]
            continue  # else kept: a history limit may delete it before the fires its span blocked are settled
        stamp = record.scheduled_time
        run = recent.get(stamp) if record.run else None
        if run is not None and run.job != name:
            run = None
        if job is None:
            if not record.finished and run is not None:
                recent[stamp] = run.model_copy(update={"state": "Unknown"})
            if not record.finished:
                record = record.model_copy(update={"finished": True})
            if _settled(record, book.checked, now):
                del records[name]  # gone and settled: nothing can count it again
            else:
                records[name] = record
            continue
        attempts = min(RUN_COUNT_MAX, job.active + job.succeeded + job.failed)
        if run is not None:
            run = run.model_copy(
                update={
                    "attempts": attempts,
                    "state": _state(job),
                    "finish_time": _clean(job.finish_time) or run.finish_time,
                }
            )
            recent[stamp] = run
        key = keys.key_of(config.task, parse_time(stamp) or now)
        if record.finished:
            if job.finalizer or name not in seen.filed:
                book.release.append(job.name)
            continue
        if job.outcome and not job.deleting and _pods_pending(seen.pods.get(job.name, ()), job, book):
            continue  # the pod's last state is on its way: counted at the next step (book.wake)
        if job.outcome or job.deleting:
            records[name] = _ended(book, record, job, run, key, seen.pods.get(job.name, ()))
            book.release.append(job.name)
            continue
        records[name] = _active(book, record, job, run, key, attempts)


def _pods_pending(pods: Sequence[PodView], job: JobView, book: Book) -> bool:
    """Whether a finished Job's outcome waits for its pods: one of them was seen but has not finished yet, and
    POD_WAIT has not passed since the Job finished (then the step wakes when it has)."""
    if not any(not pod.finished for pod in pods):
        return False
    until = (parse_time(job.finish_time) or book.now) + POD_WAIT
    if book.now >= until:
        return False
    book.wake(until)
    return True


def claim_of(pods: Sequence[PodView], key: str) -> ClaimState | None:
    """What a Job's claim came to: the last of its pods that reported a claim of ``key`` (a retry's outcome is
    the one that stands); "none" when a pod finished without claiming it (a claim of another key is not its);
    None when none of its pods has finished, or none was seen."""
    claimed = [pod for pod in pods if pod.claim is not None and pod.claim[1] == key]
    if claimed:
        outcome = max(claimed, key=lambda pod: (pod.created, pod.name)).claim
        if outcome is not None and outcome[0] in ("won", "taken-over", "lost"):
            return outcome[0]  # type: ignore[return-value]  # one of ClaimState's, checked
    return "none" if any(pod.finished for pod in pods) else None


def failure_of(job: JobView, pods: Sequence[PodView]) -> str:
    """Why a run failed: the Job's deadline first (its pod's end follows from it), else what its last failed pod
    says (OOMKilled, exit 3, Unschedulable, ImagePullBackOff, Evicted), else the Job's condition."""
    if job.reason == "DeadlineExceeded":
        return "DeadlineExceeded"
    failed = [pod for pod in pods if pod.failure]
    if failed:
        return str(max(failed, key=lambda pod: (pod.created, pod.name)).failure)
    return printable(job.reason or ("deleted" if job.deleting else "failed"), FAILURE_MAX) or "failed"


def last_run(book: Book, run: RunRecord) -> LastRun:
    """The task's ``lastRun``: its newest run as DESIGN's status shows it (its entry in ``recent`` has the rest),
    with what its claim came to (found when it ended: in this step, or kept in ``lastRun`` since)."""
    claim = book.claims.get(run.scheduled_time)
    before = book.base.last_run
    if claim is None and before is not None and before.key == run.key:
        claim = before.claim
    return LastRun(**run.model_dump(include=set(RunBase.model_fields)), claim=claim)


def _ended(
    book: Book, record: JobRecord, job: JobView, run: RunRecord | None, key: str, pods: Sequence[PodView]
) -> JobRecord:
    """A counted Job that has finished (or is being deleted before it did): its outcome counted once, with what
    its claim came to and why it failed."""
    stamp, now = record.scheduled_time, book.now
    started = parse_time(job.created) or now
    claim = claim_of(pods, key) if record.kind in (None, "catch-up") else None  # a run of its time or a duplicate
    if claim == "lost":  # the claim absorbed it: another Job of the fire did the work
        book.tally.absorbed += 1
        book.note("DuplicateAbsorbed", f"{record.name} ({key})")
        if stamp in book.recent:
            old = book.recent[stamp]
            book.recent[stamp] = old.model_copy(update={"absorbed": min(RUN_COUNT_MAX, (old.absorbed or 0) + 1)})
            run = book.recent[stamp] if run is not None else None
    if record.run:
        update: dict[str, object] = {}
        if claim is not None:
            book.claims[stamp] = claim
            if claim == "none":
                book.tally.unclaimed += 1
        if job.outcome == "Complete":
            book.tally.succeeded += 1
            last = parse_time(book.base.last_successful_time)
            if last is None or (parse_time(stamp) or now) > last:
                book.base = book.base.model_copy(update={"last_successful_time": stamp})
            book.finished.append(("succeeded", _seconds(started, job.finish_time, now)))
        else:
            book.tally.failed += 1
            why = failure_of(job, pods)
            update["failure"] = why
            book.note("RunFailed", f"{record.name} ({key}): {why}")
            book.finished.append(("failed", _seconds(started, job.finish_time, now)))
            if not job.outcome:
                update["state"] = "Failed"
        if run is not None and update:
            book.recent[stamp] = run.model_copy(update=update)
    if job.reason == "DeadlineExceeded" and not record.stuck:
        record = _stuck(book, record, run, f"{record.name} ({key}): stopped after activeDeadlineSeconds")
    return record.model_copy(update={"finished": True, "active_until": _clean(job.finish_time)})


def _stuck(book: Book, record: JobRecord, run: RunRecord | None, text: str) -> JobRecord:
    book.tally.stuck += 1
    book.note("StuckRun", text)
    if run is not None:
        book.recent[record.scheduled_time] = book.recent[record.scheduled_time].model_copy(update={"stuck": True})
    return record.model_copy(update={"stuck": True})


def _active(book: Book, record: JobRecord, job: JobView, run: RunRecord | None, key: str, attempts: int) -> JobRecord:
    """A counted Job still active: stuck past its deadline, or without a pod past the grace; when to look again."""
    config, now = book.config, book.now
    started = parse_time(job.created) or now
    if config.active_deadline is not None:
        limit = started + timedelta(seconds=config.active_deadline) + SETTLE_SLACK
        if now >= limit and not record.stuck:
            record = _stuck(book, record, run, f"{record.name} ({key}): active for more than {config.active_deadline}s")
        elif now < limit:
            book.wake(limit)
    if record.stuck:
        book.problems.append(("StuckRun", f"task {config.task!r}: run {key} is stuck"))
    if attempts == 0:  # a run asked for (a re-run of an old fire) has its grace from its creation
        began = record.active_from if record.kind else record.scheduled_time
        grace_end = (parse_time(began) or now) + timedelta(seconds=config.grace)
        if now >= grace_end:
            if not record.not_started:
                book.note(
                    "RunNotStarted",
                    f"{record.name} ({key}): no pod was started; see `kubectl describe job {record.name}`",
                )
                record = record.model_copy(update={"not_started": True})
            book.problems.append(("RunNotStarted", f"task {config.task!r}: Job {record.name} ({key}) has no pod"))
        else:
            book.wake(grace_end)
    return record


Span = tuple[datetime, datetime | None]


def suspension_spans(base: TaskStatus, config: TaskConfig, now: datetime) -> list[Span]:
    """The spans the CronJob was suspended: one opens when this reconcile suspends it and closes when it
    resumes (``config`` is what this reconcile writes), so a time is skipped for it even when it is settled
    after the resume."""
    spans: list[Span] = [(parse_time(s.since) or now, parse_time(s.until)) for s in base.suspensions or []]
    if config.suspend and not (spans and spans[-1][1] is None):
        spans.append((now, None))
    elif not config.suspend and spans and spans[-1][1] is None:
        spans[-1] = (spans[-1][0], now)
    return spans


def settled_until(config: TaskConfig, checked: datetime, job_times: set[datetime], now: datetime) -> datetime:
    """How far the times can be settled now: the fire just come if it has its Job already (every earlier fire
    is older than the slack: settled in the same step, so its run is recorded in one write); else the latest
    fire before the slack if it got a Job or its starting deadline has passed (the CronJob controller starts
    only the most recent missed time, and only within the deadline), else the fire before it. A suspension
    settles nothing early: when the CronJob resumes, the controller starts its most recent missed fire if
    the deadline allows, also one from before the suspension."""
    just = previous_fire(config.schedule, now)
    if just is not None and just > checked and just in job_times:
        return just
    latest = previous_fire(config.schedule, now - SETTLE_SLACK)
    if latest is None or latest <= checked:
        return checked
    deadline_passed = (
        config.starting_deadline is not None
        and latest + timedelta(seconds=config.starting_deadline) <= now - SETTLE_SLACK
    )
    if latest in job_times or deadline_passed:
        return latest
    before = previous_fire(config.schedule, latest - timedelta(seconds=1))
    return before if before is not None and before > checked else checked


Interval = tuple[datetime, datetime]


def _asked(job: JobView) -> bool:
    """A run someone asked for (kubectl appschedule run/rerun/backfill) or the operator started (catch-up), by
    the kind it carries: the CronJob controller does not see it, so under Forbid it never blocks a fire."""
    return job.annotations.get(naming.ANNOTATION_RUN_KIND) in naming.RUN_KINDS


def _stands(kind: str | None) -> bool:
    """Whether a Job of this kind is the run of its time: one the CronJob controller made, or a catch-up."""
    return kind not in naming.ASKED_KINDS


def blocked_spans(book: Book, seen: Seen, jobs: Sequence[JobView], spans: Sequence[Span]) -> list[Interval]:
    """The spans in which a time without a Job has a stated reason: the CronJob was suspended, or (Forbid)
    a Job of the task was active, also one already gone whose span is not settled yet."""
    now = book.now
    reasons = [(start, end or now) for start, end in spans]
    if book.config.concurrency == "Forbid":
        # the controller's Forbid sees only the Jobs it made: a run asked for never blocks a fire, nor does a Job
        # whose stated time the ledger refuses (any author's Job with the task's labels, never the controller's)
        reasons += [
            (parse_time(j.created) or now, parse_time(j.finish_time) or now)
            for j in jobs
            if parse_time(j.created) and not _asked(j) and seen.timed[record_name(j.name)].problem is None
        ]
        reasons += [
            (start, end)
            for r in book.records.values()
            if r.name not in seen.by_name and not r.kind
            for start, end in [(parse_time(r.active_from), parse_time(r.active_until))]
            if start is not None and end is not None
        ]
    return _merge(reasons)


def settle(
    book: Book, seen: Seen, until: datetime, job_times: set[datetime], blocked: Sequence[tuple[datetime, datetime]]
) -> None:
    """Settle the times in (checked, until] that got no Job: skipped where a span gives the reason, else
    missed; then let go of the records of gone or filed Jobs whose time and span are now settled."""
    checked, schedule, config = book.checked, book.config.schedule, book.config
    if until <= checked:
        return
    repeated = repeats_between(schedule, checked, until)
    fires = count_fires(schedule, checked, until) - len(repeated)
    ran = {t for t in job_times if checked < t <= until and previous_fire(schedule, t) == t}
    empty = max(0, fires - len(ran))
    # a fire inside a blackout is blacked out (before any other reason); one that ran anyway is a run
    dark = blackout.fire_spans(schedule, config.blackouts, checked, until) if config.blackouts else []
    blacked = sum(
        count_fires(schedule, max(start, checked), min(end, until))
        for start, end in dark
        if min(end, until) > max(start, checked)
    )
    blacked -= sum(1 for t in ran if _within(t, dark)) + sum(1 for t in repeated if _within(t, dark))
    blacked = max(0, min(blacked, empty))
    lit = blackout.subtract(blocked, dark)
    skipped = sum(
        count_fires(schedule, max(start, checked), min(end, until))
        for start, end in lit
        if min(end, until) > max(start, checked)
    )
    skipped -= sum(1 for t in ran if _within(t, lit))
    skipped = max(0, min(skipped, empty - blacked))
    missed = empty - blacked - skipped
    book.tally.skipped += skipped
    book.tally.blacked_out += blacked
    blocked = [*blocked, *dark]  # no missed time is shown inside a blackout
    if config.catch_up and missed:  # the newest of them within catchUpWindow wait for the operator to start them
        window = book.now - timedelta(seconds=config.catch_up)
        newest = _missed_times(schedule, checked, until, ran, blocked, missed, limit=CATCH_UP_MAX)
        waiting = [rfc3339(t) for t in newest if t > window]
        missed -= len(waiting)
        ran |= {t for t in newest if t > window}
        book.catch_up = sorted({*book.catch_up, *waiting})
        overflow = book.catch_up[:-CATCH_UP_MAX]
        book.catch_up = book.catch_up[-CATCH_UP_MAX:]
        if overflow:
            _count_missed(book, [parse_time(t) or book.now for t in overflow])
    book.tally.missed += missed
    if missed:
        times = _missed_times(schedule, checked, until, ran, blocked, missed)
        _shown_missed(book, times)
        book.note(
            "MissedRun",
            f"{missed} missed (last {keys.key_of(config.task, times[0] if times else until)})",
            count=missed,
        )
    book.checked = until
    for name, record in list(book.records.items()):  # gone or filed Jobs whose time and span are now settled
        gone = name not in seen.by_name or (name in seen.filed and record.finished)
        if gone and _settled(record, until, book.now):
            del book.records[name]


def _shown_missed(book: Book, times: Sequence[datetime]) -> None:
    """Missed times in the recent runs and in missedTimes (the last 10 of each)."""
    for moment in times:
        stamp = rfc3339(moment)
        book.recent.setdefault(
            stamp, RunRecord(key=keys.key_of(book.config.task, moment), scheduled_time=stamp, state="Missed")
        )
    previous = list(book.base.missed_times or [])
    book.base = book.base.model_copy(
        update={"missed_times": sorted({*previous, *map(rfc3339, times)}, reverse=True)[:RECENT]}
    )


def _count_missed(book: Book, times: Sequence[datetime]) -> None:
    """Fires that waited to be caught up and can no longer be (their window passed, or too many wait): missed."""
    config = book.config
    book.tally.missed += len(times)
    _shown_missed(book, times)
    newest = max(times)
    book.note(
        "MissedRun",
        f"{len(times)} missed, not caught up within catchUpWindow (last {keys.key_of(config.task, newest)})",
        count=len(times),
    )


def catch_up(book: Book, jobs: Sequence[JobView]) -> None:
    """The fires missed within catchUpWindow: one whose window has passed is counted missed; the others are
    started oldest first, respecting concurrencyPolicy: under Forbid and Replace one at a time and only when
    no run of the task is active (a run is never stopped for an old fire); under Allow all at once. Not while
    the task is suspended. A fire started here is the run of its time when its Job is admitted."""
    config, now = book.config, book.now
    if not book.catch_up:
        return
    # a fire with a Job of its own is on its way to admit() (a record is free for it soon): it never expires
    present = {
        rfc3339(t.time)
        for j in jobs
        if _stands(j.annotations.get(naming.ANNOTATION_RUN_KIND))
        for t in [job_time(j, config)]
        if t.problem is None
    }
    window = now - timedelta(seconds=config.catch_up)
    expired = [t for t in book.catch_up if (parse_time(t) or now) <= window and t not in present]
    if expired:
        book.catch_up = [t for t in book.catch_up if t not in expired]
        _count_missed(book, [parse_time(t) or now for t in expired])
    if not book.catch_up:
        return
    # when the next one expires; one with its Job never does (it waits for a record: events wake it, not time)
    ends = [(parse_time(t) or now) + timedelta(seconds=config.catch_up) for t in book.catch_up if t not in present]
    if any(end > now for end in ends):
        book.wake(min(end for end in ends if end > now))
    if config.suspend:
        return
    waiting = [t for t in book.catch_up if t not in present]
    if config.concurrency == "Allow":
        book.starts = [parse_time(t) or now for t in waiting]
        return
    if any(not (j.outcome or j.deleting) for j in jobs) or len(waiting) < len(book.catch_up):
        return  # a run is active: the next one starts when it ends (its Job's events wake the ledger)
    book.starts = [parse_time(waiting[0]) or now]


def look_ahead(book: Book, job_times: set[datetime], blocked: Sequence[tuple[datetime, datetime]]) -> str | None:
    """What is due and has no Job yet (late past the grace: RunLate once per time), and when time alone
    next changes something (``wake_at``). Returns the time reported late, as stored."""
    config, schedule, now = book.config, book.config.schedule, book.now
    windows = config.blackouts

    def following(after: datetime) -> datetime | None:  # the next fire that may run: past the blackouts
        return blackout.next_allowed(schedule, windows, after) if windows else next_fire(schedule, after)

    # wake when time alone lets a fire that came settle: once the next fire of the schedule (blacked out or not:
    # settled_until reads the schedule) is past the slack, or its starting deadline is
    def settles(fire: datetime, after: datetime | None) -> None:
        moments = [after + SETTLE_SLACK] if after is not None else []
        if config.starting_deadline is not None:
            moments.append(fire + timedelta(seconds=config.starting_deadline) + SETTLE_SLACK)
        for moment in moments:
            if moment > now:  # one passed already: what holds it is not time
                book.wake(moment)

    pending = following(book.checked)
    late_since = book.base.late_since
    while pending is not None and pending <= now and (pending in job_times or repeat_of(schedule, pending)):
        after = next_fire(schedule, pending)
        settles(pending, after)  # a fire with its Job, or repeated at a fall-back
        pending = following(pending) if windows else after
    if pending is not None and pending <= now:
        if not config.suspend and not _within(pending, blocked):
            grace_end = pending + timedelta(seconds=config.grace)
            if now >= grace_end:
                if late_since != rfc3339(pending):
                    book.note(
                        "RunLate",
                        f"{keys.key_of(config.task, pending)}: no Job "
                        f"{int((now - pending).total_seconds())}s after its time",
                    )
                    late_since = rfc3339(pending)
                book.problems.append(("RunLate", f"task {config.task!r}: no Job yet for {rfc3339(pending)}"))
            else:
                book.wake(grace_end)
        settles(pending, next_fire(schedule, pending))  # missed, or skipped (suspended, blocked), late or not
    upcoming = following(now)
    if upcoming is not None:  # its grace may end before the slack: it is late then, not 15 s later
        book.wake(upcoming + min(SETTLE_SLACK, timedelta(seconds=config.grace)))
        if upcoming in job_times:  # its Job seen before its time (the API server's clock ahead): settled at it
            book.wake(upcoming)
    return late_since


def health(task: str, recent: Sequence[RunRecord]) -> list[tuple[str, str]]:
    """What the RunsHealthy condition says of the recent runs: (reason, message), newest first."""
    problems: list[tuple[str, str]] = []
    for entry in recent:
        if entry.state == "Missed":
            problems.append(("MissedRun", f"task {task!r}: missed {entry.key}"))
        elif entry.state == "Failed":
            why = f" ({entry.failure})" if entry.failure else ""
            problems.append(("RunFailed", f"task {task!r}: run {entry.key} failed{why}"))
        if (entry.duplicates or 0) > (entry.absorbed or 0):  # a duplicate its claim absorbed did nothing
            problems.append(("DuplicateRun", f"task {task!r}: {entry.key} ran {(entry.duplicates or 0) + 1} times"))
        if entry.stuck and entry.state != "Active":
            problems.append(("StuckRun", f"task {task!r}: run {entry.key} was stuck"))
    return problems


def _settled(record: JobRecord, checked: datetime, now: datetime) -> bool:
    """Nothing of this gone Job can matter any more: its time, and the span it was active, are settled. A Job
    started outside the CronJob controller (a kind) blocks no fire, and its time is never settled by it: once
    it has finished, nothing of it is left."""
    if record.kind is not None:
        return bool(record.finished)
    return (parse_time(record.scheduled_time) or now) <= checked and (
        parse_time(record.active_until) or checked
    ) <= checked


def _seconds(start: datetime, finish: str | None, now: datetime) -> float:
    end = parse_time(finish) or now
    return max(0.0, (end - start).total_seconds())


def _missed_times(
    schedule: Schedule,
    after: datetime,
    until: datetime,
    ran: set[datetime],
    blocked: Sequence[tuple[datetime, datetime]],
    missed: int,
    limit: int = RECENT,
) -> list[datetime]:
    """The latest (at most ``limit``) missed times in (after, until], newest first, walking back a bounded
    number of fires."""
    found: list[datetime] = []
    current: datetime | None = until
    walked = 0
    repeats = set(repeats_between(schedule, after, until))
    while current is not None and current > after and len(found) < min(limit, missed) and walked < WALK_LIMIT:
        if current not in ran and current not in repeats and not _within(current, blocked):
            found.append(current)
        current = previous_fire(schedule, current - timedelta(seconds=1))
        walked += 1
    return found


MESSAGE_MAX = 1024
_TITLES: dict[LedgerReason, str] = {
    "RunLate": "run late",
    "DuplicateRun": "duplicate run",
    "RunFailed": "run failed",
    "DuplicateAbsorbed": "duplicate absorbed by the claim (it did nothing: another run of its time did the work)",
    "StuckRun": "run stuck",
    "RunNotStarted": "run not started",
    "OddJob": "Job not counted: its scheduled time is not one the cluster stated (its finalizer is released)",
    "KeyNotInjected": "Job admitted without its idempotency key (the webhook did not run; the app can derive "
    "the key with `python -m appschedule key`)",
}


def _event(reason: LedgerReason, task: str, notes: list[Note]) -> LedgerEvent:
    """One Event per task and reason per step, whatever the number of runs: its message is bounded."""
    count = sum(note.count for note in notes)
    if reason == "MissedRun":
        message = f"task {task!r}: {notes[0].text}" if len(notes) == 1 else f"task {task!r}: {count} missed"
        return LedgerEvent("Warning", reason, task, count, message[:MESSAGE_MAX])
    shown = "; ".join(note.text for note in notes[:3]) + (f"; and {len(notes) - 3} more" if len(notes) > 3 else "")
    many = f" ({len(notes)})" if len(notes) > 1 else ""
    message = f"task {task!r}: {_TITLES[reason]}{many}: {shown}"
    kind: EventType = "Normal" if reason == "DuplicateAbsorbed" else "Warning"
    return LedgerEvent(kind, reason, task, count, message[:MESSAGE_MAX])


def totals(tasks: Mapping[str, TaskStatus]) -> dict[str, int]:
    """The AppSchedule's printer-column totals across its tasks."""
    sums = {"missed": 0, "duplicates": 0, "failed": 0}
    for status in tasks.values():
        if status.counts is not None:
            for name in sums:
                sums[name] = min(COUNT_MAX, sums[name] + getattr(status.counts, name))
    return sums
