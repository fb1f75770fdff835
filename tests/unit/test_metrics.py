"""Metrics: every counter a task can move is exported at 0 before it moves (else Prometheus' increase()
never sees the first missed, failed, stuck or duplicate run, and its alert never fires)."""

from __future__ import annotations

from prometheus_client import generate_latest

from appschedule.shell import metrics


def sample(name: str, **labels: str) -> float | None:
    for family in metrics.REGISTRY.collect():
        for found in family.samples:
            if found.name == name and all(found.labels.get(k) == v for k, v in labels.items()):
                return float(found.value)
    return None


def test_counters_exist_at_zero_before_the_first_event_and_count_from_there() -> None:
    status = {"tasks": [{"name": "report", "counts": {}}]}
    labels = {"namespace": "ns-metrics", "appschedule": "shop", "task": "report"}
    metrics.track("ns-metrics", "shop", status)
    assert sample("appschedule_missed_runs_total", **labels) == 0
    assert sample("appschedule_duplicate_runs_total", **labels) == 0
    assert sample("appschedule_unkeyed_jobs_total", **labels) == 0
    for result in ("failed", "stuck", "started", "blacked_out"):
        assert sample("appschedule_runs_total", **labels, result=result) == 0
    later = {"tasks": [{"name": "report", "counts": {"missed": 2, "failed": 1, "unkeyed": 1, "blackedOut": 6}}]}
    metrics.record_status("ns-metrics", "shop", status, later)
    assert sample("appschedule_missed_runs_total", **labels) == 2
    assert sample("appschedule_unkeyed_jobs_total", **labels) == 1
    assert sample("appschedule_runs_total", **labels, result="failed") == 1
    assert sample("appschedule_runs_total", **labels, result="blacked_out") == 6
    metrics.forget("ns-metrics", "shop", ["report"])
    assert b"ns-metrics" not in generate_latest(metrics.REGISTRY)


def test_the_schedule_interval_is_the_gap_after_the_next_fire_across_daylight_saving() -> None:
    """`30 2 * * *` in Europe/Berlin: its next fire 28 March 02:30 CET is followed by 30 March 02:30 CEST (29
    March has no 02:30): 47 hours; an hourly task's gap is an hour; an unreadable schedule sets nothing."""
    labels = {"namespace": "ns-interval", "appschedule": "shop"}
    berlin = {"timeZone": "Europe/Berlin"}
    status = {"tasks": [
        {"name": "nightly", "schedule": "30 2 * * *", "nextRunTime": "2026-03-28T01:30:00Z", **berlin},
        {"name": "hourly", "schedule": "0 * * * *", "nextRunTime": "2026-03-29T00:00:00Z", **berlin},
        {"name": "odd", "schedule": "61 * * * *", "nextRunTime": "2026-03-29T00:00:00Z"},
    ]}  # fmt: skip
    metrics.record_status("ns-interval", "shop", {}, status)
    assert sample("appschedule_schedule_interval_seconds", **labels, task="nightly") == 47 * 3600
    assert sample("appschedule_schedule_interval_seconds", **labels, task="hourly") == 3600
    assert sample("appschedule_schedule_interval_seconds", **labels, task="odd") is None
    metrics.forget("ns-interval", "shop", ["nightly", "hourly", "odd"])


def test_durations_are_a_histogram_per_task_and_result_and_go_with_the_task() -> None:
    """As prometheus_client's Histogram wrote them: cumulative buckets by ``le``, +Inf, count and sum; a run
    longer than the last bound is only in +Inf."""
    labels = {"namespace": "ns-durations", "appschedule": "shop", "task": "report"}
    metrics.record_durations("ns-durations", "shop", [("report", "succeeded", s) for s in (0.5, 1.0, 61.0, 30000.0)])
    metrics.record_durations("ns-durations", "shop", [("report", "failed", 2.0)])
    name = "appschedule_run_duration_seconds"
    ok = {**labels, "result": "succeeded"}
    assert sample(f"{name}_bucket", **ok, le="1.0") == 2  # 0.5 and 1.0: a bound is inclusive
    assert sample(f"{name}_bucket", **ok, le="60.0") == 2
    assert sample(f"{name}_bucket", **ok, le="300.0") == 3
    assert sample(f"{name}_bucket", **ok, le="21600.0") == 3
    assert sample(f"{name}_bucket", **ok, le="+Inf") == sample(f"{name}_count", **ok) == 4
    assert sample(f"{name}_sum", **ok) == 0.5 + 1.0 + 61.0 + 30000.0
    assert sample(f"{name}_bucket", **labels, result="failed", le="5.0") == 1
    assert sample(f"{name}_created", **ok) is not None
    assert sample("appschedule_runs_total", **labels, result="succeeded") == 0  # its counters exist at 0 too
    metrics.forget("ns-durations", "shop", ["report"])
    assert b"ns-durations" not in generate_latest(metrics.REGISTRY)


def test_a_paused_task_is_a_gauge_of_one_and_a_resumed_one_of_zero() -> None:
    labels = {"namespace": "ns-paused", "appschedule": "shop"}
    metrics.paused("ns-paused", "shop", ["sync", "report"], ["sync"])
    assert sample("appschedule_task_paused", **labels, task="sync") == 1
    assert sample("appschedule_task_paused", **labels, task="report") == 0
    metrics.paused("ns-paused", "shop", ["sync", "report"], [])
    assert sample("appschedule_task_paused", **labels, task="sync") == 0
    metrics.forget("ns-paused", "shop", ["sync", "report"])
    assert b"ns-paused" not in generate_latest(metrics.REGISTRY)
