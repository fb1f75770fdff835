"""``kubectl appschedule``: the executable ``kubectl-appschedule`` installed with the package, which kubectl
runs as a plugin (``kubectl appschedule status``); it runs as well without kubectl.

It follows kubectl's conventions: the current kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``) and
context (``--context``), ``-n/--namespace`` (default: the context's namespace), ``-A/--all-namespaces``,
``-o text|json|yaml``; errors on stderr naming the object; exit status 0, or 1 when something named is not
found or the API server refuses.

``status [NAME]``: per task, the schedule as it runs (H resolved: the one in the status, which the
operator took from the task's CronJob), its time zone, the next three fires (local and UTC), the last run,
the counts and the health of its last runs. ``history NAME [TASK]``: a mark per fire of the last runs and
misses. The text fits a terminal of 80 columns.

``run NAME TASK``: a Job now from the task's CronJob, marked manual, its time now to the second (never a
fire's, so its key is its own). ``rerun NAME TASK --time T``: a Job for fire T (refused, naming the
nearest fires, when T is not a past fire), carrying T's key. The ledger counts them as manual runs and
re-runs, never as duplicates. ``--dry-run`` prints the Job instead.

``backfill NAME TASK --from T1 --to T2 [--parallel K]``: records a backfill in the AppSchedule
(``spec.backfills``); the operator runs each fire of the range with that fire's key, oldest first, at most
K at once, and shows the progress in ``status`` and ``kubectl get appschedules -o wide``. More than
``--max`` fires (default 100; the operator's limit is 1000) is refused; ``--dry-run`` lists the fires.
``backfill NAME --remove B`` takes backfill B out of the spec: its runs stop and its Jobs are deleted.

What to show is computed by pure functions of the AppSchedules and ``now`` (``describe``, ``text``); only
``main`` reads the cluster and the clock.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from .core import blackout, keys, naming, pause, render, runs, view
from .core.schedule import ScheduleError, fires_after, next_fire, parse, previous_fire, repeat_of
from .core.schedule import check_time_zone as schedule_zone

WIDTH = 80
NEXT = 3  # fires shown per task
RECENT = 10  # last runs a task's health is read from (as the RunsHealthy condition)
COUNTS = (
    "runs", "succeeded", "failed", "missed", "late", "skipped", "duplicates", "stuck", "manual", "reruns", "backfilled",
    "caughtUp", "unkeyed", "refused", "absorbed", "unclaimed", "blackedOut"
)  # fmt: skip
BACKFILL_MAX = 100  # fires a backfill may have without --max


class PluginError(Exception):
    """A user-facing error: printed on stderr, exit status 1."""


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _fires(
    task: Mapping[str, Any], now: datetime, windows: Sequence[blackout.Window] = ()
) -> list[dict[str, str]] | str:
    """The task's next fires as its CronJob runs them, past its blackouts, or why they cannot be told."""
    expression, zone = task.get("schedule"), task.get("timeZone") or "UTC"
    if not isinstance(expression, str) or not isinstance(zone, str):
        return "not known yet (the operator has not recorded the task's CronJob)"
    try:
        schedule = parse(expression, zone)
    except ScheduleError as error:
        return f"cannot be told: {error}"
    fires: list[datetime] = []
    if windows:
        after: datetime | None = now
        while after is not None and len(fires) < NEXT:
            after = blackout.next_allowed(schedule, windows, after)
            fires += [after] if after is not None else []
    else:
        fires = fires_after(schedule, now, NEXT)
    return [
        {"utc": f"{fire:%Y-%m-%dT%H:%M:%SZ}", "local": f"{fire.astimezone(schedule.zone):%Y-%m-%d %H:%M %Z}"}
        for fire in fires
    ]


def _windows(spec: Mapping[str, Any], name: str, shared: Sequence[Any] = ()) -> tuple[blackout.Window, ...]:
    """A task's blackouts (spec.blackouts, its calendars' and its own), as far as they read (the API server
    validated them)."""
    task = next((_dict(t) for t in _list(spec.get("tasks")) if _dict(t).get("name") == name), {})
    listed = [*_list(spec.get("blackouts")), *shared, *_list(task.get("blackouts"))]
    raw = [b for b in listed if isinstance(b, Mapping)]
    try:
        return blackout.of([dict(b) for b in raw])
    except (ValueError, KeyError, TypeError):
        return ()


def _blackout(task: Mapping[str, Any], windows: Sequence[blackout.Window], now: datetime) -> dict[str, Any] | None:
    """The blackout the task is in now (until when), else its next one within a year, in its zone."""
    zone = task.get("timeZone") or "UTC"
    if not windows or not isinstance(zone, str):
        return None
    try:
        where = schedule_zone(zone)
    except ScheduleError:
        return None
    span = blackout.covering(windows, where, now)
    if span is not None:
        return {"now": True, "name": span[2].said(), "from": _when(span[0], where), "until": _when(span[1], where)}
    ahead = blackout.spans(windows, where, now, now + timedelta(days=366))
    if not ahead:
        return None
    start, end, window = blackout.merged(ahead)[0]
    return {"now": False, "name": window.said(), "from": _when(start, where), "until": _when(end, where)}


def _when(moment: datetime, zone: Any) -> str:
    return f"{moment.astimezone(zone):%Y-%m-%d %H:%M %Z}"


def _health(task: Mapping[str, Any]) -> str:
    """What the task's last runs say: "ok", or what went wrong among them."""
    recent = [r for r in _list(task.get("recent"))[:RECENT] if isinstance(r, Mapping)]
    problems = {
        "missed": sum(1 for r in recent if r.get("state") == "Missed"),
        "failed": sum(1 for r in recent if r.get("state") == "Failed"),
        "lost": sum(1 for r in recent if r.get("state") == "Unknown"),
        "duplicated": sum(1 for r in recent if _count(r.get("duplicates")) > _count(r.get("absorbed"))),
        "stuck": sum(1 for r in recent if r.get("stuck")),
    }
    said = [f"{count} {what}" for what, count in problems.items() if count]
    if task.get("lateSince"):
        said.append(f"late since {task['lateSince']}")
    return "ok" if not said else ", ".join(said) + f" among the last {len(recent)} runs"


def describe(
    appschedule: Mapping[str, Any], now: datetime, calendars: Mapping[tuple[str, str], Sequence[Any]] | None = None
) -> dict[str, Any]:
    """What ``status`` shows of one AppSchedule (the ``-o json`` form); any field may be missing or odd.
    ``calendars``: the blackouts of the AppScheduleCalendars read, by (namespace, name)."""
    meta, spec = _dict(appschedule.get("metadata")), _dict(appschedule.get("spec"))
    status = _dict(appschedule.get("status"))
    conditions = {str(c.get("type")): c for c in _list(status.get("conditions")) if isinstance(c, Mapping)}
    tracked = {str(t.get("name")): t for t in _list(status.get("tasks")) if isinstance(t, Mapping)}
    declared = [str(t.get("name")) for t in _list(spec.get("tasks")) if isinstance(t, Mapping) and t.get("name")]
    thresholds = _thresholds(spec)
    resumed, _ = pause.resumes(str(_dict(meta.get("annotations")).get(pause.ANNOTATION_RESUMED) or ""))
    tasks = []
    for name in declared + [n for n in tracked if n not in declared]:
        task = _dict(tracked.get(name))
        paused = pause.paused(name, thresholds.get(name), _list(task.get("recent")), resumed.get(name))
        shared = [
            b
            for c in _list(spec.get("calendars"))
            for b in (calendars or {}).get((str(meta.get("namespace")), str(c)), ())
        ]
        windows = _windows(spec, name, shared)
        last = _dict(task.get("lastRun"))
        counts = _dict(task.get("counts"))
        tasks.append(
            {
                "name": name,
                "schedule": task.get("schedule"),
                "timeZone": task.get("timeZone"),
                "next": _fires(task, now, windows),
                "blackout": _blackout(task, windows, now),
                "lastRun": {
                    k: last[k] for k in ("scheduledTime", "state", "job", "key", "claim", "failure") if k in last
                }
                or None,
                "counts": {k: _count(counts.get(k)) for k in COUNTS} if counts else None,
                "health": _health(task) if task else "not tracked yet",
                "declared": name in declared,
                "paused": {"failures": paused.failures, "last": paused.last, "why": paused.why} if paused else None,
            }
        )
    fields = ("name", "task", "state", "fires", "started", "active", "succeeded", "failed", "next", "message")
    backfills = [{k: b[k] for k in fields if k in b} for b in _list(status.get("backfills")) if isinstance(b, Mapping)]
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "deployment": _dict(spec.get("deploymentRef")).get("name"),
        "ready": {k: _dict(conditions.get("Ready")).get(k) for k in ("status", "reason", "message")},
        "runsHealthy": _dict(conditions.get("RunsHealthy")).get("status"),
        "tasks": tasks,
        "backfills": backfills,
    }


