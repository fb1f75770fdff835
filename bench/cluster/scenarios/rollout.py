"""rollout: a Deployment's image change until every CronJob of its AppSchedules runs it."""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING

from ..client import bulk, cronjobs, deployments
from ..common import (
    BENCH_ERRORS,
    CONCURRENCY,
    NEW_IMAGE,
    SETTLE,
    TASKS,
    now,
    ratio,
    seconds,
)
from ..objects import (
    CRONJOB_IMAGE,
)
from ..proxy import summary

if TYPE_CHECKING:
    from ..bench import Bench


async def rollout(bench: Bench, n: int) -> None:
    floor_ns = await bench.namespace(f"floor-rollout-{n}")
    await bench.create_cronjobs(floor_ns, TASKS * n)
    first, last = await bulk(
        functools.partial(
            bench.api.patch,
            cronjobs(floor_ns, f"cj-{k}"),
            [{"op": "replace", "path": CRONJOB_IMAGE, "value": NEW_IMAGE}],
        )
        for k in range(TASKS * n)
    )
    floor = last - first
    await bench.drop(floor_ns)
    world = await bench.world(n, f"rollout-{n}")
    try:
        operator = bench.start_operator(world)
        converged = await bench.converge(world) - operator.started
        await asyncio.sleep(SETTLE)
        world.cronjobs.set_ok(lambda v: v.image == NEW_IMAGE)
        start = now()
        await bench.api.patch(
            deployments(world.namespace, "web"),
            [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": NEW_IMAGE}],
        )
        done = await bench.pulse.until(
            lambda: len(world.cronjobs.ok_keys) >= TASKS * n, bench.deadline(), "the rollout", operator.guard
        )
        took = done - start
        requests = await bench.proxy.requests(start, done)
        bench.record(
            "rollout",
            str(n),
            {
                "seconds": took,
                "floor_seconds": floor,
                "ratio": took / floor,
                "converged_seconds_before": converged,
                "operator": summary(requests),
            },
        )
        bench.report(
            f"rollout  {n} AppSchedules  {seconds(took):>9} from the Deployment's new image to "
            f"{TASKS * n} CronJobs on it ({len(requests)} requests, {sum(r.write for r in requests)} writes)"
            f"   floor {seconds(floor)} "
            f"({TASKS * n} CronJobs patched, {CONCURRENCY} at a time)   ratio {ratio(took, floor)}"
        )
    except BENCH_ERRORS as error:
        bench.failed("rollout", str(n), error, world)
    finally:
        await bench.close_world(world)


# -- admission: the loop answers while the operator plans
