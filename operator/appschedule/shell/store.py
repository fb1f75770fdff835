"""The operator's in-memory store of the world, fed by the watch streams; reconcile reads only this.

It keeps the projections of core/view.py:

* every AppSchedule;
* of Deployments only those some AppSchedule references (during the initial listing every Deployment
  is kept, since the AppSchedules may not have been listed yet; ``prune`` then drops the unreferenced ones);
* our CronJobs (the watch is filtered by label on the API server), our Jobs and their pods (what the ledger
  reads of a pod: its Job, whether it finished, its claim's outcome, why it failed).

Each ``put_*``/``drop_*`` returns the AppSchedules a change concerns, and only when something a
reconcile reads changed: a Deployment's status-only update (replica counts during a scale), or the
watch echo of our own write (already stored from the write's response), wakes nothing.

Indexes by namespace make every lookup of a reconcile independent of how many AppSchedules the
namespace has: who declares a task, who holds a CronJob for it, who claims a CronJob name.

No kopf, no client; the shell calls it from the event loop only, so it needs no lock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import naming
from ..core.view import (
    AppScheduleView,
    CalendarView,
    Claimant,
    CronJobView,
    DeploymentView,
    Holder,
    JobView,
    Key,
    PodView,
    View,
    World,
    newer_or_same,
)

UNKNOWN = object()  # a Deployment the view has never heard of (neither its template nor its absence)


@dataclass
class Store:
    appschedules: dict[Key, AppScheduleView] = field(default_factory=dict)
    deployments: dict[Key, DeploymentView | None] = field(default_factory=dict)  # None: known to be absent
    cronjobs: dict[Key, CronJobView] = field(default_factory=dict)
    jobs: dict[Key, JobView] = field(default_factory=dict)
    pods: dict[Key, PodView] = field(default_factory=dict)
    calendars: dict[Key, CalendarView] = field(default_factory=dict)
    listing: bool = True  # until the initial listing of every watch is in (see module docstring)
    # indexes
    _declarers: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, task) -> validly
    _holders: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, task) -> CronJob names
    _labelled: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, appschedule) -> CJs
    _named: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, CronJob name) -> AS
    _referencing: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, deployment) -> AS
    _naming_calendar: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, calendar) -> AS
    _runs: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, appschedule) -> Jobs
    _pods_of: dict[Key, set[str]] = field(default_factory=lambda: defaultdict(set))  # (ns, Job) -> its pods
    # Jobs that left the watch still holding the ledger's finalizer (their task label was removed), by namespace
    _left: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

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
            self.appschedules[key] = AppScheduleView(
                **{**old.__dict__, "status": dict(status), "resource_version": resource_version}
            )

    def _index(self, view: AppScheduleView) -> None:
        ns = view.namespace
        for task in view.valid:
            self._declarers[ns, task].add(view.name)
        for cronjob in view.cronjob_names():
            self._named[ns, cronjob].add(view.name)
        self._referencing[ns, view.deployment].add(view.name)
        for calendar in view.calendars:
            self._naming_calendar[ns, calendar].add(view.name)

    def _unindex(self, view: AppScheduleView) -> None:
        ns = view.namespace
        for task in view.valid:
            _discard(self._declarers, (ns, task), view.name)
        for cronjob in view.cronjob_names():
            _discard(self._named, (ns, cronjob), view.name)
        _discard(self._referencing, (ns, view.deployment), view.name)
        for calendar in view.calendars:
            _discard(self._naming_calendar, (ns, calendar), view.name)

    def _declaring(self, namespace: str, tasks: set[str]) -> set[Key]:
        return {(namespace, a) for t in tasks for a in self._declarers.get((namespace, t), ())}

    # -- AppScheduleCalendars: every one of the scope is kept (they are few and small); a change wakes the
    # AppSchedules that name it

    def put_calendar(self, view: CalendarView) -> set[Key]:
        key = (view.namespace, view.name)
        old = self.calendars.get(key)
        if old is not None and not newer_or_same(view.resource_version, old.resource_version):
            return set()
        self.calendars[key] = view
        if old is not None and (old.blackouts, old.problem) == (view.blackouts, view.problem):
            return set()
        return self._naming(*key)

    def drop_calendar(self, namespace: str, name: str) -> set[Key]:
        return self._naming(namespace, name) if self.calendars.pop((namespace, name), None) is not None else set()

    def _naming(self, namespace: str, calendar: str) -> set[Key]:
        return {(namespace, a) for a in self._naming_calendar.get((namespace, calendar), ())}

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

    def fired(self, view: View) -> bool:
        """Whether this is a CronJob of ours whose last schedule time alone changed: its controller made a Job, whose
        own events come with it (the controller wakes it with that burst, not once more on its own)."""
        if not isinstance(view, CronJobView):
            return False
        old = self.cronjobs.get((view.namespace, view.name))
        return old is not None and (old.uid, old.metadata, old.spec) == (view.uid, view.metadata, view.spec)

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
        if not view.appschedule:  # its AppSchedule label was removed: nobody can record it; (ns, "") lets it go
            return {(view.namespace, "")} if view.finalizer else set()
        return {(view.namespace, view.appschedule)}

    def drop_job(self, namespace: str, name: str, *, held: bool = False) -> set[Key]:
        """A Job left the watch. ``held``: it still holds the ledger's finalizer and is not being deleted, so it
        was not deleted but left the watch's selector (its task label was removed): it is let go by the
        reconcile of (namespace, "") (``take_left``), as a Job whose AppSchedule is gone.

        A Job that had ended and been filed (its end in the status, its finalizer let go: what a history limit
        deletes) wakes nothing: the ledger counts a filed Job that ended as gone already (core/ledger), so its
        going changes no plan; one reconcile a run less (tests/unit/test_filed_jobs.py)."""
        woken: set[Key] = set()
        if held:
            self._left[namespace].add(name)
            woken.add((namespace, ""))
        old = self.jobs.pop((namespace, name), None)
        if old is None:
            return woken
        _discard(self._runs, (namespace, old.appschedule), name)
        if not old.appschedule or filed_and_over(old):
            return woken
        return woken | {(namespace, old.appschedule)}

    # -- pods of our Jobs

    def put_pod(self, view: PodView) -> set[Key]:
        """A pod of one of our Jobs. The ledger reads its pods when the Job ends, and the Job's own event wakes
        that reconcile: a pod wakes its AppSchedule only when its Job has ended already (the ledger may be waiting
        for the pod's last state) and what the ledger reads of it changed, so a run costs no extra reconcile."""
        key = (view.namespace, view.name)
        old = self.pods.get(key)
        if old is not None and not newer_or_same(view.resource_version, old.resource_version):
            return set()
        self.pods[key] = view
        if old is not None and old.job != view.job:
            _discard(self._pods_of, (old.namespace, old.job), old.name)
        self._pods_of[view.namespace, view.job].add(view.name)
        if old is not None and old.same_except_version(view):
            return set()
        return self._owner(view)

    def drop_pod(self, namespace: str, name: str) -> set[Key]:
        """A pod gone. It wakes its ended Job's AppSchedule only when it had not finished: the ledger may be
        waiting for its last state (core/ledger._pods_pending) and need wait no longer. A finished pod going
        (its Job deleted by a history limit, after the ledger read it) wakes nothing: one reconcile a run less."""
        old = self.pods.pop((namespace, name), None)
        if old is None:
            return set()
        _discard(self._pods_of, (namespace, old.job), name)
        return set() if old.finished else self._owner(old)

    # -- a watch's changes and listings (watches.py), by kind

    def put(self, view: View) -> set[Key]:
        if isinstance(view, AppScheduleView):
            return self.put_appschedule(view)
        if isinstance(view, DeploymentView):
            return self.put_deployment(view)
        if isinstance(view, CronJobView):
            return self.put_cronjob(view)
        if isinstance(view, JobView):
            return self.put_job(view)
        if isinstance(view, CalendarView):
            return self.put_calendar(view)
        return self.put_pod(view)

    def drop(self, kind: str, namespace: str, name: str, *, held: bool = False) -> set[Key]:
        if kind == "appschedules":
            return self.drop_appschedule(namespace, name)
        if kind == "deployments":
            return self.drop_deployment(namespace, name)
        if kind == "cronjobs":
            return self.drop_cronjob(namespace, name)
        if kind == "jobs":
            return self.drop_job(namespace, name, held=held)
        if kind == "calendars":
            return self.drop_calendar(namespace, name)
        return self.drop_pod(namespace, name)

    def replace(self, kind: str, namespace: str | None, views: Sequence[View]) -> set[Key]:
        """A listing of ``kind`` in ``namespace`` (None: in every namespace): those objects are these now; one held
        that the listing lacks was deleted while the watch was down (a Deployment known to be absent stays so)."""
        tables: dict[str, Mapping[Key, object]] = {
            "appschedules": self.appschedules, "deployments": self.deployments, "cronjobs": self.cronjobs,
            "jobs": self.jobs, "pods": self.pods, "calendars": self.calendars,
        }  # fmt: skip
        held = tables[kind]
        found = {(view.namespace, view.name) for view in views}
        woken: set[Key] = set()
        for key in [k for k, v in held.items() if v is not None and namespace in (None, k[0]) and k not in found]:
            woken |= self.drop(kind, *key)
        for view in views:
            woken |= self.put(view)
        return woken

    def _owner(self, pod: PodView) -> set[Key]:
        """The AppSchedule to wake for a change of this pod: its Job's, once the Job has ended."""
        job = self.jobs.get((pod.namespace, pod.job))
        ended = job is not None and job.appschedule and (job.outcome is not None or job.deleting)
        return {(pod.namespace, job.appschedule)} if job is not None and ended else set()

    def pods_of(self, namespace: str, job: str) -> list[PodView]:
        return [self.pods[namespace, n] for n in sorted(self._pods_of.get((namespace, job), ()))]

    def take_left(self, namespace: str) -> list[str]:
        """The Jobs of ``namespace`` that left the watch holding our finalizer, to release (once)."""
        return sorted(self._left.pop(namespace, set()))

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
        held: dict[str, Holder] = {}
        declaring: dict[str, list[Claimant]] = {}
        for task in set(view.declared):
            for name in self._holders.get((namespace, task), ()):
                other = self.cronjobs[namespace, name]
                if not other.ours(view):
                    held[task] = Holder(other.appschedule, name)
            others = sorted(a for a in self._declarers.get((namespace, task), ()) if a != view.name)
            if others:
                declaring[task] = [Claimant(a, self.appschedules[namespace, a].seniority, task) for a in others]
        naming_others: dict[str, list[Claimant]] = {}
        for cronjob in view.cronjob_names():
            for other_name in sorted(self._named.get((namespace, cronjob), ())):
                if other_name != view.name:
                    sibling = self.appschedules[namespace, other_name]
                    claim = Claimant(other_name, sibling.seniority, sibling.cronjob_names()[cronjob])
                    naming_others.setdefault(cronjob, []).append(claim)
        jobs: dict[str, list[JobView]] = {}
        pods: dict[str, list[PodView]] = {}
        for job in self.jobs_of(key):
            jobs.setdefault(job.task, []).append(job)
            if (namespace, job.name) in self._pods_of:
                pods[job.name] = self.pods_of(namespace, job.name)
        calendars = {name: self.calendars.get((namespace, name)) for name in view.calendars}
        return World(view, deployment, cronjobs, held, declaring, naming_others, jobs, pods, calendars)


@dataclass(frozen=True)
class DeploymentMiss:
    namespace: str
    name: str


def filed_and_over(job: JobView) -> bool:
    """A Job that ended, whose end the status holds: filed (the ledger's annotation) and its finalizer let go."""
    return bool(job.outcome and job.annotations.get(naming.ANNOTATION_FILED)) and not job.finalizer and not job.deleting


def _discard(index: dict[Key, set[str]], key: Key, value: str) -> None:
    values = index.get(key)
    if values is not None:
        values.discard(value)
        if not values:
            del index[key]
