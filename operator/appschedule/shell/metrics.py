"""Prometheus metrics (DESIGN "Status"), served on the operator's metrics port.

The run counters grow by what each status write adds to the ledger's counts (a restart of the operator
starts them at 0 again, as Prometheus counters do); the gauges follow the status. Series of an
AppSchedule or task that is gone are removed. Labels are bounded: namespace, AppSchedule, task and a
result from a fixed set; never a Job's name or a key.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ..core.keys import parse_time
from ..core.schedule import ScheduleError, next_fire, parse

REGISTRY = CollectorRegistry()
LABELS = ("namespace", "appschedule", "task")

# the per-task families, (name, help) each; their values are kept in one TaskSeries a task (not one
# prometheus_client child a series: at 10,000 AppSchedules those children were 300 MiB)
RUNS = (
    "appschedule_runs",
    "Runs counted by the ledger, by result: started (a scheduled time got a "
    "Job), succeeded, failed, stuck, late, skipped; manual and rerun (runs asked for by hand), backfilled (runs of "
    "past fires a backfill started), caught_up (of the started: fires missed within catchUpWindow the operator ran), "
    "unclaimed (runs that finished without claiming their fire: no claim library), blacked_out (fires inside a "
    "blackout: no run, none missed).",
)
COUNTERS = (  # status count -> (family, help)
    ("missed", "appschedule_missed_runs", "Scheduled times that got no Job and no longer can."),
    ("duplicates", "appschedule_duplicate_runs", "Jobs beyond the first for one scheduled time."),
    (
        "absorbed",
        "appschedule_duplicate_runs_absorbed",
        "Jobs of a scheduled time whose claim lost (the claim libraries): another Job of that time did the work, so "
        "they did nothing. Duplicates that did the work again: appschedule_duplicate_runs_total minus this.",
    ),
    (
        "unkeyed",
        "appschedule_unkeyed_jobs",
        "Jobs admitted without their idempotency key (the key webhook did not answer).",
    ),
    (
        "refused",
        "appschedule_refused_jobs",
        "Jobs of a task the ledger did not count because the scheduled time they state is not the cluster's (not a "
        "time, in the future, or not a fire of the task): each is reported once (Event OddJob) and let go.",
    ),
)
GAUGES = (
    ("appschedule_last_success_timestamp_seconds", "Scheduled time of the last successful run."),
    ("appschedule_next_run_timestamp_seconds", "The task's next scheduled time."),
    (
        "appschedule_schedule_interval_seconds",
        "Seconds from the task's next scheduled time to the one after it: its period, for a regular schedule.",
    ),
    (
        "appschedule_task_paused",
        "1 while the task is paused after failed runs in a row (suspendAfterFailures), 0 otherwise: kubectl "
        "appschedule resume runs it again.",
    ),
)
PAUSED = 3  # the gauge's place in TaskSeries.gauges
DURATION = ("appschedule_run_duration_seconds", "From a run's Job creation to its end.")
BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0)
RECONCILES = Counter(
    "appschedule_reconciles_total", "Reconciles of AppSchedules, by result.", ["result"], registry=REGISTRY
)
RECONCILE_SECONDS = Histogram("appschedule_reconcile_duration_seconds", "Time one reconcile took.", registry=REGISTRY)
STATUS_REFUSED = Counter(
    "appschedule_status_refused_total",
    "Status writes the API server refused (too large or invalid): the AppSchedule's runs are not being recorded.",
    ["namespace", "appschedule"],
    registry=REGISTRY,
)

_RESULTS = {
    "runs": "started",
    "succeeded": "succeeded",
    "failed": "failed",
    "stuck": "stuck",
    "late": "late",
    "skipped": "skipped",
    "manual": "manual",
    "reruns": "rerun",
    "backfilled": "backfilled",
    "caughtUp": "caught_up",
    "unclaimed": "unclaimed",
    "blackedOut": "blacked_out",
}


RESULTS = tuple(_RESULTS.values())
_SLOT = {result: i for i, result in enumerate(RESULTS)}  # a result's place in TaskSeries.counts
_COUNTER_SLOT = {field: len(RESULTS) + i for i, (field, _, _) in enumerate(COUNTERS)}


class TaskSeries:
    """Every series of one task: its counters (runs by result, then COUNTERS), its gauges (NaN: not set) and its
    duration histograms by result (made at the first observation). Counters start at 0 (Prometheus' increase()
    needs a sample before the first run, miss or duplicate, or the alert on it never fires)."""

    __slots__ = ("counts", "created", "durations", "gauges")

    def __init__(self, created: float) -> None:
        self.counts = [0] * (len(RESULTS) + len(COUNTERS))
        self.gauges = [math.nan] * len(GAUGES)
        self.durations: dict[str, list[float]] | None = None  # result -> bucket counts, count, sum, created
        self.created = created


class TaskMetrics(Collector):
    """The per-task series, exposed at each scrape from TaskSeries (a custom collector, as prometheus_client
    documents for metrics kept elsewhere). Written on the event loop, read by the metrics server's thread: the
    lock guards which tasks there are; a scrape copies each task's lists (a count it reads may be one write old)."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str, str], TaskSeries] = {}
        self.lock = threading.Lock()

    def task(self, labels: tuple[str, str, str]) -> TaskSeries:
        found = self.series.get(labels)
        if found is None:
            with self.lock:
                found = self.series[labels] = TaskSeries(time.time())
        return found

    def observe(self, labels: tuple[str, str, str], result: str, seconds: float) -> None:
        """A run of the task ended after ``seconds``: its duration histogram of ``result``."""
        series = self.task(labels)
        if series.durations is None:
            series.durations = {}
        kept = series.durations.get(result)
        if kept is None:
            kept = series.durations[result] = [*(0.0 for _ in BUCKETS), 0.0, 0.0, time.time()]
        bucket = bisect.bisect_left(BUCKETS, seconds)  # the first bound at or above it
        if bucket < len(BUCKETS):
            kept[bucket] += 1
        kept[-3] += 1
        kept[-2] += seconds

    def drop(self, labels: tuple[str, str, str]) -> None:
        with self.lock:
            self.series.pop(labels, None)

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            taken = [(labels, s.created, list(s.counts), list(s.gauges), _copy(s.durations))
                     for labels, s in self.series.items()]  # fmt: skip
        runs = CounterMetricFamily(*RUNS, labels=[*LABELS, "result"])
        counters = [CounterMetricFamily(name, text, labels=list(LABELS)) for _, name, text in COUNTERS]
        gauges = [GaugeMetricFamily(name, text, labels=list(LABELS)) for name, text in GAUGES]
        durations = HistogramMetricFamily(*DURATION, labels=[*LABELS, "result"])
        for labels, created, counts, values, observed in taken:
            for result, i in _SLOT.items():
                runs.add_metric([*labels, result], counts[i], created=created)
            for family, (field, _, _) in zip(counters, COUNTERS, strict=True):
                family.add_metric(list(labels), counts[_COUNTER_SLOT[field]], created=created)
            for gauge, value in zip(gauges, values, strict=True):
                if not math.isnan(value):
                    gauge.add_metric(list(labels), value)
            for result, kept in (observed or {}).items():
                cumulative, buckets = 0.0, []
                for bound, count in zip(BUCKETS, kept, strict=False):
                    cumulative += count
                    buckets.append((_bound(bound), cumulative))
                buckets.append(("+Inf", kept[-3]))
                durations.add_metric([*labels, result], buckets, kept[-2])
                names = dict(zip((*LABELS, "result"), (*labels, result), strict=True))
                durations.add_sample(f"{DURATION[0]}_created", names, kept[-1])
        yield from (runs, *counters, *gauges, durations)


