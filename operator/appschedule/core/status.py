"""The AppSchedule's status, built through the pydantic status models of models.py.

Building it through the models means nothing is written that the CRD's schema does not declare: the
API server would prune such a field, the next reconcile would see a difference, and write it again,
forever. Status tells what runs: a task's entry names the CronJob that really runs for it and the next
run *that CronJob* makes, also while its spec is invalid or its update was refused.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from . import blackout, render
from .keys import rfc3339
from .models import MESSAGE_MAX as MESSAGE_MAX
from .models import (
    STATUS_TASKS_MAX,
    AppScheduleStatus,
    BackfillStatus,
    Condition,
    DeploymentStatus,
    TaskStatus,
    printable,
)
from .render import SpecError
from .schedule import ScheduleError, next_fire, parse

REASONS = ("DeploymentNotFound", "WriteFailed", "InvalidSpec", "TaskConflict", "CalendarInvalid", "CalendarNotFound")


def summarize(errors: Sequence[SpecError], limit: int = MESSAGE_MAX) -> str:
    """One message for many errors: the same problem of several tasks is said once, naming the first
    tasks and how many more; the whole stays within ``limit`` characters."""
    groups: dict[tuple[str, str], list[SpecError]] = {}
    for error in errors:
        groups.setdefault((error.field, error.message), []).append(error)
    parts = []
    for (field, message), group in groups.items():
        tasks = [e.task for e in group if e.task]
        if len(tasks) <= 1:
            parts.append(str(group[0]))
            continue
        named = ", ".join(repr(t) for t in tasks[:3])
        more = f" and {len(tasks) - 3} more" if len(tasks) > 3 else ""
        parts.append(f"tasks {named}{more} ({field}): {message}")
    text = ""
    for i, part in enumerate(parts):
        candidate = f"{text}; {part}" if text else part
        rest = len(parts) - i - 1
        if len(candidate) + (len(f"; and {rest} more") if rest else 0) > limit:
            tail = f"; and {len(parts) - i} more" if text else ""
            return (text or part[: limit - 3] + "...") + tail
        text = candidate
    return text


def condition(
    previous: Sequence[Mapping[str, Any]],
    kind: str,
    status: Literal["True", "False", "Unknown"],
    reason: str,
    message: str,
    generation: Any,
    now: str,
) -> Condition:
    old = next((c for c in previous if c.get("type") == kind), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return Condition(
        type=kind,
        status=status,
        reason=reason,
        message=printable(message, MESSAGE_MAX),
        last_transition_time=since or now,
        observed_generation=generation,
    )


def ready_condition(
    errors: Sequence[SpecError], running: int, deployment: str, old: Mapping[str, Any], generation: Any, now: str
) -> Condition:
    previous = old.get("conditions") or []
    if errors:
        reasons = {e.reason for e in errors}
        reason = next(r for r in REASONS if r in reasons)
        return condition(previous, "Ready", "False", reason, summarize(errors), generation, now)
    message = f"{running} CronJob(s) match the spec and Deployment {deployment!r}"
    return condition(previous, "Ready", "True", "Reconciled", message, generation, now)


def next_run(cronjob_spec: Mapping[str, Any], now: datetime) -> datetime | None:
    """The next time a CronJob with this spec starts a run, as the CronJob controller computes it, past the
    blackouts its job template carries."""
    windows = blackout.of_template(cronjob_spec)
    if cronjob_spec.get("suspend") and not blackout.marked(cronjob_spec):  # suspended for a blackout: it ends
        return None
    try:
        schedule = parse(render.schedule_text(cronjob_spec), str(cronjob_spec.get("timeZone") or "UTC"))
    except ScheduleError:
        return None
    return blackout.next_allowed(schedule, windows, now) if windows else next_fire(schedule, now)


def _old_tasks(old: Mapping[str, Any], skip: Container[str] = ()) -> dict[str, TaskStatus]:
    """The tasks' entries of the status as it was, but those named in ``skip`` (their new entries are known)."""
    kept = {}
    for entry in old.get("tasks") or []:
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str) and entry["name"] in skip:
            continue  # (a name written by hand can be anything: a list is no key)
        try:
            task = TaskStatus.model_validate(entry)
        except ValidationError:
            continue
        kept[task.name] = task
    return kept


