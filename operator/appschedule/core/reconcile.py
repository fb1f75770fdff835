"""What one reconcile of an AppSchedule must do, as a pure function of the in-memory view and ``now``.

``plan()`` takes the ``World`` of one AppSchedule (view.py: the AppSchedule, its Deployment, its
CronJobs and the ownership facts of its namespace) and returns the CronJobs to apply, the CronJobs to
delete, the status it should have and the Events to post. The shell writes exactly that. The parts:
``ownership`` (which tasks it may run), ``cronjobs`` (what differs), ``status`` and ``events``.

Invariants:

* Nothing to do means nothing written (see cronjobs.py for what "differs" means).
* A missing Deployment changes no CronJob: ``Ready=False``/``DeploymentNotFound`` and the CronJobs
  stay as they were, so a Deployment recreated by a deploy tool does not cost a run.
* A task that is merely invalid now, or whose CronJob the API server refused, keeps its CronJob:
  stopping a working task for a typo would cost runs; the error is reported instead. A spec-level
  error deletes nothing.
* Only CronJobs controlled (by uid) by this AppSchedule are ever deleted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from . import blackout, cronjobs, cutover, events, keys, ledger, naming, ownership, pause, runs, status
from .events import Event
from .models import BACKFILLS_MAX, CATCH_UP_WINDOW_MAX, DEFAULTS, BackfillStatus, Blackout, TaskStatus
from .render import Manifest, Rendered, SpecError, part_of, render, schedule_text
from .schedule import Schedule, ScheduleError, is_fire, parse
from .schedule import earliest as schedule_earliest
from .status import StatusWait
from .view import CronJobView, DeploymentView, World

__all__ = ["Event", "Plan", "Quiets", "plan"]


@dataclass
class Plan:
    apply: list[Manifest] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    status_changed: bool = False
    status_wait: StatusWait = "now"  # how long the status may wait to be written, by what it adds
    events: list[Event] = field(default_factory=list)
    release: list[str] = field(default_factory=list)  # Jobs whose ledger finalizer goes once status is written
    wake_at: datetime | None = None  # when time alone changes the ledger next
    finished: list[tuple[str, str, float]] = field(default_factory=list)  # (task, result, seconds) of ended runs
    create: list[Manifest] = field(default_factory=list)  # Jobs to create, in order: catch-ups, then backfills
    delete_jobs: list[str] = field(default_factory=list)  # Jobs of backfills no longer in the spec
    suspend: list[tuple[str, str]] = field(default_factory=list)  # (CronJob, the cut) taken over from: suspend it
    paused: list[str] = field(default_factory=list)  # tasks paused after repeated failures (pause.py)
    # Events that say what this reconcile's CronJob writes do (a cut-over's): posted with those writes, even when
    # the status waits, since the next plan sees the writes done and cannot say them again
    write_events: list[Event] = field(default_factory=list)
    # whether a status that waits may be written from this plan later (``still``): not when time settles things
    # with no wake of their own (a task's blackouts: the fires they black out; a backfill: its end coming)
    holdable: bool = True


@dataclass(frozen=True)
class _Quiet:
    """A task's ledger step that stands until its wake_at (ledger.stands) and everything it was taken from."""

    at: datetime  # the step's time
    entry: Any  # the task's entry of the status, as the view held it
    config: ledger.TaskConfig
    jobs: tuple[Any, ...]
    pods: Mapping[str, Any]
    step: ledger.LedgerUpdate

    def holds(
        self, entry: Any, config: ledger.TaskConfig, jobs: tuple[Any, ...], pods: Mapping[str, Any], now: datetime
    ) -> bool:
        """The same inputs (unchanged views are the same objects, so this is mostly identity) and a time before the
        step's ``wake_at``."""
        wake, now = self.step.wake_at, now.replace(microsecond=0)
        return (
            self.at <= now  # a clock set back: never reused for a time before the step's
            and (wake is None or now < wake)
            and _alike(self.jobs, jobs)
            and self.entry == entry
            and self.config == config
            and self.pods.keys() == pods.keys()
            and all(_alike(self.pods[name], pods[name]) for name in pods)
        )


