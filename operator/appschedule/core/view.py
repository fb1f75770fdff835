"""What a reconcile reads: projections of the cluster's objects, and the World of one AppSchedule.

A projection keeps of an object only what a reconcile reads (no managedFields, no Deployment status):

* an AppSchedule: its metadata that matters, raw spec and status, and what its spec declares
  (task names, the valid ones, their CronJob names), computed once per spec change;
* a Deployment: its pod template and selector;
* one of our CronJobs: labels, controller uid, the rendered-hash annotation, spec and lastScheduleTime;
* one of our Jobs: what the ledger reads of it;
* a pod of one of our Jobs: its Job, whether it finished, its claim's outcome and why it failed.

Invariant: a projection never raises, whatever the object holds (a field of the wrong type reads as
absent), and two projections of the same object compare equal. The store (shell/store.py) keeps them;
this module only builds them.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from pydantic import ValidationError

from . import naming
from .models import FAILURE_MAX, SCHEDULES_MAX, Blackout, CalendarSpec, printable
from .render import valid_tasks

ANNOTATION_RESUMED = f"{naming.GROUP}/resumed"  # pause.py reads it
RESUMED_MAX = 16 * 1024  # of the annotation kept: 100 tasks' names and times fit

Key = tuple[str, str]  # (namespace, name)
JobOutcome = Literal["Complete", "Failed"]  # a Job's terminal condition


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def shared(value: Any) -> Any:
    """Decoded JSON rebuilt with every string interned: what thousands of objects repeat (field names, label and
    annotation values, images, the times of one fire) is one string in memory, not one an object. ``json.loads``
    shares a key only within one call, so each object held its own copy: interned, a CronJob's view takes 5.8
    KiB instead of 10.9, an AppSchedule's 5.6 instead of 10.3 (BENCHMARKS.md, issue 34 item 2)."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, Mapping):
        return {sys.intern(str(k)): shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shared(v) for v in value]
    return value


def _shared_dict(value: Any) -> dict[str, Any]:
    shared_value: dict[str, Any] = shared(value) if isinstance(value, Mapping) else {}
    return shared_value


def _text(value: Any) -> str | None:
    """A string field of an object a client wrote: a string, or None (never a number or a map made text)."""
    return value if isinstance(value, str) and value else None


def newer_or_same(new: str, old: str) -> bool:
    """Whether resourceVersion ``new`` is not older than ``old``. They are opaque to clients but are
    etcd revisions in practice; when either is not a number the new one is taken."""
    if new.isdigit() and old.isdigit():
        return int(new) >= int(old)
    return True


_NO_SCHEDULES: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True)
class AppScheduleView:
    namespace: str
    name: str
    uid: str
    created: str  # creationTimestamp: the older AppSchedule keeps a task nobody holds
    generation: int | None
    resource_version: str
    deleting: bool
    spec: Mapping[str, Any]
    status: Mapping[str, Any]
    declared: tuple[str, ...]  # task names as written, also of invalid tasks
    valid: frozenset[str]  # tasks that would get a CronJob if nothing else stood in the way
    resumed: str = ""  # its appschedule.dev/resumed annotation (pause.py): when each paused task was resumed
    schedules: Mapping[str, int] = field(default_factory=lambda: _NO_SCHEDULES)  # a task with several: how many

    def task_cronjobs(self, task: str) -> list[str]:
        """The CronJob names a task holds: its own, and one for each further schedule it gives (whether or not its
        schedules merge into fewer: the names stay reserved for it, so no other task can take one)."""
        first = naming.cronjob_name(self.name, task)
        return [naming.part_cronjob_name(first, i) for i in range(self.schedules.get(task, 1))]

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def deployment(self) -> str:
        return str(_dict(self.spec.get("deploymentRef")).get("name") or "")

    @property
    def unobserved(self) -> bool:
        """Its spec changed since the status was last written (a generation no reconcile has seen): an edit made
        while the operator was down, planned first after a restart."""
        return self.generation != self.status.get("observedGeneration")

    @property
    def seniority(self) -> tuple[str, str]:
        return (self.created, self.name)

    def cronjob_names(self) -> dict[str, str]:
        return {name: t for t in self.declared for name in self.task_cronjobs(t)}

    @property
    def calendars(self) -> tuple[str, ...]:
        """The AppScheduleCalendars its spec names (strings only: the schema says what else is wrong)."""
        names = self.spec.get("calendars")
        return tuple(dict.fromkeys(n for n in names if isinstance(n, str))) if isinstance(names, list) else ()

    def as_object(self) -> dict[str, Any]:
        """The AppSchedule as render and plan read it."""
        meta: dict[str, Any] = {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "generation": self.generation,
            "creationTimestamp": self.created,
            "resourceVersion": self.resource_version,
        }
        if self.resumed:
            meta["annotations"] = {ANNOTATION_RESUMED: self.resumed}
        return {
            "apiVersion": naming.API_VERSION,
            "kind": naming.KIND,
            "metadata": meta,
            "spec": dict(self.spec),
            "status": dict(self.status),
        }

    def same_except_status(self, other: AppScheduleView) -> bool:
        return (self.uid, self.generation, self.deleting, self.created, self.spec, self.resumed) == (
            other.uid,
            other.generation,
            other.deleting,
            other.created,
            other.spec,
            other.resumed,
        )


