"""The operator's in-memory view of the world, fed by the watch streams; reconcile reads only this.

What is kept are projections, not whole objects (no managedFields, no Deployment status):

* every AppSchedule: its metadata that matters, raw spec and status, and what its spec declares
  (task names, the valid ones, their CronJob names), computed once per spec change;
* of Deployments only the pod template and selector, and only of Deployments some AppSchedule
  references (during the initial listing every Deployment is kept, since the AppSchedules may not have
  been listed yet; ``prune`` then drops the unreferenced ones);
* our CronJobs (the watch is filtered by label on the API server): labels, controller uid, the
  rendered-hash annotation, spec and lastScheduleTime.

Each ``put_*``/``drop_*`` returns the AppSchedules a change concerns, and only when something a
reconcile reads changed: a Deployment's status-only update (replica counts during a scale), or the
watch echo of our own write (already stored from the write's response), wakes nothing.

Indexes by namespace make every lookup of a reconcile independent of how many AppSchedules the
namespace has: who declares a task, who holds a CronJob for it, who claims a CronJob name.

Pure: no kopf, no client; the shell calls it from the event loop only, so it needs no lock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import naming
from .render import valid_tasks

Key = tuple[str, str]  # (namespace, name)


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    """A string field of an object a client wrote: a string, or None (never a number or a map made text)."""
    return value if isinstance(value, str) and value else None


def newer_or_same(new: str, old: str) -> bool:
    """Whether resourceVersion ``new`` is not older than ``old``. They are opaque to clients but are
    etcd revisions in practice; when either is not a number the new one is taken."""
    if new.isdigit() and old.isdigit():
        return int(new) >= int(old)
    return True


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

    @property
    def key(self) -> Key:
        return (self.namespace, self.name)

    @property
    def deployment(self) -> str:
        return str(_dict(self.spec.get("deploymentRef")).get("name") or "")

    @property
    def seniority(self) -> tuple[str, str]:
        return (self.created, self.name)

    def cronjob_names(self) -> dict[str, str]:
        return {naming.cronjob_name(self.name, t): t for t in self.declared}

    def as_object(self) -> dict[str, Any]:
        """The AppSchedule as render and plan read it."""
        meta = {"name": self.name, "namespace": self.namespace, "uid": self.uid, "generation": self.generation,
                "creationTimestamp": self.created, "resourceVersion": self.resource_version}  # fmt: skip
        return {"apiVersion": naming.API_VERSION, "kind": naming.KIND, "metadata": meta,
                "spec": dict(self.spec), "status": dict(self.status)}  # fmt: skip

    def same_except_status(self, other: AppScheduleView) -> bool:
        return (self.uid, self.generation, self.deleting, self.created, self.spec) == (
            other.uid, other.generation, other.deleting, other.created, other.spec
        )  # fmt: skip


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
        spec=spec,
        status=_dict(body.get("status")),
        declared=declared,
        valid=frozenset(valid_tasks(spec)),
    )


@dataclass(frozen=True)
class DeploymentView:
    namespace: str
    name: str
    selector: Mapping[str, Any]
    template: Mapping[str, Any]

    def as_object(self) -> dict[str, Any]:
        return {"metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"selector": dict(self.selector), "template": dict(self.template)}}  # fmt: skip


def project_deployment(body: Mapping[str, Any]) -> DeploymentView:
    meta, spec = _dict(body.get("metadata")), _dict(body.get("spec"))
    return DeploymentView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        selector=_dict(spec.get("selector")),
        template=_dict(spec.get("template")),
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
            other.uid, other.metadata, other.spec, other.last_schedule_time
        )  # fmt: skip

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
        metadata={k: v for k, v in kept.items() if v},
        spec=_dict(body.get("spec")),
        last_schedule_time=_text(_dict(body.get("status")).get("lastScheduleTime")),
    )


JOB_ANNOTATIONS = (
    naming.ANNOTATION_SCHEDULED_TIME,
    naming.ANNOTATION_IDEMPOTENCY_KEY,
    naming.CRONJOB_SCHEDULED_TIMESTAMP,
    naming.ANNOTATION_FILED,
)
LEDGER_FINALIZER = f"{naming.GROUP}/ledger"


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
    outcome: str | None = None  # "Complete" or "Failed" (the Job's terminal condition)
    reason: str | None = None  # the Failed condition's reason, e.g. DeadlineExceeded, BackoffLimitExceeded
    finish_time: str | None = None

    def same_except_version(self, other: JobView) -> bool:
        return {**self.__dict__, "resource_version": ""} == {**other.__dict__, "resource_version": ""}


def _count(value: object) -> int:
    """A count from a Job's status; anything else (it can be anything a client wrote) is 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31 else 0