def _alike(old: Sequence[Any], new: Sequence[Any]) -> bool:
    """The same Jobs or pods but for their resourceVersion, which the ledger never reads: a change to what their views
    do not keep (a pod's conditions, a Job's ready count) changes only that."""
    return len(old) == len(new) and all(a is b or a.same_except_version(b) for a, b in zip(old, new, strict=True))


class Quiets:
    """The standing ledger steps of the last tasks planned, by (namespace, AppSchedule, task), at most ``size`` (the
    least recently planned go first). A Job's events wake its AppSchedule, and the plan steps every task's ledger: the
    other tasks' inputs mostly did not change (also while a status they changed waits to be written). The shell keeps
    one and hands it to every plan; it only ever saves work (a step is reused only for the same inputs, before its
    ``wake_at``). A step kept is about 12 KiB (its TaskStatus): at most 12 MiB, whatever the number of AppSchedules.

    It keeps the last renderings too, by (namespace, AppSchedule), those of at most ``size`` tasks (_Rendering: about
    8 KiB a task, so at most 8 MiB): a plan that a Job or a CronJob's status woke renders the same CronJobs from the
    same spec and Deployment, stamps them and finds them in sync with the same CronJobs, each time."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._held: dict[tuple[str, str, str], _Quiet] = {}
        self._renderings: dict[tuple[str, str], _Rendering] = {}
        self._rendered_tasks = 0  # the tasks of the renderings kept
        self.hits = 0
        self.renderings_reused = 0

    def get(self, key: tuple[str, str, str]) -> _Quiet | None:
        held = self._held.pop(key, None)
        if held is not None:  # planned again: the most recent
            self._held[key] = held
        return held

    def put(self, key: tuple[str, str, str], held: _Quiet | None) -> None:
        self._held.pop(key, None)
        if held is None:
            return
        self._held[key] = held
        if len(self._held) > self.size:
            del self._held[next(iter(self._held))]

    def rendering(self, key: tuple[str, str]) -> _Rendering | None:
        held = self._renderings.pop(key, None)
        if held is not None:
            self._renderings[key] = held
        return held

    def keep_rendering(self, key: tuple[str, str], held: _Rendering) -> None:
        old = self._renderings.pop(key, None)
        self._rendered_tasks += held.weight - (old.weight if old is not None else 0)
        self._renderings[key] = held
        while self._rendered_tasks > self.size and len(self._renderings) > 1:  # the least recent go
            self._rendered_tasks -= self._renderings.pop(next(iter(self._renderings))).weight

    def __len__(self) -> int:
        return len(self._held)


@dataclass
class _Rendering:
    """What render made of an AppSchedule and what it read (its metadata but the resourceVersion, its spec, the
    Deployment's view, the calendars' blackouts), the task CronJobs stamped from it (cronjobs.with_hash: the manifest
    as planned, its stamped copy) and the CronJobs last found in sync with one of those (by name: the stamped
    manifest, and the metadata and spec of the CronJob's view). Each is reused only for inputs equal to those it was
    made from (views are replaced when their object changes, and their strings are shared: mostly identity)."""

    inputs: tuple[Any, ...]
    rendered: Rendered
    stamped: dict[str, tuple[Manifest, Manifest]] = field(default_factory=dict)
    synced: dict[str, tuple[Manifest, Mapping[str, Any], Mapping[str, Any]]] = field(default_factory=dict)

    @property
    def weight(self) -> int:
        """What it counts for in the bound: its tasks' CronJobs, and one when it has none (an invalid spec still
        keeps its inputs)."""
        return max(1, len(self.rendered.cronjobs))

    def stamp(self, task: str, manifest: Manifest) -> Manifest:
        kept = self.stamped.get(task)
        if kept is not None and (kept[0] is manifest or kept[0] == manifest):
            return kept[1]
        stamped = cronjobs.with_hash(manifest)
        self.stamped[task] = (manifest, stamped)
        return stamped

    def in_sync(self, manifest: Manifest, held: CronJobView | None) -> bool:
        """cronjobs.in_sync of a stamped manifest and the CronJob of its name, if any."""
        if held is None:
            return False
        name = str(manifest["metadata"]["name"])
        kept = self.synced.get(name)
        if kept is not None and kept[0] is manifest and kept[1] == held.metadata and kept[2] == held.spec:
            return True
        if not cronjobs.in_sync(manifest, held.as_object()):
            self.synced.pop(name, None)
            return False
        self.synced[name] = (manifest, held.metadata, held.spec)
        return True


def _render(
    appschedule: Mapping[str, Any], deployment: DeploymentView, calendars: list[Blackout], quiets: Quiets | None
) -> tuple[Rendered, _Rendering]:
    """render(), or the rendering kept for the same inputs (render reads nothing else)."""
    meta = {k: v for k, v in appschedule["metadata"].items() if k != "resourceVersion"}
    inputs = (meta, appschedule["spec"], deployment, calendars)
    key = (str(meta.get("namespace")), str(meta.get("name")))
    held = quiets.rendering(key) if quiets is not None else None
    if held is not None and held.inputs == inputs:
        if quiets is not None:
            quiets.renderings_reused += 1
        return held.rendered, held
    held = _Rendering(inputs, render(appschedule, deployment.as_object(), calendars))
    if quiets is not None:
        quiets.keep_rendering(key, held)
    return held.rendered, held


def still(planned: World, decided: Plan, at: datetime, world: World, now: datetime) -> bool:
    """Whether ``decided``, planned from ``planned`` at ``at``, still stands for ``world`` at ``now``: a plan that may
    be held (``holdable``), the same world (views are replaced when their object changes, so this is mostly
    identity), a time not before the plan's (a clock set back), and no moment passed at which time alone changes
    the plan (its ``wake_at``: a ledger's, a cut-over's; the next run time it states). The shell then writes a status
    that waited (core/status.wait_left) from the plan that let it wait: what it says was true when planned, seconds
    ago, and nothing has happened since."""
    if not decided.holdable or now < at:
        return False
    if decided.wake_at is not None and now >= decided.wake_at:
        return False
    upcoming = keys.parse_time(decided.status.get("nextRunTime"))
    if upcoming is not None and now >= upcoming:
        return False
    return world == planned


def _index(spec: Mapping[str, Any], task: str) -> int:
    tasks = spec.get("tasks") or []
    return next((i for i, t in enumerate(tasks) if isinstance(t, dict) and t.get("name") == task), 0)


def plan(
    world: World,
    now: datetime,
    *,
    rejected: Mapping[str, str] | None = None,
    failed: Mapping[str, str] | None = None,
    quiets: Quiets | None = None,
) -> Plan:
    """Everything one reconcile should do; see the module docstring for the invariants.

    ``rejected`` names tasks whose CronJob the API server refused as invalid, or whose name a CronJob
    we do not control holds (the user's to fix); ``failed`` tasks whose write failed for a reason that
    is ours (RBAC, a terminating namespace: retried with back-off). Both keep the CronJob they had. ``quiets``:
    the quiet ledger steps of earlier plans, reused where nothing they came from changed (Quiets)."""
    rejected, failed = rejected or {}, failed or {}
    view = world.appschedule
    appschedule = view.as_object()
    spec = view.spec
    errors: list[SpecError] = []
    if world.deployment is None:
        errors.append(
            SpecError(
                "spec.deploymentRef.name",
                f"Deployment {view.deployment!r} not found in namespace {view.namespace!r}; "
                "the CronJobs are left as they were",
                reason="DeploymentNotFound",
            )
        )
        wanted = (spec.get("deploymentRef") or {}).get("container") or "app"
        placeholder = {"spec": {"template": {"spec": {"containers": [{"name": wanted, "image": "-"}]}}}}
        rendered = render(appschedule, placeholder)  # only for the tasks' own errors
        rendering = _Rendering((), rendered)
    else:
        rendered, rendering = _render(appschedule, world.deployment, _calendars(world, errors), quiets)
    errors.extend(rendered.errors)
    pauses, unreadable = _pauses(world, rendered)

    ours = {n: c for n, c in world.cronjobs.items() if c.ours(view)}
    desired: dict[str, Manifest] = {}
    if world.deployment is not None:
        conflicts = ownership.conflicts(world, {t: _index(spec, t) for t in rendered.cronjobs})
        errors.extend(conflicts.values())
        for task, message in {**rejected, **failed}.items():
            reason = "WriteFailed" if task in failed else "InvalidSpec"
            errors.append(SpecError(f"spec.tasks[{_index(spec, task)}]", message, task=task, reason=reason))
    result = Plan()
    if world.deployment is not None:
        desired = {
            task: rendering.stamp(task, _suspended(manifest) if task in pauses else _blacked_out(manifest, now, result))
            for task, manifest in rendered.cronjobs.items()
            if task not in conflicts and task not in rejected and task not in failed
        }
    cuts = _cut_overs(world, rendered, desired, now, result)
    for task, (_, step) in cuts.items():
        if not step.make:
            del desired[task]
    parts = [p for m in desired.values() for p in cronjobs.parts_of(m)]  # a task's schedules after the first
    result.apply = [
        m for m in [*desired.values(), *parts] if not rendering.in_sync(m, world.cronjobs.get(m["metadata"]["name"]))
    ]
    if world.deployment is not None and rendered.spec is not None and not any(e.task is None for e in rendered.errors):
        keep = {str(m["metadata"]["name"]) for m in [*desired.values(), *parts]}
        kept = {t for t in [*(e.task for e in errors if e.task), *rejected, *failed] if t}
        keep |= {naming.cronjob_name(view.name, t) for t in kept}
        keep |= {n for n, c in ours.items() if c.task in kept and part_of(c.metadata)}
        lost = _conflicting(errors)  # a task another AppSchedule keeps: every CronJob of it goes
        keep -= {naming.cronjob_name(view.name, t) for t in lost}
        keep -= {n for n, c in ours.items() if c.task in lost}
        controlled = [n for n, c in ours.items() if c.controller == view.uid]  # never one we only label
        result.delete = cronjobs.to_delete(controlled, keep)

    # -- status: what runs after this reconcile
    running: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for cronjob, cj in ours.items():
        if cronjob not in result.delete and cj.task and not part_of(cj.metadata):
            running[cj.task] = (cronjob, cj.spec)
    for task, manifest in desired.items():
        running[task] = (str(manifest["metadata"]["name"]), manifest["spec"])
    for task, (source, step) in cuts.items():  # until the cut, the old CronJob runs the task: its Jobs are counted
        if (
            not step.make
            and source in world.cronjobs
            and cutover.handed_over(world.cronjobs[source], view.name, source)
        ):
            running.setdefault(task, (source, world.cronjobs[source].spec))
    names = list(dict.fromkeys([*view.declared, *running]))
    now_text = keys.rfc3339(now)
    ready = status.ready_condition(
        errors, len(desired) + len(parts), view.deployment, view.status, view.generation, now_text
    )
    runs = _ledgers(world, running, rendered, now, result, quiets)
    result.holdable = not spec.get("backfills") and not any(
        blackout.of_template(s) for _, s in running.values() if isinstance(s, Mapping)
    )
    backfills = _backfills(world, running, now, result)
    # a task's pause and its runs' problems, a group each: the paused first, an unreadable annotation before all
    by_task = [[("TaskPaused", p.message()), *(runs[t].problems if t in runs else ())] for t, p in pauses.items()]
    by_task += [a.problems for t, a in runs.items() if t not in pauses]
    healthy = (
        status.runs_healthy_condition(
            [*([[("InvalidAnnotation", unreadable)]] if unreadable else []), *by_task],
            len(runs),
            view.status,
            view.generation,
            now_text,
        )
        if runs
        else None
    )
    result.status = status.build(
        old=view.status,
        generation=view.generation,
        ready=ready,
        task_names=names,
        running=running,
        last_runs=[c.last_schedule_time for n, c in ours.items() if c.last_schedule_time and n not in result.delete],
        image=(view.deployment, rendered.image) if rendered.image and world.deployment is not None else None,
        task_count=len(spec.get("tasks") or []),
        now=now,
        ledgers={task: a.status for task, a in runs.items()},
        runs_healthy=healthy,
        backfills=backfills,
    )
    result.status_changed = status.changed(result.status, view.status)
    result.status_wait = status.can_wait(result.status, view.status) if result.status_changed else "now"
    old_ready: Mapping[str, Any] = next(
        (c for c in view.status.get("conditions") or [] if c.get("type") == "Ready"), {}
    )
    result.events = (
        events.for_change(old_ready, ready, errors)
        + events.for_runs([e for a in runs.values() for e in a.events])
        + _pause_events(world, desired, pauses)
    )
    result.write_events = _cut_over_events(view, world, cuts) + _blackout_events(world, desired)
    result.paused = sorted(pauses)
    return result


def _pauses(world: World, rendered: Rendered) -> tuple[dict[str, pause.Pause], str | None]:
    """The tasks paused after repeated failures (pause.py), from the runs the status holds; and what is wrong
    with the resume annotation, if anything."""
    spec = rendered.spec
    if spec is None:
        return {}, None
    view = world.appschedule
    resumed, unreadable = pause.resumes(view.resumed)
    previous = {t.get("name"): t for t in view.status.get("tasks") or [] if isinstance(t, Mapping)}
    fallback = spec.defaults.suspend_after_failures if spec.defaults is not None else None
    found = {}
    for task in spec.tasks:
        recent = previous.get(task.name, {}).get("recent")
        paused = pause.paused(
            task.name,
            task.suspend_after_failures or fallback,
            recent if isinstance(recent, list) else [],
            resumed.get(task.name),
        )
        if paused is not None:
            found[task.name] = paused
    return found, unreadable


def _suspended(manifest: Manifest) -> Manifest:
    return {**manifest, "spec": {**manifest["spec"], "suspend": True}}


def _calendars(world: World, errors: list[SpecError]) -> list[Blackout]:
    """The blackouts of the AppScheduleCalendars spec.calendars names, in that order; one missing or invalid is
    said (Ready: CalendarNotFound, CalendarInvalid) and the tasks run without it."""
    found: list[Blackout] = []
    for index, name in enumerate(world.appschedule.calendars):
        calendar = world.calendars.get(name)
        where = f"spec.calendars[{index}]"
        if calendar is None:
            errors.append(SpecError(where, f"AppScheduleCalendar {name!r} not found in namespace "
                                    f"{world.appschedule.namespace!r}: the tasks run without its blackouts",
                                    reason="CalendarNotFound"))  # fmt: skip
        elif calendar.problem is not None:
            errors.append(SpecError(where, f"AppScheduleCalendar {name!r}: {calendar.problem}: the tasks run "
                                    "without its blackouts", reason="CalendarInvalid"))  # fmt: skip
        else:
            found.extend(calendar.blackouts)
    return found


def _blacked_out(manifest: Manifest, now: datetime, out: Plan) -> Manifest:
    """The task's CronJob suspended while ``now`` is inside one of its blackouts, and marked so (its job
    template's ``appschedule.dev/blacked-out``: which, until when); ``out`` wakes at the span's end, or at the
    start of the next span within a day."""
    spec = manifest["spec"]
    windows = blackout.of_template(spec)
    if not windows or spec.get("suspend"):  # suspended anyway (the task's own suspend): nothing to add
        return manifest
    zone = parse(str(spec["schedule"]), str(spec.get("timeZone") or "UTC")).zone
    span = blackout.covering(windows, zone, now)
    if span is None:
        coming = [s for s, _, _ in blackout.spans(windows, zone, now, now + timedelta(days=1)) if s > now]
        if coming:
            out.wake_at = schedule_earliest(out.wake_at, min(coming))
        return manifest
    _, end, window = span
    out.wake_at = schedule_earliest(out.wake_at, end)
    template = spec["jobTemplate"]
    metadata = template.get("metadata") or {}
    said = {blackout.ANNOTATION_NOW: f"{window.said()} until {keys.rfc3339(end)}"}
    marked = {**metadata, "annotations": {**(metadata.get("annotations") or {}), **said}}
    return {**manifest, "spec": {**spec, "suspend": True, "jobTemplate": {**template, "metadata": marked}}}


def _blackout_events(world: World, desired: Mapping[str, Manifest]) -> list[Event]:
    """BlackoutStarted when a task's CronJob is suspended for a blackout, BlackoutEnded when it runs again: said
    with the CronJob's write (the next plan sees it done)."""
    found = []
    for task, manifest in desired.items():
        held = world.cronjobs.get(str(manifest["metadata"]["name"]))
        was = blackout.marked(held.spec) if held is not None and held.ours(world.appschedule) else None
        now_ = blackout.marked(manifest["spec"])
        if now_ and now_ != was:
            found.append(Event("Normal", "BlackoutStarted", f"task {task!r}: no run starts: blackout {now_}"[:1024]))
        elif was and not now_:
            found.append(Event("Normal", "BlackoutEnded", f"task {task!r}: blackout {was.split(' until ')[0]} ended"))
    return found


def _pause_events(world: World, desired: Mapping[str, Manifest], pauses: Mapping[str, pause.Pause]) -> list[Event]:
    """TaskPaused when a task's CronJob is suspended for its failures, TaskResumed when it runs again."""
    view, found = world.appschedule, []
    for task, manifest in desired.items():
        held = world.cronjobs.get(str(manifest["metadata"]["name"]))
        was = (
            held is not None and held.ours(view) and held.spec.get("suspend") is True and not blackout.marked(held.spec)
        )
        if task in pauses and not was:
            found.append(Event("Warning", "TaskPaused", pauses[task].message()[:1024]))
        elif (
            was
            and task not in pauses
            and held is not None
            and (not manifest["spec"].get("suspend") or blackout.marked(manifest["spec"]))
        ):
            found.append(Event("Normal", "TaskResumed", f"task {task!r} runs again"))
    return found


def _cut_overs(
    world: World, rendered: Rendered, desired: Mapping[str, Manifest], now: datetime, out: Plan
) -> dict[str, tuple[str, cutover.Step]]:
    """Each task with ``cutOverFrom`` whose CronJob would be applied: where its cut-over stands (cutover.py); the
    CronJobs to suspend and when to look again go into ``out``."""
    view = world.appschedule
    found: dict[str, tuple[str, cutover.Step]] = {}
    for task in rendered.spec.tasks if rendered.spec is not None else ():
        source = task.cut_over_from
        if not source or task.name not in desired:
            continue
        spec = desired[task.name]["spec"]
        config = task_config(task.name, "", spec, 0)
        if config is None:
            continue
        old = world.cronjobs.get(source)
        mine = world.cronjobs.get(naming.cronjob_name(view.name, task.name))
        step = cutover.step(
            task=task.name,
            source=source,
            schedule=config.schedule,
            old=old if old is not None and cutover.handed_over(old, view.name, source) else None,
            ours=mine if mine is not None and mine.ours(view) else None,
            now=now,
        )
        found[task.name] = (source, step)
        if step.suspend:
            out.suspend.append((source, keys.rfc3339(step.at or now)))
        wake = step.wake_at
        if step.make and mine is None and step.state == "Handing":  # made now: look again once it is in the view
            wake = now + timedelta(seconds=1)
        if wake is not None and (out.wake_at is None or wake < out.wake_at):
            out.wake_at = wake
    return found


def _cut_over_events(view: Any, world: World, cuts: Mapping[str, tuple[str, cutover.Step]]) -> list[Event]:
    """The cut-over's Events, each once: a Warning after a spec change while the CronJob is not handed over, when the
    task's CronJob is made (the cut), when the old one is suspended. The state itself lives in the cluster (the
    task's CronJob and its creation, the old one's suspend and its ``appschedule.dev/cut-over-at``)."""
    changed = view.status.get("observedGeneration") != view.generation
    found = []
    for task, (_, step) in cuts.items():
        made_now = step.make and naming.cronjob_name(view.name, task) not in world.cronjobs
        if step.state == "Waiting" and changed:
            found.append(Event("Warning", "CutOverWaiting", step.message[:1024]))
        elif step.state == "Handing" and (made_now or step.suspend):
            found.append(Event("Normal", "CutOver" if step.suspend else "CutOverStarted", step.message[:1024]))
    return found


def _setting(rendered: Rendered, task: str, name: str) -> Any:
    """A task's resolved setting that its CronJob does not carry (the grace, the catch-up window)."""
    spec = rendered.spec
    found = next((t for t in spec.tasks if t.name == task), None) if spec is not None else None
    return found.resolved(spec)[name] if found and spec else DEFAULTS[name]


def _grace(rendered: Rendered, task: str) -> int:
    return int(_setting(rendered, task, "missedRunGraceSeconds"))


def _catch_up(rendered: Rendered, task: str) -> int:
    try:
        return min(runs.duration_seconds(str(_setting(rendered, task, "catchUpWindow"))), CATCH_UP_WINDOW_MAX)
    except ValueError:
        return 0  # the schema's pattern refuses it; a spec written while the webhook was down runs without


def task_config(
    task: str, cronjob: str, spec: Mapping[str, Any], grace: int, catch_up: int = 0
) -> ledger.TaskConfig | None:
    """What the ledger counts against: the settings the task's CronJob really runs with."""
    try:
        schedule = parse(schedule_text(spec), str(spec.get("timeZone") or "UTC"))
    except ScheduleError:
        return None
    job = (spec.get("jobTemplate") or {}).get("spec") or {}
    return ledger.TaskConfig(
        task=task,
        cronjob=cronjob,
        schedule=schedule,
        suspend=bool(spec.get("suspend")),
        concurrency=str(spec.get("concurrencyPolicy") or "Allow"),
        starting_deadline=spec.get("startingDeadlineSeconds"),
        active_deadline=job.get("activeDeadlineSeconds"),
        grace=grace,
        catch_up=catch_up,
        blackouts=blackout.of_template(spec),
    )


def _ledgers(
    world: World,
    running: Mapping[str, tuple[str, Mapping[str, Any]]],
    rendered: Rendered,
    now: datetime,
    out: Plan,
    quiets: Quiets | None = None,
) -> dict[str, ledger.LedgerUpdate]:
    """Advance the ledger of every task that has a CronJob; collect what the shell must do for it. The
    Jobs of a task that no longer runs are let go once they are done (nothing can count them)."""
    view = world.appschedule
    previous = {t.get("name"): t for t in view.status.get("tasks") or [] if isinstance(t, Mapping)}
    advanced: dict[str, ledger.LedgerUpdate] = {}
    for task, (cronjob, spec) in running.items():
        config = task_config(task, cronjob, spec, _grace(rendered, task), _catch_up(rendered, task))
        if config is None:
            continue
        jobs = tuple(j for j in world.jobs.get(task, ()) if not j.idle)  # an idle Job runs nothing: no run
        out.release.extend(j.name for j in world.jobs.get(task, ()) if j.idle and j.finalizer)
        pods = {j.name: world.pods[j.name] for j in jobs if j.name in world.pods}
        entry, key = previous.get(task), (view.namespace, view.name, task)
        memo = quiets.get(key) if quiets is not None else None
        if memo is not None and memo.holds(entry, config, jobs, pods, now):
            step = memo.step  # the same inputs, before its wake_at: the same step (ledger.stands)
            if quiets is not None:
                quiets.hits += 1
        else:
            try:
                progress = TaskStatus.model_validate(entry) if entry is not None else None
            except ValueError:
                progress = None  # an entry written by hand that does not parse: tracking starts again
            step = ledger.advance(progress, config, jobs, now, pods)
            if quiets is not None:
                stands = ledger.stands(step, progress, config)
                quiets.put(key, _Quiet(now.replace(microsecond=0), entry, config, jobs, pods, step) if stands else None)
        advanced[task] = step
        out.release.extend(step.release)
        out.finished.extend((task, result, seconds) for result, seconds in step.finished)
        names = {j.name for j in world.jobs.get(task, ())}
        for moment in step.starts:  # catch-up: the Job name the CronJob that runs the fire gives it
            runner = _runner(cronjob, config.schedule, moment)
            held = world.cronjobs.get(runner)
            if held is None or not held.uid or not held.ours(world.appschedule):
                continue
            if naming.catch_up_job_name(runner, moment.timestamp()) in names:
                continue  # that CronJob's Job for it is there, doing no work (held back, or a time the ledger refused)
            manifest = {"metadata": {"name": runner, "namespace": held.namespace}, "spec": spec}
            owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": runner, "uid": held.uid,
                     "controller": True, "blockOwnerDeletion": False}  # fmt: skip
            out.create.append(
                runs.job_from(
                    manifest, "catch-up", moment, name=naming.catch_up_job_name(runner, moment.timestamp()), owner=owner
                )
            )
        if step.wake_at is not None and (out.wake_at is None or step.wake_at < out.wake_at):
            out.wake_at = step.wake_at
    for task, kept in world.jobs.items():
        if task not in advanced:
            out.release.extend(j.name for j in kept if j.finalizer and (j.outcome or j.deleting))
    return advanced