def project_appschedule(body: Mapping[str, Any]) -> AppScheduleView:
    meta = _dict(body.get("metadata"))
    spec = _dict(body.get("spec"))
    tasks = spec.get("tasks")
    declared = tuple(
        str(t["name"]) for t in (tasks if isinstance(tasks, list) else []) if isinstance(t, dict) and "name" in t
    )
    return AppScheduleView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        generation=meta.get("generation"),
        resource_version=str(meta.get("resourceVersion") or ""),
        deleting=bool(meta.get("deletionTimestamp")),
        spec=_shared_dict(spec),
        status=_shared_dict(body.get("status")),
        declared=declared,
        valid=frozenset(valid_tasks(spec)),
        resumed=str(_dict(meta.get("annotations")).get(ANNOTATION_RESUMED) or "")[:RESUMED_MAX],
        schedules={
            str(t["name"]): min(len(t["schedules"]), SCHEDULES_MAX)
            for t in (tasks if isinstance(tasks, list) else [])
            if isinstance(t, dict) and "name" in t and isinstance(t.get("schedules"), list) and len(t["schedules"]) > 1
        }
        or _NO_SCHEDULES,  # one object for every AppSchedule without several schedules
    )


@dataclass(frozen=True)
class DeploymentView:
    namespace: str
    name: str
    selector: Mapping[str, Any]
    template: Mapping[str, Any]

    def as_object(self) -> dict[str, Any]:
        return {
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"selector": dict(self.selector), "template": dict(self.template)},
        }


def project_deployment(body: Mapping[str, Any]) -> DeploymentView:
    meta, spec = _dict(body.get("metadata")), _dict(body.get("spec"))
    return DeploymentView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        selector=_shared_dict(spec.get("selector")),
        template=_shared_dict(spec.get("template")),
    )


@dataclass(frozen=True)
class CronJobView:
    namespace: str
    name: str
    uid: str
    resource_version: str
    appschedule: str  # its appschedule.dev/appschedule label
    task: str  # its appschedule.dev/task label
    controller: str  # uid of its controller ownerReference, "" when none
    metadata: Mapping[str, Any]  # labels, annotations, ownerReferences
    spec: Mapping[str, Any]
    last_schedule_time: str | None
    created: str = ""  # its creationTimestamp: a cut-over's cut (cutover.py)

    def ours(self, view: AppScheduleView) -> bool:
        """Controlled by this AppSchedule, or, with no controller at all (an owner reference removed by
        hand), carrying its label and the name of a task it declares: ours to apply, and to put the
        reference back on. An ownerless CronJob with our labels under any other name is not adopted (its
        labels are anyone's to write: adopting it would list a task nobody declared)."""
        if self.controller == view.uid:
            return True
        return self.controller == "" and self.appschedule == view.name and self.name in view.cronjob_names()

    def same_except_version(self, other: CronJobView) -> bool:
        return (self.uid, self.metadata, self.spec, self.last_schedule_time) == (
            other.uid,
            other.metadata,
            other.spec,
            other.last_schedule_time,
        )

    def as_object(self) -> dict[str, Any]:
        metadata = {"name": self.name, "namespace": self.namespace, "uid": self.uid, **self.metadata}
        status = {"lastScheduleTime": self.last_schedule_time} if self.last_schedule_time else {}
        return {"metadata": metadata, "spec": dict(self.spec), "status": status}