def _copy(durations: dict[str, list[float]] | None) -> dict[str, list[float]] | None:
    return {k: list(v) for k, v in durations.items()} if durations else None


def _bound(bound: float) -> str:
    return repr(float(bound))  # as prometheus_client writes a bucket's le: "1.0", "21600.0"


TASKS = TaskMetrics()
REGISTRY.register(TASKS)


def serve(port: int, addr: str = "0.0.0.0") -> None:
    start_http_server(port, addr=addr, registry=REGISTRY)


def _tasks(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(t.get("name")): t for t in status.get("tasks") or [] if isinstance(t, Mapping)}


def track(namespace: str, appschedule: str, status: Mapping[str, Any]) -> None:
    """Export every counter of the status' tasks, at 0 until something happens."""
    for task in _tasks(status):
        TASKS.task((namespace, appschedule, task))


def record_status(namespace: str, appschedule: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """A status write went through: count what it added, and set the gauges."""
    before = _tasks(old)
    for task, entry in _tasks(new).items():
        series = TASKS.task((namespace, appschedule, task))
        counts = entry.get("counts") or {}
        previous = (before.get(task) or {}).get("counts") or {}
        for field, slot in (*((f, _SLOT[r]) for f, r in _RESULTS.items()), *_COUNTER_SLOT.items()):
            added = _int(counts.get(field)) - _int(previous.get(field))
            if added > 0:
                series.counts[slot] += added
        success = parse_time(entry.get("lastSuccessfulTime"))
        if success is not None:
            series.gauges[0] = success.timestamp()
        upcoming = parse_time(entry.get("nextRunTime"))
        if upcoming is not None:
            series.gauges[1] = upcoming.timestamp()
            gap = _interval(entry, upcoming)
            if gap is not None:
                series.gauges[2] = gap
    for task in set(before) - set(_tasks(new)):
        forget(namespace, appschedule, [task])


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _interval(entry: Mapping[str, Any], upcoming: datetime) -> float | None:
    """The task's next fire to the one after, by the schedule its status says it runs (None if unreadable)."""
    try:
        schedule = parse(str(entry.get("schedule")), str(entry.get("timeZone") or "UTC"))
    except ScheduleError:
        return None
    after = next_fire(schedule, upcoming)
    return (after - upcoming).total_seconds() if after is not None else None


def paused(namespace: str, appschedule: str, tasks: Iterable[str], which: Iterable[str]) -> None:
    """Set the paused gauge of each task the plan saw: 1 for those paused after their failures, 0 for the rest."""
    stopped = set(which)
    for task in tasks:
        TASKS.task((namespace, appschedule, task)).gauges[PAUSED] = 1.0 if task in stopped else 0.0


def record_durations(namespace: str, appschedule: str, finished: Iterable[tuple[str, str, float]]) -> None:
    for task, result, seconds in finished:
        TASKS.observe((namespace, appschedule, task), result, seconds)


def forget(namespace: str, appschedule: str, tasks: Iterable[str]) -> None:
    """Drop the series of tasks (or of a whole AppSchedule) that are gone."""
    for task in tasks:
        TASKS.drop((namespace, appschedule, task))


def forget_appschedules(which: Callable[[tuple[str, str]], bool]) -> None:
    """Drop the series of the AppSchedules ``which`` selects (--shards: a shard this replica no longer holds; its new
    holder exports them, so a sum over replicas counts each once)."""
    with TASKS.lock:
        for labels in [labels for labels in TASKS.series if which((labels[0], labels[1]))]:
            del TASKS.series[labels]
