"""The API adapter: every request the operator makes outside its watch streams, and nothing else.

In steady state these are writes only (reconcile reads the in-memory view, store.py). Reads happen in two
cases: a Deployment that an AppSchedule starts to reference and the view does not hold yet, and the owner
of a CronJob whose name is taken when we try to create ours. The validating webhook asks one
SubjectAccessReview per AppSchedule spec it admits. ``appschedule release-jobs`` (the chart's pre-delete
hook) lists the task Jobs once to release them.

Every request has a timeout (connect and read): a half-open connection costs one timeout, never a
stuck worker. Responses are parsed as plain JSON (``_preload_content=False``): the client's models
would cost more CPU than the rest of a reconcile. The synchronous client runs in threads.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from ..core import failures, keys, naming
from ..core.events import Event
from ..core.failures import Failure

FIELD_MANAGER = "appschedule-operator"
TIMEOUT = (5.0, 30.0)  # seconds to connect, seconds to wait for a response
REVIEW_TIMEOUT = (2.0, 4.0)  # a SubjectAccessReview asked inside an admission request


# the AppSchedule a reconcile's requests are for: set by the worker (controller._process) in its own task, so the
# threads its requests run in (asyncio.to_thread copies the context) carry it to the fence and to in_flight
WRITING_FOR: ContextVar[tuple[str, str] | None] = ContextVar("appschedule_writing_for", default=None)


def failure_of(error: ApiException) -> Failure:
    """What a failed request means: core/failures.py's table, read from the ApiException."""
    return failures.classify(error.status, error.body or error.reason)


def message_of(error: ApiException) -> str:
    try:
        return str(json.loads(error.body).get("message") or error.reason)
    except (TypeError, ValueError, AttributeError):
        return str(error.reason)


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