def build(
    *,
    old: Mapping[str, Any],
    generation: Any,
    ready: Condition,
    task_names: Iterable[str],
    running: Mapping[str, tuple[str, Mapping[str, Any]]],  # task -> (CronJob name, the spec it runs with)
    last_runs: Iterable[str],
    image: tuple[str, str] | None,
    task_count: int,
    now: datetime,
    ledgers: Mapping[str, TaskStatus] | None = None,
    runs_healthy: Condition | None = None,
    backfills: Sequence[BackfillStatus] = (),
) -> dict[str, Any]:
    """The whole status. ``ledgers`` are the tasks' entries as the ledger advanced them; a task the
    ledger did not look at keeps its ledger fields as they were."""
    previous = {**_old_tasks(old, skip=ledgers or {}), **(ledgers or {})}
    tasks = []
    upcoming = []
    for name in list(dict.fromkeys(task_names))[:STATUS_TASKS_MAX]:  # declared first: the schema's bound
        entry = previous.get(name, TaskStatus(name=name)).model_copy(update={"cron_job": None, "next_run_time": None})
        if name in running:
            cronjob, spec = running[name]
            fire = next_run(spec, now)
            entry = entry.model_copy(update={"cron_job": cronjob, "next_run_time": rfc3339(fire) if fire else None})
            if fire:
                upcoming.append(fire)
        tasks.append(entry)
    skip = {"Ready", "RunsHealthy"} if runs_healthy is not None else {"Ready"}
    others = [
        Condition.model_validate(c) for c in old.get("conditions") or [] if c.get("type") not in skip and _valid(c)
    ]
    if runs_healthy is not None:
        others.insert(0, runs_healthy)
    deployment = None
    if image is not None:
        deployment = DeploymentStatus(name=image[0][:253], image=printable(image[1], 1024))
    elif isinstance(old.get("deployment"), Mapping) and _valid_deployment(old["deployment"]):
        deployment = DeploymentStatus.model_validate(old["deployment"])  # what the CronJobs still run
    last = sorted(last_runs)
    status = AppScheduleStatus(
        observed_generation=generation,
        conditions=[ready, *others][:4],
        deployment=deployment,
        task_count=task_count,
        last_run_time=last[-1] if last else None,
        next_run_time=rfc3339(min(upcoming)) if upcoming else None,
        **_totals(tasks, old),
        tasks=tasks,
        backfills=list(backfills) or None,
        backfill=_backfill_summary(backfills),
    )
    dumped: dict[str, Any] = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def _backfill_summary(backfills: Sequence[BackfillStatus]) -> str | None:
    """For the Backfill printer column: fires started of those in the running backfills, e.g. 4/10."""
    running = [b for b in backfills if b.state == "Running"]
    if not running:
        return None
    return f"{sum(b.started or 0 for b in running)}/{sum(b.fires or 0 for b in running)}"


def _totals(tasks: Sequence[TaskStatus], old: Mapping[str, Any]) -> dict[str, Any]:
    """The printer columns' totals across tasks: from the ledger's counts once any task is tracked."""
    counted = [t.counts for t in tasks if t.counts is not None]
    if not counted:
        return {k: old.get(k) for k in ("missed", "duplicates", "failed")}
    return {k: sum(getattr(c, k) for c in counted) for k in ("missed", "duplicates", "failed")}


def runs_healthy_condition(
    problems: Sequence[Sequence[tuple[str, str]]], tracked: int, old: Mapping[str, Any], generation: Any, now: str
) -> Condition:
    """RunsHealthy: no missed, failed, stuck or duplicate run among each task's last 10, none late or
    without a pod now, no task paused. ``problems`` are grouped by task (a group each, newest first). The
    reason is the first problem's; the message names every task in trouble before it says more of any one
    (round robin over the groups), as many as fit in MESSAGE_MAX, then how many more."""
    previous = old.get("conditions") or []
    groups = [list(g) for g in problems if g]
    if groups:
        reason = groups[0][0][0]
        ordered = [g[i] for i in range(max(len(g) for g in groups)) for g in groups if i < len(g)]
        text = ""
        for shown, (_, message) in enumerate(ordered):
            rest = len(ordered) - shown - 1
            candidate = f"{text}; {message}" if text else message
            if len(candidate) + (len(f"; and {rest} more") if rest else 0) > MESSAGE_MAX:
                text = f"{text}; and {len(ordered) - shown} more" if text else message[: MESSAGE_MAX - 3] + "..."
                break
            text = candidate
        return condition(previous, "RunsHealthy", "False", reason, text[:MESSAGE_MAX], generation, now)
    message = f"no missed, failed, stuck or duplicate run among the last runs of {tracked} task(s)"
    return condition(previous, "RunsHealthy", "True", "RunsHealthy", message, generation, now)


