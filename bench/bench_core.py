"""Benchmarks of the pure core, printed as ratios against a baseline measured in the same run.

    make bench

1. count_fires over a week of downtime of `* * * * *` (10,080 fires), against enumerating the fires
   one by one through robfig's Next (the naive way, what a controller replaying history would do), in UTC
   and in Europe/Berlin across its spring-forward and fall-back days (target: at least 1,000x).
2. One ledger step of a `* * * * *` task with a day of Jobs, on a daylight-saving day (Europe/Berlin on
   2026-10-25, America/New_York on 2026-11-01) against the same step the day before (target: at most 2x).
3. A no-op reconcile plan of an AppSchedule with 50 tasks, against rendering those 50 CronJobs alone
   (the plan's overhead beyond rendering: hashing, comparison, status).
4. The memory of every task's metrics (17 counters, 3 gauges, a duration histogram) for 3,000 tasks, kept as
   the operator keeps them (shell/metrics.TaskSeries), against one prometheus_client child a series (how they
   were kept before: 300 MiB at 10,000 AppSchedules).
5. Blackouts (a year of holidays, a company shutdown, weekend and night windows, in Europe/Berlin): the
   blacked-out fires of `* * * * *` counted over a week against one check a fire (target: at least 100x),
   the same count over a year against over a week (O(windows): about the ratio of their spans, not 52x the
   fires), and the no-op plan of item 3 with those 32 blackouts on every task against none (target: at most
   1.5x).
6. The plans of one AppSchedule of three tasks through Berlin's autumn change night (every 13 s for two hours, the
   Jobs of each fire made, run and ended, its status written back: tests/unit/test_quiets.py), reusing the ledger
   steps whose inputs did not change (reconcile.Quiets) against stepping every task's ledger in every plan.
7. The no-op plan of item 3 with its rendering kept from the plan before (reconcile.Quiets: the CronJobs rendered,
   stamped and found in sync, reused for the same spec, Deployment and CronJobs) against rendered anew.
"""

from __future__ import annotations

import sys
import timeit
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the test kit is tests.kit

from tests.kit.worlds import world_of

from appschedule.core import blackout, keys, naming, schedule
from appschedule.core.keys import rfc3339 as stamp
from appschedule.core.ledger import TaskConfig, advance
from appschedule.core.reconcile import Quiets, plan
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