class Cluster:
    def __init__(self, api: client.ApiClient, timeout: tuple[float, float] = TIMEOUT) -> None:
        self.api = api
        self.timeout = timeout
        # urllib3 sends an idempotent request (PUT, DELETE, GET) again after a read timeout, up to three times:
        # a status PUT that passed the fence could then land long after it closed. No request is sent twice here;
        # a failed one fails the reconcile, which the work queue retries with back-off, through the fence again.
        pool = getattr(getattr(api, "rest_client", None), "pool_manager", None)
        if pool is not None:
            pool.connection_pool_kw["retries"] = False
            pool.clear()
        self.custom = client.CustomObjectsApi(api)
        self.apps = client.AppsV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)
        self._lock = threading.Lock()
        self._inflight: dict[int, tuple[float, tuple[str, str] | None]] = {}  # started, for which AppSchedule
        self.requests: Counter[str] = Counter()  # by namespace, for the liveness probe and tests
        # called before every write of a reconcile; raises (leader.Fenced) when this replica may not write, else
        # says how many seconds it may still write (before its Lease could pass to another replica)
        self.fence: Callable[[tuple[str, str] | None], float] | None = None

    def _write(self) -> tuple[float, float] | float:
        """Before every write of a reconcile: refused (leader.Fenced) when this replica may not write. Returns the
        write's timeout: under a Lease, one total bound (connect and answer together) that ends before the Lease
        could pass to another replica, so no write of this replica is still waiting when another one leads."""
        if self.fence is None:
            return self.timeout
        left = self.fence(WRITING_FOR.get())
        return max(0.1, min(left, sum(self.timeout)))

    @contextmanager
    def _call(self, namespace: str) -> Iterator[None]:
        token = object()
        with self._lock:
            self._inflight[id(token)] = (time.monotonic(), WRITING_FOR.get())
            self.requests[namespace] += 1
        try:
            yield
        finally:
            with self._lock:
                self._inflight.pop(id(token), None)

    def oldest_call(self) -> float:
        """Seconds the oldest request in flight has been waiting (0 when none is)."""
        with self._lock:
            started = min((at for at, _ in self._inflight.values()), default=None)
        return 0.0 if started is None else time.monotonic() - started

    def in_flight(self, which: Callable[[tuple[str, str]], bool]) -> bool:
        """Whether a request made for an AppSchedule ``which`` selects is still waiting for its answer (--shards:
        a shard is released only once none of its writes is)."""
        with self._lock:
            return any(key is not None and which(key) for _, key in self._inflight.values())

    @staticmethod
    def _json(response: Any) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(response.data)
        return data

    def read_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._call(namespace):
            try:
                return self._json(
                    self.apps.read_namespaced_deployment(
                        name, namespace, _preload_content=False, _request_timeout=self.timeout
                    )
                )
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

    def list_jobs(
        self, namespace: str, appschedule: str, task: str | None = None, timeout: Any = None
    ) -> list[dict[str, Any]]:
        """The Jobs labelled with this AppSchedule's name (and ``task``'s), as the API server has them now (not a
        cache): for a backfill's Jobs, and for the key webhook's Forbid across a task's CronJobs."""
        selector = f"{naming.LABEL_APPSCHEDULE}={appschedule}" + (f",{naming.LABEL_TASK}={task}" if task else "")
        with self._call(namespace):
            body = self._json(
                self.batch.list_namespaced_job(
                    namespace, label_selector=selector, _preload_content=False, _request_timeout=timeout or self.timeout
                )
            )
        return [item for item in body.get("items") or [] if isinstance(item, dict)]

    def read_cronjob(self, namespace: str, name: str, timeout: Any = None) -> dict[str, Any] | None:
        """A CronJob as the API server has it now (not a cache), None when there is none: for the key webhook's
        Forbid across a cut-over (the old CronJob's active runs)."""
        with self._call(namespace):
            try:
                return self._json(
                    self.batch.read_namespaced_cron_job(
                        name, namespace, _preload_content=False, _request_timeout=timeout or self.timeout
                    )
                )
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

    def controller_of(self, namespace: str, name: str) -> str | None:
        """The uid of the controller of an existing CronJob ("" when it has none), None when there is none."""
        with self._call(namespace):
            try:
                cronjob = self._json(
                    self.batch.read_namespaced_cron_job(
                        name, namespace, _preload_content=False, _request_timeout=self.timeout
                    )
                )
            except ApiException as error:
                if error.status == 404:
                    return None
                raise
        owners = cronjob["metadata"].get("ownerReferences") or []
        return next((str(o.get("uid")) for o in owners if o.get("controller")), "")

    def apply_cronjob(self, manifest: Mapping[str, Any], *, force: bool) -> dict[str, Any]:
        """Server-side apply. Without ``force`` (a CronJob we do not hold yet) a CronJob of the same name
        whose fields someone else manages makes it fail with 409 instead of taking it over."""
        timeout = self._write()
        with self._call(str(manifest["metadata"]["namespace"])):
            return self._json(
                self.batch.patch_namespaced_cron_job(
                    manifest["metadata"]["name"],
                    manifest["metadata"]["namespace"],
                    manifest,
                    field_manager=FIELD_MANAGER,
                    force=force,
                    _content_type="application/apply-patch+yaml",
                    _preload_content=False,
                    _request_timeout=timeout,
                )
            )

    def suspend_cronjob(self, namespace: str, name: str, uid: str, annotations: Mapping[str, str]) -> dict[str, Any]:
        """Suspend a CronJob handed over to us (a cut-over), annotated; the uid makes it this one, not a namesake."""
        timeout = self._write()
        patch = {"metadata": {"uid": uid, "annotations": dict(annotations)}, "spec": {"suspend": True}}
        with self._call(namespace):
            return self._json(
                self.batch.patch_namespaced_cron_job(
                    name,
                    namespace,
                    patch,
                    _content_type="application/merge-patch+json",
                    _preload_content=False,
                    _request_timeout=timeout,
                )
            )

    def delete_cronjob(self, namespace: str, name: str, uid: str | None) -> None:
        timeout = self._write()
        options = client.V1DeleteOptions(
            propagation_policy="Background", preconditions=client.V1Preconditions(uid=uid) if uid else None
        )
        with self._call(namespace):
            try:
                self.batch.delete_namespaced_cron_job(
                    name, namespace, body=options, _preload_content=False, _request_timeout=timeout
                )
            except ApiException as error:
                if error.status not in (404, 409):
                    raise

    def create_job(self, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create a Job the operator starts (a catch-up, a backfill's run); None when one of that name exists
        already (an earlier leader made it, or the CronJob controller made the fire's own)."""
        timeout = self._write()
        namespace = str(manifest["metadata"]["namespace"])
        with self._call(namespace):
            try:
                return self._json(
                    self.batch.create_namespaced_job(
                        namespace, manifest, _preload_content=False, _request_timeout=timeout
                    )
                )
            except ApiException as error:
                if error.status == 409:
                    return None
                raise

    def delete_job(self, namespace: str, name: str) -> None:
        """Delete a backfill's Job (its backfill was removed from the spec), its pods with it."""
        timeout = self._write()
        options = client.V1DeleteOptions(propagation_policy="Background")
        with self._call(namespace):
            try:
                self.batch.delete_namespaced_job(
                    name, namespace, body=options, _preload_content=False, _request_timeout=timeout
                )
            except ApiException as error:
                if error.status not in (404, 409):
                    raise

    def release_job(self, namespace: str, name: str, finalizer: str) -> dict[str, Any] | None:
        """Remove our finalizer from a Job and mark it filed (the ledger is done with it: a status that lists
        only a few Jobs needs the Job to say so), in one patch; None when the Job is gone."""
        timeout = self._write()
        patch = {
            "metadata": {
                "$deleteFromPrimitiveList/finalizers": [finalizer],
                "annotations": {naming.ANNOTATION_FILED: "true"},
            }
        }
        with self._call(namespace):
            try:
                return self._json(
                    self.batch.patch_namespaced_job(
                        name,
                        namespace,
                        patch,
                        _content_type="application/strategic-merge-patch+json",
                        _preload_content=False,
                        _request_timeout=timeout,
                    )
                )
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

    def release_all_jobs(self, namespaces: Sequence[str], finalizer: str) -> int:
        """Remove our finalizer from every Job of a task in these namespaces (all when empty): one LIST each,
        for uninstalling. Returns how many Jobs were released."""
        listed: list[dict[str, Any]] = []
        for namespace in namespaces or [""]:
            options: dict[str, Any] = {
                "label_selector": naming.LABEL_TASK,
                "_preload_content": False,
                "_request_timeout": self.timeout,
            }
            with self._call(namespace):
                if namespace:
                    response = self.batch.list_namespaced_job(namespace, **options)
                else:
                    response = self.batch.list_job_for_all_namespaces(**options)
            listed.extend(self._json(response)["items"])
        released = 0
        for job in listed:
            meta = job["metadata"]
            if finalizer in (meta.get("finalizers") or []) and self.release_job(
                meta["namespace"], meta["name"], finalizer
            ):
                released += 1
        return released

    def replace_status(self, appschedule: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the status with the resourceVersion it was computed from: a 409 means the object moved on
        and the reconcile is run again from the newer view; no update is ever lost or written blind."""
        timeout = self._write()
        meta = appschedule["metadata"]
        body = {
            "apiVersion": naming.API_VERSION,
            "kind": naming.KIND,
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
            },
            "spec": appschedule.get("spec") or {},
            "status": status,
        }
        with self._call(meta["namespace"]):
            return self._json(
                self.custom.replace_namespaced_custom_object_status(
                    naming.GROUP,
                    naming.VERSION,
                    meta["namespace"],
                    naming.PLURAL,
                    meta["name"],
                    body,
                    _preload_content=False,
                    _request_timeout=timeout,
                )
            )

    def review_access(self, review: Mapping[str, Any]) -> dict[str, Any]:
        """Create a SubjectAccessReview; its status (allowed, denied, reason). Bounded well under the
        webhook's timeoutSeconds (8 at least): past it the API server would fail open and admit unchecked."""
        with self._call(""):
            created = self._json(
                client.AuthorizationV1Api(self.api).create_subject_access_review(
                    review, _preload_content=False, _request_timeout=REVIEW_TIMEOUT
                )
            )
        status: dict[str, Any] = created.get("status") or {}
        return status

    def post_event(self, appschedule: Mapping[str, Any], event: Event, now: datetime) -> None:
        timeout = self._write()
        meta = appschedule["metadata"]
        stamp = keys.rfc3339(now)
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
        with self._call(meta["namespace"]):
            self.core.create_namespaced_event(meta["namespace"], body, _preload_content=False, _request_timeout=timeout)
