"""Benchmarks of the pure core, printed as ratios against a baseline measured in the same run.

    make bench

1. count_fires over a week of downtime of `* * * * *` (10,080 fires), against enumerating the fires
   one by one through robfig's Next (the naive way, what a controller replaying history would do), in UTC
   and in Europe/Berlin across its spring-forward and fall-back days (target: at least 1,000x).
2. One ledger step of a `* * * * *` task with a day of Jobs, on a daylight-saving day (Europe/Berlin on
   2026-10-25, America/New_York on 2026-11-01) against the same step the day before (target: at most 2x).
3. A no-op reconcile plan of an AppSchedule with 50 tasks, against rendering those 50 CronJobs alone
   (the plan's overhead beyond rendering: hashing, comparison, status).
4. The memory of every task's metrics (16 counters, 3 gauges, a duration histogram) for 3,000 tasks, kept as
   the operator keeps them (shell/metrics.TaskSeries), against one prometheus_client child a series (how they
   were kept before: 300 MiB at 10,000 AppSchedules).
"""

from __future__ import annotations

import sys
import timeit
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the test kit is tests.kit

from tests.kit.worlds import world_of

from appschedule.core import keys, naming, schedule
from appschedule.core.keys import rfc3339 as stamp
from appschedule.core.ledger import TaskConfig, advance
from appschedule.core.reconcile import plan
from appschedule.core.render import render
from appschedule.core.view import JobView


def best(stmt: object, number: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number  # type: ignore[arg-type]


def enumerate_fires(parsed: schedule.Schedule, start: datetime, end: datetime) -> int:
    return sum(1 for _ in schedule.fires_between(parsed, start, end))


def bench_count() -> None:
    weeks = (("UTC", "2026-06-01"), ("Europe/Berlin", "2026-03-25"), ("Europe/Berlin", "2026-10-22"))
    for zone, start in weeks:  # the last two span a daylight-saving change
        minutely = schedule.parse("* * * * *", zone)
        a = datetime.fromisoformat(start).replace(tzinfo=UTC)
        b = a + timedelta(days=7)
        assert schedule.count_fires(minutely, a, b) == sum(1 for _ in schedule.fires_between(minutely, a, b))
        naive = best(partial(enumerate_fires, minutely, a, b), 1)
        fast = best(partial(schedule.count_fires, minutely, a, b), 3)
        print(
            f"count a week of * * * * * from {start} in {zone:13}  enumerate {naive * 1000:8.1f} ms   "
            f"count_fires {fast * 1000:7.2f} ms   ratio {naive / fast:6.1f}x"
        )


def ledger_step(zone: str, day: datetime) -> float:
    """The time of one ledger step at 12:00 UTC on ``day``: a `* * * * *` task whose Jobs of the last
    three hours are all there (the controller's history limits keep a few; a day's worth stresses more)."""
    config = TaskConfig(task="report", cronjob="shop-report", schedule=schedule.parse("* * * * *", zone))
    now = day.replace(hour=12)
    jobs = []
    for fire in schedule.fires_between(config.schedule, now - timedelta(hours=3), now - timedelta(seconds=30)):
        created = fire + timedelta(seconds=1)
        jobs.append(
            JobView(
                namespace="shop",
                name=f"shop-report-{int(fire.timestamp()) // 60}",
                uid=str(fire),
                resource_version="1",
                appschedule="shop",
                task="report",
                created=stamp(created),
                annotations={
                    naming.CRONJOB_SCHEDULED_TIMESTAMP: stamp(fire),
                    naming.ANNOTATION_IDEMPOTENCY_KEY: keys.key_of("report", fire),
                },
                finalizer=True,
                deleting=False,
                active=0,
                succeeded=1,
                failed=0,
                outcome="Complete",
                reason=None,
                finish_time=stamp(created + timedelta(seconds=5)),
            )
        )
    progress = advance(None, config, [], now - timedelta(hours=3, seconds=30)).status
    progress = advance(progress, config, jobs[: len(jobs) // 2], now - timedelta(hours=1, minutes=30)).status
    return best(partial(advance, progress, config, jobs, now), 3)


def bench_ledger() -> None:
    for zone, dst_day in (("Europe/Berlin", "2026-10-25"), ("America/New_York", "2026-11-01")):
        day = datetime.fromisoformat(dst_day).replace(tzinfo=UTC)
        ordinary = ledger_step(zone, day - timedelta(days=1))
        changing = ledger_step(zone, day)
        print(
            f"ledger step of * * * * * in {zone:16}  day before {ordinary * 1000:7.2f} ms   "
            f"{dst_day} {changing * 1000:7.2f} ms   ratio {changing / ordinary:5.2f}x"
        )


def bench_plan() -> None:
    deployment = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "app", "image": "registry.example.com/web:1", "env": [{"name": "A", "value": "1"}]}
                    ]
                }
            }
        },
    }
    appschedule = {
        "metadata": {
            "name": "shop",
            "namespace": "shop",
            "uid": "u",
            "generation": 1,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "deploymentRef": {"name": "web"},
            "timeZone": "Europe/Berlin",
            "tasks": [{"name": f"task-{i}", "schedule": f"{i} 3 * * *", "command": ["run"]} for i in range(50)],
        },
    }
    now = datetime(2026, 3, 27, 12, tzinfo=UTC)
    first = plan(world_of(appschedule, deployment), now)
    cronjobs = [dict(m, metadata={**m["metadata"], "uid": m["metadata"]["name"]}) for m in first.apply]
    settled = {**appschedule, "status": first.status}
    world = world_of(settled, deployment, cronjobs)
    assert not plan(world, now).apply
    rendering = best(lambda: render(settled, deployment), 5)
    noop = best(lambda: plan(world, now), 5)
    print(
        f"50-task AppSchedule   render {rendering * 1000:7.2f} ms   no-op plan {noop * 1000:7.2f} ms   "
        f"ratio {noop / rendering:5.2f}x of rendering"
    )


