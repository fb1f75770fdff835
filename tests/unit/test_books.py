"""Nobody can freeze the books: a Job stating a time the cluster did not state, a backlog of any size, a
wall-clock time repeated at a fall-back with several fires in its hour (DESIGN "The ledger").

The ``Shell`` below does what the controller does with each step, and nothing more: it stores the status only
when ``status.changed`` says it must be written, and takes the ledger's finalizer off (marking the Job filed)
every Job the step releases. Every time-related test includes Europe/Berlin and the days around a transition."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from appschedule.core import admission, keys, naming, status
from appschedule.core.keys import rfc3339 as stamp
from appschedule.core.ledger import SETTLE_SLACK, TaskConfig, advance
from appschedule.core.models import JOBS_MAX, TaskStatus
from appschedule.core.schedule import fires_between, parse, repeat_of
from appschedule.core.view import JobView

from .test_ledger import CRONJOB, T0, config, counts, job
from .test_status_size import largest

FALL_BACK = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)  # Europe/Berlin: 03:00 CEST becomes 02:00 CET


def _dumped(task: TaskStatus) -> dict[str, Any]:
    return {"tasks": [task.model_dump(by_alias=True, exclude_none=True, mode="json")]}


@dataclass
class Shell:
    """The controller around ``advance``: writes a status only when it must, releases what the step says."""

    cfg: TaskConfig
    jobs: dict[str, JobView] = field(default_factory=dict)
    stored: TaskStatus | None = None
    reconciles: int = 0
    released: Counter[str] = field(default_factory=Counter)
    events: list[Any] = field(default_factory=list)

    def add(self, *made: JobView) -> None:
        for one in made:
            self.jobs[one.name] = one

    def reconcile(self, now: datetime) -> TaskStatus:
        self.reconciles += 1
        result = advance(self.stored, self.cfg, list(self.jobs.values()), now)
        old = _dumped(self.stored) if self.stored is not None else {}
        if self.stored is None or status.changed(_dumped(result.status), old):
            self.stored = result.status
        for name in result.release:
            self.released[name] += 1
            held = self.jobs[name]
            annotations = {**held.annotations, naming.ANNOTATION_FILED: "true"}
            self.jobs[name] = dataclasses.replace(held, finalizer=False, annotations=annotations)
        self.events.extend(result.events)
        assert self.stored is not None
        return self.stored

    def holding(self) -> list[str]:
        return sorted(n for n, j in self.jobs.items() if j.finalizer)


def claiming(name: str, claimed: str, created: datetime, **extra: Any) -> JobView:
    """A Job an author with Job rights made: the task's labels and a scheduled time of their choosing."""
    annotations = {naming.ANNOTATION_SCHEDULED_TIME: claimed, naming.ANNOTATION_IDEMPOTENCY_KEY: f"report@{claimed}"}
    return dataclasses.replace(job(None, created=created, name=name, **extra), annotations=annotations)


# -- 1. a time that is not the cluster's never holds a record


def test_jobs_claiming_a_far_future_time_are_reported_once_and_let_go_and_every_fire_is_counted() -> None:
    """Six Jobs claiming 2099 (as many as the status remembers) fill nothing: over the next 60 fires every run
    is counted and every finalizer released, lastRun is never 2099, and each hostile Job is said once."""
    shell = Shell(config("* * * * *"))
    shell.reconcile(T0 - timedelta(seconds=30))
    hostile = [claiming(f"evil-{i}", "2099-01-01T00:00:00Z", T0 - timedelta(seconds=20)) for i in range(JOBS_MAX)]
    shell.add(*hostile)
    shell.reconcile(T0 - timedelta(seconds=10))
    for minute in range(60):
        fire = T0 + timedelta(minutes=minute)
        shell.add(job(fire))
        shell.reconcile(fire + timedelta(seconds=2))
        shell.add(job(fire, outcome="Complete"))
        shell.reconcile(fire + timedelta(seconds=8))
    final = shell.reconcile(T0 + timedelta(minutes=60, seconds=20))
    assert counts(final) == {"runs": 60, "succeeded": 60, "refused": JOBS_MAX}
    assert final.last_run is not None and final.last_run.scheduled_time.startswith("2026-09-11T15:59")
    assert shell.holding() == [] and all(shell.released[j.name] == 1 for j in hostile)
    odd = [e for e in shell.events if e.reason == "OddJob"]
    assert sum(e.count for e in odd) == JOBS_MAX and "2099-01-01T00:00:00Z" in odd[0].message
    assert not any("2099" in (r.scheduled_time) for r in final.jobs or [])