def _thresholds(spec: Mapping[str, Any]) -> dict[str, int]:
    """Each task's suspendAfterFailures (its own, else spec.defaults'), where it is a number the schema takes."""
    fallback = _dict(spec.get("defaults")).get("suspendAfterFailures")
    found = {}
    for task in _list(spec.get("tasks")):
        value = _dict(task).get("suspendAfterFailures", fallback)
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 10:
            found[str(_dict(task).get("name"))] = value
    return found


def text(described: Sequence[Mapping[str, Any]]) -> str:
    """The terminal form: a block per AppSchedule, a few lines per task, every line at most 80 columns."""
    lines: list[str] = []
    for item in described:
        ready = _dict(item.get("ready"))
        head = f"{item.get('namespace')}/{item.get('name')}  deployment {item.get('deployment')}"
        head += f"  ready {ready.get('status') or '?'}  runs healthy {item.get('runsHealthy') or '?'}"
        lines.append(head)
        if ready.get("status") == "False" and ready.get("message"):
            lines.append(f"  not ready: {ready['message']}")
        for task in item.get("tasks") or []:
            where = "" if task.get("declared") else "  (no longer declared)"
            schedule = (
                f"{task['schedule']}  {task.get('timeZone') or ''}"
                if task.get("schedule")
                else "schedule not known yet"
            )
            lines.append(f"  {task['name']}  {schedule}{where}")
            last = task.get("lastRun")
            if last:
                why = f" ({last['failure']})" if last.get("failure") else ""
                claim = f", claim {last['claim']}" if last.get("claim") else ""
                lines.append(f"    last run  {last.get('state')}{why}, fire {last.get('scheduledTime')}{claim}")
            counts = task.get("counts")
            if counts:
                shown = ("runs", "missed", "duplicates", "failed", "stuck", "unkeyed")
                lines.append("    counts    " + "  ".join(f"{k} {counts[k]}" for k in shown))
                asked = ("manual", "reruns", "backfilled", "caughtUp")
                if any(counts[k] for k in asked):
                    lines.append("    asked     " + "  ".join(f"{k} {counts[k]}" for k in asked))
                if counts["absorbed"] or counts["unclaimed"]:
                    lines.append(  # absorbed: a duplicate that lost its claim did nothing; unclaimed: no library
                        f"    claims    absorbed {counts['absorbed']} of {counts['duplicates']} duplicates  "
                        f"runs that claimed nothing {counts['unclaimed']}"
                    )
                if counts["refused"]:
                    lines.append(
                        f"    refused   {counts['refused']} Jobs stating a time not the cluster's (Event OddJob)"
                    )
            lines.append(f"    health    {task.get('health')}")
            held = _dict(task.get("paused"))
            if held:
                lines.append(
                    f"    paused    after {held.get('failures')} failed runs, the last {held.get('last')}: kubectl "
                    f"appschedule resume {item.get('name')} {task['name']}"
                )
            dark = _dict(task.get("blackout"))
            if dark:
                when = "now" if dark.get("now") else "next"
                lines.append(f"    blackout  {when} {dark.get('name')}")
                lines.append(f"              {dark.get('from')} to {dark.get('until')}")
            if counts and counts.get("blackedOut"):
                lines.append(f"    blacked   {counts['blackedOut']} fires inside blackouts (no run, none missed)")
            upcoming = task.get("next")
            if isinstance(upcoming, str):
                lines.append(f"    next      {upcoming}")
            else:
                for n, fire in enumerate(upcoming or []):
                    lines.append(f"    {'next' if n == 0 else '':10}{fire['local']:<24}{fire['utc']}")
        for fill in item.get("backfills") or []:
            said = f"  backfill {fill.get('name')} ({fill.get('task')})  {fill.get('state')}"
            if fill.get("state") == "Invalid":
                said += f": {fill.get('message')}"
            lines.append(said)
            if fill.get("state") != "Invalid":
                progress = (
                    f"    started {fill.get('started', 0)}/{fill.get('fires', 0)}  active {fill.get('active', 0)}"
                )
                lines.append(progress + f"  succeeded {fill.get('succeeded', 0)}  failed {fill.get('failed', 0)}")
        lines.append("")
    wrapped: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        wrapped.extend(textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False) or [""])
    return "\n".join(wrapped).rstrip() + "\n"


MARKS = {  # one per fire, the first that applies: what went wrong before what went right
    "M": "missed",
    "S": "stuck",
    "F": "failed",
    "?": "lost (its Job deleted unseen)",
    "D": "duplicated (a Job beyond the first did the work, or claimed nothing)",
    "R": "run again (rerun, backfill)",
    "C": "caught up (started by the operator)",
    "d": "duplicate absorbed (its claim lost: it did nothing)",
    "K": "ran without its key",
    "L": "late",
    "A": "active",
    ".": "succeeded",
}


def _grace(spec: Mapping[str, Any], task: str) -> int:
    """The task's missedRunGraceSeconds: its own, spec.defaults', else the built-in 120."""
    declared = next((t for t in _list(spec.get("tasks")) if isinstance(t, Mapping) and t.get("name") == task), {})
    for source in (declared, _dict(spec.get("defaults"))):
        value = source.get("missedRunGraceSeconds")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 120


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mark(run: Mapping[str, Any], grace: int) -> str:
    state, delay = run.get("state"), run.get("delaySeconds")
    late = isinstance(delay, int) and delay > grace
    found = {
        "M": state == "Missed",
        "S": bool(run.get("stuck")),
        "F": state == "Failed",
        "?": state == "Unknown",
        "D": isinstance(run.get("duplicates"), int) and run["duplicates"] > _count(run.get("absorbed")),
        "R": isinstance(run.get("reruns"), int) and run["reruns"] > 0,
        "C": run.get("caughtUp") is True and state != "Failed",
        "d": isinstance(run.get("duplicates"), int) and run["duplicates"] > 0,
        "K": run.get("keyInjected") is False,
        "L": late,
        "A": state == "Active",
        ".": state == "Succeeded",
    }
    return next((mark for mark, applies in found.items() if applies), "?")


def history(appschedule: Mapping[str, Any], task: str | None = None) -> dict[str, Any]:
    """The last runs and misses the status remembers (10 per task), oldest first, a mark per fire; whether the task
    is paused after failures, and how many fires blackouts took."""
    meta, spec = _dict(appschedule.get("metadata")), _dict(appschedule.get("spec"))
    thresholds = _thresholds(spec)
    resumed, _ = pause.resumes(str(_dict(meta.get("annotations")).get(pause.ANNOTATION_RESUMED) or ""))
    tasks = []
    for entry in _list(_dict(appschedule.get("status")).get("tasks")):
        if not isinstance(entry, Mapping) or (task is not None and entry.get("name") != task):
            continue
        grace = _grace(spec, str(entry.get("name")))
        runs = sorted(
            (
                r
                for r in _list(entry.get("recent"))
                if isinstance(r, Mapping) and isinstance(r.get("scheduledTime"), str)
            ),
            key=lambda r: str(r["scheduledTime"]),
        )
        fires = [
            {
                "scheduledTime": r["scheduledTime"],
                "mark": _mark(r, grace),
                **{
                    k: r[k]
                    for k in (
                        "state",
                        "job",
                        "key",
                        "delaySeconds",
                        "failure",
                        "duplicates",
                        "absorbed",
                        "reruns",
                        "caughtUp",
                    )
                    if k in r
                },
            }
            for r in runs
        ]
        name = str(entry.get("name"))
        held = pause.paused(name, thresholds.get(name), _list(entry.get("recent")), resumed.get(name))
        dark = _count(_dict(entry.get("counts")).get("blackedOut"))
        tasks.append(
            {
                "name": entry.get("name"),
                "schedule": entry.get("schedule"),
                "fires": fires,
                "blackedOut": dark,
                "paused": {"failures": held.failures, "last": held.last, "why": held.why} if held else None,
            }
        )
    return {"namespace": meta.get("namespace"), "name": meta.get("name"), "tasks": tasks}


