"""The pods of our Jobs, listed and watched by the operator itself: a projection made as each one arrives.

kopf handled this watch until the fires benchmark showed what it cost: a run's pod sends four or five
events (created, scheduled, running, ended, deleted with its Job), and kopf passes each through its whole
machinery (a Body, causes, an index and an event handler, a logging context), which made a run cost 22 %
more CPU (BENCHMARKS.md). The ledger reads three things of a pod (its Job, whether it finished, what its claim
said and why it failed: core/view.PodView), so here each event is one ``json.loads`` and one projection.

The watch is filtered by the task label on the API server (every pod of our Jobs carries it, from the Job's
template), in every namespace or in each the operator watches (``--namespace``). One thread per scope reads
the stream with the same client as every other request (api.py: its kubeconfig or ServiceAccount, TLS,
timeouts) and hands each batch of projections to the event loop, which alone touches the store. It lists
(in pages), then watches from the list's resourceVersion with bookmarks; a watch that ends is opened
again from the last version seen; an expired version (410) lists again, and the listing replaces what the
store held of that scope (a pod deleted meanwhile goes). Any other failure is logged and retried after a
back-off (1 s, doubling to 30 s): the ledger waits for a pod's state at most ``POD_WAIT`` and goes on
without it, so a watch that is down costs the claim's and the failure's detail, never a run.

The controller takes no decision before this listing is in (``Controller.listing_done("pods")``), as it
waits for kopf's: a Job that ended while the operator was down is recorded with its pod's claim. A first
listing that fails (no RBAC for pods yet, the API server away) ends that wait all the same, with an
incomplete Listing: the runs go on without their pods' detail until a listing succeeds.
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
from ..core.view import PodView, project_pod

log = logging.getLogger("appschedule")

PAGE = 500  # pods a listing page holds
WATCH_SECONDS = 290  # the API server ends a watch after this long (then it is opened again)
READ_TIMEOUT = WATCH_SECONDS + 30  # a stream silent for longer than that is a half-open connection
BACKOFF = (1.0, 30.0)  # the first and the longest wait after a failure

# a watch event as the loop is handed it: a pod's projection (put), or the (namespace, name) of one deleted
Change = PodView | tuple[str, str]


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


@dataclass
class Listing:
    """A scope's pods as one listing found them (``namespace`` None: every namespace); ``complete`` False: the
    first listing failed, ``pods`` is empty and says nothing (the store keeps what it has)."""

    namespace: str | None
    pods: list[PodView]
    complete: bool = True


@dataclass
class PodWatch:
    """List and watch our Jobs' pods in ``namespaces`` (empty: every namespace), one thread per scope; each
    listing goes to ``on_listing`` and each batch of events to ``on_changes``, both called on ``loop``."""

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
            thread = threading.Thread(target=self._run, args=(namespace,), name=f"pods-{namespace or 'all'}")
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
                log.warning("the pod watch (%s) failed: %s; again in %.0f s", namespace or "all namespaces",
                            error, wait)  # fmt: skip
                if not told:  # decisions wait for no listing that may never come
                    self.loop.call_soon_threadsafe(self.on_listing, Listing(namespace, [], complete=False))
                    told = True
                if self.stopping.wait(wait):
                    return
                wait = min(BACKOFF[1], wait * 2)

    def _call(self, namespace: str | None, **options: Any) -> Any:
        core = client.CoreV1Api(self.api)
        options |= {"label_selector": naming.LABEL_TASK, "_preload_content": False}
        if namespace is None:
            return core.list_pod_for_all_namespaces(**options)
        return core.list_namespaced_pod(namespace, **options)

    def _list(self, namespace: str | None) -> str:
        """Every pod of the scope, in pages; the listing's resourceVersion."""
        pods: list[PodView] = []
        token: str | None = None
        while True:
            page = {"limit": PAGE, "_request_timeout": (5.0, 60.0)} | ({"_continue": token} if token else {})
            body = json.loads(self._call(namespace, **page).data)
            pods.extend(project_pod(item) for item in body.get("items") or [] if isinstance(item, dict))
            meta = body.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                self.loop.call_soon_threadsafe(self.on_listing, Listing(namespace, pods))
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
                        changes.append(project_pod(body))
                    elif kind == "DELETED":
                        changes.append((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
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