def _valid(condition_: Mapping[str, Any]) -> bool:
    try:
        Condition.model_validate(condition_)
    except ValidationError:
        return False
    return True


def _valid_deployment(value: Mapping[str, Any]) -> bool:
    try:
        DeploymentStatus.model_validate(value)
    except ValidationError:
        return False
    return True


def changed(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether ``new`` must be written over ``old``: it says something ``old`` does not.

    What only the ledger's own bookkeeping let go is not such a thing: records of Jobs (``jobs``: filed ones
    whose time is settled), suspension spans (``suspensions``) that nothing needs any more, and the mark
    (``filedThrough``) where it passed only Jobs counted before. A step from
    ``old`` lets them go again the same way (as after a restart: the ledger goes on from any status it
    wrote), so they ride on the next write that matters, and the status stored is always the whole result
    of one step. Every count, run, time (``checkedUntil`` included), condition or new record is written at
    once."""
    return not _same(_without_housekeeping(new, old), old)


def needs_listed_view(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    """Whether ``new`` may be written only once the Jobs it was planned from are confirmed by a list (the watch
    may lag, or have been down with the API server): it counts a fire missed that ``old`` did not (its Job may
    be on its way), or moves a task's mark (``filedThrough``: every Job created before it is counted)."""
    marks = [{t.get("name"): t.get("filedThrough") for t in s.get("tasks") or [] if isinstance(t, Mapping)}
             for s in (new, old)]  # fmt: skip
    return _missed(new) > _missed(old) or any(mark != marks[1].get(name) for name, mark in marks[0].items())


def _missed(status: Mapping[str, Any]) -> int:
    """The missed runs a status counts over all its tasks."""
    total = 0
    for task in status.get("tasks") or []:
        counts = task.get("counts") if isinstance(task, Mapping) else None
        missed = counts.get("missed") if isinstance(counts, Mapping) else None
        total += missed if isinstance(missed, int) else 0
    return total