def history_text(found: Mapping[str, Any]) -> str:
    """A row per task: its marks, oldest first, and the span they cover; a legend; 80 columns."""
    lines = [f"{found.get('namespace')}/{found.get('name')}: the last runs and misses of each task, oldest first"]
    for task in found.get("tasks") or []:
        fires = task.get("fires") or []
        marks = " ".join(f["mark"] for f in fires) or "(none yet)"
        span = f"  {fires[0]['scheduledTime']} .. {fires[-1]['scheduledTime'][11:]}" if fires else ""
        lines.append(f"  {str(task.get('name'))[:20]:<20} {marks:<19}{span}")
        failed = [f"{f['scheduledTime'][11:16]} {f['failure']}" for f in fires if isinstance(f.get("failure"), str)]
        if failed:
            lines.append(f"    failed: {', '.join(failed[-3:])}")
        held = task.get("paused")
        if isinstance(held, Mapping):
            lines.append(f"    paused after {held.get('failures')} failed runs in a row, the last {held.get('last')}: "
                         f"kubectl appschedule resume {found.get('name')} {task.get('name')}")  # fmt: skip
        if task.get("blackedOut"):
            lines.append(
                f"    blacked out: {task['blackedOut']} fires inside blackouts since tracked (no run, none missed)"
            )
    legend = [f"{mark} {meaning.split(' (')[0]}" for mark, meaning in MARKS.items()]
    lines += ["  " + "  ".join(legend[:5]), "  " + "  ".join(legend[5:])]
    wrapped: list[str] = []
    for line in lines:
        wrapped.extend(textwrap.wrap(line, WIDTH, subsequent_indent="    ", break_on_hyphens=False) or [""])
    return "\n".join(wrapped) + "\n"


EVENTS_SHOWN = 10  # an AppSchedule's Events on the page, newest first
PAGE_JOBS = 50  # a task's Jobs still in the cluster shown beyond the status' last runs, newest first


