"""cold: N AppSchedules before the operator starts, against the same CronJobs created directly."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..common import (
    CONCURRENCY,
    TASKS,
    ratio,
    seconds,
)
from ..proxy import summary

if TYPE_CHECKING:
    from ..bench import Bench, Population


async def floor_cold(bench: Bench, n: int) -> float:
    namespace = await bench.namespace(f"floor-cold-{n}")
    first, last = await bench.create_cronjobs(namespace, TASKS * n)
    await bench.drop(namespace)
    return last - first


async def cold(bench: Bench, world: Population, floor: float) -> None:
    n = world.size
    operator = bench.start_operator(world)
    done = await bench.converge(world)
    requests = await bench.proxy.requests(operator.started, done)
    writes = [r.t for r in requests if r.write]
    first_write = min(writes) if writes else done
    took = done - first_write
    bench.record(
        "cold",
        str(n),
        {
            "seconds_from_first_write": took,
            "seconds_from_start": done - operator.started,
            "seconds_start_to_first_write": first_write - operator.started,
            "floor_seconds": floor,
            "ratio": took / floor,
            "cronjobs": len(world.cronjobs.objects),
            "ready": len(world.appschedules.ok_keys),
            "operator": summary(requests),
        },
    )
    bench.report(
        f"cold     N={n:<5} {seconds(took):>9} from the first write to {TASKS * n} CronJobs and {n} Ready "
        f"({seconds(done - operator.started)} from start, {len(requests)} requests, {len(writes)} writes)"
        f"   floor {seconds(floor)} ({TASKS * n} CronJobs, {CONCURRENCY} at a time)   ratio {ratio(took, floor)}"
    )


# -- idle