@pytest.mark.parametrize(
    ("schedule", "zone", "claimed", "why"),
    [
        ("0 * * * *", "UTC", "2026-09-11T14:30:00Z", "not a fire"),  # an hourly task's half hour
        ("0 * * * *", "UTC", "2026-09-11T14:00:30Z", "not a fire"),  # seconds past a fire
        ("30 2 * * *", "Europe/Berlin", "2026-10-25T00:31:00Z", "not a fire"),  # the fall-back night, a minute off
        ("* * * * *", "UTC", "2026-09-11T15:06:00Z", "after the Job was created"),  # a fire, 6 minutes ahead
        ("30 2 * * *", "Europe/Berlin", "2027-03-28T00:30:00Z", "after the Job was created"),  # a future fire
    ],
)
def test_a_stated_time_that_is_not_a_past_fire_is_refused(schedule: str, zone: str, claimed: str, why: str) -> None:
    parsed = parse(schedule, zone)
    created = T0 if not claimed.startswith("2026-10") else FALL_BACK + timedelta(hours=2)
    found = keys.scheduled_time(
        annotations={naming.ANNOTATION_SCHEDULED_TIME: claimed},
        job_name="evil",
        cronjob=CRONJOB,
        created=created,
        schedule=parsed,
    )
    assert found.problem is not None and why in found.problem and found.refused == keys.parse_time(claimed)
    assert found.source == "created" and found.time <= created  # keyed as a Job made by hand at its creation
    cfg = TaskConfig(task="report", cronjob=CRONJOB, schedule=parsed)
    base = advance(None, cfg, [], created - timedelta(days=2)).status
    result = advance(base, cfg, [claiming("evil", claimed, created)], created + timedelta(seconds=5))
    assert result.release == ["evil"] and not result.status.jobs and result.status.counts is not None
    assert result.status.counts.refused == 1 and result.status.counts.runs == 0


def test_a_manual_run_states_its_own_time_but_never_a_future_one() -> None:
    parsed = parse("0 * * * *")
    manual = {naming.ANNOTATION_SCHEDULED_TIME: stamp(T0 + timedelta(seconds=7)), naming.ANNOTATION_RUN_KIND: "manual"}
    found = keys.scheduled_time(annotations=manual, job_name="m", cronjob=CRONJOB, created=T0, schedule=parsed)
    assert found.problem is None and found.time == T0 + timedelta(seconds=7)
    ahead = {**manual, naming.ANNOTATION_SCHEDULED_TIME: "2099-01-01T00:00:07Z"}
    found = keys.scheduled_time(annotations=ahead, job_name="m", cronjob=CRONJOB, created=T0, schedule=parsed)
    assert found.problem is not None and "after the Job was created" in found.problem


def test_a_name_claiming_a_future_minute_is_refused() -> None:
    """The controller's naming, ``<cronjob>-<minutes>``, used by hand for 2160."""
    found = keys.scheduled_time(
        annotations={}, job_name=f"{CRONJOB}-99999999", cronjob=CRONJOB, created=T0, schedule=parse("* * * * *")
    )
    assert found.problem is not None and found.refused is not None and found.refused.year == 2160