def project_job(body: Mapping[str, Any]) -> JobView:
    meta, status = _dict(body.get("metadata")), _dict(body.get("status"))
    labels = _dict(meta.get("labels"))
    annotations = _dict(meta.get("annotations"))
    outcome = reason = finish = None
    for condition in _list(status.get("conditions")):
        if (
            isinstance(condition, Mapping)
            and condition.get("status") == "True"
            and condition.get("type") in ("Complete", "Failed")
        ):
            outcome, reason = str(condition["type"]), _text(condition.get("reason"))
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
        finalizer=isinstance(meta.get("finalizers"), list) and LEDGER_FINALIZER in meta["finalizers"],
        deleting=bool(meta.get("deletionTimestamp")),
        active=_count(status.get("active")),
        succeeded=_count(status.get("succeeded")),
        failed=_count(status.get("failed")),
        outcome=outcome,
        reason=str(reason) if reason else None,
        finish_time=_text(status.get("completionTime")) or finish,
    )


UNKNOWN = object()  # a Deployment the view has never heard of (neither its template nor its absence)


@dataclass(frozen=True)
class World:
    """What one reconcile of one AppSchedule reads: a snapshot of the view, plus the facts about its
    namespace that task ownership needs (DESIGN "Task ownership")."""

    appschedule: AppScheduleView
    deployment: DeploymentView | None
    cronjobs: Mapping[str, CronJobView]  # carrying its appschedule label, by name
    held_elsewhere: Mapping[str, str]  # task -> "CronJob 'x' of AppSchedule 'y'", for tasks someone else runs
    senior_claimant: Mapping[str, str]  # task -> an older AppSchedule declaring it validly (when nobody holds it)
    name_claimant: Mapping[str, str]  # CronJob name -> "'x' (task 'y')", an older AppSchedule whose task has it
    jobs: Mapping[str, Sequence[JobView]] = field(default_factory=dict)  # task -> its Jobs (this AppSchedule's)


