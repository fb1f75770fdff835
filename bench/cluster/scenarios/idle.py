"""idle: the operator's requests, writes, CPU and memory after convergence, against a bare kopf operator."""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import TYPE_CHECKING

import psutil

from ..common import (
    SETTLE,
    TARGET_REQUESTS_PER_MINUTE,
    TARGET_RSS_MIB,
    BenchError,
    Json,
    now,
    ratio,
)
from ..processes import BARE_KOPF, IMPORT_ONLY, Process
from ..proxy import summary

if TYPE_CHECKING:
    from ..bench import Bench, Population


async def idle(bench: Bench, world: Population, duration: float) -> Json:
    operator = world.operator
    assert operator is not None
    await asyncio.sleep(SETTLE)
    operator.guard()
    start, cpu_start = now(), operator.cpu_seconds()
    peak = 0
    while now() < start + duration:
        operator.guard()
        peak = max(peak, operator.rss_kib())
        await asyncio.sleep(min(5.0, max(0.0, start + duration - now())))
    end, cpu_end, rss = now(), operator.cpu_seconds(), operator.rss_kib()
    minutes = (end - start) / 60
    requests = await bench.proxy.requests(start, end)
    return {
        "seconds": end - start,
        "operator": summary(requests, minutes),
        "requests_per_minute": len(requests) / minutes,
        "watch_per_minute": sum(r.watch for r in requests) / minutes,
        "other_per_minute": sum(not r.watch for r in requests) / minutes,
        "other_per_second": sum(not r.watch for r in requests) / (end - start),
        "writes": sum(r.write for r in requests),
        "cpu_seconds": cpu_end - cpu_start,
        "cpu_seconds_per_minute": (cpu_end - cpu_start) / minutes,
        "rss_kib": rss,
        "pss_kib": operator.pss_kib(),
        "rss_peak_in_window_kib": max(peak, rss),
        "rss_high_water_kib": operator.peak_kib(),
    }


def idle_line(bench: Bench, n: int, idle: Json, bare: Json | None) -> str:
    rss_mib = idle["rss_kib"] / 1024
    line = (
        f"idle     N={n:<5} {idle['requests_per_minute']:.1f} requests/min (watch {idle['watch_per_minute']:.1f}, "
        f"other {idle['other_per_minute']:.1f})  {idle['writes']} writes  "
        f"CPU {idle['cpu_seconds_per_minute']:.2f} s/min  RSS {rss_mib:.1f} MiB "
        f"({idle['rss_kib'] / n:.0f} KiB/AppSchedule) over {idle['seconds']:.0f} s"
        f"   target {TARGET_REQUESTS_PER_MINUTE:.0f}/min: ratio "
        f"{ratio(idle['requests_per_minute'], TARGET_REQUESTS_PER_MINUTE)}"
    )
    if bare is not None:
        extra = (idle["rss_kib"] - bare["rss_kib"]) / n
        line += (
            f"   RSS vs bare kopf {bare['rss_kib'] / 1024:.1f} MiB: ratio {ratio(idle['rss_kib'], bare['rss_kib'])}"
            f" ({extra:.0f} KiB/AppSchedule above it)"
        )
        if "pss_kib" in bare:
            line += (
                f"   PSS {idle['pss_kib'] / 1024:.1f} MiB vs bare kopf {bare['pss_kib'] / 1024:.1f} MiB: "
                f"ratio {ratio(idle['pss_kib'], bare['pss_kib'])}"
            )
    if n >= 1000:
        line += f"   RSS target {TARGET_RSS_MIB:.0f} MiB: ratio {ratio(rss_mib, TARGET_RSS_MIB)}"
    return line


# -- baselines for idle and restart


async def bare_kopf(bench: Bench, world: Population) -> Json:
    """A kopf operator with no-op handlers on the same three resources: when its watches are up, its RSS."""
    command = [bench.args.operator_python, "-c", BARE_KOPF, world.namespace]
    log = bench.state / "bench-bare-kopf.log"
    env = dict(os.environ, KUBECONFIG=str(bench.baseline_proxy.kubeconfig))
    bare = Process("bare-kopf", command, env, log, bench.state)
    try:
        wanted = {"appschedules", "deployments", "cronjobs"}
        deadline = bench.deadline()
        while True:
            bare.guard()
            requests = await bench.baseline_proxy.requests(bare.started)
            watching = {r.resource: r.t for r in requests if r.watch and r.resource in wanted}
            if set(watching) == wanted:
                ready = max(watching.values()) - bare.started
                break
            if now() > deadline:
                raise BenchError("timed out waiting for the bare kopf operator's watches")
            await asyncio.sleep(0.1)
        # then until its CPU settles (it has run a no-op handler per object), at most 60 s
        settle_deadline, previous, quiet = now() + 60, bare.cpu_seconds(), 0
        while quiet < 2 and now() < settle_deadline:
            await asyncio.sleep(1)
            current = bare.cpu_seconds()
            quiet = quiet + 1 if current - previous < 0.02 else 0
            previous = current
        return {
            "watches_ready_seconds": ready,
            "rss_kib": bare.rss_kib(),
            "pss_kib": bare.pss_kib(),
            "cpu_seconds": bare.cpu_seconds(),
        }
    finally:
        bare.stop()


async def import_only(bench: Bench) -> Json:
    """RSS of the same Python having imported kopf and kubernetes, doing nothing."""
    process = subprocess.Popen(
        [bench.args.operator_python, "-c", IMPORT_ONLY],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ),
    )
    try:
        assert process.stdout is not None
        await asyncio.to_thread(process.stdout.readline)
        return {"rss_kib": psutil.Process(process.pid).memory_info().rss // 1024}
    finally:
        process.kill()
        process.wait()


# -- change
