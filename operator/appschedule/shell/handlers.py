"""kopf wiring: the watch streams feed the in-memory view; its changes queue AppSchedules for the workers.

Why a queue rather than kopf's change handlers: an AppSchedule is reconciled for many reasons (its
spec, its Deployment's rollout, a CronJob edited or deleted by hand, a sibling that frees a task, the
periodic resync) and must end in the same state whatever woke it. So the watches only keep the view
(store.py) current, and a change the view says matters queues the AppSchedules it concerns.

The view is fed by kopf *index* handlers: kopf calls them for every event of every watched object
and holds every other resource handler until every index has its initial listing. The ``on.event``
handlers therefore run only once every listing is in, which is what makes the first decision
(who owns a task, which CronJob to delete) safe at start-up; the first of them starts the work. The
index handlers return None, so kopf's own indexes stay empty: the view is the one copy. A DELETED
event reaches no index handler, so the ``on.event`` handlers remove objects from the view.

The CronJob watch is filtered by our label on the API server (``settings.watching.label_selectors``;
a ``labels=`` filter on a handler would be applied in the client, after every CronJob of the cluster
was sent and decoded). Deployments cannot be filtered that way (AppSchedules name them), so every
Deployment event is decoded, and one that changes nothing a rendering reads costs nothing more.

Jobs of our tasks are watched the same way (filtered by the ``appschedule.dev/task`` label on the API
server) for the run ledger. Their pods (the label comes with the Job's template) are watched by the
operator itself, not kopf (podwatch.py: a run's pod sends several events, and kopf's cost per event was most
of what the pods cost); a projection of each (core/view.PodView: its Job, whether it finished, its claim's
outcome, why it failed) tells the ledger whether a duplicate did the work and why a run failed. Decisions
wait for its listing as for kopf's (``Controller.listing_done``). The admission webhooks and the liveness endpoint are
answered by a process of their own (webhook_server.py), which this loop tells that it is alive every second
(``_heartbeat``); the operator stops when that process is gone. Prometheus metrics are served on their own
port (metrics.py).

kopf stores nothing on the objects (no finalizer, no annotations: only event and index handlers),
so the operator can be killed at any point and converges when started again. The one finalizer is
the ledger's own, on Jobs, set at admission and removed once the Job is recorded.

Every handler is ``async``: kopf runs plain functions in threads, and the view is touched from the
event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

import kopf

from ..core import naming
from ..core.view import PodView, project_appschedule, project_cronjob, project_deployment, project_job
from . import metrics, webhook_server
from .api import Cluster, api_client
from .controller import Controller, Options
from .leader import LeaderElector
from .podwatch import Change, Listing, PodWatch

log = logging.getLogger("appschedule")
CRONJOB_SELECTOR = f"{naming.MANAGED_BY}={naming.MANAGER}"


@dataclass(frozen=True)
class Election:
    """The Lease replicas elect their leader on (``--leader-elect``), and this replica's name in it."""

    namespace: str
    name: str
    identity: str


@dataclass
class Launch:
    """What ``appschedule run`` (cli.py) hands to the handlers, through kopf's memo (``memo["launch"]``)."""

    options: Options
    election: Election | None = None  # None: this process reconciles alone (no Lease)
    admission: tuple[BaseProcess, webhook_server.Heartbeat] | None = None  # the admission process, if started
    admission_lost: bool = False  # set when it exited: the operator stopped because of that (exit status 1)
    namespaces: tuple[str, ...] = ()  # the namespaces watched (--namespace); empty: every namespace


def _launch(memo: kopf.Memo) -> Launch:
    launch: Launch = memo["launch"]
    return launch


def _controller(memo: kopf.Memo) -> Controller:
    controller: Controller = memo["controller"]
    return controller


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # the planning thread (controller.py) holds the GIL while it plans; hand it to the loop every 1 ms, not 5,
    # so a watch event or a write's answer waits about that long for it
    sys.setswitchinterval(0.001)
    settings.persistence.finalizer = f"{naming.GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=naming.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=naming.GROUP, key="last-handled-configuration"
    )
    # without both timeouts a watch can go silent forever (kopf issues #585, #1120)
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.watching.label_selectors["batch", "v1", "cronjobs"] = CRONJOB_SELECTOR
    settings.watching.label_selectors["batch", "v1", "jobs"] = naming.LABEL_TASK
    settings.posting.level = logging.WARNING
    launch = _launch(memo)
    settings.scanning.disabled = not launch.options.scanning
    if launch.options.metrics_port:
        metrics.serve(launch.options.metrics_port)
    cluster = Cluster(api_client())
    controller = Controller(cluster, launch.options)
    memo["controller"] = controller
    if launch.election is None:
        await controller.start()
    else:
        election = launch.election
        elector = LeaderElector(
            cluster.api, election.namespace, election.name, election.identity,
            on_lead=controller.lead, on_follow=controller.follow,
        )  # fmt: skip
        cluster.fence = elector.fence
        memo["elector"] = elector
        await controller.start(lead=False)
        memo["election"] = asyncio.create_task(elector.run())
    if launch.admission is not None:
        _beat(controller, launch.admission[1])  # the probe answers from the first second on
    memo["heartbeat"] = asyncio.create_task(_heartbeat(controller, launch))
    memo["pods"] = _watch_pods(controller, cluster, launch.namespaces)


