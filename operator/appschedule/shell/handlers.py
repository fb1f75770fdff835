"""kopf wiring: kopf runs the operator's life (start-up, clean-up, signals); the watches (watches.py) feed the
in-memory view; its changes queue AppSchedules for the workers.

Why a queue rather than kopf's change handlers: an AppSchedule is reconciled for many reasons (its
spec, its Deployment's rollout, a CronJob edited or deleted by hand, a sibling that frees a task, the
periodic resync) and must end in the same state whatever woke it. So the watches only keep the view
(store.py) current, and a change the view says matters queues the AppSchedules it concerns.

Why watches of our own rather than kopf's: kopf's indexes held every handler until every listing was in, which
made the first decision (who owns a task, which CronJob to delete) safe at start-up, but they did it with
one toggle per listed object that woke every object still waiting (a restart at 3,000 AppSchedules took 17
minutes at a full core), and every event went through kopf's whole machinery. watches.py lists and watches
AppSchedules, Deployments, our CronJobs (filtered by our label on the API server), our Jobs and their pods
(filtered by the task label), keeps only projections, and tells the controller when each first listing is
in (``Controller.listing_done``): decisions wait for all five. A Job's and a pod's events wake their
AppSchedule once for a burst (``wake_soon``), the others at once.

The admission webhooks and the liveness endpoint are answered by a process of their own (webhook_server.py),
which this loop tells that it is alive every second (``_heartbeat``); the operator stops when that process is
gone. Prometheus metrics are served on their own port (metrics.py).

kopf stores nothing on the objects (it has no resource handler), so the operator can be killed at any point
and converges when started again. The one finalizer is the ledger's own, on Jobs, set at admission and
removed once the Job is recorded. The view is touched from the event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

import kopf

from . import metrics, webhook_server
from .api import Cluster, api_client
from .controller import WATCHED, Controller, Options
from .leader import LeaderElector
from .shards import ShardElector
from .watches import KINDS, Change, Listing, Watch

log = logging.getLogger("appschedule")


@dataclass(frozen=True)
class Election:
    """The Lease replicas elect their leader on (``--leader-elect``), and this replica's name in it."""

    namespace: str
    name: str
    identity: str
    shards: int = 1  # more than 1 (--shards): a Lease per shard, each replica leading a share (shards.py)


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
    settings.posting.level = logging.WARNING
    launch = _launch(memo)
    settings.scanning.disabled = True  # kopf watches nothing (watches.py does): no CRDs, no namespaces
    if launch.options.metrics_port:
        metrics.serve(launch.options.metrics_port)
    cluster = Cluster(api_client())
    controller = Controller(cluster, launch.options)
    memo["controller"] = controller
    if launch.election is None:
        await controller.start()
    elif launch.election.shards > 1:
        election = launch.election
        sharded = ShardElector(
            cluster.api, election.namespace, election.name, election.identity, election.shards,
            on_gain=lambda shards: controller.gain(lambda key: sharded.shard(key) in shards),
            on_lose=lambda shards: controller.lose(lambda key: sharded.shard(key) in shards,
                                                   holds_any=bool(sharded.renewed)),
            writing=cluster.in_flight,
        )  # fmt: skip
        controller.owns = sharded.owns
        cluster.fence = sharded.fence
        memo["elector"] = sharded
        await controller.start(lead=False)
        memo["election"] = asyncio.create_task(sharded.run())
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
    memo["watches"] = [_watch(controller, kind, launch.namespaces) for kind in WATCHED]


def _watch(controller: Controller, kind: str, namespaces: tuple[str, ...]) -> Watch:
    """One kind's watch (watches.py), fed into the store from the event loop."""
    scopes = set(namespaces) if namespaces else {None}

    def on_listing(listing: Listing) -> None:
        if listing.complete:
            controller.take_listing(kind, listing.namespace, listing.views)
        scopes.discard(listing.namespace)
        if not scopes:
            controller.listing_done(kind)

    def on_changes(changes: list[Change]) -> None:
        controller.take_changes(kind, changes)

    # a client of its own: the watch holds one of its connections at all times, and the pool the writes share
    # (Cluster's, cpu_count * 5 connections) stays theirs
    watch = Watch(KINDS[kind], api_client(), namespaces, asyncio.get_running_loop(), on_listing, on_changes)
    watch.start()
    return watch


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    memo["heartbeat"].cancel()
    for watch in memo["watches"]:
        watch.stop()
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