def test_the_key_webhook_keys_a_refused_time_from_the_creation_and_sets_no_finalizer() -> None:
    """The author's annotation is left as written (the ledger sees the same refusal whether or not the webhook
    ran); the containers get the key of the Job's creation rounded down; nothing holds the Job."""
    body = {
        "metadata": {
            "name": "evil",
            "labels": {naming.LABEL_TASK: "report", naming.LABEL_APPSCHEDULE: "shop"},
            "annotations": {naming.ANNOTATION_SCHEDULED_TIME: "2099-01-01T00:00:00Z"},
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "app", "env": [{"name": "APPSCHEDULE_SCHEDULE", "value": "0 * * * *"}]}]
                }
            }
        },
    }
    patch = admission.mutate_job(body, T0 + timedelta(minutes=5))
    assert "finalizers" not in patch["metadata"]
    assert naming.ANNOTATION_SCHEDULED_TIME not in patch["metadata"]["annotations"]
    assert patch["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY] == keys.key_of("report", T0)
    env = {e["name"]: e["value"] for e in patch["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["APPSCHEDULE_IDEMPOTENCY_KEY"] == "report@2026-09-11T15:00:00Z"


def test_jobs_of_the_schedule_before_a_change_are_let_go_quietly() -> None:
    """A Job of the old schedule finishing after the change is no author's claim: not counted, not reported."""
    old = job(T0 + timedelta(minutes=7), outcome="Complete")  # a fire of */7, not of */10
    cfg = config("*/10 * * * *")
    base = advance(None, cfg, [], T0 + timedelta(minutes=8)).status
    result = advance(base, cfg, [old], T0 + timedelta(minutes=8, seconds=5))
    assert result.release == [old.name] and result.events == [] and counts(result.status) == {}


# -- 2. a backlog of any size is counted in one step


def _backlog(schedule: str, zone: str, outage: timedelta, after: datetime) -> tuple[Shell, list[datetime]]:
    """The operator was down for ``outage`` from ``after``: every fire ran and finished, none was recorded."""
    shell = Shell(TaskConfig(task="report", cronjob=CRONJOB, schedule=parse(schedule, zone)))
    shell.reconcile(after)
    fires = list(fires_between(shell.cfg.schedule, after, after + outage))
    shell.add(*(job(f, outcome="Complete") for f in fires))
    shell.reconciles = 0
    return shell, fires


@pytest.mark.parametrize(
    ("schedule", "zone", "outage", "after"),
    [
        ("0 * * * *", "Europe/Berlin", timedelta(hours=48), FALL_BACK - timedelta(hours=24)),  # hourly, 48 h
        ("30 2 * * *", "Europe/Berlin", timedelta(days=14), FALL_BACK - timedelta(days=7)),  # daily, 14 days
        ("*/5 * * * *", "UTC", timedelta(hours=24), T0),  # 288 Jobs
    ],
)
def test_a_backlog_after_an_outage_is_counted_in_one_step(
    schedule: str, zone: str, outage: timedelta, after: datetime
) -> None:
    """Every finished Job is counted and let go by the first step after the outage, however many the status
    could remember: the mark (filedThrough) passes them in the order they were created."""
    shell, fires = _backlog(schedule, zone, outage, after)
    assert len(fires) > JOBS_MAX
    final = shell.reconcile(after + outage + timedelta(minutes=1))
    repeated = sum(1 for f in fires if repeat_of(shell.cfg.schedule, f))  # the fall-back's second 02:30: its key
    expected = {"runs": len(fires) - repeated, "succeeded": len(fires) - repeated, "duplicates": repeated}
    assert counts(final) == {k: v for k, v in expected.items() if v}
    assert shell.holding() == [] and set(shell.released.values()) == {1}
    # records only for the newest runs, whose time or span the step has yet to settle; the mark stands for the rest
    assert all(r.finished for r in final.jobs or []) and len(final.jobs or []) <= 2
    assert final.filed_through is not None
    assert final.filed_through.created in {stamp(f + timedelta(seconds=1)) for f in sorted(fires)[-3:]}
    again = shell.reconcile(after + outage + timedelta(minutes=2))  # nothing is counted twice
    assert counts(again) == counts(final) and set(shell.released.values()) == {1}


def test_a_backlog_whose_releases_did_not_land_is_let_go_and_never_counted_twice() -> None:
    """The status that counted the backlog was written, then the operator stopped before the releases: the next
    step lets every Job go (the mark says they are counted) and counts nothing again, also a Job whose filed
    annotation someone removed later."""
    shell, fires = _backlog("0 * * * *", "Europe/Berlin", timedelta(hours=48), FALL_BACK - timedelta(hours=24))
    now = FALL_BACK + timedelta(days=1, minutes=1)
    result = advance(shell.stored, shell.cfg, list(shell.jobs.values()), now)
    shell.stored = result.status  # written; none of its releases landed
    assert len(result.release) == len(fires)
    final = shell.reconcile(now + timedelta(seconds=5))
    assert counts(final) == counts(result.status) and shell.holding() == []
    first = shell.jobs[min(shell.jobs)]
    shell.jobs[first.name] = dataclasses.replace(first, annotations={**first.annotations, naming.ANNOTATION_FILED: ""})
    again = shell.reconcile(now + timedelta(minutes=5))
    assert counts(again) == counts(final)


@pytest.mark.parametrize("kind", ["x", "catch-up"])
def test_copies_of_a_fire_with_any_run_kind_keep_the_records_within_their_bound(kind: str) -> None:
    """Any author's Jobs may carry any run-kind annotation: one the ledger does not know makes a Job a run like
    any other, and a second catch-up of a fire is its duplicate; both are counted past the mark only once their
    time and span are settled. Eight finished copies of the fire just come (their span not settled yet) never
    take more than JOBS_MAX records (found by review: with catch-up, 7 records and a status refused)."""
    shell = Shell(TaskConfig(task="report", cronjob=CRONJOB, schedule=parse("* * * * *", "Europe/Berlin")))
    fire = FALL_BACK + timedelta(minutes=30)
    shell.reconcile(fire - timedelta(hours=1))
    for index in range(8):
        made = job(fire, name=f"copy-{index}", created=fire + timedelta(seconds=1), outcome="Complete")
        shell.add(dataclasses.replace(made, annotations={**made.annotations, naming.ANNOTATION_RUN_KIND: kind}))
    final = shell.reconcile(fire + timedelta(seconds=25))
    assert len(final.jobs or []) <= JOBS_MAX
    TaskStatus.model_validate(_dumped(final)["tasks"][0])  # a status the schema takes
    later = shell.reconcile(fire + timedelta(minutes=3))
    assert counts(later)["runs"] == 1 and counts(later)["duplicates"] == 7 and shell.holding() == []


def test_the_run_of_the_fire_just_come_is_counted_beside_a_backlog() -> None:
    """Ten finished hourly runs of an outage and the current fire's run, still active: the backlog's Jobs
    counted past the mark never count as active records, so the current run is counted in the same step (found
    by review: it waited, with no wake, for some later event)."""
    shell = Shell(TaskConfig(task="report", cronjob=CRONJOB, schedule=parse("0 * * * *", "Europe/Berlin")))
    now = FALL_BACK + timedelta(hours=3)
    shell.reconcile(now - timedelta(hours=10, seconds=30))
    shell.add(*(job(now - timedelta(hours=h), outcome="Complete") for h in range(10, 0, -1)), job(now))
    final = shell.reconcile(now + timedelta(seconds=30))
    assert counts(final) == {"runs": 11, "succeeded": 10}


def test_a_mark_after_now_in_a_status_written_by_hand_counts_nothing_as_done() -> None:
    """filedThrough is the ledger's own: a status stating one in 2099 does not stop the Jobs before it from
    being counted."""
    shell, fires = _backlog("*/5 * * * *", "UTC", timedelta(hours=2), T0)
    assert shell.stored is not None
    mark = {"created": "2099-01-01T00:00:00Z", "name": "zzz"}
    shell.stored = TaskStatus.model_validate({**_dumped(shell.stored)["tasks"][0], "filedThrough": mark})
    final = shell.reconcile(T0 + timedelta(hours=2, minutes=1))
    assert counts(final)["runs"] == len(fires) and shell.holding() == []
    assert final.filed_through is not None and final.filed_through.created < "2099"


# -- 3. a wall-clock time repeated at a fall-back, in an hour with several fires


@pytest.mark.parametrize(("schedule", "repeats"), [("0,30 2 * * *", 2), ("*/20 2 * * *", 3), ("* 2 * * *", 60)])
def test_every_repeated_fire_of_the_hour_takes_the_first_ones_key(schedule: str, repeats: int) -> None:
    parsed = parse(schedule, "Europe/Berlin")
    fires = list(fires_between(parsed, FALL_BACK - timedelta(hours=2), FALL_BACK + timedelta(hours=2)))
    assert len(fires) == 2 * repeats
    found = [
        keys.scheduled_time(
            annotations={naming.CRONJOB_SCHEDULED_TIMESTAMP: stamp(f)},
            job_name="x",
            cronjob=None,
            created=f + timedelta(seconds=1),
            schedule=parsed,
        )
        for f in fires
    ]
    assert all(f.problem is None for f in found)
    assert [f.key("t") for f in found[repeats:]] == [f.key("t") for f in found[:repeats]]
    assert len({f.time for f in found}) == repeats


def test_catch_up_starts_each_repeated_wall_time_once() -> None:
    """The controller was down over the fall-back night: `0,30 2` had four fires, two wall-clock times."""
    cfg = TaskConfig(task="report", cronjob=CRONJOB, schedule=parse("0,30 2 * * *", "Europe/Berlin"), catch_up=6 * 3600)
    base = advance(None, cfg, [], FALL_BACK - timedelta(hours=2)).status
    result = advance(base, cfg, [], FALL_BACK + timedelta(hours=1))
    assert result.status.catch_up == ["2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z"]
    assert counts(result.status) == {}


# -- any Jobs, any outages: the ordinary fires are counted as without them, and nothing is held


NIGHT = FALL_BACK - timedelta(hours=2)  # Europe/Berlin's fall-back night: 02:00-03:00 comes twice
TASK_SHARE = len(json.dumps(largest(TaskStatus, [], "task")).encode())  # the largest a task's status can be
HOSTILE = ("future", "far-future", "not-a-fire", "garbage", "duplicate", "past-fire-refused")


@dataclass(frozen=True)
class Planned:
    """A Job as it will be: created, finished (or never), leaving the task's view when its labels go."""

    name: str
    created: datetime
    finish: datetime | None
    outcome: Any
    annotations: dict[str, str]
    kind: str  # "fire" (the CronJob controller's) or one of HOSTILE
    leaves: datetime | None = None


def _hostile(
    index: int, kind: str, minute: int, lasts: int | None, leaves: int | None, fires: list[datetime]
) -> Planned:
    created = NIGHT + timedelta(minutes=minute, seconds=7)
    stated = {
        "future": stamp(created + timedelta(minutes=30)),
        "far-future": "2099-01-01T00:00:00Z",
        "not-a-fire": stamp(created.replace(second=0) - timedelta(minutes=(created.minute - 5) % 10 or 10)),  # :x5
        "garbage": "yesterday",
        "past-fire-refused": stamp(created.replace(second=30)),
    }.get(kind)
    annotations = {naming.ANNOTATION_SCHEDULED_TIME: stated} if stated else {}
    if kind == "duplicate":  # a hand-made copy of a fire that already has its run: created after it, ends soon
        fire = max((f for f in fires if f <= created - timedelta(minutes=1)), default=None)
        if fire is None or (created - fire) > timedelta(minutes=10):  # that fire got no Job: nothing to copy
            created, fire = NIGHT - timedelta(minutes=1), None  # it comes and goes before tracking began
        annotations = {naming.CRONJOB_SCHEDULED_TIMESTAMP: stamp(fire)} if fire else {}
        finish: datetime | None = created + timedelta(seconds=50)
    else:
        finish = None if lasts is None else created + timedelta(minutes=lasts)
    gone = None if leaves is None else created + timedelta(minutes=leaves)
    return Planned(f"hostile-{index}", created, finish, "Complete", annotations, kind, gone)


def _simulate(
    cfg: TaskConfig, planned: list[Planned], operator_down: list[tuple[int, int]], minutes: int
) -> tuple[TaskStatus, set[str], list[str]]:
    """Reconciles twice a minute while the operator is up, from the status it last wrote, as the controller
    does (a restart of the operator goes on from that status too: it keeps nothing else). Returns the status,
    the Jobs it let go, and what went wrong on the way."""
    released: set[str] = set()
    seen: set[str] = set()
    stored: TaskStatus | None = None
    problems: list[str] = []
    for second in range(0, (minutes + 15) * 60, 60):
        now = NIGHT + timedelta(seconds=second)
        if any(start * 60 <= second < end * 60 for start, end in operator_down):
            continue
        jobs = []
        for p in planned:
            if p.created > now or (p.leaves is not None and p.leaves <= now):
                if p.leaves is not None and p.leaves <= now:
                    released.add(p.name)  # the (namespace, "") reconcile lets it go (tests/integration)
                continue
            keyed = keys.scheduled_time(
                annotations=p.annotations, job_name=p.name, cronjob=CRONJOB, created=p.created, schedule=cfg.schedule
            )
            done = p.finish is not None and p.finish <= now
            view = job(None, created=p.created, name=p.name, outcome=p.outcome if done else None)
            annotations = {**p.annotations, **({naming.ANNOTATION_FILED: "true"} if p.name in released else {})}
            if keyed.problem is None:
                annotations[naming.ANNOTATION_IDEMPOTENCY_KEY] = keyed.key("report")
            finish_time = stamp(p.finish) if done and p.finish else None
            jobs.append(
                dataclasses.replace(
                    view,
                    annotations=annotations,
                    finalizer=keyed.problem is None and p.name not in released,  # as the key webhook sets it
                    finish_time=finish_time,
                )
            )
        seen |= {j.name for j in jobs}
        result = advance(stored, cfg, jobs, now)
        old = _dumped(stored) if stored is not None else {}
        if stored is None or status.changed(_dumped(result.status), old):
            stored = result.status
            body = stored.model_dump(by_alias=True, exclude_none=True, mode="json")
            TaskStatus.model_validate(body)  # the API server's schema takes it
            if len(json.dumps(body).encode()) > TASK_SHARE:
                problems.append(f"{now}: a task's status of {len(json.dumps(body))} bytes, over its share")
        released |= set(result.release)
        in_view = {j.name for j in jobs}
        for record in stored.jobs or []:
            if record.finished and record.name in in_view and record.name not in released:
                problems.append(f"{now}: {record.name} is counted and filed but still held")
    assert stored is not None
    held = [p.name for p in planned if p.name in seen and p.created <= NIGHT + timedelta(minutes=minutes + 14)]
    held = [n for n in held if n not in released and not n.startswith("hostile")]
    problems += [f"{n} still held at the end" for n in held]
    return stored, seen, problems


@given(
    hostile=st.lists(
        st.tuples(
            st.sampled_from(HOSTILE),
            st.integers(0, 170),  # created at this minute of the night
            st.one_of(st.none(), st.integers(1, 90)),  # lasts (None: never ends)
            st.one_of(st.none(), st.integers(0, 60)),  # its labels are removed after this many minutes
        ),
        max_size=12,
    ),
    controller_down=st.lists(st.tuples(st.integers(0, 170), st.integers(1, 40)), max_size=2),
    operator_down=st.lists(st.tuples(st.integers(0, 170), st.integers(1, 60)), max_size=2),
    failing=st.sets(st.integers(0, 17), max_size=4),
)
@example(  # a Job stating a time 30 minutes after its creation, both before the operator's first look (found)
    hostile=[("future", 0, None, None)], controller_down=[], operator_down=[(0, 31)], failing=set()
)
@settings(max_examples=25, deadline=None)
def test_any_jobs_with_any_outages_leave_the_ordinary_fires_counted_and_nothing_held(
    hostile: list[tuple[str, int, int | None, int | None]],
    controller_down: list[tuple[int, int]],
    operator_down: list[tuple[int, int]],
    failing: set[int],
) -> None:
    """Three hours of `*/10 * * * *` over Berlin's fall-back night (02:00-03:00 twice): the controller's Jobs
    for every fire outside its outages, hostile Jobs of every kind (in the future, far in it, not a fire, not a
    time, a seconds-past-a-fire claim, a hand-made copy of a fire), some never ending, some losing their labels,
    and outages of the operator. Against the same night without the hostile Jobs: the same runs, successes,
    failures, misses, late and skipped fires; each refused Job counted once; nothing counted left held; no
    status over its share."""
    cfg = TaskConfig(task="report", cronjob=CRONJOB, schedule=parse("*/10 * * * *", "Europe/Berlin"), grace=60)
    minutes = 180
    fires = list(fires_between(cfg.schedule, NIGHT, NIGHT + timedelta(minutes=minutes)))
    down = [(NIGHT + timedelta(minutes=s), NIGHT + timedelta(minutes=s + d)) for s, d in controller_down]
    ordinary = [
        Planned(
            f"{CRONJOB}-{int(f.timestamp()) // 60}",
            f + timedelta(seconds=1),
            f + timedelta(seconds=40),
            "Failed" if i in failing else "Complete",
            {naming.CRONJOB_SCHEDULED_TIMESTAMP: stamp(f)},
            "fire",
        )
        for i, f in enumerate(fires)
        if not any(start <= f < end for start, end in down)
    ]
    attack = [_hostile(i, *h, fires=[p.created.replace(second=0) for p in ordinary]) for i, h in enumerate(hostile)]
    baseline, _, clean = _simulate(cfg, ordinary, operator_down, minutes)
    attacked, seen, problems = _simulate(cfg, [*ordinary, *attack], operator_down, minutes)
    assert clean == [] and problems == []
    plain = {k: v for k, v in counts(baseline).items() if k not in ("duplicates", "refused")}
    assert {k: v for k, v in counts(attacked).items() if k not in ("duplicates", "refused")} == plain
    # the first reconcile begins tracking: a Job stating a time and made for a fire, both before it, is of the time
    # before the books (as an ordinary Job of then): not counted, refused or not
    up = next(m for m in range(minutes + 15) if not any(s <= m < s + d for s, d in operator_down))
    since = NIGHT + timedelta(minutes=up)

    def before_books(h: Planned) -> bool:
        timed = keys.scheduled_time(
            annotations=h.annotations, job_name=h.name, cronjob=CRONJOB, created=h.created, schedule=cfg.schedule
        )
        return timed.refused is not None and timed.refused < since and timed.time < since

    refusable = [h for h in attack if h.kind != "duplicate" and h.name in seen and not before_books(h)]
    assert counts(attacked).get("refused", 0) == len(refusable)
    copies = [h for h in attack if h.kind == "duplicate" and h.name in seen and h.created > NIGHT]
    assert counts(baseline).get("duplicates", 0) <= counts(attacked).get("duplicates", 0)
    assert counts(attacked).get("duplicates", 0) <= counts(baseline).get("duplicates", 0) + len(copies)


def test_thirteen_finished_backfill_runs_of_two_backfills_are_counted_in_one_step() -> None:
    """Backfill runs block no fire: two backfills' 13 finished runs (7 of them were uncounted after 30
    reconciles) are counted as soon as they are older than the slack, in one step."""
    shell = Shell(TaskConfig(task="report", cronjob=CRONJOB, schedule=parse("0 * * * *", "Europe/Berlin")))
    now = FALL_BACK + timedelta(days=2)
    shell.reconcile(now)
    fires = list(fires_between(shell.cfg.schedule, FALL_BACK - timedelta(hours=8), FALL_BACK + timedelta(hours=5)))
    for index, fire in enumerate(fires[:13]):
        made = job(fire, name=f"fill-{index}", created=now + timedelta(seconds=5), outcome="Complete")
        annotations = {
            naming.ANNOTATION_SCHEDULED_TIME: stamp(fire),
            naming.ANNOTATION_RUN_KIND: "backfill",
            naming.ANNOTATION_BACKFILL: "a.1" if index < 7 else "b.2",
            naming.ANNOTATION_IDEMPOTENCY_KEY: keys.key_of("report", fire),
        }
        shell.add(dataclasses.replace(made, annotations=annotations))
    waking = advance(shell.stored, shell.cfg, list(shell.jobs.values()), now + timedelta(seconds=10))
    assert waking.wake_at == now + timedelta(seconds=5) + SETTLE_SLACK  # when the mark can pass
    early = shell.reconcile(now + timedelta(seconds=10))  # created 5 s ago: a Job created before them may yet appear
    assert counts(early) == {"backfilled": JOBS_MAX} and len(shell.holding()) == 13 - JOBS_MAX
    final = shell.reconcile(now + timedelta(seconds=5) + SETTLE_SLACK)  # older than the slack: the mark passes them
    assert counts(final) == {"backfilled": 13} and shell.holding() == [] and not final.jobs


def test_a_controller_manager_whose_clock_runs_ahead_still_has_its_runs_counted() -> None:
    """The stated time comes from the controller manager's clock, the creation from the API server's: a
    fire stated up to 5 minutes after its Job's creation is the cluster's statement, not a claim."""
    cfg = config("*/10 * * * *")
    base = advance(None, cfg, [], T0 - timedelta(minutes=10)).status
    skewed = job(T0, created=T0 - timedelta(minutes=4))
    result = advance(base, cfg, [skewed], T0 + timedelta(seconds=30))
    assert counts(result.status) == {"runs": 1} and result.events == []