def project_cronjob(body: Mapping[str, Any]) -> CronJobView:
    meta = _dict(body.get("metadata"))
    labels = {str(k): str(v) for k, v in _dict(meta.get("labels")).items()}
    owners = [o for o in _list(meta.get("ownerReferences")) if isinstance(o, Mapping)]
    controller = next((str(o.get("uid")) for o in owners if o.get("controller")), "")
    kept = {"labels": labels, "annotations": _dict(meta.get("annotations")), "ownerReferences": owners}
    return CronJobView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        appschedule=labels.get(naming.LABEL_APPSCHEDULE, ""),
        task=labels.get(naming.LABEL_TASK, ""),
        controller=controller,
        metadata=_shared_dict({k: v for k, v in kept.items() if v}),
        spec=_shared_dict(body.get("spec")),
        last_schedule_time=_text(_dict(body.get("status")).get("lastScheduleTime")),
        created=_text(meta.get("creationTimestamp")) or "",
    )


JOB_ANNOTATIONS = (
    naming.ANNOTATION_SCHEDULED_TIME,
    naming.ANNOTATION_IDEMPOTENCY_KEY,
    naming.CRONJOB_SCHEDULED_TIMESTAMP,
    naming.ANNOTATION_FILED,
    naming.ANNOTATION_RUN_KIND,
    naming.ANNOTATION_BACKFILL,
)


@dataclass(frozen=True)
class JobView:
    """A Job of one of our tasks (the watch is filtered by the task label on the API server): what the
    ledger reads, nothing else (no pod template, no managedFields)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    appschedule: str
    task: str
    created: str
    annotations: Mapping[str, str]  # only JOB_ANNOTATIONS
    finalizer: bool  # holds our ledger finalizer
    deleting: bool
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    outcome: JobOutcome | None = None  # the Job's terminal condition
    reason: str | None = None  # the Failed condition's reason, e.g. DeadlineExceeded, BackoffLimitExceeded
    finish_time: str | None = None
    idle: bool = False  # spec.completions is 0: it runs nothing (a later schedule's Job for a minute an earlier one
    # runs, admission.py), so it is no run of its time

    def same_except_version(self, other: JobView) -> bool:
        return {**self.__dict__, "resource_version": ""} == {**other.__dict__, "resource_version": ""}


def _count(value: object) -> int:
    """A count from a Job's status; anything else (it can be anything a client wrote) is 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31 else 0


def idle(completions: object) -> bool:
    """Whether a Job's spec.completions is 0: it runs nothing (admission.py)."""
    return isinstance(completions, int) and not isinstance(completions, bool) and completions == 0


