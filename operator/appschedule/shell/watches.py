"""The operator's watches: each kind it reads listed and watched by the operator itself, a projection made as each
object arrives (core/view.py); kopf runs the operator's life (start-up, clean-up, signals) and watches nothing.

kopf watched these until the benchmarks showed what it cost. A run's pod sends four or five events, and kopf
passed each through its whole machinery (a Body, causes, an index and an event handler, a logging context, a
deep copy of the body for its diff base), which made a run cost 22 % more CPU. And at a restart kopf's index
pre-population made one toggle per listed object that woke every object still waiting: 16.8 minutes at a
full core for 3,000 AppSchedules (BENCHMARKS.md). Here each event is one ``json.loads`` and one projection, a
listing is one call of ``on_listing``, and nothing of the body is kept.

Each kind (``KINDS``) is filtered by a label on the API server where it can be: our CronJobs by
``app.kubernetes.io/managed-by``, our Jobs and their pods by the task label (every pod of our Jobs carries it,
from the Job's template); AppSchedules and Deployments are not (every AppSchedule is ours; AppSchedules name
their Deployments). One thread per kind and scope (every namespace, or each the operator watches with
``--namespace``) reads the stream with the same client as every other request (api.py: its kubeconfig or
ServiceAccount, TLS, timeouts) and hands each batch of changes to the event loop, which alone touches the
store. It lists (in pages), then watches from the list's resourceVersion with bookmarks; a watch that ends is
opened again from the last version seen; an expired version (410) lists again, and the listing replaces what
the store held of that scope (an object deleted meanwhile goes). Any other failure is logged and retried
after a back-off (1 s, doubling to 30 s).

The controller takes no decision before every kind's first listing is in (``Controller.listing_done``): who
owns a task, which CronJob is an orphan, which Job ended while the operator was down all need the whole
picture. Only the pods' may come in incomplete: a first listing of pods that fails (no RBAC for pods yet)
ends that wait all the same, and the runs go on without their pods' detail (the ledger waits for a pod's
state at most ``POD_WAIT``) until a listing succeeds. A first listing of any other kind that fails is
retried, and decisions wait for it, as they waited for kopf's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from ..core import naming
from ..core.view import (
    View,
    project_appschedule,
    project_calendar,
    project_cronjob,
    project_deployment,
    project_job,
    project_pod,
)

log = logging.getLogger("appschedule")

PAGE = 500  # objects a listing page holds
WATCH_SECONDS = 290  # the API server ends a watch after this long (then it is opened again)
READ_TIMEOUT = WATCH_SECONDS + 30  # a stream silent for longer than that is a half-open connection
BACKOFF = (1.0, 30.0)  # the first and the longest wait after a failure


@dataclass(frozen=True)
class Gone:
    """An object deleted (or gone from the watch's selector). ``held``: a Job that left holding the ledger's
    finalizer and is not being deleted, so its task label was removed (store.drop_job)."""

    namespace: str
    name: str
    held: bool = False


# a watch event as the loop is handed it: the object's projection (put), or what is known of one gone
Change = View | Gone


@dataclass(frozen=True)
class Kind:
    """A kind the operator watches: how to list it, the selector the API server filters it by, its projection,
    and whether a failed first listing may end the wait for it (``optional``)."""

    name: str
    selector: str | None
    project: Callable[[dict[str, Any]], View]
    list_all: Callable[[client.ApiClient], Callable[..., Any]]
    list_in: Callable[[client.ApiClient], Callable[..., Any]]
    optional: bool = False

    def call(self, api: client.ApiClient, namespace: str | None, **options: Any) -> Any:
        if self.selector:
            options["label_selector"] = self.selector
        options["_preload_content"] = False
        if namespace is None:
            return self.list_all(api)(**options)
        return self.list_in(api)(namespace, **options)


def _gone(body: dict[str, Any]) -> Gone:
    found = body.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    finalizers = meta.get("finalizers")
    held = not meta.get("deletionTimestamp") and isinstance(finalizers, list) and naming.LEDGER_FINALIZER in finalizers
    return Gone(str(meta.get("namespace") or ""), str(meta.get("name") or ""), held=bool(held))


def _custom(api: client.ApiClient, namespaced: bool, plural: str = naming.PLURAL) -> Callable[..., Any]:
    objects, crd = client.CustomObjectsApi(api), (naming.GROUP, naming.VERSION)
    if namespaced:
        return lambda ns, **o: objects.list_namespaced_custom_object(*crd, ns, plural, **o)
    return lambda **o: objects.list_cluster_custom_object(*crd, plural, **o)


KINDS = {
    kind.name: kind
    for kind in (
        Kind("appschedules", None, project_appschedule,
             lambda api: _custom(api, False), lambda api: _custom(api, True)),
        Kind("deployments", None, project_deployment,
             lambda api: client.AppsV1Api(api).list_deployment_for_all_namespaces,
             lambda api: client.AppsV1Api(api).list_namespaced_deployment),
        Kind("cronjobs", f"{naming.MANAGED_BY}={naming.MANAGER}", project_cronjob,
             lambda api: client.BatchV1Api(api).list_cron_job_for_all_namespaces,
             lambda api: client.BatchV1Api(api).list_namespaced_cron_job),
        Kind("jobs", naming.LABEL_TASK, project_job,
             lambda api: client.BatchV1Api(api).list_job_for_all_namespaces,
             lambda api: client.BatchV1Api(api).list_namespaced_job),
        Kind("pods", naming.LABEL_TASK, project_pod,
             lambda api: client.CoreV1Api(api).list_pod_for_all_namespaces,
             lambda api: client.CoreV1Api(api).list_namespaced_pod, optional=True),
        # optional: a cluster without the AppScheduleCalendar CRD (installed before it came) still runs
        Kind("calendars", None, project_calendar,
             lambda api: _custom(api, False, naming.CALENDAR_PLURAL),
             lambda api: _custom(api, True, naming.CALENDAR_PLURAL), optional=True),
    )
}  # fmt: skip


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass
class Listing:
    """A scope's objects of one kind as one listing found them (``namespace`` None: every namespace);
    ``complete`` False: the first listing failed (an optional kind only), ``views`` is empty and says nothing
    (the store keeps what it has)."""

    kind: str
    namespace: str | None
    views: list[View]
    complete: bool = True


@dataclass
class Watch:
    """List and watch one kind in ``namespaces`` (empty: every namespace), one thread per scope; each listing
    goes to ``on_listing`` and each batch of events to ``on_changes``, both called on ``loop``."""

    kind: Kind
    api: client.ApiClient
    namespaces: Sequence[str]
    loop: asyncio.AbstractEventLoop
    on_listing: Callable[[Listing], None]
    on_changes: Callable[[list[Change]], None]
    stopping: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        scopes: list[str | None] = [*self.namespaces] or [None]
        for namespace in scopes:
            name = f"{self.kind.name}-{namespace or 'all'}"
            thread = threading.Thread(target=self._run, args=(namespace,), name=name)
            thread.daemon = True  # a watch blocked in a read never holds the process at exit
            thread.start()
            self.threads.append(thread)

    def stop(self) -> None:
        self.stopping.set()

    # -- one scope, in its thread

    def _run(self, namespace: str | None) -> None:
        wait, told = BACKOFF[0], False
        while not self.stopping.is_set():
            try:
                version = self._list(namespace)
                wait, told = BACKOFF[0], True
                while not self.stopping.is_set():
                    version = self._watch(namespace, version)
            except Expired:
                continue
            except Exception as error:  # any failure: logged, tried again; never the operator's end
                log.warning("the watch of %s (%s) failed: %s; again in %.0f s", self.kind.name,
                            namespace or "all namespaces", error, wait)  # fmt: skip
                if not told and self.kind.optional:  # decisions wait for no listing that may never come
                    self.loop.call_soon_threadsafe(self.on_listing, Listing(self.kind.name, namespace, [], False))
                    told = True
                if self.stopping.wait(wait):
                    return
                wait = min(BACKOFF[1], wait * 2)

    def _call(self, namespace: str | None, **options: Any) -> Any:
        return self.kind.call(self.api, namespace, **options)

    def _list(self, namespace: str | None) -> str:
        """Every object of the scope, in pages; the listing's resourceVersion."""
        views: list[View] = []
        token: str | None = None
        while True:
            page = {"limit": PAGE, "_request_timeout": (5.0, 60.0)} | ({"_continue": token} if token else {})
            body = json.loads(self._call(namespace, **page).data)
            views.extend(self.kind.project(item) for item in body.get("items") or [] if isinstance(item, dict))
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                self.loop.call_soon_threadsafe(self.on_listing, Listing(self.kind.name, namespace, views))
                return str(meta.get("resourceVersion") or "")

    def _watch(self, namespace: str | None, version: str) -> str:
        """One watch from ``version`` until the API server ends it; the last version seen."""
        try:
            response = self._call(namespace, watch=True, resource_version=version, allow_watch_bookmarks=True,
                                  timeout_seconds=WATCH_SECONDS, _request_timeout=(5.0, READ_TIMEOUT))  # fmt: skip
        except ApiException as error:
            if error.status == 410:
                raise Expired from error
            raise
        try:
            for batch in _batches(response):
                changes: list[Change] = []
                for event in batch:
                    kind, body = event.get("type"), event.get("object")
                    if not isinstance(body, dict):
                        continue
                    if kind == "ERROR":
                        if body.get("code") == 410:
                            raise Expired
                        raise RuntimeError(f"the watch said: {body.get('message') or body}")
                    found = body.get("metadata")
                    meta: dict[str, Any] = found if isinstance(found, dict) else {}
                    version = str(meta.get("resourceVersion") or version)
                    if kind in ("ADDED", "MODIFIED"):
                        changes.append(self.kind.project(body))
                    elif kind == "DELETED":
                        changes.append(_gone(body))
                if changes:
                    self.loop.call_soon_threadsafe(self.on_changes, changes)
                if self.stopping.is_set():
                    break
        finally:
            response.release_conn()
        return version


def _batches(response: Any, size: int = 65536) -> Iterator[list[dict[str, Any]]]:
    """The stream's events (one JSON object a line), in the batches the network delivers them (reads of at
    most ``size`` bytes; a line split between reads is joined)."""
    pending = b""
    for chunk in response.stream(size, decode_content=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        events = [json.loads(line) for line in lines if line.strip()]
        if events:
            yield events
    if pending.strip():
        yield [json.loads(pending)]
