"""Benchmarks of the pure core, printed as ratios against a baseline measured in the same run.

    make bench

1. count_fires over a week of downtime of `* * * * *` (10,080 fires), against enumerating the fires
   one by one through robfig's Next (the naive way, what a controller replaying history would do).
2. A no-op reconcile plan of an AppSchedule with 50 tasks, against rendering those 50 CronJobs alone
   (the plan's overhead beyond rendering: hashing, comparison, status).
"""

from __future__ import annotations

import sys
import timeit
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from appschedule import schedule
from appschedule.reconcile import plan
from appschedule.render import render
from appschedule.state import world_of


def best(stmt: object, number: int) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=5)) / number  # type: ignore[arg-type]


def enumerate_fires(parsed: schedule.Schedule, start: datetime, end: datetime) -> int:
    return sum(1 for _ in schedule.fires_between(parsed, start, end))


def bench_count() -> None:
    for zone, start in (("UTC", "2026-06-01"), ("Europe/Berlin", "2026-03-25")):  # the second spans a DST change
        minutely = schedule.parse("* * * * *", zone)
        a = datetime.fromisoformat(start).replace(tzinfo=UTC)
        b = a + timedelta(days=7)
        assert schedule.count_fires(minutely, a, b) == sum(1 for _ in schedule.fires_between(minutely, a, b))
        naive = best(partial(enumerate_fires, minutely, a, b), 1)
        fast = best(partial(schedule.count_fires, minutely, a, b), 3)
        print(f"count a week of * * * * * in {zone:13}  enumerate {naive * 1000:8.1f} ms   "
              f"count_fires {fast * 1000:7.2f} ms   ratio {naive / fast:6.1f}x")  # fmt: skip


def bench_plan() -> None:
    deployment = {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "registry.example.com/web:1", "env": [{"name": "A", "value": "1"}]}]}}}}  # fmt: skip
    appschedule = {
        "metadata": {"name": "shop", "namespace": "shop", "uid": "u", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"deploymentRef": {"name": "web"}, "timeZone": "Europe/Berlin",
                 "tasks": [{"name": f"task-{i}", "schedule": f"{i} 3 * * *", "command": ["run"]} for i in range(50)]},
    }  # fmt: skip
    now = datetime(2026, 3, 27, 12, tzinfo=UTC)
    first = plan(world_of(appschedule, deployment), now)
    cronjobs = [dict(m, metadata={**m["metadata"], "uid": m["metadata"]["name"]}) for m in first.apply]
    settled = {**appschedule, "status": first.status}
    world = world_of(settled, deployment, cronjobs)
    assert not plan(world, now).apply
    rendering = best(lambda: render(settled, deployment), 5)
    noop = best(lambda: plan(world, now), 5)
    print(f"50-task AppSchedule   render {rendering * 1000:7.2f} ms   no-op plan {noop * 1000:7.2f} ms   "
          f"ratio {noop / rendering:5.2f}x of rendering")  # fmt: skip


if __name__ == "__main__":
    bench_count()
    bench_plan()