def project_job(body: Mapping[str, Any]) -> JobView:
    meta, status = _dict(body.get("metadata")), _dict(body.get("status"))
    labels = _dict(meta.get("labels"))
    annotations = _dict(meta.get("annotations"))
    outcome: JobOutcome | None = None
    reason = finish = None
    for condition in _list(status.get("conditions")):
        if isinstance(condition, Mapping) and condition.get("status") == "True":
            kind = condition.get("type")
            if kind != "Complete" and kind != "Failed":
                continue
            outcome, reason = kind, _text(condition.get("reason"))
            finish = _text(condition.get("lastTransitionTime"))
    return JobView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        appschedule=str(labels.get(naming.LABEL_APPSCHEDULE) or ""),
        task=str(labels.get(naming.LABEL_TASK) or ""),
        created=str(meta.get("creationTimestamp") or ""),
        annotations={k: str(annotations[k]) for k in JOB_ANNOTATIONS if k in annotations},
        finalizer=isinstance(meta.get("finalizers"), list) and naming.LEDGER_FINALIZER in meta["finalizers"],
        deleting=bool(meta.get("deletionTimestamp")),
        active=_count(status.get("active")),
        succeeded=_count(status.get("succeeded")),
        failed=_count(status.get("failed")),
        outcome=outcome,
        reason=str(reason) if reason else None,
        finish_time=_text(status.get("completionTime")) or finish,
        idle=idle(_dict(body.get("spec")).get("completions")),
    )


CLAIM_PREFIX = "appschedule.dev/claim: "  # the claim libraries' line in a container's termination message
CLAIM_OUTCOMES = ("won", "taken-over", "lost")
# a container that cannot start, by its waiting reason (the kubelet's); anything else waiting is not a failure yet
_CANNOT_START = {
    "ImagePullBackOff": "ImagePullBackOff",
    "ErrImagePull": "ErrImagePull",
    "InvalidImageName": "InvalidImageName",
    "CreateContainerConfigError": "ContainerConfigError",
    "CreateContainerError": "CreateContainerError",
    "CrashLoopBackOff": "CrashLoopBackOff",
}


@dataclass(frozen=True)
class PodView:
    """A pod of one of our Jobs (the watch is filtered by the task label on the API server): its Job, whether it
    has finished, what its container's claim came to, and why it failed or cannot start."""

    namespace: str
    name: str
    resource_version: str
    job: str  # its Job's name (the Job controller's label), "" when it has none
    created: str
    finished: bool  # phase Succeeded or Failed
    claim: tuple[str, str] | None = None  # (outcome, key) of the last claim line its containers wrote
    failure: str | None = None  # OOMKilled, exit 3, Unschedulable, ImagePullBackOff, Evicted...

    def same_except_version(self, other: PodView) -> bool:
        return {**self.__dict__, "resource_version": ""} == {**other.__dict__, "resource_version": ""}


def _claim_of(message: Any) -> tuple[str, str] | None:
    """The last claim line of a termination message (the app may write its own lines around it); a line of
    another form, an unknown outcome or a key that is not text of a key's length reads as no claim."""
    found = None
    for line in message.splitlines() if isinstance(message, str) else []:
        if not line.startswith(CLAIM_PREFIX):
            continue
        outcome, _, key = line[len(CLAIM_PREFIX) :].strip().partition(" ")
        if outcome in CLAIM_OUTCOMES and 0 < len(key) <= naming.TASK_NAME_MAX + 21 and key.isascii():
            found = (outcome, key)
    return found


def _container_failure(status: Mapping[str, Any]) -> str | None:
    """Why a container failed or cannot start: OOMKilled, exit N, its waiting reason; None when it did not."""
    state = _dict(status.get("state"))
    terminated, waiting = _dict(state.get("terminated")), _dict(state.get("waiting"))
    if terminated:
        reason, code = _text(terminated.get("reason")), terminated.get("exitCode")
        if reason == "OOMKilled":
            return "OOMKilled"
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return f"exit {code}" if -(2**31) <= code < 2**31 else "exit ?"
        if reason in ("ContainerCannotRun", "StartError", "DeadlineExceeded"):
            return reason
        return None
    reason = _text(waiting.get("reason"))
    return _CANNOT_START.get(reason or "")


@dataclass(frozen=True)
class CalendarView:
    """An AppScheduleCalendar: its blackouts as read, or why they do not read (``problem``: the field and why; the
    API server's schema refuses most, not the rules between fields)."""

    namespace: str
    name: str
    resource_version: str
    blackouts: tuple[Blackout, ...] = ()
    problem: str | None = None


