"""Runs started outside the CronJob controller: by hand (kubectl appschedule run/rerun), by a backfill, and
by the operator for fires missed within ``catchUpWindow``. Pure: the Job each of them is, and a backfill's
progress as a function of its request, the task's schedule, the Jobs in the view and ``now``.

Every such Job is the task's CronJob's job template with two annotations: ``appschedule.dev/scheduled-time``
(the key webhook keys the run from it) and ``appschedule.dev/run-kind`` (the ledger counts it as that kind).

A backfill keeps no progress of its own: its Jobs are named by fire (``naming.backfill_job_name``), owned by
the AppSchedule (so no CronJob history limit deletes them) and kept until the backfill is removed from the
spec, so what ran is what the view holds. A create that an earlier leader already made is refused as
AlreadyExists: a SIGKILL at any point neither loses nor repeats a fire. Fires start oldest first, at most
``parallel`` at once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import blackout, keys, naming
from .keys import parse_time, rfc3339
from .models import BACKFILL_FIRES_MAX, BackfillStatus, duration_seconds

__all__ = ["duration_seconds"]
from .schedule import Schedule, next_fire, previous_fire, repeat_of
from .view import JobView


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def job_from(
    cronjob: Mapping[str, Any],
    kind: str,
    scheduled: datetime,
    *,
    name: str | None = None,
    owner: Mapping[str, Any] | None = None,
    backfill: str | None = None,
) -> dict[str, Any]:
    """The Job of a run started outside the CronJob controller: the CronJob's template, as ``kubectl create job
    --from=cronjob`` makes it, marked with its kind and scheduled time. Named ``name`` (else generated from
    the CronJob's) and owned by ``owner`` (else the CronJob, as kubectl does)."""
    meta, spec = _dict(cronjob.get("metadata")), _dict(cronjob.get("spec"))
    template = _dict(spec.get("jobTemplate"))
    labels = {str(k): str(v) for k, v in _dict(_dict(template.get("metadata")).get("labels")).items()}
    annotations = {str(k): str(v) for k, v in _dict(_dict(template.get("metadata")).get("annotations")).items()}
    annotations |= {naming.ANNOTATION_SCHEDULED_TIME: keys.rfc3339(scheduled), naming.ANNOTATION_RUN_KIND: kind}
    if backfill:
        annotations[naming.ANNOTATION_BACKFILL] = backfill
    reference = dict(
        owner
        or {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "controller": True,
            "blockOwnerDeletion": True,
        }
    )
    metadata: dict[str, Any] = {
        "namespace": meta.get("namespace"),
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [reference],
    }
    if name:
        metadata["name"] = name
    else:
        metadata["generateName"] = f"{str(meta.get('name'))[:40].rstrip('-.')}-{kind}-"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": dict(_dict(template.get("spec")))}


def backfill_fires(
    schedule: Schedule, start: datetime, end: datetime, limit: int = BACKFILL_FIRES_MAX
) -> list[datetime]:
    """The fires in [start, end], oldest first (a DST fall-back's repeat is not a fire of its own: its key is
    the first one's); ValueError when there are more than ``limit``. Remembered for the last 256 ranges: every
    plan of an AppSchedule with a backfill asks again."""
    found = _fires(schedule, start, end, limit)
    if isinstance(found, str):
        raise ValueError(found)
    return list(found)


@functools.lru_cache(maxsize=256)
def _fires(schedule: Schedule, start: datetime, end: datetime, limit: int) -> tuple[datetime, ...] | str:
    found: list[datetime] = []
    start = start.replace(microsecond=0)
    moment = start if previous_fire(schedule, start) == start else next_fire(schedule, start)  # from 1970-01-01 too
    while moment is not None and moment <= end:
        if repeat_of(schedule, moment) is None:
            found.append(moment)
            if len(found) > limit:
                return f"more than {limit} fires between {rfc3339(start)} and {rfc3339(end)}"
        moment = next_fire(schedule, moment)
    return tuple(found)


@dataclass(frozen=True)
class BackfillRequest:
    """One entry of spec.backfills, as read (any field may be wrong: ``problem`` says which)."""

    name: str
    task: str
    start: datetime | None
    end: datetime | None
    parallel: int
    problem: str | None = None
    include_blackouts: bool = False

    @classmethod
    def read(cls, entry: Any, index: int) -> BackfillRequest:
        raw = _dict(entry)
        name, task = str(raw.get("name") or ""), str(raw.get("task") or "")
        parallel = raw.get("parallel")
        parallel = parallel if isinstance(parallel, int) and not isinstance(parallel, bool) and parallel > 0 else 1
        start = parse_time(raw["from"]) if isinstance(raw.get("from"), str) else None
        end = parse_time(raw["to"]) if isinstance(raw.get("to"), str) else None
        where = f"spec.backfills[{index}]"
        problem = None
        if not name or not task:
            problem = f"{where}: name and task are required"
        elif start is None:
            problem = f"{where}.from: not an RFC 3339 time: {raw.get('from')!r}"
        elif end is None:
            problem = f"{where}.to: not an RFC 3339 time: {raw.get('to')!r}"
        elif end < start:
            problem = f"{where}: to ({rfc3339(end)}) is before from ({rfc3339(start)})"
        return cls(name, task, start, end, min(parallel, 10), problem, raw.get("includeBlackouts") is True)

    @property
    def identity(self) -> str:
        """What its Jobs carry (``appschedule.dev/backfill``): its name and a hash of its task and range, so
        that a backfill removed and added again with the same name but another range is a new one."""
        span = (self.task, rfc3339(self.start) if self.start else "", rfc3339(self.end) if self.end else "")
        return f"{self.name}.{naming.short_hash(*span, length=6)}"


def _said(text: str, limit: int) -> str:
    """Text for the status, which holds printable ASCII only and bounds each string: anything else escaped."""
    escaped = text.encode("ascii", "backslashreplace").decode()
    return "".join(c if " " <= c <= "~" else " " for c in escaped)[:limit]


@dataclass
class BackfillStep:
    status: BackfillStatus
    starts: list[datetime] = field(default_factory=list)


def backfill_step(
    request: BackfillRequest,
    schedule: Schedule | None,
    jobs: Sequence[JobView],
    now: datetime,
    taken: Mapping[datetime, str] | None = None,
    windows: Sequence[blackout.Window] = (),
) -> BackfillStep:
    """A backfill's progress from its Jobs in the view, and the fires to start now: the oldest that have no
    Job, so that at most ``parallel`` of its runs are active. ``taken``: fires an earlier backfill of the task
    (by spec order) runs, each with that backfill's name: never started twice, and said in the status."""

    name, task = _said(request.name, 63), _said(request.task, 63)

    def invalid(message: str) -> BackfillStep:
        return BackfillStep(BackfillStatus(name=name, task=task, state="Invalid", message=_said(message, 256)))

    if request.problem:
        return invalid(request.problem)
    if schedule is None:
        return invalid(f"task {request.task!r} has no CronJob running (is it declared and valid?)")
    assert request.start is not None and request.end is not None
    if request.end > now:
        return invalid(f"to ({rfc3339(request.end)}) is in the future: a backfill runs past fires only")
    try:
        fires = backfill_fires(schedule, request.start, request.end)
    except ValueError as error:
        return invalid(f"{error}; split the range (at most {BACKFILL_FIRES_MAX} fires per backfill)")
    dark: list[datetime] = []
    if windows and not request.include_blackouts and fires:  # a blackout's fires are not run unless asked
        spans = blackout.fire_spans(schedule, windows, fires[0] - blackout.ONE, fires[-1])
        dark = [t for t in fires if any(a < t <= b for a, b in spans)]
        fires = [t for t in fires if t not in set(dark)]
    others = [t for t in fires if taken and t in taken]
    fires = [t for t in fires if not (taken and t in taken)]
    said = [f"{len(dark)} of its fires are inside blackouts: not run (includeBlackouts runs them)"] if dark else []
    if others and taken:
        said.append(f"{len(others)} of its fires are backfill {taken[others[0]]!r}'s: not run twice")
    mine = [j for j in jobs if j.annotations.get(naming.ANNOTATION_BACKFILL) == request.identity]
    have = {j.annotations.get(naming.ANNOTATION_SCHEDULED_TIME) for j in mine}
    active = sum(1 for j in mine if not (j.outcome or j.deleting))
    todo = [t for t in fires if rfc3339(t) not in have]
    starts = todo[: max(0, request.parallel - active)]
    started = len(fires) - len(todo)
    done = not todo and active == 0
    return BackfillStep(
        BackfillStatus(
            name=name,
            task=task,
            state="Complete" if done else "Running",
            fires=len(fires),
            started=started,
            active=active,
            succeeded=sum(1 for j in mine if j.outcome == "Complete"),
            failed=sum(1 for j in mine if j.outcome == "Failed"),
            next=rfc3339(todo[0]) if todo else None,
            message=_said("; ".join(said), 256) if said else None,
        ),
        starts,
    )