def _same(status: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Equal as JSON values. Both are JSON (a model dumped in json mode, or what the API server stored), so ``==``
    judges them as comparing their sorted dumps did (but that 1, 1.0 and true are equal to it), at a fraction of the
    cost: the dumps were 12 % of the operator's CPU at 900 runs a minute (BENCHMARKS.md)."""
    return dict(status) == dict(other)


def _per_task(
    new: Mapping[str, Any], old: Mapping[str, Any], fix: Callable[[dict[str, Any], Mapping[str, Any]], None]
) -> dict[str, Any]:
    """``new`` with ``fix(task, was)`` applied to a copy of each task that ``old`` has too."""
    before = {t.get("name"): t for t in old.get("tasks") or [] if isinstance(t, Mapping)}
    tasks = new.get("tasks")
    if not isinstance(tasks, list):
        return dict(new)
    kept: list[Any] = []
    for task in tasks:
        was = before.get(task.get("name")) if isinstance(task, Mapping) else None
        if was is not None:
            task = dict(task)
            fix(task, was)
        kept.append(task)
    return {**new, "tasks": kept}


def _without_housekeeping(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    def let_go(task: dict[str, Any], was: Mapping[str, Any]) -> None:
        for field in ("jobs", "suspensions"):
            if all(item in (was.get(field) or []) for item in task.get(field) or []):  # only some let go
                _restore(task, was, field)
        _restore(task, was, "filedThrough")  # alone it moves only past Jobs counted already: nothing to write

    return _per_task(new, old, let_go)


def _restore(task: dict[str, Any], was: Mapping[str, Any], field: str) -> None:
    """``task[field]`` as it was (absent if it was absent)."""
    if field in was:
        task[field] = was[field]
    else:
        task.pop(field, None)


StatusWait = Literal["now", "ends", "starts", "time"]  # how long a status may wait to be written (can_wait)
# seconds a status of each kind may wait in all, from the first plan that let it wait: a fire's run carries the
# next run time within a minute; a run that started is shown with its end, or after 5 s if it lasts longer (the
# soak holds every Job recorded within seconds: a 30 s wait failed it); successful ends wait 2 s for the rest of
# their AppSchedule's fire (completion to status within 5 s)
STATUS_WAITS: dict[StatusWait, float] = {"time": 60.0, "starts": 5.0, "ends": 2.0}
# what a successful end adds to a task's counts: nothing a user must see at once
GOOD_COUNTS = frozenset({"runs", "late", "succeeded", "unclaimed"})
GOOD_STATES = frozenset({"Active", "Succeeded"})
SHAPE = ("schedule", "timeZone", "cronJob", "trackingSince")  # what a task's spec or CronJob says: at once


def wait_left(kind: StatusWait, waited: float) -> float:
    """Seconds a status of this kind may still wait, having waited ``waited`` seconds already (0: write it)."""
    return max(0.0, STATUS_WAITS[kind] - waited) if kind in STATUS_WAITS else 0.0


def can_wait(new: Mapping[str, Any], old: Mapping[str, Any]) -> StatusWait:
    """How long ``new`` may wait before it is written over ``old``, by what it adds (the controller bounds each
    wait: STATUS_WAITS). ``time``: only the next (and last) run time moved, a fire came: it waits for that
    fire's run, which carries it. ``starts``: runs that started: they wait a few seconds for their end.
    ``ends``: runs that succeeded (and started): a moment, for the other tasks' ends of the same fire, so that
    an AppSchedule's fire is one write. ``now``: a failure, a miss, a skip, a duplicate, a condition, a manual
    run, anything from the spec."""
    quiet = _without_housekeeping(new, old)
    if _same(_without_times(quiet, old), old):
        return "time"
    if _same(_without_starts(quiet, old), old):
        return "starts"
    return "ends" if _same(_without_ends(quiet, old), old) else "now"


def _without_ends(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    """``new`` with every task that only ran and succeeded as it was in ``old``."""

    def succeeded(task: dict[str, Any], was: Mapping[str, Any]) -> None:
        counts, counted = task.get("counts") or {}, was.get("counts") or {}
        if not isinstance(counts, Mapping) or not isinstance(counted, Mapping):
            return
        if any(counts.get(k, 0) != counted.get(k, 0) for k in {*counts, *counted} - GOOD_COUNTS):
            return  # a failure, a miss, a skip, a duplicate...: at once
        runs = [task.get("lastRun"), *(task.get("recent") or [])]
        if not all(isinstance(r, Mapping) and r.get("state") in GOOD_STATES for r in runs if r is not None):
            return
        if any(task.get(k) != was.get(k) for k in ("missedTimes", "suspensions", "catchUp", *SHAPE)):
            return
        task.clear()
        task.update(was)

    return _without_times(_per_task(new, old, succeeded), old)


def _without_times(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    out = _per_task(new, old, lambda task, was: _restore(task, was, "nextRunTime"))
    for field in ("lastRunTime", "nextRunTime"):
        _restore(out, old, field)
    return out


def _without_starts(new: Mapping[str, Any], old: Mapping[str, Any]) -> dict[str, Any]:
    def unstarted(task: dict[str, Any], was: Mapping[str, Any]) -> None:
        counts, counted = dict(task.get("counts") or {}), dict(was.get("counts") or {})
        if all(counts.get(k, 0) == counted.get(k, 0) for k in {*counts, *counted} - {"runs", "late"}):
            _restore(task, was, "counts")
            # nothing missed or skipped: the settled time moved only over fires that ran (one just started)
            _restore(task, was, "checkedUntil")
        recent = {r.get("scheduledTime"): r for r in was.get("recent") or [] if isinstance(r, Mapping)}
        if all(_started(r, recent.get(r.get("scheduledTime"))) for r in task.get("recent") or []):
            _restore(task, was, "recent")
        records = list(was.get("jobs") or [])
        names = {r.get("name") for r in records if isinstance(r, Mapping)}
        if all(r in records or (r.get("name") not in names and not r.get("finished")) for r in task.get("jobs") or []):
            _restore(task, was, "jobs")
        last = task.get("lastRun")
        if isinstance(last, Mapping) and last.get("state") == "Active":
            _restore(task, was, "lastRun")

    return _without_times(_per_task(new, old, unstarted), old)


def _started(run: Any, was: Mapping[str, Any] | None) -> bool:
    """A recent run that is new and Active, or as it was but for its attempts while Active."""
    if not isinstance(run, Mapping):
        return False
    if run == was:
        return True
    if was is None:
        return run.get("state") == "Active"
    return run.get("state") == "Active" and {**run, "attempts": was.get("attempts")} == dict(was)
