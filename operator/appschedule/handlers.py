"""kopf wiring: watch events only enqueue AppSchedules; one work queue reconciles each through reconcile.plan.

Why a queue rather than kopf's change handlers: an AppSchedule is reconciled for many reasons (its
spec, its Deployment's rollout, a CronJob edited or deleted by hand, a sibling that frees a task, the
periodic resync) and must end in the same state whatever woke it. Every watch event therefore just
enqueues the AppSchedule's key; a worker takes a key, reads the world, calls the pure ``plan`` and
writes what it says. A key is never reconciled by two workers at once (a key that changes while being
reconciled is queued again), bursts collapse into one reconcile, and a failing key is retried with
exponential back-off without touching the others. kopf stores nothing on the objects (no finalizer,
no progress annotations): the state is the world itself, so a SIGKILL at any point loses nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import kopf
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from . import naming
from .reconcile import Event, Plan, plan

log = logging.getLogger("appschedule")
FIELD_MANAGER = "appschedule-operator"

Key = tuple[str, str]


@dataclass
class Options:
    """What ``appschedule run`` sets before kopf starts."""

    resync_seconds: float = 60.0
    workers: int = 4


OPTIONS = Options()


@dataclass
class Outcome:
    applied: int = 0
    deleted: int = 0
    status: int = 0
    events: int = 0

    @property
    def writes(self) -> int:
        return self.applied + self.deleted + self.status + self.events


# ---------------------------------------------------------------------------------------------------
# Reading and writing (synchronous kubernetes client, run in threads)


class Cluster:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.custom = client.CustomObjectsApi(api)
        self.apps = client.AppsV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)

    @staticmethod
    def _json(response: Any) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(response.data)
        return data

    def get_appschedule(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self._json(
                self.custom.get_namespaced_custom_object(
                    naming.GROUP, naming.VERSION, namespace, naming.PLURAL, name, _preload_content=False
                )
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def list_appschedules(self, namespace: str) -> list[dict[str, Any]]:
        items = self._json(
            self.custom.list_namespaced_custom_object(
                naming.GROUP, naming.VERSION, namespace, naming.PLURAL, _preload_content=False
            )
        )["items"]
        return list(items)

    def get_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        if not name:
            return None
        try:
            return self._json(self.apps.read_namespaced_deployment(name, namespace, _preload_content=False))
        except ApiException as error:
            if error.status == 404:
                return None
            raise

    def list_cronjobs(self, namespace: str, appschedule: str) -> list[dict[str, Any]]:
        selector = f"{naming.LABEL_APPSCHEDULE}={appschedule},{naming.MANAGED_BY}={naming.MANAGER}"
        response = self.batch.list_namespaced_cron_job(namespace, label_selector=selector, _preload_content=False)
        return list(self._json(response)["items"])

    def controller_of(self, namespace: str, name: str) -> str | None:
        """The uid of the controller of an existing CronJob ("" when it has none), None when there is none."""
        try:
            cronjob = self._json(self.batch.read_namespaced_cron_job(name, namespace, _preload_content=False))
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        owners = cronjob["metadata"].get("ownerReferences") or []
        return next((str(o.get("uid")) for o in owners if o.get("controller")), "")

    def apply_cronjob(self, manifest: Mapping[str, Any]) -> None:
        self.batch.patch_namespaced_cron_job(
            manifest["metadata"]["name"],
            manifest["metadata"]["namespace"],
            manifest,
            field_manager=FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )

    def delete_cronjob(self, namespace: str, name: str, uid: str | None) -> None:
        options = client.V1DeleteOptions(
            propagation_policy="Background", preconditions=client.V1Preconditions(uid=uid) if uid else None
        )
        try:
            self.batch.delete_namespaced_cron_job(name, namespace, body=options)
        except ApiException as error:
            if error.status not in (404, 409):
                raise

    def replace_status(self, appschedule: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        meta = appschedule["metadata"]
        body = {**appschedule, "status": status}
        self.custom.replace_namespaced_custom_object_status(
            naming.GROUP, naming.VERSION, meta["namespace"], naming.PLURAL, meta["name"], body
        )

    def post_event(self, appschedule: Mapping[str, Any], event: Event, now: datetime) -> None:
        meta = appschedule["metadata"]
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": naming.API_VERSION,
                "kind": naming.KIND,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": event.type,
            "reason": event.reason,
            "message": event.message[:1024],
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        self.core.create_namespaced_event(meta["namespace"], body)


def _refusal(error: ApiException) -> str | None:
    """The API server's reason for refusing an object, when retrying the same object cannot help."""
    if error.status in (400, 403, 404, 422) or (error.status == 500 and "typed patch" in str(error.body)):
        try:
            return str(json.loads(error.body).get("message") or error.reason)
        except (TypeError, ValueError):
            return str(error.reason)
    return None


