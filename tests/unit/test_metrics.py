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
    for result in ("failed", "stuck", "started"):
        assert sample("appschedule_runs_total", **labels, result=result) == 0
    later = {"tasks": [{"name": "report", "counts": {"missed": 2, "failed": 1, "unkeyed": 1}}]}
    metrics.record_status("ns-metrics", "shop", status, later)
    assert sample("appschedule_missed_runs_total", **labels) == 2
    assert sample("appschedule_unkeyed_jobs_total", **labels) == 1
    assert sample("appschedule_runs_total", **labels, result="failed") == 1
    metrics.forget("ns-metrics", "shop", ["report"])
    assert b"ns-metrics" not in generate_latest(metrics.REGISTRY)