def _job_run(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """One Job still in the cluster as a fire on the page: its time, kind, key and how it ended; None when the Job
    states no time that can be read, or runs nothing (a later schedule's Job for a minute an earlier one runs): the
    page shows runs, not every Job."""
    meta, status = _dict(job.get("metadata")), _dict(job.get("status"))
    annotations = _dict(meta.get("annotations"))
    idle = annotations.get(naming.ANNOTATION_RUN_BY) or annotations.get(naming.ANNOTATION_BLOCKED_BY)
    if idle and view.idle(_dict(job.get("spec")).get("completions")):
        return None
    stated = next(
        (
            str(annotations[k])
            for k in (naming.ANNOTATION_SCHEDULED_TIME, naming.CRONJOB_SCHEDULED_TIMESTAMP)
            if isinstance(annotations.get(k), str)
        ),
        None,
    )
    moment = keys.parse_time(stated) if stated else None
    if moment is None:
        return None
    ended = {
        str(c.get("type")): c
        for c in _list(status.get("conditions"))
        if isinstance(c, Mapping) and c.get("status") == "True" and c.get("type") in ("Complete", "Failed")
    }
    state = "Failed" if "Failed" in ended else "Succeeded" if "Complete" in ended else "Active"
    found: dict[str, Any] = {
        "scheduledTime": keys.rfc3339(moment),
        "job": meta.get("name"),
        "state": state,
        "mark": {"Failed": "F", "Succeeded": ".", "Active": "A"}[state],
        "source": "jobs",
    }
    kind = annotations.get(naming.ANNOTATION_RUN_KIND)
    if kind in naming.RUN_KINDS:
        found["kind"] = kind
    if isinstance(annotations.get(naming.ANNOTATION_IDEMPOTENCY_KEY), str):
        found["key"] = annotations[naming.ANNOTATION_IDEMPOTENCY_KEY]
    if "Failed" in ended:
        why = _dict(ended["Failed"])
        found["failure"] = f"{why.get('reason') or 'Failed'}: {why.get('message') or ''}".strip().rstrip(":")[:200]
    return found


METRIC_HOURS = 24  # the page's hourly stretches read from Prometheus
# what each hourly stretch counts: the family (a run's result, or a counter of its own) the page reads
METRIC_QUERIES = {
    "runs": "sum by (namespace, appschedule, task, result) (increase(appschedule_runs_total{{{sel}}}[1h]))",
    "missed": "sum by (namespace, appschedule, task) (increase(appschedule_missed_runs_total{{{sel}}}[1h]))",
    "duplicates": "sum by (namespace, appschedule, task) (increase(appschedule_duplicate_runs_total{{{sel}}}[1h]))",
}


def metric_stretches(answers: Mapping[str, Any]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """Prometheus' answers to ``METRIC_QUERIES`` (range queries, a step of an hour) as hourly stretches per
    (namespace, AppSchedule, task), oldest first: the end of each hour and what the ledger counted in it
    (``increase`` estimates: rounded). Anything odd in an answer is left out."""
    hours: dict[tuple[str, str, str], dict[float, dict[str, int]]] = {}
    for name, answer in answers.items():
        for series in _list(_dict(_dict(answer).get("data")).get("result")):
            labels = _dict(_dict(series).get("metric"))
            where = (str(labels.get("namespace")), str(labels.get("appschedule")), str(labels.get("task")))
            field = str(labels.get("result")) if name == "runs" else name
            for point in _list(_dict(series).get("values")):
                try:
                    at, value = float(point[0]), round(float(point[1]))
                    datetime.fromtimestamp(at, UTC)
                except (TypeError, ValueError, LookupError, OverflowError, OSError):
                    continue  # a point that is not [time, number], a time out of range, NaN, +Inf
                if value > 0:
                    counts = hours.setdefault(where, {}).setdefault(at, {})
                    counts[field] = counts.get(field, 0) + value
    return {
        where: [
            {"end": f"{datetime.fromtimestamp(at, UTC):%Y-%m-%dT%H:%M:%SZ}", "counts": counts, "source": "metrics"}
            for at, counts in sorted(by_hour.items())
        ]
        for where, by_hour in hours.items()
    }


def page(
    items: Sequence[Mapping[str, Any]],
    jobs: Sequence[Mapping[str, Any]],
    events: Sequence[Mapping[str, Any]],
    now: datetime,
    calendars: Mapping[tuple[str, str], Sequence[Any]] | None = None,
    allowed: Mapping[str, Mapping[str, bool]] | None = None,
    metrics: Mapping[tuple[str, str, str], Sequence[Mapping[str, Any]]] | None = None,
    metrics_said: str | None = None,
) -> dict[str, Any]:
    """What ``kubectl appschedule ui`` shows, as data: per AppSchedule its status (``describe``), per task a
    timeline of fires oldest first (the status' last runs, then the Jobs still in the cluster that the status no
    longer holds, each saying its source), its Events newest first, and what the user may do in its namespace
    (``allowed``: namespace to {"run": bool}, from SelfSubjectAccessReviews), and, when Prometheus was read, each
    task's hourly stretches (``metric_stretches``) with ``metrics_said`` saying where they came from or why there
    are none. Any field of any input may be odd."""
    by_task: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for job in jobs:
        labels = _dict(_dict(job.get("metadata")).get("labels"))
        where = (
            str(_dict(job.get("metadata")).get("namespace")),
            str(labels.get(naming.LABEL_APPSCHEDULE)),
            str(labels.get(naming.LABEL_TASK)),
        )
        run = _job_run(job)
        if run is not None:
            by_task.setdefault(where, []).append(run)
    said: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for event in events:
        involved = _dict(event.get("involvedObject"))
        if involved.get("kind") != naming.KIND:
            continue
        when = (
            event.get("lastTimestamp")
            or event.get("eventTime")
            or _dict(event.get("metadata")).get("creationTimestamp")
        )
        said.setdefault((str(involved.get("namespace")), str(involved.get("name"))), []).append(
            {
                "type": event.get("type"),
                "reason": event.get("reason"),
                "message": str(event.get("message") or "")[:300],
                "time": when if isinstance(when, str) else None,
                "count": _count(event.get("count")) or 1,
            }
        )
    shown = []
    ordered = sorted(
        items, key=lambda i: (str(_dict(i.get("metadata")).get("namespace")), str(_dict(i.get("metadata")).get("name")))
    )
    for item in ordered:
        described = describe(item, now, calendars)
        namespace, name = str(described["namespace"]), str(described["name"])
        fires = {str(t.get("name")): t for t in history(item)["tasks"]}
        for task in described["tasks"]:
            past = fires.get(task["name"], {})
            timeline = [dict(f, source="status") for f in past.get("fires") or []]
            held = {(f["scheduledTime"], str(f.get("job"))) for f in timeline}
            times = {f["scheduledTime"] for f in timeline if f.get("mark") not in ("R", "C")}
            extra = [
                r
                for r in by_task.get((namespace, name, task["name"]), [])
                if (r["scheduledTime"], str(r["job"])) not in held
                and not (r["scheduledTime"] in times and "kind" not in r)
            ]
            extra.sort(key=lambda r: (r["scheduledTime"], str(r["job"])))
            timeline = sorted(timeline + extra[-PAGE_JOBS:], key=lambda r: (r["scheduledTime"], str(r.get("job"))))
            task["timeline"] = timeline
            task["blackedOut"] = past.get("blackedOut", 0)
            task["hourly"] = [dict(h) for h in (metrics or {}).get((namespace, name, task["name"]), [])]
        notes = sorted(said.get((namespace, name), []), key=lambda e: str(e["time"] or ""), reverse=True)
        described["events"] = notes[:EVENTS_SHOWN]
        described["may"] = {"run": False, "backfill": False, **dict((allowed or {}).get(namespace) or {})}
        shown.append(described)
    return {
        "now": keys.rfc3339(now),
        "appschedules": shown,
        "marks": MARKS,
        "sources": {
            "status": "the AppSchedule's status: the last 10 runs and misses of each task",
            "jobs": "the task's Jobs still in the cluster (its CronJob's history limits keep them)",
            "events": "the AppSchedule's Events (the API server keeps them about an hour)",
            "metrics": metrics_said or "Prometheus not asked (kubectl appschedule ui --prometheus URL)",
        },
    }


def asked_time(kind: str, now: datetime, cronjob: Mapping[str, Any], wanted: datetime | None = None) -> datetime:
    """The scheduled time of a run asked for. ``manual``: now to the second, never :00, so its key is never
    a fire's (fires are whole minutes). ``rerun``: ``wanted``, which must be a past fire of the CronJob's
    schedule (PluginError naming the nearest fires otherwise)."""
    if kind == "manual":
        moment = now.astimezone(UTC).replace(microsecond=0)
        return moment + timedelta(seconds=1) if moment.second == 0 else moment
    assert wanted is not None
    spec = _dict(cronjob.get("spec"))
    zone = str(spec.get("timeZone") or "UTC")
    try:
        schedule = parse(render.schedule_text(spec), zone)
    except ScheduleError as error:
        raise PluginError(f"the CronJob's schedule cannot be read: {error}") from None
    moment = wanted.astimezone(UTC)
    moment = repeat_of(schedule, moment) or moment  # the fall-back repeat of a fire is that fire (its key)
    if previous_fire(schedule, moment) != moment:
        before, after = previous_fire(schedule, moment), next_fire(schedule, moment)
        nearest = " and ".join(keys.rfc3339(t) for t in (before, after) if t is not None)
        raise PluginError(
            f"{keys.rfc3339(moment)} is not a fire of {schedule.expression!r} ({zone}); the nearest: {nearest}"
        )
    if moment > now:
        raise PluginError(f"{keys.rfc3339(moment)} has not fired yet (now {keys.rfc3339(now)})")
    return moment


def job_for(cronjob: Mapping[str, Any], kind: str, scheduled: datetime) -> dict[str, Any]:
    """The Job a run asked for is: the CronJob's template, as ``kubectl create job --from=cronjob`` makes
    it (owned by the CronJob), with its kind and its scheduled time; the key webhook keys it from that time."""
    return runs.job_from(cronjob, kind, scheduled)


def backfill_entry(
    cronjob: Mapping[str, Any], task: str, start: datetime, end: datetime, parallel: int, limit: int, now: datetime,
    name: str | None = None,
) -> tuple[dict[str, Any], list[datetime]]:  # fmt: skip
    """The spec.backfills entry for a range of the task's CronJob's schedule, and its fires; PluginError when
    the range is empty, in the future, or has more than ``limit`` fires."""
    spec = _dict(cronjob.get("spec"))
    zone = str(spec.get("timeZone") or "UTC")
    try:
        schedule = parse(render.schedule_text(spec), zone)
    except ScheduleError as error:
        raise PluginError(f"the CronJob's schedule cannot be read: {error}") from None
    if end < start:
        raise PluginError(f"--to {keys.rfc3339(end)} is before --from {keys.rfc3339(start)}")
    if end > now:
        raise PluginError(f"--to {keys.rfc3339(end)} is in the future (now {keys.rfc3339(now)}): past fires only")
    try:
        fires = runs.backfill_fires(schedule, start, end, limit)
    except ValueError as error:
        raise PluginError(f"{error} (schedule {spec.get('schedule')!r}, {zone}); raise --max to run them") from None
    if not fires:
        raise PluginError(f"no fire of {spec.get('schedule')!r} ({zone}) between {keys.rfc3339(start)} and "
                          f"{keys.rfc3339(end)}")  # fmt: skip
    chosen = name or f"{task[:16].rstrip('-')}-{fires[0]:%Y%m%d%H%M}"
    entry = {"name": chosen, "task": task, "from": keys.rfc3339(start), "to": keys.rfc3339(end), "parallel": parallel}
    return entry, fires


def _time_arg(text: str, flag: str = "--time") -> datetime:
    try:
        return keys.given_time(flag, text)
    except ValueError as error:
        raise PluginError(str(error)) from None


# -- the shell: kubectl's conventions, the cluster, the clock


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl appschedule", description=__doc__.split("\n\n")[0])
    common = argparse.ArgumentParser(add_help=False)  # after the subcommand, as kubectl passes them
    common.add_argument("--kubeconfig", help="path to the kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
    common.add_argument("--context", help="the kubeconfig context to use (default: the current one)")
    commands = parser.add_subparsers(dest="command", required=True)
    status = commands.add_parser(
        "status", parents=[common], help="per task: schedule as it runs, next fires, last run, counts"
    )
    status.add_argument("name", nargs="?", help="one AppSchedule (default: all in the namespace)")
    status.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    status.add_argument("-A", "--all-namespaces", action="store_true", help="AppSchedules of every namespace")
    status.add_argument("-o", "--output", choices=["text", "json", "yaml"], default="text")
    past = commands.add_parser("history", parents=[common], help="per task: the last runs and misses, a mark per fire")
    past.add_argument("name", help="the AppSchedule")
    past.add_argument("task", nargs="?", help="one task (default: all)")
    past.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    past.add_argument("-o", "--output", choices=["text", "json", "yaml"], default="text")
    past.set_defaults(all_namespaces=False)
    fill = commands.add_parser("backfill", parents=[common], help="run every fire of a past range, each with its key")
    fill.add_argument("name", help="the AppSchedule")
    fill.add_argument("task", nargs="?", help="the task")
    fill.add_argument("--from", dest="start", help="the first time of the range (RFC 3339), inclusive")
    fill.add_argument("--to", dest="end", help="the last time of the range (RFC 3339), inclusive")
    fill.add_argument("--parallel", type=int, default=1, help="runs at once, 1 to 10 (default 1)")
    fill.add_argument("--max", type=int, default=BACKFILL_MAX, help=f"most fires allowed (default {BACKFILL_MAX})")
    fill.add_argument("--backfill-name", help="name of the backfill (default: <task>-<first fire>)")
    fill.add_argument("--remove", metavar="BACKFILL", help="take this backfill out: its runs stop, its Jobs go")
    fill.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    fill.add_argument("--dry-run", action="store_true", help="list the fires, record nothing")
    fill.add_argument("-o", "--output", choices=["text", "json", "yaml"], default="text")
    fill.set_defaults(all_namespaces=False)
    for kind, help_text in (
        ("run", "start a task now, with a key of its own"),
        ("rerun", "run a past fire again, with its key"),
    ):
        act = commands.add_parser(kind, parents=[common], help=help_text)
        act.add_argument("name", help="the AppSchedule")
        act.add_argument("task", help="the task")
        if kind == "rerun":
            act.add_argument(
                "--time", required=True, help="the fire to run again (RFC 3339), e.g. 2026-03-07T17:00:00Z"
            )
        act.add_argument("-n", "--namespace", help="namespace (default: the context's)")
        act.add_argument("--dry-run", action="store_true", help="print the Job, create nothing")
        act.add_argument("-o", "--output", choices=["text", "json", "yaml"], default="text")
        act.set_defaults(all_namespaces=False)
    show = commands.add_parser(
        "ui", parents=[common], help="a page of runs on 127.0.0.1: a timeline per task, live, with run and rerun"
    )
    show.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    show.add_argument("-A", "--all-namespaces", action="store_true", help="AppSchedules of every namespace")
    show.add_argument("--port", type=int, default=8384, help="port on 127.0.0.1 (default 8384; 0: any free one)")
    show.add_argument("--no-browser", action="store_true", help="print the address, open no browser")
    show.add_argument(
        "--prometheus", metavar="URL", help="a Prometheus that scrapes the operator (e.g. a port-forward): 24 hours "
        "of run counts, hour by hour, beside the timeline",
    )  # fmt: skip
    show.set_defaults(name=None, output="json")
    resume = commands.add_parser(
        "resume", parents=[common], help="run a task paused after repeated failures (suspendAfterFailures) again"
    )
    resume.add_argument("name", help="the AppSchedule")
    resume.add_argument("task", help="the task")
    resume.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    move = commands.add_parser(
        "import",
        parents=[common],
        help="an AppSchedule for existing CronJobs (printed; --apply creates it, --cut-over hands their fires over)",
    )
    kinds = move.add_subparsers(dest="source", required=True, metavar="SOURCE")
    take = kinds.add_parser(
        "cronjob",
        parents=[common],
        help="one task per CronJob: schedule, zone, settings, command, what differs from the Deployment",
    )
    take.add_argument("cronjobs", nargs="+", metavar="NAME", help="the CronJobs")
    take.add_argument("--deployment", required=True, help="the Deployment whose image runs the tasks")
    take.add_argument("--container", help="the Deployment's container (default: its first)")
    take.add_argument("--name", help="the AppSchedule's name (default: the Deployment's)")
    take.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    take.add_argument(
        "--cut-over",
        action="store_true",
        help="each task takes over its CronJob's fires at a fire boundary (cutOverFrom): with --apply, the "
        "CronJobs are labelled for it and suspended by the operator after their last fire; never deleted",
    )
    take.add_argument("--apply", action="store_true", help="create the AppSchedule (default: print it)")
    take.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    take.set_defaults(all_namespaces=False)
    return parser


def resumed_annotation(current: Mapping[str, Any], task: str, now: datetime) -> str:
    """The appschedule.dev/resumed annotation with ``task`` resumed at ``now`` (an unreadable one is replaced)."""
    raw = _dict(_dict(current.get("metadata")).get("annotations")).get(pause.ANNOTATION_RESUMED)
    found, _ = pause.resumes(str(raw or ""))
    times = {name: keys.rfc3339(moment) for name, moment in found.items()}
    declared = {str(_dict(t).get("name")) for t in _list(_dict(current.get("spec")).get("tasks"))}
    times = {name: time for name, time in times.items() if name in declared}  # a task removed since: gone
    times[task] = keys.rfc3339(now)
    return json.dumps(times, sort_keys=True, separators=(",", ":"))


def _resume(args: argparse.Namespace, now: datetime) -> int:
    """resume: record that ``task`` runs again (pause.py); the operator un-suspends its CronJob."""
    custom, default_namespace = _api(args)
    namespace = args.namespace or default_namespace
    where = f'appschedules.appschedule.dev "{args.name}"'
    group, version, plural = naming.GROUP, naming.VERSION, naming.PLURAL
    current = _asked(
        where, namespace, lambda: custom.get_namespaced_custom_object(group, version, namespace, plural, args.name)
    )
    declared = [str(_dict(t).get("name")) for t in _list(_dict(current.get("spec")).get("tasks"))]
    if args.task not in declared:
        raise PluginError(f'appschedule "{args.name}" has no task "{args.task}"')
    metadata = {
        "resourceVersion": _dict(current.get("metadata")).get("resourceVersion"),
        "annotations": {pause.ANNOTATION_RESUMED: resumed_annotation(current, args.task, now)},
    }
    body = {"metadata": metadata}
    _asked(
        where,
        namespace,
        lambda: custom.patch_namespaced_custom_object(group, version, namespace, plural, args.name, body),
    )
    print(f"task {args.task} of appschedule {args.name} resumed: failures before {keys.rfc3339(now)} no longer count")
    return 0


def _import_cronjobs(args: argparse.Namespace) -> int:
    """import cronjob: read the CronJobs and the Deployment, print the AppSchedule and what was left out; with
    --apply (and --cut-over) hand the CronJobs over, then create it. Deletes nothing."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from .core import cronjob_import

    custom, default_namespace = _api(args)
    namespace = args.namespace or default_namespace
    batch, apps = client.BatchV1Api(custom.api_client), client.AppsV1Api(custom.api_client)
    name = args.name or args.deployment

    def read(what: str, call: Any, object_name: str) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(
            _asked(
                f'{what} "{object_name}"', namespace, lambda: call(object_name, namespace, _preload_content=False)
            ).data
        )
        return found

    deployment = read("deployments.apps", apps.read_namespaced_deployment, args.deployment)
    cronjobs = [read("cronjobs.batch", batch.read_namespaced_cron_job, c) for c in dict.fromkeys(args.cronjobs)]
    tasks, handed = [], []
    for cronjob in cronjobs:
        found = cronjob_import.translate(cronjob, deployment, args.container)
        if found.task is None:
            raise PluginError(f'cronjob "{found.cronjob}": not imported: {found.refused}')
        if args.cut_over:
            found.task["cutOverFrom"] = found.cronjob
        tasks.append(found.task)
        handed.append((cronjob, found.task["name"]))
        for line in found.left:
            print(f"cronjob/{found.cronjob}: not carried over as it was: {line}", file=sys.stderr)
    names = [t["name"] for t in tasks]
    if len(set(names)) != len(names):
        raise PluginError(f"two CronJobs give one task name ({', '.join(names)}): import them one at a time")
    deployment_ref: dict[str, Any] = {"name": args.deployment}
    if args.container:
        deployment_ref["container"] = args.container
    document = {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": naming.KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"deploymentRef": deployment_ref, "tasks": tasks},
    }
    if not args.apply:
        _print(document, args.output, str)
        return 0
    running = [c["metadata"]["name"] for c in cronjobs if not _dict(c.get("spec")).get("suspend")]
    if running and not args.cut_over:
        raise PluginError(
            f"cronjob {', '.join(running)} still runs: applying this AppSchedule beside it runs every fire twice; "
            "add --cut-over (it hands the fires over at a fire boundary), or suspend the CronJob first"
        )
    patches = [(c["metadata"]["name"], cronjob_import.handover_patch(c, name, namespace, t)) for c, t in handed]
    try:
        # every write asked first as a dry run (the API server's validation, the webhooks, RBAC, an AppSchedule of
        # that name already there): a refusal leaves every CronJob as it was, not labelled for an AppSchedule
        # that never came
        for dry_run in ("All", None):
            extra = {"dry_run": dry_run} if dry_run else {}
            if args.cut_over:  # labelled first: the operator makes no task CronJob before it sees its old one's
                for cronjob_name, patch in patches:
                    batch.patch_namespaced_cron_job(
                        cronjob_name, namespace, patch, _content_type="application/merge-patch+json", **extra
                    )
            custom.create_namespaced_custom_object(
                naming.GROUP, naming.VERSION, namespace, naming.PLURAL, document, **extra
            )
    except ApiException as error:
        raise PluginError(f"the API server refused: {error.status} {error.reason}: {error.body}") from None
    except (OSError, HTTPError) as error:
        raise PluginError(f"cannot reach the API server: {error}") from None
    _print(document, args.output, str)
    how = "the operator hands each CronJob's fires over at the next fire boundary" if args.cut_over else "created"
    print(f"appschedule.appschedule.dev/{name} created: {how}; `kubectl appschedule status {name}`", file=sys.stderr)
    return 0


def _asked(what: str, namespace: str, call: Any) -> Any:
    """The answer to one read of ``what``; a PluginError naming it when it is not found or the API server refuses."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return call()
    except ApiException as error:
        if error.status == 404:
            raise PluginError(f"{what} not found in namespace {namespace}") from None
        raise PluginError(f"the API server refused: {error.status} {error.reason}") from None
    except (OSError, HTTPError) as error:
        raise PluginError(f"cannot reach the API server: {error}") from None


def _cronjob(api: Any, namespace: str, appschedule: str, task: str) -> dict[str, Any]:
    """The task's CronJob, as the API server has it (``api``: an ApiClient)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    cronjob_name = naming.cronjob_name(appschedule, task)
    batch = client.BatchV1Api(api)
    try:
        raw = batch.read_namespaced_cron_job(cronjob_name, namespace, _preload_content=False)
    except ApiException as error:
        if error.status == 404:
            raise PluginError(
                f'task "{task}" of appschedule "{appschedule}" has no CronJob ({cronjob_name}) in namespace '
                f"{namespace}: is the task declared and valid?"
            ) from None
        raise PluginError(f"the API server refused: {error.status} {error.reason}") from None
    except (OSError, HTTPError) as error:
        raise PluginError(f"cannot reach the API server: {error}") from None
    found: dict[str, Any] = json.loads(raw.data)
    return found


def start_run(
    api: Any, namespace: str, appschedule: str, task: str, kind: str, now: datetime, wanted: datetime | None = None,
    *, dry_run: bool = False,
) -> tuple[dict[str, Any], datetime]:  # fmt: skip
    """run (``kind`` manual) or rerun (``kind`` rerun, fire ``wanted``): a Job from the task's CronJob, marked with
    its kind, created (or, ``dry_run``, only made); the Job as the API server returned it, and its fire time. The
    plugin's ``run``/``rerun`` and the page's buttons both come here."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    cronjob = _cronjob(api, namespace, appschedule, task)
    scheduled = asked_time(kind, now, cronjob, wanted)
    body = job_for(cronjob, kind, scheduled)
    if dry_run:
        return body, scheduled
    try:
        created = client.BatchV1Api(api).create_namespaced_job(namespace, body, _preload_content=False)
    except ApiException as error:
        raise PluginError(f"the API server refused the Job: {error.status} {error.reason}: {error.body}") from None
    except (OSError, HTTPError) as error:
        raise PluginError(f"cannot reach the API server: {error}") from None
    job: dict[str, Any] = json.loads(created.data)
    return job, scheduled


def _act(args: argparse.Namespace, now: datetime) -> int:
    """run / rerun: a Job from the task's CronJob, marked with its kind; prints what was created."""
    custom, default_namespace = _api(args)
    namespace = args.namespace or default_namespace
    kind = "manual" if args.command == "run" else "rerun"
    wanted = _time_arg(args.time) if kind == "rerun" else None
    job, scheduled = start_run(
        custom.api_client, namespace, args.name, args.task, kind, now, wanted, dry_run=args.dry_run
    )
    if args.dry_run:
        _print(job, "yaml" if args.output == "text" else args.output, lambda b: yaml.safe_dump(b, sort_keys=False))
        return 0
    key = _dict(_dict(job.get("metadata")).get("annotations")).get(naming.ANNOTATION_IDEMPOTENCY_KEY)
    if args.output == "text":
        said = f"job.batch/{job['metadata']['name']} created ({kind}, fire time {keys.rfc3339(scheduled)}, "
        print(said + (f"key {key})" if key else "NO KEY: the key webhook did not answer)"))
    else:
        _print(job, args.output, str)
    return 0


def change_backfills(
    custom: Any, namespace: str, name: str, now: datetime, *, remove: str | None = None, task: str | None = None,
    start: datetime | None = None, end: datetime | None = None, parallel: int = 1, limit: int = BACKFILL_MAX,
    backfill_name: str | None = None, dry_run: bool = False,
) -> tuple[str, dict[str, Any], list[datetime]]:  # fmt: skip
    """A spec.backfills entry added (or, ``remove``, taken out) with a JSON patch that first tests the
    resourceVersion read, so that a concurrent edit is never lost; ``dry_run`` patches nothing. What was done (a
    sentence), the entry and its fires. The plugin's ``backfill`` and the page's buttons both come here."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    where = f'appschedules.appschedule.dev "{name}"'
    current = _asked(
        where,
        namespace,
        lambda: custom.get_namespaced_custom_object(naming.GROUP, naming.VERSION, namespace, naming.PLURAL, name),
    )
    existing = [b for b in _list(_dict(current.get("spec")).get("backfills")) if isinstance(b, Mapping)]
    version = str(_dict(current.get("metadata")).get("resourceVersion"))
    if remove:
        index = next((i for i, b in enumerate(existing) if b.get("name") == remove), None)
        if index is None:
            raise PluginError(f'{where} has no backfill "{remove}"')
        ops: list[dict[str, Any]] = [{"op": "remove", "path": f"/spec/backfills/{index}"}]
        said = f"appschedule.appschedule.dev/{name} backfill {remove} removed (its runs stop, its Jobs go)"
        entry: dict[str, Any] = {}
        fires: list[datetime] = []
    else:
        if not (task and start and end):
            raise PluginError("backfill needs TASK, --from and --to (or --remove BACKFILL)")
        if not 1 <= parallel <= 10:
            raise PluginError(f"--parallel must be 1 to 10 (got {parallel})")
        limit = min(max(1, limit), 1000)
        entry, fires = backfill_entry(
            _cronjob(custom.api_client, namespace, name, task), task, start, end, parallel, limit, now, backfill_name
        )
        if any(b.get("name") == entry["name"] for b in existing):
            raise PluginError(f'{where} has a backfill "{entry["name"]}" already: remove it first '
                              f"(--remove {entry['name']}) or give --backfill-name")  # fmt: skip
        path = "/spec/backfills/-" if existing else "/spec/backfills"
        ops = [{"op": "add", "path": path, "value": entry if existing else [entry]}]
        span = f"{keys.rfc3339(fires[0])} .. {keys.rfc3339(fires[-1])}"
        said = f"appschedule.appschedule.dev/{name} backfill {entry['name']} requested: {len(fires)} fires of "
        said += f"task {task}, {span}, {parallel} at once"
    if dry_run:
        return said, entry, fires
    test = {"op": "test", "path": "/metadata/resourceVersion", "value": version}
    try:
        custom.patch_namespaced_custom_object(
            naming.GROUP, naming.VERSION, namespace, naming.PLURAL, name, [test, *ops],
            _content_type="application/json-patch+json",
        )  # fmt: skip
    except ApiException as error:
        if error.status in (409, 422) and "test" in str(error.body):
            raise PluginError(f"{where} changed while it was read; run the command again") from None
        raise PluginError(f"the API server refused: {error.status} {error.reason}: {error.body}") from None
    except (OSError, HTTPError) as error:
        raise PluginError(f"cannot reach the API server: {error}") from None
    return said, entry, fires


def _backfill(args: argparse.Namespace, now: datetime) -> int:
    """backfill: ``change_backfills`` from the command line; --dry-run lists the fires."""
    custom, default_namespace = _api(args)
    namespace = args.namespace or default_namespace
    start = end = None
    if not args.remove and args.task and args.start and args.end:
        start, end = _time_arg(args.start, "--from"), _time_arg(args.end, "--to")
    said, entry, fires = change_backfills(
        custom, namespace, args.name, now, remove=args.remove, task=args.task, start=start, end=end,
        parallel=args.parallel, limit=args.max, backfill_name=args.backfill_name, dry_run=args.dry_run,
    )  # fmt: skip
    if args.dry_run:
        listed = [{"scheduledTime": keys.rfc3339(t), "key": keys.key_of(args.task, t)} for t in fires]
        as_text = "".join(f"{f['scheduledTime']}  {f['key']}\n" for f in listed) + f"{len(listed)} fires (dry run)\n"
        _print({"backfill": entry, "fires": listed}, args.output, lambda _: as_text if fires else said + " (dry run)\n")
        return 0
    if args.output == "text":
        print(said)
    else:
        _print({"backfill": entry or {"name": args.remove, "removed": True}}, args.output, str)
    return 0


def _api(args: argparse.Namespace) -> tuple[Any, str]:
    """A client for the context kubectl would use, and that context's namespace (default: default)."""
    import os
    from pathlib import Path

    from kubernetes import client, config

    try:
        api = config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
    except (config.ConfigException, OSError) as error:
        raise PluginError(f"cannot read the kubeconfig: {error}") from None
    paths = (
        [args.kubeconfig] if args.kubeconfig else (os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
    )
    docs = []
    for path in paths:  # as kubectl merges them: the first file that says wins
        try:
            docs.append(_dict(yaml.safe_load(Path(path).expanduser().read_text())))
        except (OSError, yaml.YAMLError):
            continue
    current = args.context or next((str(d["current-context"]) for d in docs if d.get("current-context")), "")
    chosen = next(
        (_dict(c.get("context")) for d in docs for c in _list(d.get("contexts")) if _dict(c).get("name") == current), {}
    )
    return client.CustomObjectsApi(api), str(chosen.get("namespace") or "default")


def _read(args: argparse.Namespace) -> list[dict[str, Any]]:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    custom, default_namespace = _api(args)
    namespace = args.namespace or default_namespace
    group, version, plural = naming.GROUP, naming.VERSION, naming.PLURAL
    try:
        if args.name:
            if args.all_namespaces:
                raise PluginError("a resource cannot be retrieved by name across all namespaces")
            return [custom.get_namespaced_custom_object(group, version, namespace, plural, args.name)]
        if args.all_namespaces:
            found = custom.list_cluster_custom_object(group, version, plural)
        else:
            found = custom.list_namespaced_custom_object(group, version, namespace, plural)
    except ApiException as error:
        if error.status == 404 and args.name:
            raise PluginError(
                f'appschedules.appschedule.dev "{args.name}" not found in namespace {namespace}'
            ) from None
        raise PluginError(f"the API server refused: {error.status} {error.reason}") from None
    except (OSError, HTTPError) as error:
        raise PluginError(f"cannot reach the API server: {error}") from None
    items = [i for i in found.get("items") or [] if isinstance(i, dict)]
    if not items and args.output == "text":
        print(f"No AppSchedules found in {'any namespace' if args.all_namespaces else namespace}.", file=sys.stderr)
    return items


def _read_calendars(
    args: argparse.Namespace, items: Sequence[Mapping[str, Any]], custom: Any = None
) -> dict[tuple[str, str], list[Any]]:
    """The blackouts of the AppScheduleCalendars the AppSchedules name; one that cannot be read is left out (the
    AppSchedule's Ready condition says why)."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    wanted = {
        (str(_dict(i.get("metadata")).get("namespace")), str(c))
        for i in items
        for c in _list(_dict(i.get("spec")).get("calendars"))
    }
    if not wanted:
        return {}
    if custom is None:
        custom, _ = _api(args)
    found: dict[tuple[str, str], list[Any]] = {}
    for namespace, name in sorted(wanted):
        try:
            body = custom.get_namespaced_custom_object(
                naming.GROUP, naming.VERSION, namespace, naming.CALENDAR_PLURAL, name
            )
        except (ApiException, OSError, HTTPError):
            continue
        found[namespace, name] = _list(_dict(_dict(body).get("spec")).get("blackouts"))
    return found


ALLOWED_FOR = 30.0  # seconds a SelfSubjectAccessReview's answer is kept by the page
REFRESH = 30.0  # seconds between two reads of the page's state when no watch event came
REQUEST_TIMEOUT = 15.0  # seconds the page waits for one answer of the API server (the state waits on it)
METRICS_FOR = 60.0  # seconds the hourly counts read from Prometheus are kept


class _Cluster:
    """What the page reads and does, with the user's own kubeconfig and context: nothing more than they may."""

    def __init__(self, args: argparse.Namespace) -> None:
        custom, default_namespace = _api(args)
        self.custom, self.api = custom, custom.api_client
        self.namespace = None if args.all_namespaces else (args.namespace or default_namespace)
        self.args = args
        self._allowed: dict[str, tuple[float, dict[str, bool]]] = {}
        self._metrics: tuple[float, dict[tuple[str, str, str], list[dict[str, Any]]], str] | None = None

    def _list(self, kind: str, **query: str) -> list[dict[str, Any]]:
        """AppSchedules, Jobs or Events in scope as plain JSON (no model objects); a kind the user may not list is
        empty (the page shows what they may read)."""
        from kubernetes.client.exceptions import ApiException

        call = self._call(kind)
        try:
            answer = call(_preload_content=False, _request_timeout=REQUEST_TIMEOUT, **query)
        except ApiException as error:
            if error.status in (401, 403):
                return []
            if error.status == 404 and kind == "appschedules":
                raise PluginError("the API server has no AppSchedules: is the operator's CRD installed?") from None
            raise
        items = json.loads(answer.data).get("items") or []
        return [i for i in items if isinstance(i, dict)]

    def _call(self, kind: str) -> Any:
        """The list call of ``kind`` (appschedules, jobs, events) in the page's namespace, or in all of them."""
        from kubernetes import client

        ns = self.namespace
        if kind == "jobs":
            batch = client.BatchV1Api(self.api)
            return (lambda **kw: batch.list_namespaced_job(ns, **kw)) if ns else batch.list_job_for_all_namespaces
        if kind == "events":
            core = client.CoreV1Api(self.api)
            return (lambda **kw: core.list_namespaced_event(ns, **kw)) if ns else core.list_event_for_all_namespaces
        group, version, plural = naming.GROUP, naming.VERSION, naming.PLURAL
        if ns:
            return lambda **kw: self.custom.list_namespaced_custom_object(group, version, ns, plural, **kw)
        return lambda **kw: self.custom.list_cluster_custom_object(group, version, plural, **kw)

    def allowed(self, namespace: str) -> dict[str, bool]:
        """What the user may do in ``namespace`` (SelfSubjectAccessReviews): run and rerun = create Jobs; start
        and remove a backfill = patch AppSchedules."""
        import time

        from kubernetes import client

        kept = self._allowed.get(namespace)
        if kept and time.monotonic() - kept[0] < ALLOWED_FOR:
            return kept[1]

        def may_i(verb: str, group: str, resource: str) -> bool:
            review = client.V1SelfSubjectAccessReview(
                spec=client.V1SelfSubjectAccessReviewSpec(
                    resource_attributes=client.V1ResourceAttributes(
                        namespace=namespace, verb=verb, group=group, resource=resource
                    )
                )
            )
            try:
                answer = client.AuthorizationV1Api(self.api).create_self_subject_access_review(
                    review, _request_timeout=REQUEST_TIMEOUT
                )
            except Exception:  # a review that cannot be asked shows no action
                return False
            return bool(answer.status and answer.status.allowed)

        may = {"run": may_i("create", "batch", "jobs"), "backfill": may_i("patch", naming.GROUP, naming.PLURAL)}
        self._allowed[namespace] = (time.monotonic(), may)
        return may

    def snapshot(self) -> dict[str, Any]:
        items = self._list("appschedules")
        jobs = self._list("jobs", label_selector=f"{naming.MANAGED_BY}={naming.MANAGER}")
        events = self._list("events", field_selector=f"involvedObject.kind={naming.KIND}")
        calendars = _read_calendars(self.args, items, self.custom)
        namespaces = {str(_dict(i.get("metadata")).get("namespace")) for i in items}
        allowed = {n: self.allowed(n) for n in namespaces}
        now = datetime.now(UTC).replace(microsecond=0)
        stretches, said = self.metrics(now)
        return page(items, jobs, events, now, calendars, allowed, stretches, said)

    def metrics(self, now: datetime) -> tuple[dict[tuple[str, str, str], list[dict[str, Any]]], str | None]:
        """The last ``METRIC_HOURS`` hours of run counts from Prometheus (``--prometheus``), or why not."""
        import time
        import urllib.parse
        import urllib.request

        url = getattr(self.args, "prometheus", None)
        if not url:
            return {}, None
        kept = self._metrics
        if kept is not None and time.monotonic() - kept[0] < METRICS_FOR:  # hourly counts: read once a minute
            return kept[1], kept[2]
        sel = f'namespace="{self.namespace}"' if self.namespace else ""
        end = now.timestamp() // 3600 * 3600 + 3600
        answers = {}
        try:
            for name, expr in METRIC_QUERIES.items():
                query = urllib.parse.urlencode(
                    {"query": expr.format(sel=sel), "start": end - METRIC_HOURS * 3600, "end": end, "step": 3600}
                )
                with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query_range?{query}", timeout=10) as answer:
                    answers[name] = json.loads(answer.read())
        except Exception as error:  # any failure of Prometheus or of its answer: said on the page, never raised
            return {}, f"Prometheus at {url} could not be read: {type(error).__name__}: {error}"
        said = f"Prometheus at {url}: what the ledger counted, hour by hour"
        self._metrics = (time.monotonic(), metric_stretches(answers), said)
        return self._metrics[1], said

    def act(self, asked: dict[str, Any]) -> dict[str, Any]:
        """A run or a rerun the page asked for: the plugin's own code (``start_run``); ValueError says why not."""
        action, namespace = asked.get("action"), asked.get("namespace")
        name, task, when = asked.get("name"), asked.get("task"), asked.get("time")
        if action in ("backfill", "remove-backfill"):
            return self._backfill(asked)
        if action not in ("run", "rerun") or not all(isinstance(v, str) and v for v in (namespace, name, task)):
            raise ValueError("an action is run, rerun, backfill or remove-backfill, with namespace, name and task")
        self._in_scope(namespace)
        wanted = None
        if action == "rerun":
            wanted = keys.parse_time(when)
            if wanted is None:
                raise ValueError(f"rerun needs the fire's time (RFC 3339), got {when!r}")
        kind = "manual" if action == "run" else "rerun"
        try:
            job, scheduled = start_run(self.api, str(namespace), str(name), str(task), kind, datetime.now(UTC), wanted)
        except PluginError as error:
            raise ValueError(str(error)) from None
        meta = _dict(job.get("metadata"))
        key = _dict(meta.get("annotations")).get(naming.ANNOTATION_IDEMPOTENCY_KEY)
        return {
            "job": meta.get("name"),
            "key": key,
            "scheduledTime": keys.rfc3339(scheduled),
            "message": f"job.batch/{meta.get('name')} created ({kind}, fire time {keys.rfc3339(scheduled)}, "
            + (f"key {key})" if key else "NO KEY: the key webhook did not answer)"),
        }

    def _in_scope(self, namespace: Any) -> None:
        if self.namespace is not None and namespace != self.namespace:
            raise ValueError(f"this page shows namespace {self.namespace} only")

    def _backfill(self, asked: dict[str, Any]) -> dict[str, Any]:
        """A backfill started (task, from, to, parallel) or removed (backfill) from the page: ``change_backfills``."""
        namespace, name = asked.get("namespace"), asked.get("name")
        if not (isinstance(namespace, str) and namespace and isinstance(name, str) and name):
            raise ValueError("a backfill action names the namespace and the AppSchedule")
        self._in_scope(namespace)
        now = datetime.now(UTC)
        try:
            if asked["action"] == "remove-backfill":
                removed = asked.get("backfill")
                if not isinstance(removed, str) or not removed:
                    raise ValueError("remove-backfill names the backfill")
                said, _, _ = change_backfills(self.custom, namespace, name, now, remove=removed)
                return {"message": said}
            task, parallel = asked.get("task"), asked.get("parallel", 1)
            start, end = keys.parse_time(asked.get("from")), keys.parse_time(asked.get("to"))
            if not isinstance(task, str) or not task or start is None or end is None:
                raise ValueError("a backfill needs the task, and from and to as RFC 3339 times")
            if not isinstance(parallel, int) or isinstance(parallel, bool):
                raise ValueError("parallel is a number from 1 to 10")
            said, entry, _ = change_backfills(
                self.custom, namespace, name, now, task=task, start=start, end=end, parallel=parallel
            )
        except PluginError as error:
            raise ValueError(str(error)) from None
        return {"message": said, "backfill": entry.get("name")}

    def follow(self, changed: Any, stop: Any) -> None:
        """Watch AppSchedules and the operator's Jobs in scope; every event says the page changed. Each watch
        reconnects after an error or its timeout, with a pause that grows to 30 s while errors repeat."""
        import threading

        def watch(kind: str, **query: str) -> None:
            """One kind's watch, resumed from the last resourceVersion it saw (no replay of every object at each
            reconnect), listed anew only when the API server says that version is gone (410)."""
            from kubernetes import watch as kwatch
            from kubernetes.client.exceptions import ApiException

            stream = kwatch.Watch()
            pause_s = 1.0
            while not stop.is_set():
                since = stream.resource_version
                try:
                    resume = {"resource_version": since} if since else {}
                    for event in stream.stream(
                        self._call(kind), timeout_seconds=50, _request_timeout=70, **resume, **query
                    ):
                        if _dict(event).get("type") == "ERROR":
                            stream.resource_version = None  # too old: start again from a list
                            break
                        changed()
                        if stop.is_set():
                            return
                    pause_s = 1.0
                except ApiException as error:
                    if error.status == 410:
                        stream.resource_version = None
                    pause_s = min(30.0, pause_s * 2)
                except Exception:
                    pause_s = min(30.0, pause_s * 2)
                stop.wait(pause_s)  # at least a second between two watches of one kind

        threads = [
            threading.Thread(target=watch, args=("appschedules",), daemon=True),
            threading.Thread(
                target=watch,
                args=("jobs",),
                kwargs={"label_selector": f"{naming.MANAGED_BY}={naming.MANAGER}"},
                daemon=True,
            ),
        ]
        for thread in threads:
            thread.start()
        while not stop.wait(REFRESH):  # what no watch here says: Events, next fires, the counts Prometheus holds
            changed()


def _ui(args: argparse.Namespace) -> int:
    """ui: the page of runs on 127.0.0.1 until interrupted."""
    import threading
    import webbrowser

    from kubernetes.client.exceptions import ApiException

    from .shell.pageserver import PageServer

    cluster = _Cluster(args)
    try:
        cluster.snapshot()  # say now, not in the browser, when the cluster cannot be read
    except ApiException as error:
        raise PluginError(f"the API server refused: {error.status} {error.reason}") from None
    except PluginError:
        raise
    except Exception as error:
        raise PluginError(f"cannot reach the API server: {error}") from None
    try:
        server = PageServer(cluster.snapshot, cluster.act, cluster.follow, port=args.port)
    except OSError as error:
        raise PluginError(f"cannot listen on 127.0.0.1:{args.port}: {error.strerror} (choose another --port)") from None
    server.start()
    where = "every namespace" if cluster.namespace is None else f"namespace {cluster.namespace}"
    print(f"the page of runs of {where}: {server.url}  (Ctrl-C stops it)", flush=True)
    if not args.no_browser:
        webbrowser.open(server.url)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command in ("run", "rerun"):
            return _act(args, datetime.now(UTC))
        if args.command == "backfill":
            return _backfill(args, datetime.now(UTC))
        if args.command == "import":
            return _import_cronjobs(args)
        if args.command == "resume":
            return _resume(args, datetime.now(UTC).replace(microsecond=0))
        if args.command == "ui":
            return _ui(args)
        items = _read(args)
    except PluginError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.command == "history":
        if not items:
            return 1
        found = history(items[0], args.task)
        if args.task and not found["tasks"]:
            print(f'error: appschedule "{args.name}" has no task "{args.task}" in its status', file=sys.stderr)
            return 1
        _print(found, args.output, history_text)
        return 0
    now = datetime.now(UTC).replace(microsecond=0)
    ordered = sorted(
        items, key=lambda i: (str(_dict(i.get("metadata")).get("namespace")), str(_dict(i.get("metadata")).get("name")))
    )
    calendars = _read_calendars(args, ordered)
    described = [describe(item, now, calendars) for item in ordered]
    if described:
        _print(
            described if not args.name else described[0], args.output, lambda d: text(d if isinstance(d, list) else [d])
        )
    elif args.output != "text":
        _print([], args.output, text)
    return 0


def _print(found: Any, output: str, as_text: Any) -> None:
    if output == "json":
        print(json.dumps(found, indent=2))
    elif output == "yaml":
        print(yaml.safe_dump(found, sort_keys=False), end="")
    else:
        print(as_text(found), end="")


if __name__ == "__main__":
    sys.exit(main())
