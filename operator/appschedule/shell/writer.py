"""Every write of a reconcile, one method per kind of write: it makes the request (api.Cluster, in a thread:
the client is synchronous), records the answer in the Store (so the watch echo of our own write wakes
nothing), reads a failure through core/failures.py's one table, and returns what happened as a value.

What a reconcile can go on from comes back as a value (a CronJob refused: the task is named and keeps its
old CronJob; a write that is ours to retry; a Job not created; a status refused). What it cannot go on from
is raised: ``leader.Fenced`` (this replica may no longer write) and a failure the work queue retries
(the API server away, a conflict: the key is planned again from a newer view)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from ..core import cutover, naming
from ..core.events import Event
from ..core.view import CronJobView, project_cronjob, project_job
from . import metrics
from .api import Cluster, failure_of, message_of
from .leader import Fenced
from .store import Store
from .workqueue import Key

log = logging.getLogger("appschedule")


@dataclass(frozen=True)
class Refused:
    """The API server will not take this CronJob as it is (the user's to fix): the task is named, keeps its
    CronJob."""

    message: str


@dataclass(frozen=True)
class Ours:
    """We may not write it now (RBAC, a quota, a terminating namespace): reported, retried with back-off."""

    message: str


class Writer:
    """The writes of one reconcile of ``key``; ``wake`` queues the other AppSchedules a write concerns."""

    def __init__(self, cluster: Cluster, store: Store, key: Key, wake: Callable[[set[Key]], None]) -> None:
        self.cluster, self.store, self.key, self._wake = cluster, store, key, wake

    def _woken(self, keys: set[Key]) -> None:
        self._wake(keys - {self.key})  # not the key itself: it is being reconciled

    async def confirm_jobs(self) -> bool:
        """Put the AppSchedule's Jobs, as the API server has them now, in the view; True when that changed it."""
        bodies = await asyncio.to_thread(self.cluster.list_jobs, *self.key)
        changed = False
        for body in bodies:
            changed |= bool(self.store.put_job(project_job(body)))
        if changed:
            log.info("%s/%s: a Job the watch had not delivered yet was found by a list before writing", *self.key)
        return changed

    async def apply_cronjob(
        self, manifest: dict[str, Any], *, held: CronJobView | None, uid: str
    ) -> Refused | Ours | None:
        """Server-side apply of a task's CronJob (forced over one we hold); None when it went through."""
        name = str(manifest["metadata"]["name"])
        force = held is not None
        try:
            body = await self._apply(manifest, force=force, uid=uid)
        except ApiException as error:
            failure = failure_of(error)
            if failure == "conflict":
                return Refused(
                    f"a CronJob named {name!r} already exists and is not this AppSchedule's; rename or remove it"
                )
            if failure in ("refused", "too-large"):
                return Refused(f"the API server refused CronJob {name!r}: {message_of(error)}")
            if failure == "ours":
                return Ours(
                    f"the operator could not write CronJob {name!r} ({error.status} {error.reason}: "
                    f"{message_of(error)}); retrying"
                )
            raise
        self._woken(self.store.put_cronjob(project_cronjob(body)))
        return None

    async def _apply(self, manifest: dict[str, Any], *, force: bool, uid: str) -> dict[str, Any]:
        try:
            return await asyncio.to_thread(self.cluster.apply_cronjob, manifest, force=force)
        except ApiException as error:
            if force or error.status != 409:
                raise
        # a create found the name taken: ours after all (our label was removed by hand), or someone else's
        namespace, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        holder = await asyncio.to_thread(self.cluster.controller_of, namespace, name)
        if holder != uid:
            raise ApiException(status=409, reason="name taken")
        return await asyncio.to_thread(self.cluster.apply_cronjob, manifest, force=True)

    async def delete_cronjob(self, cronjob: CronJobView) -> None:
        await asyncio.to_thread(self.cluster.delete_cronjob, cronjob.namespace, cronjob.name, cronjob.uid)
        self._woken(self.store.drop_cronjob(cronjob.namespace, cronjob.name))

    async def suspend_cronjob(self, cronjob: CronJobView, at: str) -> Refused | None:
        """Suspend a CronJob this AppSchedule took a task over from, noting the cut on it; a refusal (it is gone,
        or another object of that name) comes back to report, the next plan reads the CronJob again."""
        annotations = {cutover.ANNOTATION_CUT: at}
        try:
            body = await asyncio.to_thread(
                self.cluster.suspend_cronjob, cronjob.namespace, cronjob.name, cronjob.uid, annotations
            )
        except ApiException as error:
            if error.status in (400, 403, 404, 409, 422):
                return Refused(f"could not suspend CronJob {cronjob.name!r}: {message_of(error)}")
            raise
        self._woken(self.store.put_cronjob(project_cronjob(body)))
        log.info("%s/%s: suspended CronJob %s, cut over at %s", *self.key, cronjob.name, at)
        return None

    async def create_job(self, manifest: Mapping[str, Any]) -> str | None:
        """Create a Job the operator starts; what failed (to report), None when it was made (or existed)."""
        name = manifest["metadata"]["name"]
        kind = manifest["metadata"]["annotations"][naming.ANNOTATION_RUN_KIND]
        try:
            body = await asyncio.to_thread(self.cluster.create_job, manifest)
        except Fenced:
            raise
        except (ApiException, HTTPError, OSError) as error:
            why = (
                f"{error.status} {error.reason}: {message_of(error)}"
                if isinstance(error, ApiException)
                else f"API server unreachable ({type(error).__name__})"
            )
            failure = f"could not create Job {name} ({kind}): {why}"
            log.warning("%s/%s: %s", *self.key, failure)
            return failure
        if body is not None:
            self.store.put_job(project_job(body))
            log.info("%s/%s: started Job %s (%s)", *self.key, body["metadata"]["name"], kind)
        return None

    async def delete_job(self, name: str) -> None:
        await asyncio.to_thread(self.cluster.delete_job, self.key[0], name)

    async def status(self, appschedule: Mapping[str, Any], status: Mapping[str, Any], now: datetime) -> bool:
        """Write the status with the resourceVersion it was computed from; False when the API server refused it
        for good (too large, invalid): then nothing the ledger decided can be recorded, so it is said (a
        Warning Event, a metric, the log) and every Job held for the ledger is let go."""
        try:
            body = await asyncio.to_thread(self.cluster.replace_status, appschedule, status)
        except ApiException as error:
            if failure_of(error) not in ("refused", "too-large"):
                raise
            await self._status_refused(appschedule, error, now)
            return False
        old = appschedule.get("status") or {}
        self.store.stored_status(self.key, body.get("status") or {}, str(body["metadata"]["resourceVersion"]))
        metrics.record_status(*self.key, old, body.get("status") or {})
        return True

    async def _status_refused(self, appschedule: Mapping[str, Any], error: ApiException, now: datetime) -> None:
        why = f"{error.status} {error.reason}: {message_of(error)}"[:900]
        log.error("%s/%s: the API server refused the status (%s); runs are not being recorded", *self.key, why)
        metrics.STATUS_REFUSED.labels(*self.key).inc()
        holding = [j.name for j in self.store.jobs_of(self.key) if j.finalizer]
        await self.release(holding)
        message = (
            f"the API server refused the status ({why}); runs are not being recorded and {len(holding)} "
            "Job(s) were let go; the CronJobs are reconciled as usual"
        )
        await self.events(appschedule, [Event("Warning", "StatusRefused", message)], now)

    async def release(self, jobs: Sequence[str]) -> int:
        """Take our finalizer off Jobs the ledger has recorded (or that nobody can record any more)."""
        namespace = self.key[0]
        released = 0
        for name in jobs:
            try:
                await asyncio.to_thread(self.cluster.release_job, namespace, name, naming.LEDGER_FINALIZER)
            except ApiException as error:  # tried again on the next reconcile: the Job still holds it
                log.warning("could not release Job %s/%s: %s %s", namespace, name, error.status, error.reason)
                continue
            self.store.released(namespace, name)
            released += 1
        return released

    async def events(self, appschedule: Mapping[str, Any], events: Sequence[Event], now: datetime) -> int:
        """Post Events, best effort: one that fails is logged, never fails the reconcile."""
        posted = 0
        for event in events:
            try:
                await asyncio.to_thread(self.cluster.post_event, appschedule, event, now)
                posted += 1
            except ApiException as error:
                log.warning("could not post event %s on %s/%s: %s", event.reason, *self.key, error.reason)
        return posted
