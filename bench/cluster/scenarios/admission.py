"""admission: the webhooks' and the liveness probe's latency while the operator plans cold."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import aiohttp
from tests.kit import operator as kit
from tests.kit.wait import until

from ..client import appschedules
from ..common import (
    BENCH_ERRORS,
    IMAGE,
    BenchError,
    Json,
    free_port,
    now,
    percentile,
    ratio,
    seconds,
)
from ..objects import (
    appschedule,
    asched_name,
    task_name,
)
from ..processes import Process

if TYPE_CHECKING:
    from ..bench import Bench, Population


async def admission(bench: Bench, n: int) -> None:
    world = await bench.world(n, f"admission-{n}")
    live = free_port()
    try:
        await start_webhook_operator(bench, world, "admission", live)
        samples: dict[str, list[float]] = {"key webhook": [], "validation": [], "liveness": [], "no webhook": []}
        await answering(bench, world, live)  # the controller has started (its first heartbeat): it plans from now on
        before = await webhook_calls(bench)
        stop = asyncio.Event()
        probes = [asyncio.create_task(_probe(bench, world, samples, live, stop))]
        try:
            await bench.converge(world)
        finally:
            stop.set()
            await asyncio.gather(*probes)
        calls = webhook_call_shares(before, await webhook_calls(bench))
        busy = {k: list(v) for k, v in samples.items()}
        for values in samples.values():
            values.clear()
        stop = asyncio.Event()
        idle = asyncio.create_task(_probe(bench, world, samples, live, stop))
        await asyncio.sleep(20)
        stop.set()
        await idle
        targets = {"key webhook": 0.1, "validation": 0.5, "liveness": 0.1, "no webhook": 0.1}
        figures: Json = {"webhook_calls_as_the_api_server_timed_them": calls}
        for hook, share in calls.items():
            bench.report(
                f"admission N={n:<5} {hook}: {share['calls']} calls while planning as the API server "
                f"timed them: {share['within_0.1s']:.1%} within 100 ms, {share['within_0.5s']:.1%} "
                f"within 500 ms, p99 at most {seconds(share['p99_at_most'])}"
            )
        failed = {
            when: {what: len(values) for what, values in found.items() if what.endswith(" failed")}
            for when, found in (("while planning", busy), ("idle", samples))
        }
        figures["failed"] = failed
        if any(failed.values()):
            bench.report(f"admission N={n:<5} FAILED probes (not in the figures): {failed}")
        for what, values in busy.items():
            if what.endswith(" failed"):
                continue
            base = samples[what]
            p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
            b50, b99 = percentile(base, 0.5), percentile(base, 0.99)
            figures[what] = {
                "count": len(values),
                "p50": p50,
                "p99": p99,
                "idle_p50": b50,
                "idle_p99": b99,
                "target_p99": targets[what],
                "slowest": sorted(values)[-5:],
            }
            bench.report(
                f"admission N={n:<5} {what:11} while planning: p50 {seconds(p50)} p99 {seconds(p99)} "
                f"({len(values)} requests)   idle p50 {seconds(b50)} p99 {seconds(b99)}   ratio {ratio(p99, b99)}"
                f"   target p99 {seconds(targets[what])}: {'met' if p99 <= targets[what] else 'MISSED'}"
            )
        bench.record("admission", str(n), figures)
    except BENCH_ERRORS as error:
        bench.failed("admission", str(n), error, world)
    finally:
        await bench.close_world(world)
        await drop_webhooks(bench)


async def answering(bench: Bench, world: Population, port: int) -> None:
    """Until the operator's liveness endpoint answers 200 (its controller has started)."""
    assert world.operator is not None

    async def answers() -> bool:
        async with bench.api.session.get(f"http://127.0.0.1:{port}/healthz") as response:
            return response.status == 200

    await until(
        answers,
        timeout=bench.deadline() - now(),
        what="the liveness endpoint to answer 200",
        interval=0.1,
        ignore=(aiohttp.ClientError,),
        guard=world.operator.guard,
    )


async def webhook_calls(bench: Bench) -> dict[str, dict[float, float]]:
    """apiserver_admission_webhook_admission_duration_seconds of our webhooks: cumulative buckets by name."""
    text = await bench.api.text("/metrics")
    found: dict[str, dict[float, float]] = {}
    prefix = "apiserver_admission_webhook_admission_duration_seconds_bucket{"
    for line in text.splitlines():
        if not line.startswith(prefix) or webhook_config_name(bench) not in line:
            continue
        labels = dict(part.split("=", 1) for part in line[len(prefix) : line.rindex("}")].split(","))
        name = labels["name"].strip('"').split(".", 1)[0]
        bound = math.inf if labels["le"].strip('"') == "+Inf" else float(labels["le"].strip('"'))
        buckets = found.setdefault(name, {})
        buckets[bound] = buckets.get(bound, 0.0) + float(line.rsplit(" ", 1)[1])
    return found