def _runner(cronjob: str, schedule: Schedule, moment: datetime) -> str:
    """The CronJob whose Job runs a fire: a task's first, or of several schedules the first part firing then (a
    later part firing too has its Job do no work: admission.py)."""
    if not schedule.union:
        return cronjob
    part = next((i for i, p in enumerate(schedule.parts) if is_fire(p, moment)), 0)
    return naming.part_cronjob_name(cronjob, part)


DELETES_MAX = 50  # Jobs of removed backfills deleted per reconcile; their deletions wake the next one


def _backfills(
    world: World, running: Mapping[str, tuple[str, Mapping[str, Any]]], now: datetime, out: Plan
) -> list[BackfillStatus]:
    """Each backfill's progress, and the Jobs it starts now (owned by the AppSchedule, named by fire); the
    Jobs of a backfill no longer in the spec are deleted (removing it is how it is stopped)."""
    view = world.appschedule
    entries = view.spec.get("backfills")
    entries = entries[:BACKFILLS_MAX] if isinstance(entries, list) else []
    owner = {"apiVersion": naming.API_VERSION, "kind": naming.KIND, "name": view.name, "uid": view.uid,
             "controller": True, "blockOwnerDeletion": False}  # fmt: skip
    found: list[BackfillStatus] = []
    names: set[str] = set()
    identities: set[str] = set()
    taken: dict[str, dict[datetime, str]] = {}  # by task: the fires earlier backfills run, and which one
    for index, entry in enumerate(entries):
        request = runs.BackfillRequest.read(entry, index)
        if request.name in names:
            continue
        names.add(request.name)
        identities.add(request.identity)
        cronjob, spec = running.get(request.task, ("", {}))
        config = task_config(request.task, cronjob, spec, 0) if cronjob else None
        jobs = world.jobs.get(request.task, ())
        mine = taken.setdefault(request.task, {})
        step = runs.backfill_step(
            request, config.schedule if config else None, jobs, now, mine, config.blackouts if config else ()
        )
        if config is not None and step.status.state != "Invalid" and request.start and request.end:
            for fire in runs.backfill_fires(config.schedule, request.start, request.end):
                mine.setdefault(fire, request.name)
        found.append(step.status)
        manifest = {"metadata": {"name": cronjob, "namespace": view.namespace}, "spec": spec}
        out.create.extend(
            runs.job_from(
                manifest,
                "backfill",
                moment,
                name=naming.backfill_job_name(
                    view.name, request.name, request.task, moment.timestamp(), request.identity
                ),
                owner=owner,
                backfill=request.identity,
            )
            for moment in step.starts
        )
    out.delete_jobs = sorted(
        j.name
        for jobs in world.jobs.values()
        for j in jobs
        if j.annotations.get(naming.ANNOTATION_BACKFILL)
        and j.annotations[naming.ANNOTATION_BACKFILL] not in identities
        and not j.deleting
    )[:DELETES_MAX]  # fmt: skip
    return found


def _conflicting(errors: list[SpecError]) -> dict[str, SpecError]:
    return {e.task: e for e in errors if e.task and e.reason == "TaskConflict"}