def reconcile(cluster: Cluster, key: Key, now: datetime) -> Outcome:
    """Read the world for one AppSchedule, plan, and write what the plan says (nothing, usually).

    A CronJob the API server refuses (or whose name a CronJob we do not control already holds) is
    reported for its task and the rest of the plan still happens."""
    namespace, name = key
    appschedule = cluster.get_appschedule(namespace, name)
    if appschedule is None or appschedule["metadata"].get("deletionTimestamp"):
        return Outcome()  # gone: its CronJobs go with it: garbage collection by ownerReference
    deployment_name = str(((appschedule.get("spec") or {}).get("deploymentRef") or {}).get("name") or "")
    deployment = cluster.get_deployment(namespace, deployment_name)
    # a name too long for a label value cannot select anything; render reports it
    cronjobs = cluster.list_cronjobs(namespace, name) if len(name) <= naming.TASK_NAME_MAX else []
    siblings = [a for a in cluster.list_appschedules(namespace) if a["metadata"]["name"] != name]
    decided: Plan = plan(appschedule, deployment, cronjobs, siblings, now)

    outcome = Outcome()
    existing = {c["metadata"]["name"] for c in cronjobs}
    rejected: dict[str, str] = {}
    for manifest in decided.apply:
        task = manifest["metadata"]["labels"][naming.LABEL_TASK]
        cronjob = manifest["metadata"]["name"]
        holder = None if cronjob in existing else cluster.controller_of(namespace, cronjob)
        if holder is not None and holder != appschedule["metadata"]["uid"]:
            rejected[task] = (
                f"a CronJob named {cronjob!r} already exists and is not this AppSchedule's; rename or remove it"
            )
            continue
        try:
            cluster.apply_cronjob(manifest)
            outcome.applied += 1
        except ApiException as error:
            refusal = _refusal(error)
            if refusal is None:
                raise
            rejected[task] = f"the API server refused CronJob {cronjob!r}: {refusal}"
    if rejected:
        decided = plan(appschedule, deployment, cronjobs, siblings, now, rejected=rejected)
    uids = {c["metadata"]["name"]: c["metadata"].get("uid") for c in cronjobs}
    for cronjob in decided.delete:
        cluster.delete_cronjob(namespace, cronjob, uids.get(cronjob))
        outcome.deleted += 1
    if decided.status_changed:
        cluster.replace_status(appschedule, decided.status)
        outcome.status = 1
    for event in decided.events:
        try:
            cluster.post_event(appschedule, event, now)
            outcome.events += 1
        except ApiException as error:  # an Event is best effort: never fail the reconcile for it
            log.warning("could not post event %s on %s/%s: %s", event.reason, namespace, name, error.reason)
    return outcome


# ---------------------------------------------------------------------------------------------------
# The work queue