def bench_union() -> None:
    """Several schedules for one task: a year counted for the union against enumerating its fires, and against
    counting one of its schedules alone (the cost rule: O(parts x days), never O(fires))."""
    for zone in ("UTC", "Europe/Berlin"):
        union = schedule.parse("*/5 * * * * | 7 9-17 * * 1-5 | 30 2 * * 0", zone)
        alone = schedule.parse("*/5 * * * *", zone)
        a = datetime(2026, 1, 1, tzinfo=UTC)
        b = a + timedelta(days=365)
        assert schedule.count_fires(union, a, b) == enumerate_fires(union, a, b)
        naive = best(partial(enumerate_fires, union, a, b), 1)
        fast = best(partial(schedule.count_fires, union, a, b), 3)
        single = best(partial(schedule.count_fires, alone, a, b), 3)
        print(
            f"count a year of 3 schedules in {zone:13}  enumerate {naive * 1000:8.1f} ms   count_fires "
            f"{fast * 1000:7.2f} ms   ratio {naive / fast:6.1f}x   against one schedule {fast / single:5.1f}x"
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
    noop, rendering = plan_times()
    print(
        f"50-task AppSchedule   render {rendering * 1000:7.2f} ms   no-op plan {noop * 1000:7.2f} ms   "
        f"ratio {noop / rendering:5.2f}x of rendering"
    )


HOLIDAYS: list[dict[str, Any]] = [
    {"name": f"holiday-{i}", "dates": [f"2026-{1 + i % 12:02d}-{1 + (7 * i) % 28:02d}"], "reason": "closed"}
    for i in range(28)
] + [
    {"name": "shutdown", "from": "2026-12-24", "to": "2027-01-01"},
    {"name": "weekends", "weekly": {"days": ["SAT", "SUN"], "from": "00:00", "to": "24:00"}},
    {"name": "nights", "weekly": {"days": ["MON", "TUE", "WED", "THU", "FRI"], "from": "22:00", "to": "06:00"}},
    {"name": "repeated-hour", "weekly": {"days": ["SUN"], "from": "02:00", "to": "03:00"}},
]


def bench_blackouts() -> None:
    windows = blackout.of(HOLIDAYS)
    every = schedule.parse("* * * * *", "Europe/Berlin")
    week = (datetime(2026, 10, 21, tzinfo=UTC), datetime(2026, 10, 28, tzinfo=UTC))  # the fall-back inside
    year = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    fast = best(lambda: blackout.count(every, windows, *week), 5)

    def one_check_a_fire() -> int:
        return sum(
            1 for f in schedule.fires_between(every, *week) if blackout.blacked_out(windows, every.zone, f) is not None
        )

    assert one_check_a_fire() == blackout.count(every, windows, *week)
    naive = best(one_check_a_fire, 1)
    print(
        f"blackouts of * * * * * over a week   one check a fire {naive * 1000:8.1f} ms   "
        f"count {fast * 1000:6.2f} ms   ratio {naive / fast:6.1f}x"
    )
    spans = [len(blackout.merged(blackout.spans(windows, every.zone, *r))) for r in (week, year)]
    whole = best(lambda: blackout.count(every, windows, *year), 3)
    print(
        f"blackouts over a year against a week   {whole * 1000:7.2f} ms / {fast * 1000:6.2f} ms   ratio "
        f"{whole / fast:5.1f}x   spans {spans[1]} / {spans[0]} = {spans[1] / spans[0]:5.1f}x   fires 52x"
    )
    plain, _ = plan_times()
    dark, _ = plan_times(HOLIDAYS)
    print(
        f"50-task no-op plan with {len(HOLIDAYS)} blackouts {dark * 1000:7.2f} ms   without {plain * 1000:7.2f} ms   "
        f"ratio {dark / plain:5.2f}x"
    )


def _settled_50(
    blackouts: list[dict[str, Any]] | None = None,
) -> tuple[tuple[dict[str, Any], dict[str, Any]], Any, datetime]:
    """A 50-task AppSchedule (and its Deployment) whose CronJobs and status are as its first plan made them, the
    world of its next (no-op) plan, and when."""
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
    if blackouts:
        appschedule["spec"]["blackouts"] = blackouts  # type: ignore[index]
    now = datetime(2026, 3, 27, 12, tzinfo=UTC)
    first = plan(world_of(appschedule, deployment), now)
    cronjobs = [dict(m, metadata={**m["metadata"], "uid": m["metadata"]["name"]}) for m in first.apply]
    settled = {**appschedule, "status": first.status}
    world = world_of(settled, deployment, cronjobs)
    assert not plan(world, now).apply
    return (settled, deployment), world, now


def plan_times(blackouts: list[dict[str, Any]] | None = None) -> tuple[float, float]:
    """The no-op plan of a 50-task AppSchedule, and the rendering of its CronJobs alone (seconds)."""
    (settled, deployment), world, now = _settled_50(blackouts)
    rendering = best(lambda: render(settled, deployment), 5)
    noop = best(lambda: plan(world, now), 5)
    return noop, rendering


def bench_rendering_kept() -> None:
    """Item 7: the no-op plan of item 3 with the rendering kept (a Quiets the plans share) against rendered anew."""
    _, world, now = _settled_50()
    anew = best(lambda: plan(world, now), 5)
    quiets = Quiets()
    plan(world, now, quiets=quiets)
    kept = best(lambda: plan(world, now, quiets=quiets), 5)
    assert quiets.renderings_reused > 0
    print(
        f"50-task no-op plan   rendered anew {anew * 1000:7.2f} ms   rendering kept {kept * 1000:7.2f} ms   "
        f"ratio {kept / anew:5.2f}x"
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


def bench_quiets() -> None:
    from tests.unit import test_quiets as night  # the sequence the equivalence test plans

    deployment = yaml.safe_load((Path(__file__).resolve().parents[1] / "examples" / "deployment.yaml").read_text())
    deployment["metadata"].update(name="web", namespace="shop")
    start = night.NIGHTS[1]
    end = start + timedelta(hours=2)
    fires = {n: list(schedule.fires_between(schedule.parse(s, "Europe/Berlin"), start, end)) for n, s in night.TASKS}
    first = plan(world_of(night.appschedule({}), deployment), start)
    made = {"creationTimestamp": "2026-10-01T00:00:00Z"}
    cronjobs = [{**m, "metadata": {**m["metadata"], "uid": f"cj-{m['metadata']['name']}", **made}} for m in first.apply]
    worlds, status, released, now = [], first.status, set[str](), start
    while now < end:
        jobs = [j for n, times in fires.items() for f in times if (j := night.job(n, f, now, released)) is not None]
        world = world_of(night.appschedule(status), deployment, cronjobs, jobs=jobs)
        worlds.append((world, now))
        decided = plan(world, now)
        if decided.status_changed:
            status, released = decided.status, released | set(decided.release)
        now += timedelta(seconds=13)

    def every(quiets: Quiets | None) -> None:
        for world, at in worlds:
            plan(world, at, quiets=quiets)

    base = min(timeit.repeat(partial(every, None), number=1, repeat=3))
    ours = min(timeit.repeat(lambda: every(Quiets()), number=1, repeat=3))
    print(
        f"plans of a night of 3 tasks   {len(worlds)} plans   every ledger stepped {base / len(worlds) * 1000:5.2f} ms "
        f"a plan   unchanged steps reused {ours / len(worlds) * 1000:5.2f} ms   ratio {ours / base:4.2f}x"
    )


if __name__ == "__main__":
    bench_count()
    bench_union()
    bench_ledger()
    bench_plan()
    bench_metrics_memory()
    bench_blackouts()
    bench_quiets()
    bench_rendering_kept()