def webhook_config_name(bench: Bench) -> str:
    return f"bench-{bench.run_id}.appschedule.dev"


async def start_webhook_operator(bench: Bench, world: Population, what: str, live: int) -> Process:
    """The operator with both webhooks (under a configuration of its own) and its liveness endpoint,
    once the API server calls its webhooks."""
    name = webhook_config_name(bench)
    args = ["run", "--log-format", "json", "--namespace", world.namespace, "--webhook-port", str(free_port())]
    args += ["--webhook-config-name", name, "--liveness", f"http://127.0.0.1:{live}/healthz"]
    command = kit.command(*args, python=bench.args.operator_python)
    log = bench.state / f"bench-operator-{bench.args.label}-{what}.log"
    world.operator = Process("operator", command, bench.operator_env(bench.proxy.kubeconfig), log, bench.state)
    configured = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}"
    await until(
        lambda: bench.api.call("GET", configured, allow=404),
        timeout=bench.deadline() - now(),
        what="the webhook configuration",
        interval=0.2,
        guard=world.operator.guard,
    )
    return world.operator


async def drop_webhooks(bench: Bench) -> None:
    with contextlib.suppress(BenchError, aiohttp.ClientError):
        for kind in ("mutating", "validating"):
            path = f"/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations/{webhook_config_name(bench)}"
            await bench.api.call("DELETE", path, allow=404)


async def _probe(
    bench: Bench, world: Population, samples: dict[str, list[float]], live: int, stop: asyncio.Event
) -> None:
    """A Job and the liveness probe 4 times a second, an AppSchedule twice a second, until ``stop``."""
    namespace = world.namespace
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": "probe-",
            "namespace": namespace,
            "labels": {"appschedule.dev/appschedule": asched_name(0), "appschedule.dev/task": task_name(0, 0)},
        },
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": IMAGE}]}}},
    }
    probe = appschedule(n_probe := world.size + 1)
    probe["metadata"]["name"] = asched_name(n_probe)
    url = f"http://127.0.0.1:{live}/healthz"
    tick = 0
    # the API server's own latency under the same load: a dry-run create that no webhook sees
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps?dryRun=All"
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"generateName": "probe-"},
        "data": {"a": "b"},
    }

    async def timed(what: str, call: Callable[[], Awaitable[object]]) -> None:
        started = now()
        try:
            await call()
        except (*BENCH_ERRORS, aiohttp.ClientError) as error:
            print(f"  ({what} probe failed: {error})", flush=True)
            samples.setdefault(f"{what} failed", []).append(now() - started)
            return
        samples[what].append(now() - started)

    async def keyed() -> None:  # a Job admitted without its key means the webhook failed open: not a sample
        jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
        created = await bench.api.call("POST", jobs, job, query={"dryRun": "All"})
        if "appschedule.dev/idempotency-key" not in ((created or {}).get("metadata") or {}).get("annotations", {}):
            raise BenchError("the Job was admitted without its key")

    async def liveness() -> None:
        async with bench.api.session.get(url, timeout=aiohttp.ClientTimeout(total=30)) as response:
            await response.read()
            if response.status != 200:
                raise BenchError(f"liveness answered {response.status}")

    pending: set[asyncio.Task[None]] = set()
    while not stop.is_set():
        calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("key webhook", keyed),
            ("liveness", liveness),
            ("no webhook", functools.partial(bench.api.call, "POST", configmaps, configmap)),
        ]
        if tick % 2 == 0:
            path = appschedules(namespace) + "?dryRun=All"
            calls.append(("validation", functools.partial(bench.api.call, "POST", path, probe)))
        for what, call in calls:
            task = asyncio.create_task(timed(what, call))
            pending.add(task)
            task.add_done_callback(pending.discard)
        tick += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.25)
    await asyncio.gather(*pending)


# -- fires


def webhook_call_shares(
    before: Mapping[str, Mapping[float, float]], after: Mapping[str, Mapping[float, float]]
) -> Json:
    """Per webhook, from two readings of the API server's histogram: the calls between them, the share
    within 100 ms and 500 ms, and the bucket bound the 99th percentile lies under."""
    shares: Json = {}
    for name, buckets in after.items():
        delta = {le: count - before.get(name, {}).get(le, 0.0) for le, count in buckets.items()}
        total = delta.get(math.inf, 0.0)
        if total <= 0:
            continue
        p99 = min((le for le, count in delta.items() if count >= 0.99 * total), default=math.inf)
        shares[name] = {
            "calls": int(total),
            "within_0.1s": delta.get(0.1, 0.0) / total,
            "within_0.5s": delta.get(0.5, 0.0) / total,
            "p99_at_most": p99,
        }
    return shares
