"""fires: every CronJob firing every minute: the operator's writes, CPU and latency per run."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import aiohttp
import psutil

from ..client import appschedules
from ..common import (
    BENCH_ERRORS,
    FLOOR_RESOURCES,
    LABEL_TASK,
    free_port,
    now,
    percentile,
    ratio,
    seconds,
)
from ..informer import Informer
from ..objects import (
    BenchJob,
    finished_jobs,
    job_view,
    name_key,
)
from ..proxy import summary
from . import admission

if TYPE_CHECKING:
    from ..bench import Bench


async def fires(bench: Bench, n: int, minutes: float) -> None:
    """N AppSchedules x 3 tasks firing every minute, with the webhooks on: the operator's cost per run."""
    what = f"fires-{n}"
    world = await bench.world(n, what, every_minute=True)
    jobs: Informer[BenchJob] = Informer(
        bench.api,
        f"/apis/batch/v1/namespaces/{world.namespace}/jobs",
        bench.pulse,
        key=name_key,
        project=job_view,
        selector=LABEL_TASK,
    )
    filed: Informer[frozenset[str]] = Informer(
        bench.api, appschedules(world.namespace), bench.pulse, key=name_key, project=finished_jobs
    )
    completed: dict[str, float] = {}  # Job name -> when the benchmark's watch saw it finished
    shown: dict[str, float] = {}  # Job name -> when the AppSchedule's status first listed it finished

    def on_job(name: str, view: BenchJob | None) -> None:
        if view is not None and view.finished and name not in completed:
            completed[name] = now()

    def on_status(_: str, names: frozenset[str] | None) -> None:
        for name in names or ():
            shown.setdefault(name, now())

    jobs.listeners.append(on_job)
    filed.listeners.append(on_status)
    try:
        await jobs.start()
        await filed.start()
        live = free_port()
        operator = await admission.start_webhook_operator(bench, world, what, live)
        await bench.converge(world)
        await asyncio.sleep(60 - time.time() % 60 + 5)  # the first fire after convergence is under way
        operator.guard()
        controllers = cluster_process(bench, "kube-controller-manager")  # makes the Jobs: the same runs' floor
        start, cpu_start, metrics_start = now(), operator.cpu_seconds(), await write_counts(bench)
        own_start, health_start = operator.own_cpu_seconds(), await health(bench, live)
        kcm_start = cpu_of(controllers)
        peak = operator.rss_kib()
        while now() < start + minutes * 60:
            operator.guard()
            peak = max(peak, operator.rss_kib())
            await asyncio.sleep(min(5.0, max(0.0, start + minutes * 60 - now())))
        end, cpu_end, metrics_end = now(), operator.cpu_seconds(), await write_counts(bench)
        own_end, health_end = operator.own_cpu_seconds(), await health(bench, live)
        kcm_end = cpu_of(controllers)
        requests = await bench.proxy.requests(start, end)
        runs = [name for name, t in completed.items() if start <= t <= end]
        settle = end + 30  # the runs that finished at the end of the window get as long as any to show
        await bench.pulse.until(
            lambda: all(name in shown for name in runs) or now() > settle, settle + 5, "the status of every run"
        )
        latencies = sorted(max(0.0, shown[name] - completed[name]) for name in runs if name in shown)
        unseen = sum(name not in shown for name in runs)
        ours = sum(r.write and r.resource in FLOOR_RESOURCES for r in requests)
        others = sum(metrics_end.values()) - sum(metrics_start.values()) - ours
        writes = sum(r.write for r in requests)
        figures = {
            "minutes": (end - start) / 60,
            "runs": len(runs),
            "runs_per_minute": len(runs) / ((end - start) / 60),
            "operator": summary(requests, (end - start) / 60),
            "requests_per_run": len(requests) / max(1, len(runs)),
            "writes_per_run": writes / max(1, len(runs)),
            "floor_writes_per_run": others / max(1, len(runs)),
            "floor_writes_by_resource": {k: metrics_end.get(k, 0) - metrics_start.get(k, 0) for k in metrics_end},
            "cpu_seconds_per_minute": (cpu_end - cpu_start) / ((end - start) / 60),
            "cpu_ms_per_run": (cpu_end - cpu_start) * 1000 / max(1, len(runs)),
            # the controller's process alone; the rest is the admission process (the webhooks)
            "controller_cpu_ms_per_run": (own_end - own_start) * 1000 / max(1, len(runs)),
            **reconciles_per_run(health_start, health_end, len(runs)),
            "controller_manager_cpu_seconds_per_minute": (kcm_end - kcm_start) / ((end - start) / 60),
            "writes_by_kind_per_run": {
                "status": sum(r.write and r.resource.endswith("/status") for r in requests) / max(1, len(runs)),
                "jobs": sum(r.write and r.resource == "jobs" for r in requests) / max(1, len(runs)),
            },
            "rss_kib": operator.rss_kib(),
            "rss_peak_in_window_kib": peak,
            "completion_to_status_p50": percentile(latencies, 0.5) if latencies else None,
            "completion_to_status_p99": percentile(latencies, 0.99) if latencies else None,
            "runs_not_shown_within_30s": unseen,
            "targets": {"writes_per_run": 1.5, "p99_seconds_at_300": 5.0, "cpu_cores_at_300": 0.25},
        }
        bench.record("fires", str(n), figures)
        p50 = seconds(latencies[len(latencies) // 2]) if latencies else "-"
        p99 = seconds(percentile(latencies, 0.99)) if latencies else "-"
        per_run = max(1, len(runs))
        bench.report(
            f"fires    N={n:<5} {len(runs)} runs in {(end - start) / 60:.1f} min: operator "
            f"{len(requests) / per_run:.2f} requests and {writes / per_run:.2f} writes a run (target 1.5)   floor "
            f"{others / per_run:.2f} writes a run by the others (jobs, cronjobs, pods)   "
            f"ratio {ratio(writes, others)}   CPU {(cpu_end - cpu_start) / (end - start):.0%} of a core "
            f"(kube-controller-manager {(kcm_end - kcm_start) / (end - start):.0%}: "
            f"ratio {ratio(cpu_end - cpu_start, kcm_end - kcm_start)})   "
            f"RSS {operator.rss_kib() / 1024:.0f} MiB   the controller's own CPU "
            f"{figures['controller_cpu_ms_per_run']:.1f} of {(cpu_end - cpu_start) * 1000 / per_run:.1f} ms a run   "
            f"reconciles a run {figures['reconciles_per_run']:.2f} "
            f"({', '.join(f'{k} {v:.2f}' for k, v in figures['woken_by_per_run'].items())}; a cause counts in "
            f"every reconcile it took part in; {figures['status_deferred_per_run']:.2f} deferred a status, "
            f"{figures['written_held_per_run']:.2f} wrote one from the plan that deferred it; status writes a run "
            f"by kind: {', '.join(f'{k} {v:.2f}' for k, v in figures['status_written_per_run'].items())})"
            f"   completion to status p50 {p50} p99 {p99} ({unseen} not shown within 30 s)"
        )
    except BENCH_ERRORS as error:
        bench.failed("fires", str(n), error, world)
    finally:
        await jobs.stop()
        await filed.stop()
        await bench.close_world(world)
        await admission.drop_webhooks(bench)


async def health(bench: Bench, port: int) -> dict[str, Any]:
    """The operator's liveness answer: its controller's health (Controller.health), {} when unreadable."""
    try:
        async with bench.api.session.get(f"http://127.0.0.1:{port}/healthz") as response:
            found = await response.json()
    except (TimeoutError, aiohttp.ClientError, ValueError):
        return {}
    workers = found.get("workers") if isinstance(found, dict) else None
    return workers if isinstance(workers, dict) else {}


def reconciles_per_run(before: dict[str, Any], after: dict[str, Any], runs: int) -> dict[str, Any]:
    """The reconciles of the window a run, by what woke them (health's woken_by: a reconcile counts under every
    cause gathered since the one before), and how many deferred a status write."""
    per = max(1, runs)
    causes = {
        k: (after.get("woken_by", {}).get(k, 0) - before.get("woken_by", {}).get(k, 0)) / per
        for k in sorted(after.get("woken_by") or {})
    }
    return {
        "reconciles_per_run": (int(after.get("reconciles") or 0) - int(before.get("reconciles") or 0)) / per,
        "woken_by_per_run": {k: v for k, v in sorted(causes.items(), key=lambda kv: -kv[1]) if v},
        "status_deferred_per_run": (int(after.get("status_deferred") or 0) - int(before.get("status_deferred") or 0))
        / per,
        # of the reconciles, those that wrote a status that waited from the plan that let it wait (no plan)
        "written_held_per_run": (
            int(after.get("status_written_held") or 0) - int(before.get("status_written_held") or 0)
        )
        / per,
        # the status writes a run, by what the status waited as (core/status.can_wait: time, starts, ends, now)
        "status_written_per_run": {
            k: (after.get("status_written", {}).get(k, 0) - before.get("status_written", {}).get(k, 0)) / per
            for k in sorted(after.get("status_written") or {})
        },
    }


def cluster_process(bench: Bench, component: str) -> psutil.Process | None:
    """A component of the bench cluster (hack/cluster/localcluster.py keeps ``pids/<component>``: pid and start)."""
    try:
        pid = int((bench.state / "pids" / component).read_text().split()[0])
        return psutil.Process(pid)
    except (OSError, ValueError, IndexError, psutil.Error):
        return None


def cpu_of(process: psutil.Process | None) -> float:
    """User and system seconds of ``process`` (0 when there is none to read)."""
    try:
        return 0.0 if process is None else (times := process.cpu_times()).user + times.system
    except psutil.Error:
        return 0.0


async def write_counts(bench: Bench) -> dict[str, float]:
    """Writes to jobs, cronjobs and pods the API server has served, by resource (apiserver_request_total)."""
    text = await bench.api.text("/metrics")
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].split(","))
        verb, resource = labels.get("verb", "").strip('"'), labels.get("resource", "").strip('"')
        if verb in {"POST", "PUT", "PATCH", "DELETE", "APPLY"} and resource in FLOOR_RESOURCES:
            if labels.get("dry_run", '""') != '""':
                continue
            found[resource] = found.get(resource, 0.0) + float(line.rsplit(" ", 1)[1])
    return found


# -- one size: cold, idle, restart and change share a world
