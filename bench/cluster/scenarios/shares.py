"""shares: replicas that share the work (``--shards``): one operator, then three replicas on three shards, on the
same AppSchedules firing every minute; each replica's CPU and memory against the one operator's."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from tests.kit import operator as kit

from ..common import BENCH_ERRORS, LABEL_TASK, now, ratio
from ..informer import Informer
from ..objects import BenchJob, job_view, name_key
from ..processes import Process

if TYPE_CHECKING:
    from ..bench import Bench, Population

SHARDS = 3
GROUP = "bench-shards"


async def shares(bench: Bench, n: int, minutes: float) -> None:
    """N AppSchedules x 3 every-minute tasks: the one operator's CPU a minute and memory (PSS) over ``minutes``,
    then the same for each of three replicas with ``--shards 3``, once each holds one shard."""
    what = f"shares-{n}"
    world = await bench.world(n, what, every_minute=True)
    jobs: Informer[BenchJob] = Informer(
        bench.api, f"/apis/batch/v1/namespaces/{world.namespace}/jobs", bench.pulse, key=name_key, project=job_view,
        selector=LABEL_TASK,
    )  # fmt: skip
    finished: dict[str, float] = {}

    def on_job(name: str, view: BenchJob | None) -> None:
        if view is not None and view.finished:
            finished.setdefault(name, now())

    jobs.listeners.append(on_job)
    replicas: list[Process] = []
    try:
        await jobs.start()
        bench.start_operator(world)
        await bench.converge(world)
        assert world.operator is not None
        one = await _window(bench, [world.operator], minutes, finished)
        world.operator.stop()
        world.operator = None
        replicas = [_replica(bench, world, name) for name in "abc"]
        world.operator = replicas[0]  # what close_world stops (the others below) and failed() shows

        def guard() -> None:
            for replica in replicas:
                replica.guard()

        await bench.pulse.until(lambda: _spread(replicas), bench.deadline(), "one shard held by each replica", guard)
        three = await _window(bench, replicas, minutes, finished)
        figures = {"one": one, "three": three, "shards": SHARDS, "minutes": minutes}
        bench.record("shares", str(n), figures)
        cpu = ", ".join(f"{c:.0%}" for c in three["cpu_cores"])
        pss = ", ".join(f"{p / 1024:.0f}" for p in three["pss_kib"])
        bench.report(
            f"shares   N={n:<5} one operator: {one['cpu_cores'][0]:.0%} of a core, PSS {one['pss_kib'][0] / 1024:.0f} "
            f"MiB, {one['runs_per_minute']:.0f} runs a minute   three replicas on {SHARDS} shards: {cpu} of a core "
            f"(the busiest ratio {ratio(max(three['cpu_cores']), one['cpu_cores'][0])}), PSS {pss} MiB (the largest "
            f"ratio {ratio(max(three['pss_kib']), one['pss_kib'][0])}), {three['runs_per_minute']:.0f} runs a minute"
        )
    except BENCH_ERRORS as error:
        bench.failed("shares", str(n), error, world)
    finally:
        for replica in replicas[1:]:
            replica.stop()
        await jobs.stop()
        await bench.close_world(world)


def _replica(bench: Bench, world: Population, name: str) -> Process:
    command = kit.command(
        "run", "--log-format", "json", "--namespace", world.namespace, "--shards", str(SHARDS),
        "--leader-election-namespace", world.namespace, "--leader-election-name", GROUP,
        python=bench.args.operator_python,
    )  # fmt: skip
    log = bench.state / f"bench-operator-{bench.args.label}-shares-{name}.log"
    return Process(f"replica-{name}", command, bench.operator_env(bench.proxy.kubeconfig), log, bench.state)


def _spread(replicas: list[Process]) -> bool:
    """Each replica leads exactly one shard (the last word of its log on what it leads)."""
    for replica in replicas:
        said = [line for line in replica.lines() if "leads shards [" in line]
        held = said[-1].split("leads shards [", 1)[1].split("]", 1)[0] if said else ""
        if not held.strip() or "," in held:
            return False
    return True


async def _window(bench: Bench, processes: list[Process], minutes: float, finished: dict[str, float]) -> dict[str, Any]:
    """From just after a fire, ``minutes`` of each process' CPU; its memory (PSS) at the end; the runs ended."""
    await asyncio.sleep(60 - time.time() % 60 + 5)
    for process in processes:
        process.guard()
    start, cpu = now(), [p.cpu_seconds() for p in processes]
    while now() < start + minutes * 60:
        for process in processes:
            process.guard()
        await asyncio.sleep(min(5.0, max(0.0, start + minutes * 60 - now())))
    end = now()
    used = [p.cpu_seconds() - c for p, c in zip(processes, cpu, strict=True)]
    runs = sum(start <= t <= end for t in finished.values())
    return {
        "cpu_cores": [u / (end - start) for u in used],
        "cpu_seconds_per_minute": [u / ((end - start) / 60) for u in used],
        "pss_kib": [p.pss_kib() for p in processes],
        "runs": runs,
        "runs_per_minute": runs / ((end - start) / 60),
    }
