"""Prometheus metrics (DESIGN "Status"), served on the operator's metrics port.

The run counters grow by what each status write adds to the ledger's counts (a restart of the operator
starts them at 0 again, as Prometheus counters do); the gauges follow the status. Series of an
AppSchedule or task that is gone are removed. Labels are bounded: namespace, AppSchedule, task and a
result from a fixed set; never a Job's name or a key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ..core.keys import parse_time
from ..core.schedule import ScheduleError, next_fire, parse

REGISTRY = CollectorRegistry()
LABELS = ("namespace", "appschedule", "task")

RUNS = Counter(
    "appschedule_runs_total",
    "Runs counted by the ledger, by result: started (a scheduled time got a "
    "Job), succeeded, failed, stuck, late, skipped; manual and rerun (runs asked for by hand), backfilled (runs of "
    "past fires a backfill started), caught_up (of the started: fires missed within catchUpWindow the operator ran), "
    "unclaimed (runs that finished without claiming their fire: no claim library).",
    [*LABELS, "result"],
    registry=REGISTRY,
)
MISSED = Counter(
    "appschedule_missed_runs_total", "Scheduled times that got no Job and no longer can.", LABELS, registry=REGISTRY
)
DUPLICATES = Counter(
    "appschedule_duplicate_runs_total", "Jobs beyond the first for one scheduled time.", LABELS, registry=REGISTRY
)
ABSORBED = Counter(
    "appschedule_duplicate_runs_absorbed_total",
    "Jobs of a scheduled time whose claim lost (the claim libraries): another Job of that time did the work, so "
    "they did nothing. Duplicates that did the work again: appschedule_duplicate_runs_total minus this.",
    LABELS,
    registry=REGISTRY,
)
UNKEYED = Counter(
    "appschedule_unkeyed_jobs_total",
    "Jobs admitted without their idempotency key (the key webhook did not answer).",
    LABELS,
    registry=REGISTRY,
)
REFUSED_JOBS = Counter(
    "appschedule_refused_jobs_total",
    "Jobs of a task the ledger did not count because the scheduled time they state is not the cluster's (not a "
    "time, in the future, or not a fire of the task): each is reported once (Event OddJob) and let go.",
    LABELS,
    registry=REGISTRY,
)
DURATION = Histogram(
    "appschedule_run_duration_seconds",
    "From a run's Job creation to its end.",
    [*LABELS, "result"],
    buckets=(1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 21600),
    registry=REGISTRY,
)
LAST_SUCCESS = Gauge(
    "appschedule_last_success_timestamp_seconds",
    "Scheduled time of the last successful run.",
    LABELS,
    registry=REGISTRY,
)
NEXT_RUN = Gauge("appschedule_next_run_timestamp_seconds", "The task's next scheduled time.", LABELS, registry=REGISTRY)
INTERVAL = Gauge(
    "appschedule_schedule_interval_seconds",
    "Seconds from the task's next scheduled time to the one after it: its period, for a regular schedule.",
    LABELS,
    registry=REGISTRY,
)
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
}


def serve(port: int, addr: str = "0.0.0.0") -> None:
    start_http_server(port, addr=addr, registry=REGISTRY)


def _tasks(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(t.get("name")): t for t in status.get("tasks") or [] if isinstance(t, Mapping)}


def track(namespace: str, appschedule: str, status: Mapping[str, Any]) -> None:
    """Export every counter of the status' tasks, at 0 until something happens: Prometheus' increase()
    needs a sample before the first run, miss or duplicate, or the alert on it never fires."""
    for task in _tasks(status):
        labels = (namespace, appschedule, task)
        for result in _RESULTS.values():
            RUNS.labels(*labels, result)
        MISSED.labels(*labels)
        DUPLICATES.labels(*labels)
        ABSORBED.labels(*labels)
        UNKEYED.labels(*labels)
        REFUSED_JOBS.labels(*labels)


def record_status(namespace: str, appschedule: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """A status write went through: count what it added, and set the gauges."""
    track(namespace, appschedule, new)
    before = _tasks(old)
    for task, entry in _tasks(new).items():
        labels = (namespace, appschedule, task)
        counts = entry.get("counts") or {}
        previous = (before.get(task) or {}).get("counts") or {}
        for field, result in _RESULTS.items():
            added = int(counts.get(field) or 0) - int(previous.get(field) or 0)
            if added > 0:
                RUNS.labels(*labels, result).inc(added)
        for field, counter in (
            ("missed", MISSED),
            ("duplicates", DUPLICATES),
            ("absorbed", ABSORBED),
            ("unkeyed", UNKEYED),
            ("refused", REFUSED_JOBS),
        ):
            added = int(counts.get(field) or 0) - int(previous.get(field) or 0)
            if added > 0:
                counter.labels(*labels).inc(added)
        success = parse_time(entry.get("lastSuccessfulTime"))
        if success is not None:
            LAST_SUCCESS.labels(*labels).set(success.timestamp())
        upcoming = parse_time(entry.get("nextRunTime"))
        if upcoming is not None:
            NEXT_RUN.labels(*labels).set(upcoming.timestamp())
            gap = _interval(entry, upcoming)
            if gap is not None:
                INTERVAL.labels(*labels).set(gap)
    for task in set(before) - set(_tasks(new)):
        forget(namespace, appschedule, [task])


def _interval(entry: Mapping[str, Any], upcoming: datetime) -> float | None:
    """The task's next fire to the one after, by the schedule its status says it runs (None if unreadable)."""
    try:
        schedule = parse(str(entry.get("schedule")), str(entry.get("timeZone") or "UTC"))
    except ScheduleError:
        return None
    after = next_fire(schedule, upcoming)
    return (after - upcoming).total_seconds() if after is not None else None


def record_durations(namespace: str, appschedule: str, finished: Iterable[tuple[str, str, float]]) -> None:
    for task, result, seconds in finished:
        DURATION.labels(namespace, appschedule, task, result).observe(seconds)


def forget(namespace: str, appschedule: str, tasks: Iterable[str]) -> None:
    """Drop the series of tasks (or of a whole AppSchedule) that are gone."""
    for task in tasks:
        labels = (namespace, appschedule, task)
        for metric in (MISSED, DUPLICATES, ABSORBED, UNKEYED, REFUSED_JOBS, LAST_SUCCESS, NEXT_RUN, INTERVAL):
            with contextlib.suppress(KeyError):
                metric.remove(*labels)
        for metric_with_result in (RUNS, DURATION):
            for result in {*_RESULTS.values(), "succeeded", "failed"}:
                with contextlib.suppress(KeyError):
                    metric_with_result.remove(*labels, result)
