"""The benchmark's state and its run at one size; the scenarios are in scenarios/."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.kit import operator as kit

from . import scenarios
from .client import Api, appschedules, bulk, cronjobs, deployments
from .common import (
    BENCH_ERRORS,
    MANAGED_BY,
    TASKS,
    Json,
    now,
    operator_env,
)
from .informer import Informer, Pulse
from .objects import (
    BenchCronJob,
    appschedule,
    cronjob_view,
    deployment,
    is_ready,
    minimal_cronjob,
    name_key,
    schedule,
    task_key,
)
from .processes import Process
from .proxy import Proxy

# ---------------------------------------------------------------------------------------------------
# The benchmark


@dataclass
class Population:
    """One namespace of N AppSchedules on one Deployment, watched by the benchmark."""

    namespace: str
    size: int
    cronjobs: Informer[BenchCronJob]
    appschedules: Informer[bool]
    operator: Process | None = None

    def converged(self) -> bool:
        return len(self.cronjobs.objects) >= TASKS * self.size and len(self.appschedules.ok_keys) >= self.size


@dataclass
class Bench:
    args: argparse.Namespace
    api: Api
    proxy: Proxy
    baseline_proxy: Proxy
    state: Path
    run_id: str
    results: Json
    results_path: Path
    pulse: Pulse = field(default_factory=Pulse)
    namespaces: set[str] = field(default_factory=set)
    lines: list[str] = field(default_factory=list)

    # -- bookkeeping

    def report(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)
        self.results["lines"] = self.lines
        self.save()

    def save(self) -> None:
        self.results_path.write_text(json.dumps(self.results, indent=2) + "\n")

    def record(self, scenario: str, key: str, value: Json) -> None:
        value.setdefault("loadavg_at_end", list(os.getloadavg()))
        self.results.setdefault("scenarios", {}).setdefault(scenario, {})[key] = value
        self.save()

    def deadline(self) -> float:
        return now() + float(self.args.timeout)

    async def namespace(self, what: str) -> str:
        name = f"bench-{self.run_id}-{what}"
        await self.api.create_namespace(name)
        self.namespaces.add(name)
        return name

    async def drop(self, namespace: str) -> float:
        took = await self.api.delete_namespace(namespace, self.deadline())
        self.namespaces.discard(namespace)
        return took

    def operator_env(self, kubeconfig: Path) -> dict[str, str]:
        return dict(operator_env(self.args), KUBECONFIG=str(kubeconfig), PYTHONUNBUFFERED="1")

    def start_operator(self, world: Population) -> Process:
        command = kit.command(
            "run", "--log-format", "json", "--namespace", world.namespace, python=self.args.operator_python
        )
        log = self.state / f"bench-operator-{self.args.label}.log"
        world.operator = Process("operator", command, self.operator_env(self.proxy.kubeconfig), log, self.state)
        return world.operator

    def failed(self, scenario: str, key: str, error: BaseException, world: Population | None) -> None:
        tail = world.operator.tail() if world is not None and world.operator is not None else ""
        self.report(f"{scenario:8} {key}: FAILED: {error}")
        if tail:
            print(f"operator log ({world.operator.log if world and world.operator else ''}):\n{tail}", flush=True)
        self.record(scenario, key, {"error": str(error), "operator_log_tail": tail})

    # -- floors and worlds

    async def create_cronjobs(self, namespace: str, count: int) -> tuple[float, float]:
        calls = [
            functools.partial(self.api.call, "POST", cronjobs(namespace), minimal_cronjob(f"cj-{k}", schedule(k, 0)))
            for k in range(count)
        ]
        return await bulk(calls)

    async def world(self, n: int, what: str, *, every_minute: bool = False) -> Population:
        namespace = await self.namespace(what)
        await self.api.call("POST", deployments(namespace), deployment())
        bodies = [appschedule(i, every_minute=every_minute) for i in range(n)]
        await bulk(functools.partial(self.api.call, "POST", appschedules(namespace), body) for body in bodies)
        cj: Informer[BenchCronJob] = Informer(
            self.api, cronjobs(namespace), self.pulse, key=task_key, project=cronjob_view, selector=MANAGED_BY
        )
        ready: Informer[bool] = Informer(self.api, appschedules(namespace), self.pulse, key=name_key, project=is_ready)
        ready.ok = bool
        await cj.start()
        await ready.start()
        return Population(namespace, n, cj, ready)

    async def close_world(self, world: Population) -> None:
        if world.operator is not None:
            world.operator.stop()
            # Jobs the ledger still held (a run being recorded when it stopped) would keep the namespace from
            # going: let them go as an uninstall does (README, "Install with Helm")
            command = kit.command("release-jobs", "-n", world.namespace, python=self.args.operator_python)
            env = dict(operator_env(self.args), KUBECONFIG=str(self.state / "kubeconfig"))
            await asyncio.to_thread(subprocess.run, command, env=env, check=False, capture_output=True)
        await world.cronjobs.stop()
        await world.appschedules.stop()
        await self.drop(world.namespace)

    async def converge(self, world: Population) -> float:
        assert world.operator is not None
        return await self.pulse.until(
            world.converged,
            self.deadline(),
            f"{world.size * TASKS} CronJobs and {world.size} Ready AppSchedules in {world.namespace}",
            world.operator.guard,
        )

    # -- cold

    async def size(self, n: int, *, largest: bool) -> None:
        asked = set(self.args.scenarios)
        here = {"cold", "idle"} & asked
        if largest:
            here |= {"restart", "change"} & asked
        if not here:
            return
        floor = await scenarios.cold.floor_cold(self, n) if "cold" in here else None
        change_floor = (
            await scenarios.change.floor_change(self, min(int(self.args.edits), n // 2)) if "change" in here else None
        )
        world = await self.world(n, f"n{n}")
        idle: Json | None = None
        restart: Json | None = None
        step = "cold"
        try:
            if floor is not None:
                await scenarios.cold.cold(self, world, floor)
            else:
                self.start_operator(world)
                await self.converge(world)
            if "idle" in here:
                step = "idle"
                duration = float(self.args.idle_seconds) if largest else min(float(self.args.idle_seconds), 120.0)
                idle = await scenarios.idle.idle(self, world, duration)
                self.record("idle", str(n), idle)
                print(f"  (idle N={n} measured; its line follows with the bare kopf baseline)", flush=True)
            if "restart" in here:
                step = "restart"
                restart = await scenarios.restart.restart(self, world, idle["other_per_second"] if idle else None)
                self.record("restart", str(n), restart)
                print(f"  (restart N={n} measured; its line follows with the bare kopf baseline)", flush=True)
            if "change" in here and change_floor is not None:
                step = "change"
                await scenarios.change.change(self, world, change_floor)
        except BENCH_ERRORS as error:
            self.failed(step, str(n), error, world)
        if world.operator is not None:
            world.operator.stop()
        bare: Json | None = None
        if idle is not None or restart is not None:
            try:
                bare = await scenarios.idle.bare_kopf(self, world)
                self.results.setdefault("baselines", {})[f"bare_kopf_{n}"] = bare
            except BENCH_ERRORS as error:
                print(f"  (bare kopf baseline failed: {error})", flush=True)
        if idle is not None:
            idle["bare_kopf"] = bare
            self.record("idle", str(n), idle)
            self.report(scenarios.idle.idle_line(self, n, idle, bare))
        if restart is not None:
            restart["bare_kopf"] = bare
            self.record("restart", str(n), restart)
            self.report(scenarios.restart.restart_line(self, n, restart, bare))
        await self.close_world(world)
