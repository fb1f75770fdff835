"""restart: SIGKILL, a probe edit, start again: until the probe is applied and the operator is quiet."""

from __future__ import annotations

import asyncio
import bisect
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..client import appschedules, cronjobs
from ..common import (
    QUIET_WINDOW,
    BenchError,
    Json,
    now,
    ratio,
    seconds,
)
from ..objects import (
    BenchCronJob,
    asched_name,
    schedule,
    schedule_patch,
    task_name,
)
from ..proxy import summary

if TYPE_CHECKING:
    from ..bench import Bench, Population


async def restart(bench: Bench, world: Population, idle_other_per_second: float | None) -> Json:
    n, namespace = world.size, world.namespace
    operator = world.operator
    assert operator is not None
    if idle_other_per_second is None:  # no idle scenario before: measure the rate now
        start = now()
        await asyncio.sleep(30)
        idle_other_per_second = sum(not r.watch for r in await bench.proxy.requests(start)) / (now() - start)
    threshold = max(1, math.ceil(1.5 * idle_other_per_second * QUIET_WINDOW))
    i = n - 1
    probe, key, cron = asched_name(i), f"{asched_name(i)}/{task_name(i, 0)}", schedule(i, 0, minute=45)
    probe_paths = {appschedules(namespace, probe), appschedules(namespace, probe) + "/status"}
    ours = [view.name for k, view in world.cronjobs.objects.items() if k.startswith(probe + "/")]
    probe_paths |= {cronjobs(namespace, name) for name in ours}
    applied: list[float] = []

    def seen(k: str, view: BenchCronJob | None) -> None:
        if k == key and view is not None and view.schedule == cron and not applied:
            applied.append(now())

    world.cronjobs.listeners.append(seen)
    try:
        operator.kill()
        edited = now()
        await bench.api.patch(appschedules(namespace, probe), schedule_patch(0, cron))
        operator = bench.start_operator(world)
        start = operator.started
        deadline = bench.deadline()
        quiet: float | None = None
        while True:
            await asyncio.sleep(1)
            operator.guard()
            times = sorted(r.t for r in await bench.proxy.requests(start) if not r.watch)
            quiet = first_quiet(times, start, now(), QUIET_WINDOW, threshold)
            if applied and quiet is not None:
                break
            if now() > deadline:
                raise BenchError(f"no catch-up after restart (probe applied: {bool(applied)})")
        caught_up = max(applied[0], quiet)
        observe_until = max(start + 90, caught_up + 30)  # covers a 60 s resync
        await asyncio.sleep(max(0.0, observe_until - now()))
        requests = await bench.proxy.requests(start, observe_until)
    finally:
        world.cronjobs.listeners.remove(seen)
    writes = [r for r in requests if r.write]
    other = [r for r in writes if r.path not in probe_paths]
    return {
        "caught_up_seconds": caught_up - start,
        "probe_applied_seconds_from_start": applied[0] - start,
        "probe_applied_seconds_from_edit": applied[0] - edited,
        "rate_at_idle_from_seconds": quiet - start,
        "quiet_window_seconds": QUIET_WINDOW,
        "quiet_threshold_requests": threshold,
        "observed_seconds": observe_until - start,
        "writes": len(writes),
        "writes_other_than_probe": len(other),
        "other_writes": sorted({f"{r.method} {r.path}" for r in other})[:50],
        "operator": summary(requests),
    }


def restart_line(bench: Bench, n: int, result: Json, bare: Json | None) -> str:
    line = (
        f"restart  N={n:<5} caught up {seconds(result['caught_up_seconds'])} after start (probe applied "
        f"{seconds(result['probe_applied_seconds_from_start'])}, requests at idle from "
        f"{seconds(result['rate_at_idle_from_seconds'])})  {result['writes_other_than_probe']} writes other than "
        f"the probe's (target 0) in {result['observed_seconds']:.0f} s"
    )
    if bare is not None:
        base = bare["watches_ready_seconds"]
        line += f"   bare kopf watches up in {seconds(base)}: ratio {ratio(result['caught_up_seconds'], base)}"
    return line


# -- rollout


def first_quiet(times: Sequence[float], start: float, until: float, window: float, threshold: int) -> float | None:
    """The first moment (the start, or just after a request) from which ``window`` seconds hold at most
    ``threshold`` requests; None while no such window has ended before ``until``."""
    for candidate in (start, *times):
        if candidate + window > until:
            return None
        if bisect.bisect_right(times, candidate + window) - bisect.bisect_right(times, candidate) <= threshold:
            return candidate
    return None