def _allocated(build: Callable[[], object]) -> int:
    """Bytes ``build`` leaves allocated (tracemalloc), what it returns kept alive meanwhile."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before


def bench_metrics_memory(tasks: int = 3000) -> None:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    from appschedule.shell import metrics

    labels = [("ns", f"app-{i // 3}", f"task-{i % 3}") for i in range(tasks)]

    def children() -> object:  # the baseline: a prometheus_client child for every series, as before
        registry = CollectorRegistry()
        runs = Counter("r_total", "", ["namespace", "appschedule", "task", "result"], registry=registry)
        counters = [
            Counter(f"c{i}_total", "", ["namespace", "appschedule", "task"], registry=registry) for i in range(5)
        ]
        gauges = [Gauge(f"g{i}", "", ["namespace", "appschedule", "task"], registry=registry) for i in range(3)]
        durations = Histogram(
            "d", "", ["namespace", "appschedule", "task", "result"], buckets=metrics.BUCKETS, registry=registry
        )
        for one in labels:
            for result in metrics.RESULTS:
                runs.labels(*one, result)
            for counter in counters:
                counter.labels(*one)
            for gauge in gauges:
                gauge.labels(*one).set(1.0)
            durations.labels(*one, "succeeded").observe(3.0)
        return registry

    def series() -> object:
        kept = metrics.TaskMetrics()
        for one in labels:
            task = kept.task(one)
            task.gauges[:] = [1.0, 1.0, 1.0]
            kept.observe(one, "succeeded", 3.0)
        return kept

    base, ours = _allocated(children), _allocated(series)
    print(
        f"metrics of {tasks} tasks   prometheus_client children {base / tasks / 1024:6.1f} KiB a task   "
        f"TaskSeries {ours / tasks / 1024:6.1f} KiB a task   ratio {base / ours:5.1f}x smaller"
    )


if __name__ == "__main__":
    bench_count()
    bench_ledger()
    bench_plan()
    bench_metrics_memory()