def project_calendar(body: Mapping[str, Any]) -> CalendarView:
    meta = _dict(body.get("metadata"))
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    version = str(meta.get("resourceVersion") or "")
    try:
        spec = CalendarSpec.model_validate(_dict(body.get("spec")))
    except ValidationError as error:
        first = error.errors()[0]
        where = "spec" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"].removeprefix("Value error, ")
        said = printable(f"{where}: {message}", 512)
        return CalendarView(namespace, name, version, problem=said)
    return CalendarView(namespace, name, version, tuple(spec.blackouts or ()))


# any projection a watch makes (shell/watches.py)
View = AppScheduleView | DeploymentView | CronJobView | JobView | PodView | CalendarView


def project_pod(body: Mapping[str, Any]) -> PodView:
    meta, status = _dict(body.get("metadata")), _dict(body.get("status"))
    labels = _dict(meta.get("labels"))
    job = _text(labels.get(naming.JOB_NAME_LABEL)) or _text(labels.get("job-name")) or ""
    phase = _text(status.get("phase"))
    containers = [_dict(c) for c in _list(status.get("containerStatuses"))]
    inits = [_dict(c) for c in _list(status.get("initContainerStatuses"))]
    claim = None
    for container in containers:
        terminated = _dict(_dict(container.get("state")).get("terminated"))
        claim = _claim_of(terminated.get("message")) or claim
    failure = None
    if _text(status.get("reason")) == "Evicted":
        failure = "Evicted"
    for container in [*inits, *containers]:
        failure = failure or _container_failure(container)
    for condition in _list(status.get("conditions")):
        if (
            failure is None
            and isinstance(condition, Mapping)
            and condition.get("type") == "PodScheduled"
            and condition.get("status") == "False"
            and condition.get("reason") == "Unschedulable"
        ):
            failure = "Unschedulable"
    return PodView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        job=printable(job, 253),
        created=str(meta.get("creationTimestamp") or ""),
        finished=phase in ("Succeeded", "Failed"),
        claim=claim,
        failure=printable(failure, FAILURE_MAX) if failure else None,
    )


@dataclass(frozen=True)
class Holder:
    """Another AppSchedule's task, by the name of its AppSchedule and of the CronJob or task."""

    appschedule: str
    name: str  # the CronJob's name (a task held elsewhere) or the task's (a CronJob name claimed)


@dataclass(frozen=True)
class Claimant:
    """Another AppSchedule of the namespace that wants a task or a CronJob name too: its name, its seniority
    (``AppScheduleView.seniority``) and the task (its own name for it)."""

    appschedule: str
    seniority: tuple[str, str]
    task: str


@dataclass(frozen=True)
class World:
    """What one reconcile of one AppSchedule reads: a snapshot of the view, plus the facts about its
    namespace that task ownership needs (DESIGN "Task ownership")."""

    appschedule: AppScheduleView
    deployment: DeploymentView | None
    cronjobs: Mapping[str, CronJobView]  # carrying its appschedule label, by name
    held_elsewhere: Mapping[str, Holder]  # task -> the CronJob (and its AppSchedule) that runs it elsewhere
    # the facts ownership.py decides from: the others declaring each task validly, and the others whose
    # CronJob name for one of their tasks is one of this AppSchedule's (core/ownership.py picks the senior)
    declaring: Mapping[str, Sequence[Claimant]] = field(default_factory=dict)  # task -> others declaring it
    sharing_names: Mapping[str, Sequence[Claimant]] = field(default_factory=dict)  # CronJob name -> others with it
    jobs: Mapping[str, Sequence[JobView]] = field(default_factory=dict)  # task -> its Jobs (this AppSchedule's)
    pods: Mapping[str, Sequence[PodView]] = field(default_factory=dict)  # Job name -> its pods (of those Jobs)
    # the AppScheduleCalendars spec.calendars names, by name: None for one the namespace does not have
    calendars: Mapping[str, CalendarView | None] = field(default_factory=dict)