@dataclass
class State:
    appschedules: dict[Key, AppScheduleView] = field(default_factory=dict)
    deployments: dict[Key, DeploymentView | None] = field(default_factory=dict)  # None: known to be absent
    cronjobs: dict[Key, CronJobView] = field(default_factory=dict)
    jobs: dict[Key, JobView] = field(default_factory=dict)
    listing: bool = True  # until the initial listing of every watch is in (see module docstring)
    # indexes
    _declarers: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, task) -> validly
    _holders: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, task) -> CronJob names
    _labelled: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, appschedule) -> CJs
    _named: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, CronJob name) -> AS
    _referencing: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, deployment) -> AS
    _runs: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, appschedule) -> Jobs

    # -- AppSchedules

    def put_appschedule(self, view: AppScheduleView) -> set[Key]:
        old = self.appschedules.get(view.key)
        if old is not None and not newer_or_same(view.resource_version, old.resource_version):
            return set()
        self.appschedules[view.key] = view
        if old is not None and old.same_except_status(view):
            return {view.key} if old.status != view.status else set()
        if old is not None:
            self._unindex(old)
        self._index(view)
        woken = {view.key}
        if old is None or (old.valid, old.declared) != (view.valid, view.declared):
            tasks = set(view.declared) | (set(old.declared) if old else set())
            woken |= self._declaring(view.namespace, tasks)
        return woken

    def drop_appschedule(self, namespace: str, name: str) -> set[Key]:
        old = self.appschedules.pop((namespace, name), None)
        if old is None:
            return set()
        self._unindex(old)
        return self._declaring(namespace, set(old.declared))  # a task it held may go to a sibling

    def stored_status(self, key: Key, status: Mapping[str, Any], resource_version: str) -> None:
        """Our own status write went through: remember its result, so its watch echo wakes nothing."""
        old = self.appschedules.get(key)
        if old is not None and newer_or_same(resource_version, old.resource_version):
            self.appschedules[key] = AppScheduleView(**{**old.__dict__, "status": dict(status),
                                                        "resource_version": resource_version})  # fmt: skip

    def _index(self, view: AppScheduleView) -> None:
        ns = view.namespace
        for task in view.valid:
            self._declarers[ns, task].add(view.name)
        for cronjob in view.cronjob_names():
            self._named[ns, cronjob].add(view.name)
        self._referencing[ns, view.deployment].add(view.name)

    def _unindex(self, view: AppScheduleView) -> None:
        ns = view.namespace
        for task in view.valid:
            _discard(self._declarers, (ns, task), view.name)
        for cronjob in view.cronjob_names():
            _discard(self._named, (ns, cronjob), view.name)
        _discard(self._referencing, (ns, view.deployment), view.name)

    def _declaring(self, namespace: str, tasks: set[str]) -> set[Key]:
        return {(namespace, a) for t in tasks for a in self._declarers.get((namespace, t), ())}

    # -- Deployments

    def referenced(self, namespace: str, name: str) -> bool:
        return bool(self._referencing.get((namespace, name)))

    def referencing(self, namespace: str, name: str) -> set[Key]:
        return {(namespace, a) for a in self._referencing.get((namespace, name), ())}

    def put_deployment(self, view: DeploymentView) -> set[Key]:
        key = (view.namespace, view.name)
        if not self.listing and not self.referenced(*key):
            self.deployments.pop(key, None)
            return set()
        if self.deployments.get(key, UNKNOWN) == view:
            return set()  # a status-only update: replica counts, conditions
        self.deployments[key] = view
        return self.referencing(*key)

    def drop_deployment(self, namespace: str, name: str) -> set[Key]:
        if self.referenced(namespace, name):
            self.deployments[namespace, name] = None
        else:
            self.deployments.pop((namespace, name), None)
        return self.referencing(namespace, name)

    def fetched_deployment(self, namespace: str, name: str, view: DeploymentView | None) -> None:
        """A Deployment read on a miss: kept unless a watch event got there first (it is newer)."""
        self.deployments.setdefault((namespace, name), view)

    def prune(self) -> None:
        """The initial listing is in: from now on only referenced Deployments are kept."""
        self.listing = False
        for key in [k for k in self.deployments if not self.referenced(*k)]:
            del self.deployments[key]

    # -- CronJobs

    def put_cronjob(self, view: CronJobView) -> set[Key]:
        key = (view.namespace, view.name)
        old = self.cronjobs.get(key)
        if old is not None and not newer_or_same(view.resource_version, old.resource_version):
            return set()
        self.cronjobs[key] = view
        if old is not None and old.same_except_version(view):
            return set()
        if old is not None:
            self._unindex_cronjob(old)
        self._index_cronjob(view)
        woken = {(view.namespace, view.appschedule)} if view.appschedule else set()
        if old is not None and old.appschedule:
            woken.add((old.namespace, old.appschedule))
        if old is None or (old.task, old.appschedule) != (view.task, view.appschedule):
            woken |= self._declaring(view.namespace, {view.task} | ({old.task} if old else set()))
        return woken

    def drop_cronjob(self, namespace: str, name: str) -> set[Key]:
        old = self.cronjobs.pop((namespace, name), None)
        if old is None:
            return set()
        self._unindex_cronjob(old)
        woken = {(namespace, old.appschedule)} if old.appschedule else set()
        return woken | self._declaring(namespace, {old.task})  # the task may go to another AppSchedule now

    def _index_cronjob(self, view: CronJobView) -> None:
        self._holders[view.namespace, view.task].add(view.name)
        self._labelled[view.namespace, view.appschedule].add(view.name)

    def _unindex_cronjob(self, view: CronJobView) -> None:
        _discard(self._holders, (view.namespace, view.task), view.name)
        _discard(self._labelled, (view.namespace, view.appschedule), view.name)

    # -- Jobs

    def put_job(self, view: JobView) -> set[Key]:
        key = (view.namespace, view.name)
        old = self.jobs.get(key)
        if old is not None and not newer_or_same(view.resource_version, old.resource_version):
            return set()
        self.jobs[key] = view
        if old is not None and old.same_except_version(view):
            return set()
        if old is not None:
            _discard(self._runs, (old.namespace, old.appschedule), old.name)
        self._runs[view.namespace, view.appschedule].add(view.name)
        return {(view.namespace, view.appschedule)} if view.appschedule else set()

    def drop_job(self, namespace: str, name: str) -> set[Key]:
        old = self.jobs.pop((namespace, name), None)
        if old is None:
            return set()
        _discard(self._runs, (namespace, old.appschedule), name)
        return {(namespace, old.appschedule)} if old.appschedule else set()

    def jobs_of(self, key: Key) -> list[JobView]:
        """The Jobs labelled with this AppSchedule's name."""
        return [self.jobs[key[0], n] for n in sorted(self._runs.get(key, ()))]

    def released(self, namespace: str, name: str) -> None:
        """Our finalizer was removed from a Job and it was marked filed: remember it, so its watch echo
        wakes nothing."""
        old = self.jobs.get((namespace, name))
        if old is not None:
            annotations = {**old.annotations, naming.ANNOTATION_FILED: "true"}
            self.jobs[namespace, name] = JobView(**{**old.__dict__, "finalizer": False, "annotations": annotations})

    # -- what a reconcile reads

    def world(self, key: Key) -> World | DeploymentMiss | None:
        """The snapshot for one reconcile; None when there is nothing to reconcile (gone, being deleted);
        a ``DeploymentMiss`` when the Deployment it references must be read first."""
        view = self.appschedules.get(key)
        if view is None or view.deleting:
            return None
        namespace = view.namespace
        deployment = self.deployments.get((namespace, view.deployment), UNKNOWN)
        if deployment is UNKNOWN:
            return DeploymentMiss(namespace, view.deployment)
        assert deployment is None or isinstance(deployment, DeploymentView)
        cronjobs = {n: self.cronjobs[namespace, n] for n in self._labelled.get(key, ())}
        held: dict[str, str] = {}
        senior: dict[str, str] = {}
        for task in set(view.declared):
            for name in self._holders.get((namespace, task), ()):
                other = self.cronjobs[namespace, name]
                if not other.ours(view):
                    held[task] = f"CronJob {name!r} of AppSchedule {other.appschedule!r}"
            if task in view.valid:
                older = [
                    self.appschedules[namespace, a]
                    for a in self._declarers.get((namespace, task), ())
                    if a != view.name
                ]
                older = [a for a in older if a.seniority < view.seniority]
                if older:
                    senior[task] = min(older, key=lambda a: a.seniority).name
        claimed: dict[str, str] = {}
        for cronjob in view.cronjob_names():
            for other_name in self._named.get((namespace, cronjob), ()):
                sibling = self.appschedules[namespace, other_name]
                if other_name != view.name and sibling.seniority < view.seniority:
                    claimed[cronjob] = f"{other_name!r} (task {sibling.cronjob_names()[cronjob]!r})"
        jobs: dict[str, list[JobView]] = {}
        for job in self.jobs_of(key):
            jobs.setdefault(job.task, []).append(job)
        return World(view, deployment, cronjobs, held, senior, claimed, jobs)