def _watch_pods(controller: Controller, cluster: Cluster, namespaces: tuple[str, ...]) -> PodWatch:
    """The pods of our Jobs (podwatch.py), fed into the store from the event loop."""
    scopes = set(namespaces) if namespaces else {None}

    def on_listing(listing: Listing) -> None:
        if listing.complete:
            controller.wake_soon(controller.store.replace_pods(listing.namespace, listing.pods))
        scopes.discard(listing.namespace)
        if not scopes:
            controller.listing_done("pods")

    def on_changes(changes: list[Change]) -> None:
        woken: set[tuple[str, str]] = set()
        for change in changes:
            woken |= (
                controller.store.put_pod(change) if isinstance(change, PodView) else controller.store.drop_pod(*change)
            )
        controller.wake_soon(woken)

    watch = PodWatch(cluster.api, namespaces, asyncio.get_running_loop(), on_listing, on_changes)
    watch.start()
    return watch


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    memo["heartbeat"].cancel()
    memo["pods"].stop()
    controller = _controller(memo)
    controller.follow()  # no new reconcile; the Lease is released once the workers are gone
    await controller.stop()
    if "election" in memo:
        memo["election"].cancel()
        await asyncio.to_thread(memo["elector"].release)
    admission = _launch(memo).admission
    if admission is not None and admission[0].is_alive():
        admission[0].terminate()


def _beat(controller: Controller, heartbeat: webhook_server.Heartbeat) -> None:
    try:
        heartbeat.beat(controller.health(), None)
    except Exception as error:  # a stuck worker: liveness fails, saying which
        heartbeat.beat(None, str(error))


async def _heartbeat(controller: Controller, launch: Launch) -> None:
    """Every second: tell the admission process this loop runs (liveness), and stop the operator (exit
    status 1) if that process is gone: the pod restarts rather than run without its webhooks."""
    if launch.admission is None:
        return
    process, heartbeat = launch.admission
    while True:
        _beat(controller, heartbeat)
        if not process.is_alive():
            log.error("the admission process exited (status %s): stopping the operator", process.exitcode)
            launch.admission_lost = True
            os.kill(os.getpid(), signal.SIGTERM)
            return
        await asyncio.sleep(1)


# -- the view, fed by the watch streams


@kopf.index(naming.GROUP, naming.VERSION, naming.PLURAL)
async def appschedule_view(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    controller.wake(controller.store.put_appschedule(project_appschedule(body)))


@kopf.index("apps", "v1", "deployments")
async def deployment_view(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    controller.wake(controller.store.put_deployment(project_deployment(body)))


@kopf.index("batch", "v1", "cronjobs")
async def cronjob_view(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    controller.wake(controller.store.put_cronjob(project_cronjob(body)))


@kopf.index("batch", "v1", "jobs")
async def job_view(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    controller.wake_soon(controller.store.put_job(project_job(body)))


# -- deletions, and the start of the work once every listing is in


def _event(event: Mapping[str, Any], memo: kopf.Memo) -> tuple[Controller, bool]:
    """Every watch event: the first one after the listings ends them (``initial_listing_done``: decisions may
    start), and whether this one is a deletion."""
    controller = _controller(memo)
    controller.initial_listing_done()
    return controller, event.get("type") == "DELETED"


@kopf.on.event(naming.GROUP, naming.VERSION, naming.PLURAL)
async def appschedule_event(
    event: Mapping[str, Any], namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    controller, deleted = _event(event, memo)
    if deleted and namespace:
        controller.wake(controller.store.drop_appschedule(namespace, name))


@kopf.on.event("apps", "v1", "deployments")
async def deployment_event(
    event: Mapping[str, Any], namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    controller, deleted = _event(event, memo)
    if deleted and namespace:
        controller.wake(controller.store.drop_deployment(namespace, name))


@kopf.on.event("batch", "v1", "cronjobs")
async def cronjob_event(event: Mapping[str, Any], namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    controller, deleted = _event(event, memo)
    if deleted and namespace:
        controller.wake(controller.store.drop_cronjob(namespace, name))


@kopf.on.event("batch", "v1", "jobs")
async def job_event(event: Mapping[str, Any], namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    controller, deleted = _event(event, memo)
    if deleted and namespace:
        controller.wake_soon(controller.store.drop_job(namespace, name, held=_held(event)))


def _held(event: Mapping[str, Any]) -> bool:
    """A Job that left the watch holding the ledger's finalizer, not being deleted: its task label was removed
    (a deleted Job leaves only once the finalizer is gone, or with a deletionTimestamp)."""
    body = event.get("object")
    meta = body.get("metadata") if isinstance(body, Mapping) else None
    if not isinstance(meta, Mapping) or meta.get("deletionTimestamp"):
        return False
    finalizers = meta.get("finalizers")
    return isinstance(finalizers, list) and naming.LEDGER_FINALIZER in finalizers