@dataclass
class Controller:
    cluster: Cluster
    options: Options
    queue: asyncio.Queue[Key] = field(default_factory=asyncio.Queue)
    pending: set[Key] = field(default_factory=set)
    active: set[Key] = field(default_factory=set)
    dirty: set[Key] = field(default_factory=set)
    failures: dict[Key, int] = field(default_factory=dict)
    known: dict[Key, str] = field(default_factory=dict)  # AppSchedule -> its Deployment's name
    generations: dict[Key, Any] = field(default_factory=dict)
    backoff: dict[Key, asyncio.TimerHandle] = field(default_factory=dict)  # one retry timer per failing key
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def enqueue(self, key: Key) -> None:
        """Queue a reconcile now, unless one is queued, or a retry is waiting (its timer will queue it)."""
        if key in self.backoff:
            return
        if key in self.active:
            self.dirty.add(key)
        elif key not in self.pending:
            self.pending.add(key)
            self.queue.put_nowait(key)

    def enqueue_namespace(self, namespace: str) -> None:
        for key in list(self.known):
            if key[0] == namespace:
                self.enqueue(key)

    def referencing(self, namespace: str, deployment: str) -> list[Key]:
        return [k for k, d in self.known.items() if k[0] == namespace and d == deployment]

    async def start(self) -> None:
        self.tasks = [asyncio.create_task(self._worker(i)) for i in range(self.options.workers)]
        self.tasks.append(asyncio.create_task(self._resync()))

    async def stop(self) -> None:
        for timer in self.backoff.values():
            timer.cancel()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.options.resync_seconds)
            for key in list(self.known):
                self.enqueue(key)

    async def _worker(self, number: int) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self._process(key)
            except asyncio.CancelledError:
                raise
            except BaseException:  # nothing may end a worker: it would silently stop reconciling
                log.exception("worker %d: unexpected failure on %s/%s", number, *key)

    async def _process(self, key: Key) -> None:
        self.pending.discard(key)
        self.active.add(key)
        started = time.monotonic()
        try:
            try:
                outcome = await asyncio.to_thread(reconcile, self.cluster, key, datetime.now(UTC))
            except ApiException as error:
                self._retry(key, f"{error.status} {error.reason}", conflict=error.status == 409)
            except Exception as error:
                log.exception("reconcile of %s/%s failed", *key)
                self._retry(key, repr(error))
            else:
                self.failures.pop(key, None)
                log.info(
                    "reconciled %s/%s: applied=%d deleted=%d status=%d events=%d writes=%d in %.0fms",
                    *key,
                    outcome.applied,
                    outcome.deleted,
                    outcome.status,
                    outcome.events,
                    outcome.writes,
                    (time.monotonic() - started) * 1000,
                    extra={"namespace": key[0], "appschedule": key[1], "writes": outcome.writes},
                )
        finally:
            self.active.discard(key)
            if key in self.dirty:
                self.dirty.discard(key)
                self.enqueue(key)

    def _retry(self, key: Key, why: str, *, conflict: bool = False) -> None:
        """One timer per failing key; events and resyncs meanwhile wait for it (no pile-up)."""
        attempts = self.failures.get(key, 0) + 1
        self.failures[key] = attempts
        delay = 0.2 if conflict else min(60.0, 0.5 * 2 ** min(attempts - 1, 7))
        log.warning("reconcile of %s/%s failed (%s); retry %d in %.1fs", *key, why, attempts, delay)
        if key not in self.backoff:
            self.backoff[key] = asyncio.get_running_loop().call_later(delay, self._retry_now, key)

    def _retry_now(self, key: Key) -> None:
        self.backoff.pop(key, None)
        self.enqueue(key)


def _controller(memo: kopf.Memo) -> Controller:
    controller: Controller = memo["controller"]
    return controller


def api_client() -> client.ApiClient:
    """KUBECONFIG when it is set; else, in a pod, its ServiceAccount; else the default kubeconfig."""
    if os.environ.get("KUBECONFIG"):
        config.load_kube_config()
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
    return client.ApiClient()


# ---------------------------------------------------------------------------------------------------
# kopf handlers


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.finalizer = f"{naming.GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=naming.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=naming.GROUP, key="last-handled-configuration"
    )
    # without both timeouts a watch can go silent forever (kopf issues #585, #1120)
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.posting.level = logging.WARNING
    controller = Controller(Cluster(api_client()), OPTIONS)
    memo["controller"] = controller
    await controller.start()


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    await _controller(memo).stop()


@kopf.on.event(naming.GROUP, naming.VERSION, naming.PLURAL)
async def appschedule_event(
    event: Mapping[str, Any], namespace: str | None, name: str, spec: Mapping[str, Any], meta: Mapping[str, Any],
    memo: kopf.Memo, **_: Any,
) -> None:  # fmt: skip
    controller = _controller(memo)
    if namespace is None:
        return
    key = (namespace, name)
    if event.get("type") == "DELETED":
        controller.known.pop(key, None)
        controller.generations.pop(key, None)
        controller.enqueue_namespace(namespace)  # a task it held may now belong to a sibling
        return
    controller.known[key] = str((spec.get("deploymentRef") or {}).get("name") or "")
    if controller.generations.get(key) != meta.get("generation"):
        controller.generations[key] = meta.get("generation")
        controller.enqueue_namespace(namespace)  # task ownership may move between siblings
    controller.enqueue(key)


@kopf.on.event("apps", "v1", "deployments")
async def deployment_event(namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    if namespace is None:
        return
    for key in controller.referencing(namespace, name):
        controller.enqueue(key)


@kopf.on.event("batch", "v1", "cronjobs", labels={naming.MANAGED_BY: naming.MANAGER})
async def cronjob_event(namespace: str | None, labels: Mapping[str, str], memo: kopf.Memo, **_: Any) -> None:
    owner = labels.get(naming.LABEL_APPSCHEDULE)
    if owner and namespace:
        _controller(memo).enqueue((namespace, owner))