@dataclass(frozen=True)
class DeploymentMiss:
    namespace: str
    name: str


def _discard(index: dict[Key, set[str]], key: Key, value: str) -> None:
    values = index.get(key)
    if values is not None:
        values.discard(value)
        if not values:
            del index[key]


def world_of(
    appschedule: Mapping[str, Any],
    deployment: Mapping[str, Any] | None,
    cronjobs: Sequence[Mapping[str, Any]] = (),
    siblings: Sequence[Mapping[str, Any]] = (),
    jobs: Sequence[Mapping[str, Any]] = (),
) -> World:
    """The World a reconcile of ``appschedule`` would read, built from whole objects as the watches
    build the view (for tests, benchmarks and offline use)."""
    state = State()
    for obj in [*siblings, appschedule]:
        state.put_appschedule(project_appschedule(obj))
    if deployment is not None:
        state.put_deployment(project_deployment(deployment))
    for cronjob in cronjobs:
        state.put_cronjob(project_cronjob(cronjob))
    for job in jobs:
        state.put_job(project_job(job))
    state.prune()
    view = project_appschedule(appschedule)
    if deployment is None:
        state.drop_deployment(view.namespace, view.deployment)
    built = state.world(view.key)
    if not isinstance(built, World):
        raise ValueError(f"no world for {view.key}: the Deployment is not {view.deployment!r}, or it is being deleted")
    return built
