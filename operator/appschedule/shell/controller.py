"""One reconcile of one AppSchedule, and the workers and resync that run them.

A reconcile reads the in-memory view (store.py), calls the pure ``plan`` and writes what it says,
nothing else: in steady state it makes no request at all. The one read: before a status that counts a
run missed is written, the AppSchedule's Jobs are listed once, so a Job the watch has not delivered yet
(its stream was down with the API server, or lags) is never counted missed. What it writes it also records in the view
from the write's response, so the watch echo of its own write wakes nothing.

The resync (every ``resync_seconds``) re-plans from memory the AppSchedules whose next run time has
passed (what time alone changes), and every AppSchedule every ``full_resync_every`` periods, spread evenly
over the period, in the background lane of the queue: it costs CPU, makes no request when nothing
changed, and never delays a watch event's reconcile.

While this replica does not lead (``--leader-elect``: another holds the Lease, leader.py), no worker
takes a key and the resync queues nothing; the watches keep the store current, so ``lead()`` only has to
plan every AppSchedule once. With ``--shards`` (shards.py) it plans only the AppSchedules of the shards it
holds (``owns``): ``gain()`` plans a shard's AppSchedules once when it comes, ``lose()`` lets a shard go.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from ..core import keys, naming
from ..core.events import Event
from ..core.lease import RETRY_SECONDS
from ..core.reconcile import Plan, Quiets, plan, still
from ..core.schedule import earliest
from ..core.status import StatusWait, needs_listed_view, wait_left
from ..core.view import AppScheduleView, View, World, project_deployment
from . import metrics
from .api import WRITING_FOR, Cluster, failure_of
from .leader import Fenced
from .store import DeploymentMiss, Store
from .watches import Change, Gone
from .workqueue import Key, WorkQueue
from .writer import Ours, Refused, Writer

log = logging.getLogger("appschedule")
WATCHED = (
    "appschedules",
    "deployments",
    "cronjobs",
    "jobs",
    "pods",
    "calendars",
)  # the kinds watches.py lists and watches
BURSTS = frozenset({"jobs", "pods"})  # a run's burst of events wakes its AppSchedule once (wake_soon)
FULL_EVERY = 10  # resync periods between two re-plans of every AppSchedule
STUCK_SECONDS = 120.0  # a reconcile or request this old means a stuck worker: liveness fails


@dataclass
class Options:
    """What ``appschedule run`` sets before kopf starts."""

    resync_seconds: float = 60.0
    workers: int = 4
    full_resync_every: int = FULL_EVERY
    metrics_port: int | None = None


@dataclass
class Outcome:
    applied: int = 0
    deleted: int = 0
    status: int = 0
    events: int = 0
    released: int = 0
    jobs: int = 0  # Jobs created (catch-ups, backfills) and deleted (of backfills removed)
    why: str = ""  # what the status written adds (core/status.can_wait: "now", or a wait that ran out)

    @property
    def writes(self) -> int:
        return self.applied + self.deleted + self.status + self.events + self.released + self.jobs


@dataclass
class Result:
    """What a reconcile says to the queue (``_process`` alone acts on it)."""

    outcome: Outcome
    retry: str | None = None  # what failed for a reason of ours (reported): tried again with back-off
    wake_at: datetime | None = None  # when time alone changes the ledger: the key is queued again then
    fenced: str | None = None  # this replica may no longer write: the next leader plans it again


@dataclass
class Controller:
    cluster: Cluster
    options: Options
    store: Store = field(default_factory=Store)
    queue: WorkQueue = field(default_factory=WorkQueue)
    running: asyncio.Event = field(default_factory=asyncio.Event)  # set while this replica may reconcile (leads)
    listed: asyncio.Event = field(default_factory=asyncio.Event)  # every watch's initial listing is in
    listings: set[str] = field(default_factory=lambda: set(WATCHED))  # the watches whose first listing is not in
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    reconciles: int = 0
    timers: dict[Key, asyncio.TimerHandle] = field(default_factory=dict)  # when time alone changes a ledger
    waiting: dict[Key, dict[str, float]] = field(default_factory=dict)  # a status waits since, by kind (monotonic)
    # plans run here, off the event loop, one at a time: a plan is CPU under the GIL, so more threads would
    # plan no faster and only queue the loop (webhooks, probes) behind more of them
    _planner: ThreadPoolExecutor = field(init=False, repr=False)
    # the AppSchedules this replica plans (--shards: those of the shards it holds, shards.py); every one otherwise
    owns: Callable[[Key], bool] = field(default=lambda key: True, repr=False)
    # the quiet ledger steps of recent plans, reused by a plan of the same inputs (the planning thread alone uses it)
    quiets: Quiets = field(default_factory=Quiets, repr=False)
    # why the AppSchedules were reconciled: the causes gathered by a key since its last reconcile (a watch's kind,
    # "timer", "resync", "start", "write"), and how many reconciles each took part in (health(): woken_by)
    causes: dict[Key, set[str]] = field(default_factory=dict, repr=False)
    woken_by: Counter[str] = field(default_factory=Counter, repr=False)
    deferred: int = 0  # reconciles that left a status to wait (core/status.wait_left): a timer brings them back
    # the plan that let a status wait, and the world it was planned from: when the wait is up and nothing changed
    # (reconcile.still), the status is written from it, without planning again; any reconcile takes it
    held: dict[Key, tuple[World, Plan, datetime]] = field(default_factory=dict, repr=False)
    written_held: int = 0  # statuses written so
    written: Counter[str] = field(default_factory=Counter, repr=False)  # statuses written, by what let them wait

    def __post_init__(self) -> None:
        self._planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan")

    def wake(self, keys: set[Key], *, urgent: bool = True, cause: str = "write") -> None:
        for key in keys:
            if self.owns(key):
                self.causes.setdefault(key, set()).add(cause)
                self.queue.add(key, urgent=urgent)

    def _wait_left(self, key: Key, kind: StatusWait) -> float:
        """Seconds a status of this kind may still wait (core/status.wait_left), counted from the first plan that
        let it wait: the shell keeps only when that was."""
        if kind == "now":
            return 0.0
        first = self.waiting.setdefault(key, {}).setdefault(kind, time.monotonic())
        return wait_left(kind, time.monotonic() - first)

    def wake_soon(self, keys: set[Key], *, cause: str) -> None:
        """For a Job's events: one reconcile for the burst they come in (workqueue.add_soon)."""
        for key in keys:
            if self.owns(key):
                self.causes.setdefault(key, set()).add(cause)
                self.queue.add_soon(key)

    def take_listing(self, kind: str, namespace: str | None, views: Sequence[View]) -> None:
        """A watch's listing (watches.py) into the store, and who it wakes. After the first listings, a relisting
        wakes as its events would. Before (a start, a restart), every AppSchedule is planned once anyway: that goes
        to the background lane, and an AppSchedule edited while the operator was down (``unobserved``) to the
        urgent one, so the change a user waits for is planned first, not after every other one."""
        woken = self.store.replace(kind, namespace, views)
        if self.listed.is_set():
            (self.wake_soon if kind in BURSTS else self.wake)(woken, cause=kind)
            return
        self.wake(woken, urgent=False, cause="start")
        self.wake({v.key for v in views if isinstance(v, AppScheduleView) and v.unobserved}, cause="start")

    def take_changes(self, kind: str, changes: Sequence[Change]) -> None:
        """A batch of a watch's events (watches.py) into the store, waking the AppSchedules they concern."""
        woken: set[Key] = set()
        later: set[Key] = set()  # a moment later, with the rest of a fire's burst
        for change in changes:
            if isinstance(change, Gone):
                found = self.store.drop(kind, change.namespace, change.name, held=change.held)
                (later if kind in BURSTS else woken).update(found)
            elif kind in BURSTS or self.store.fired(change):
                later |= self.store.put(change)
            else:
                woken |= self.store.put(change)
        self.wake(woken, cause=kind)
        self.wake_soon(later, cause=kind)

    def listing_done(self, watches: str) -> None:
        """The watch of ``watches`` (a kind of WATCHED: watches.py) has its first listing in; once every one has,
        decisions may be taken."""
        self.listings.discard(watches)
        if not self.listings and not self.listed.is_set():
            self.listed.set()
            self.store.prune()
            log.info(
                "initial listing done: %d AppSchedules, %d CronJobs, %d Deployments, %d pods in memory",
                len(self.store.appschedules),
                len(self.store.cronjobs),
                len(self.store.deployments),
                len(self.store.pods),
            )

    async def start(self, *, lead: bool = True) -> None:
        """Start the workers and the resync; they reconcile once this replica leads (at once, unless it is
        elected: then ``lead()`` starts them)."""
        if lead:
            self.running.set()
        self.tasks = [asyncio.create_task(self._worker(i)) for i in range(self.options.workers)]
        self.tasks.append(asyncio.create_task(self._resync()))

    async def stop(self) -> None:
        self.queue.close()
        for timer in self.timers.values():
            timer.cancel()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self._planner.shutdown(wait=False, cancel_futures=True)

    def lead(self) -> None:
        """This replica became the leader: plan every AppSchedule once (what changed while it followed is
        in the store already: the watches never stopped), then as usual."""
        self.running.set()
        self.wake(set(self.store.appschedules), cause="start")

    def follow(self) -> None:
        """This replica stopped leading: the workers finish what they hold (its writes are fenced) and wait."""
        self.running.clear()
        self.held.clear()

    def gain(self, which: Callable[[Key], bool]) -> None:
        """--shards: this replica took shards (``owns`` says so already): plan each of their AppSchedules once, as
        ``lead()`` plans every one."""
        self.running.set()
        self.wake({key for key in self.store.appschedules if which(key)}, cause="start")

    def lose(self, which: Callable[[Key], bool], *, holds_any: bool) -> None:
        """--shards: shards went to another replica (their writes are fenced already): no more timers for their
        AppSchedules, and their series leave this replica's metrics (their new holder exports them); with no shard
        left, the workers wait."""
        for key in [k for k in self.timers if which(k)]:
            self.timers.pop(key).cancel()
        for key in [k for k in self.waiting if which(k)]:  # a status that waited here is its new holder's to write
            del self.waiting[key]
            self.held.pop(key, None)
        metrics.forget_appschedules(which)
        if not holds_any:
            self.running.clear()

    def health(self) -> dict[str, Any]:
        """For the liveness probe: raises when a worker is stuck (a request or reconcile far past every timeout)."""
        stuck = max(self.queue.longest_active(), self.cluster.oldest_call() if self.cluster else 0.0)
        if stuck > STUCK_SECONDS:
            raise RuntimeError(f"a worker has been stuck for {stuck:.0f}s")
        requests = dict(self.cluster.requests) if self.cluster else {}
        return {
            "queued": len(self.queue),
            "active": len(self.queue.active),
            "reconciles": self.reconciles,
            "quiet_steps_reused": self.quiets.hits,
            "renderings_reused": self.quiets.renderings_reused,
            "woken_by": dict(self.woken_by),
            "status_deferred": self.deferred,
            "status_written_held": self.written_held,
            "status_written": dict(self.written),
            "requests": requests,
            "time": time.time(),
        }

    def due(self, now: datetime, full: bool) -> list[Key]:
        """What a resync re-plans: every AppSchedule on a full round (the safety net), else only those
        whose next run time has passed, the one thing time alone changes."""
        stamp = keys.rfc3339(now)
        return [
            key
            for key, view in self.store.appschedules.items()
            if (full or str(view.status.get("nextRunTime") or "") <= stamp) and self.owns(key)
        ]

    async def _resync(self) -> None:
        # round 0 would be a full one: the start (every first listing) and lead() have just planned every
        # AppSchedule, so the first full round comes a full_resync_every later, not at once (at N = 10,000 that
        # round was a minute of CPU, right after a start had done the same)
        rounds = 1
        while True:
            period = self.options.resync_seconds
            await self.listed.wait()
            await self.running.wait()
            keys = self.due(datetime.now(UTC), full=rounds % self.options.full_resync_every == 0)
            rounds += 1
            if not keys:
                await asyncio.sleep(period)
                continue
            pause = period / len(keys)
            for key in keys:  # spread over the period, not a burst
                await self.running.wait()
                if key in self.store.appschedules:
                    self.causes.setdefault(key, set()).add("resync")
                    self.queue.add(key, urgent=False)
                await asyncio.sleep(pause)

    async def _worker(self, number: int) -> None:
        await self.listed.wait()
        while True:
            await self.running.wait()
            key = await self.queue.get()
            self.woken_by.update(self.causes.pop(key, None) or ("retry",))
            if not self.owns(key):  # its shard went to another replica while it waited: that one plans it
                self.queue.done(key)
                continue
            if not self.running.is_set():  # paused while waiting for a key: leave it for later
                self.queue.done(key)
                self.queue.add(key)
                continue
            try:
                await self._process(key)
            except asyncio.CancelledError:
                raise
            except BaseException:  # nothing may end a worker: it would silently stop reconciling
                log.exception("worker %d: unexpected failure on %s/%s", number, *key)
                self.queue.done(key, retry_in=self.queue.failed(key))

    async def _process(self, key: Key) -> None:
        """One reconcile of ``key``, and what its result means for the queue (as controller-runtime's
        reconcileHandler maps a Result): done, queued again at a time, retried with back-off, or left to the
        next leader."""
        started = time.monotonic()
        now = datetime.now(UTC)
        WRITING_FOR.set(key)  # the fence of --shards asks whose writes these are (this worker's task only)
        try:
            result = await self.reconcile(key, now)
        except Fenced as error:  # a write outside the reconcile's own (none today): as a fenced result
            result = Result(Outcome(), fenced=str(error))
        except ApiException as error:
            metrics.RECONCILES.labels("failed").inc()
            failure = failure_of(error)
            log.warning("reconcile of %s/%s failed (%s %s)", *key, error.status, error.reason)
            retry_in = self.queue.failed(key, conflict=failure == "conflict", transient=failure == "transient")
            self.queue.done(key, retry_in=retry_in)
            return
        except (HTTPError, OSError) as error:  # the API server is away (a restart, a network cut): one line
            metrics.RECONCILES.labels("failed").inc()
            log.warning("reconcile of %s/%s failed: API server unreachable (%s)", *key, type(error).__name__)
            self.queue.done(key, retry_in=self.queue.failed(key, transient=True))
            return
        except Exception:
            metrics.RECONCILES.labels("failed").inc()
            log.exception("reconcile of %s/%s failed", *key)
            self.queue.done(key, retry_in=self.queue.failed(key))
            return
        outcome = result.outcome
        if result.fenced:  # leadership ended under this reconcile: the next leader plans it again
            log.info("reconcile of %s/%s stopped: %s", *key, result.fenced)
            self.queue.done(key, retry_in=RETRY_SECONDS)
            return
        self._wake_at(key, result.wake_at, now)
        if result.retry:  # reported (a condition, an Event): tried again with back-off
            metrics.RECONCILES.labels("failed").inc()
            log.warning("reconcile of %s/%s failed: %s", *key, result.retry)
            self.queue.done(key, retry_in=self.queue.failed(key))
            return
        self.reconciles += 1
        metrics.RECONCILES.labels("ok").inc()
        metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)
        self.queue.done(key)
        log.info(
            "reconciled %s/%s: applied=%d deleted=%d status=%d%s events=%d released=%d writes=%d in %.0fms",
            *key,
            outcome.applied,
            outcome.deleted,
            outcome.status,
            f" ({outcome.why})" if outcome.why else "",
            outcome.events,
            outcome.released,
            outcome.writes,
            (time.monotonic() - started) * 1000,
            extra={"namespace": key[0], "appschedule": key[1], "writes": outcome.writes},
        )

    async def _world(self, key: Key) -> World | None:
        world = self.store.world(key)
        if isinstance(world, DeploymentMiss):  # newly referenced: read it once, the watch keeps it fresh
            body = await asyncio.to_thread(self.cluster.read_deployment, world.namespace, world.name)
            self.store.fetched_deployment(world.namespace, world.name, project_deployment(body) if body else None)
            world = self.store.world(key)
        return None if isinstance(world, DeploymentMiss) else world

    def _wake_others(self, key: Key, woken: set[Key]) -> None:
        """Wake the others a write of ours concerns; not the key itself (it is being reconciled)."""
        self.wake(woken - {key})

    async def reconcile(self, key: Key, now: datetime) -> Result:
        """Read, plan, write the CronJobs, plan again with what the API server said of them, write the Jobs, the
        status, the releases and the Events; the result says what the queue should do next."""
        held = self.held.pop(key, None)
        world = await self._world(key)
        if world is None:  # gone or going: its CronJobs go with it (garbage collection by ownerReference)
            return await self._gone(key)
        write = Writer(self.cluster, self.store, key, self.wake)
        if held is not None and still(*held, world, now):  # a status that waited, and nothing changed since
            self.written_held += 1
            try:
                return await self._status(key, write, world, held[1], now, Outcome(), [], None, hold=True)
            except Fenced as error:
                return Result(Outcome(), fenced=str(error))
        decided = await self._plan(world, now)
        # about to count a fire missed or move a mark, from a view the watches keep: a Job may be on its way (the
        # watch was down with the API server, or lags). Read the AppSchedule's Jobs once and plan again.
        if needs_listed_view(decided.status, world.appschedule.status) and await write.confirm_jobs():
            world = await self._world(key)
            if world is None:
                return Result(Outcome())
            decided = await self._plan(world, now)
        outcome = Outcome()
        unsuspended: list[str] = []
        try:
            refused, ours = await self._write_cronjobs(write, world, decided, outcome)
            if refused or ours:
                world = await self._world(key)
                if world is None:
                    return Result(outcome)
                decided = await self._plan(world, now, rejected=refused, failed=ours)
                if needs_listed_view(decided.status, world.appschedule.status) and await write.confirm_jobs():
                    world = await self._world(key) or world  # the watch delivered more meanwhile: list again
                    decided = await self._plan(world, now, rejected=refused, failed=ours)
            for name in decided.delete:
                await write.delete_cronjob(world.cronjobs[name])
                outcome.deleted += 1
            for name, at in decided.suspend:  # a cut-over's old CronJob, after its last fire: retried until done
                refusal = await write.suspend_cronjob(world.cronjobs[name], at)
                if refusal is not None:
                    unsuspended.append(refusal.message)
                else:
                    outcome.applied += 1
            outcome.events = await write.events(world.appschedule.as_object(), decided.write_events, now)
            outcome.jobs, not_started = await self._write_jobs(write, decided)  # idempotent: never waits
            metrics.track(*key, world.appschedule.status)
            metrics.paused(*key, world.appschedule.declared, decided.paused)
            failures = [*ours.values(), *([not_started] if not_started else []), *unsuspended]
            hold = not failures and not refused  # a reconcile that failed at something, or was refused, plans again
            return await self._status(key, write, world, decided, now, outcome, failures, not_started, hold=hold)
        except Fenced as error:
            return Result(outcome, fenced=str(error))

    async def _status(
        self,
        key: Key,
        write: Writer,
        world: World,
        decided: Plan,
        now: datetime,
        outcome: Outcome,
        failures: list[str],
        not_started: str | None,
        *,
        hold: bool,
    ) -> Result:
        """The end of a reconcile: the status written, or left to wait (held with its plan: when the wait is up and
        nothing changed, it is written from that plan), then the releases and the Events; ``failures``: what this
        reconcile could not do (``not_started``: a Job it could not create), retried with back-off; ``hold``: whether
        a status that waits may be written from this plan later."""
        left = self._wait_left(key, decided.status_wait) if decided.status_changed else 0.0
        if left > 0:  # a fire that came, or runs that started: written when the wait is up, with what else comes
            self.deferred += 1
            if hold and self.owns(key) and self.running.is_set():  # (a shard lost, leadership lost: not ours)
                self.held[key] = (world, decided, now)
            return Result(outcome, wake_at=earliest(decided.wake_at, now + timedelta(seconds=left)))
        self.waiting.pop(key, None)
        appschedule = world.appschedule.as_object()
        if decided.status_changed:
            if not await write.status(appschedule, decided.status, now):
                return Result(outcome)  # refused for good: said, and every held Job let go
            outcome.status, outcome.why = 1, decided.status_wait
            self.written[decided.status_wait] += 1
            metrics.record_durations(*key, decided.finished)
        outcome.released = await write.release(decided.release)  # recorded in the status written
        outcome.events += await write.events(appschedule, decided.events, now)
        if not_started:
            await write.events(appschedule, [Event("Warning", "JobNotCreated", not_started[:1024])], now)
        return Result(outcome, retry="; ".join(failures) or None, wake_at=decided.wake_at)

    async def _gone(self, key: Key) -> Result:
        """An AppSchedule gone (or a key of Jobs nobody can record): its Jobs are let go."""
        self.waiting.pop(key, None)
        outcome = Outcome()
        if key not in self.store.appschedules:  # its Jobs can be counted by nobody: let them go
            holding = [j.name for j in self.store.jobs_of(key) if j.finalizer]
            if not key[1]:  # Jobs whose labels were removed after admission: the ledger finalized them
                holding += self.store.take_left(key[0])
            try:
                outcome.released = await Writer(self.cluster, self.store, key, self.wake).release(holding)
            except Fenced as error:
                return Result(outcome, fenced=str(error))
            metrics.forget(key[0], key[1], {j.task for j in self.store.jobs_of(key)})
        return Result(outcome)

    async def _write_cronjobs(
        self, write: Writer, world: World, decided: Plan, outcome: Outcome
    ) -> tuple[dict[str, str], dict[str, str]]:
        """Apply the planned CronJobs; the tasks whose CronJob the API server refused (the user's to fix) and
        those it did not take for a reason of ours (retried), each with what to say."""
        refused: dict[str, str] = {}
        ours: dict[str, str] = {}
        view = world.appschedule
        for manifest in decided.apply:
            held = world.cronjobs.get(str(manifest["metadata"]["name"]))
            answer = await write.apply_cronjob(manifest, held=held if held and held.ours(view) else None, uid=view.uid)
            task = str(manifest["metadata"]["labels"][naming.LABEL_TASK])
            if isinstance(answer, Refused):
                refused[task] = answer.message
            elif isinstance(answer, Ours):
                ours[task] = answer.message
            else:
                outcome.applied += 1
        return refused, ours

    async def _plan(self, world: World, now: datetime, **given: Any) -> Plan:
        """plan() in the planning thread: the event loop also answers both admission webhooks and the liveness
        probe, and a plan is CPU (rendering, the ledger) that must never make them wait. ``world`` is a
        snapshot of immutable views, so the thread shares nothing with the loop. The interpreter hands the GIL
        over every millisecond (handlers.startup), so the loop gets it back within about that while a plan runs."""
        return await asyncio.get_running_loop().run_in_executor(
            self._planner, partial(plan, world, now, quiets=self.quiets, **given)
        )

    async def _write_jobs(self, write: Writer, decided: Plan) -> tuple[int, str | None]:
        """Create the Jobs the plan starts, in order (oldest fire first); each goes into the view from the
        create's answer, so the next plan counts it active at once. A Job of that name that exists already is
        not created twice. A create the API server refuses (a quota, an admission policy, RBAC, an invalid
        template) or cannot answer stops the rest: what failed is returned, to be reported (an Event) and tried
        again with back-off after the status is written; the reconcile goes on. Then delete the Jobs of
        backfills that were removed."""
        done = 0
        failure = None
        for manifest in decided.create:
            failure = await write.create_job(manifest)
            if failure is not None:
                break
            done += 1
        for name in decided.delete_jobs:
            await write.delete_job(name)
            done += 1
        return done, failure

    def _wake_at(self, key: Key, moment: datetime | None, now: datetime) -> None:
        """Queue the key again when time alone will change its ledger (a run due, a grace or deadline over)."""
        old = self.timers.pop(key, None)
        if old is not None:
            old.cancel()
        if moment is None:
            return
        delay = max(0.0, (moment - now).total_seconds())
        loop = asyncio.get_running_loop()
        self.timers[key] = loop.call_later(delay, lambda: self._timer_fired(key))

    def _timer_fired(self, key: Key) -> None:
        self.timers.pop(key, None)
        if key in self.store.appschedules and self.running.is_set() and self.owns(key):
            self.causes.setdefault(key, set()).add("timer")
            self.queue.add(key, urgent=False)
