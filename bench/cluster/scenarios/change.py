"""change: a task's schedule edit until its CronJob shows it, under churn, against CronJobs patched directly."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..client import appschedules, cronjobs
from ..common import (
    CHURN_PER_SECOND,
    EDIT_SPACING,
    TASKS,
    BenchError,
    Json,
    now,
    percentile,
    ratio,
    seconds,
)
from ..informer import Informer
from ..objects import (
    CRONJOB_SCHEDULE,
    BenchCronJob,
    asched_name,
    cronjob_view,
    name_key,
    schedule,
    schedule_patch,
    task_name,
)

if TYPE_CHECKING:
    from ..bench import Bench, Population


async def measure_edits(
    bench: Bench,
    measured: list[tuple[str, str, list[Json]]],
    churn: Callable[[random.Random], tuple[str, list[Json]]],
    informer: Informer[BenchCronJob],
    expected: Callable[[str], str],
    guard: Callable[[], None] | None,
) -> Json:
    """Measured edits (path, key of the CronJob to watch, patch), EDIT_SPACING apart, under a churn of
    CHURN_PER_SECOND other edits; each measured edit's latency is patch sent -> watch shows it."""
    sent: dict[str, float] = {}
    latency: dict[str, float] = {}

    def seen(key: str, view: BenchCronJob | None) -> None:
        if key in sent and key not in latency and view is not None and view.schedule == expected(key):
            latency[key] = now() - sent[key]

    informer.listeners.append(seen)
    done = asyncio.Event()
    churned = 0

    async def churning() -> None:
        nonlocal churned
        rng, start = random.Random(7), now()
        while not done.is_set():
            path, patch = churn(rng)
            await bench.api.patch(path, patch)
            churned += 1
            await asyncio.sleep(max(0.0, start + churned / CHURN_PER_SECOND - now()))

    churn_task = asyncio.create_task(churning())
    churn_started = now()
    try:
        await asyncio.sleep(2)  # the churn is on before the first measured edit
        start = now()
        for k, (path, key, patch) in enumerate(measured):
            await asyncio.sleep(max(0.0, start + k * EDIT_SPACING - now()))
            sent[key] = now()
            await bench.api.patch(path, patch)
        with contextlib.suppress(BenchError):
            await bench.pulse.until(lambda: len(latency) == len(measured), bench.deadline(), "edits", guard)
    finally:
        done.set()
        await churn_task
        informer.listeners.remove(seen)
    values = list(latency.values())
    return {
        "edits": len(measured),
        "applied": len(values),
        "timed_out": len(measured) - len(values),
        "p50": percentile(values, 0.5) if values else None,
        "p99": percentile(values, 0.99) if len(values) == len(measured) else None,
        "max": max(values) if values else None,
        "churn_per_second": churned / (now() - churn_started),
    }


async def floor_change(bench: Bench, edits: int) -> Json:
    namespace = await bench.namespace("floor-change")
    count = edits + 100
    await bench.create_cronjobs(namespace, count)
    informer: Informer[BenchCronJob] = Informer(
        bench.api, cronjobs(namespace), bench.pulse, key=name_key, project=cronjob_view
    )
    await informer.start()
    churn_counts: Counter[int] = Counter()

    def churn(rng: random.Random) -> tuple[str, list[Json]]:
        k = rng.randrange(edits, count)
        churn_counts[k] += 1
        cron = schedule(k, 0, minute=3 + churn_counts[k] % 27)
        return cronjobs(namespace, f"cj-{k}"), [{"op": "replace", "path": CRONJOB_SCHEDULE, "value": cron}]

    def expected(key: str) -> str:
        return schedule(int(key.removeprefix("cj-")), 0, minute=30)

    measured = [
        (
            cronjobs(namespace, f"cj-{k}"),
            f"cj-{k}",
            [{"op": "replace", "path": CRONJOB_SCHEDULE, "value": expected(f"cj-{k}")}],
        )
        for k in range(edits)
    ]
    try:
        return await measure_edits(bench, measured, churn, informer, expected, None)
    finally:
        await informer.stop()
        await bench.drop(namespace)


async def change(bench: Bench, world: Population, floor: Json) -> None:
    n, namespace = world.size, world.namespace
    rng = random.Random(42)
    edits = min(int(bench.args.edits), n // 2)
    targets = rng.sample(range(n - 1), edits)  # never the restart probe (the last one)
    others = sorted(set(range(n)) - set(targets))
    churn_counts: Counter[int] = Counter()

    def churn(r: random.Random) -> tuple[str, list[Json]]:
        i, j = r.choice(others), r.randrange(TASKS)
        churn_counts[i * TASKS + j] += 1
        cron = schedule(i, j, minute=3 + churn_counts[i * TASKS + j] % 27)
        return appschedules(namespace, asched_name(i)), schedule_patch(j, cron)

    def key_of(i: int) -> str:
        return f"{asched_name(i)}/{task_name(i, 0)}"

    expected_by_key = {key_of(i): schedule(i, 0, minute=30) for i in targets}
    measured = [
        (appschedules(namespace, asched_name(i)), key_of(i), schedule_patch(0, expected_by_key[key_of(i)]))
        for i in targets
    ]
    assert world.operator is not None
    result = await measure_edits(
        bench, measured, churn, world.cronjobs, expected_by_key.__getitem__, world.operator.guard
    )
    result["floor"] = floor
    bench.record("change", str(n), result)
    if result["p50"] is None or floor["p50"] is None:
        bench.report(f"change   N={n:<5} no edit applied within {bench.args.timeout}s")
        return
    p99 = f"{seconds(result['p99'])}" if result["p99"] is not None else f"> {bench.args.timeout}s"
    p99_ratio = ratio(result["p99"], floor["p99"]) if result["p99"] is not None and floor["p99"] else "n/a"
    bench.report(
        f"change   N={n:<5} p50 {seconds(result['p50'])}  p99 {p99}  ({result['applied']}/{edits} edits applied, "
        f"churn {result['churn_per_second']:.1f}/s)   floor (CronJob patched directly) p50 "
        f"{seconds(floor['p50'])} p99 {seconds(floor['p99'] or 0)}   ratio p50 {ratio(result['p50'], floor['p50'])}"
        f" p99 {p99_ratio}"
    )


# -- restart
