"""The command line: `python -m bench.cluster` (see the package's docstring)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from .. import cluster
from . import scenarios
from .bench import Bench
from .client import Api
from .common import (
    CACHE,
    CHURN_PER_SECOND,
    CONCURRENCY,
    CRD_NAME,
    GROUP,
    KUBECTL,
    LOCALCLUSTER,
    PLURAL,
    REPO,
    RESULTS,
    BenchError,
    Json,
    now,
    operator_env,
)
from .proxy import Proxy, proxy_main

# ---------------------------------------------------------------------------------------------------
# Setup: the cluster, the CRD, the proxy check


def cluster_env(args: argparse.Namespace) -> dict[str, str]:
    return dict(
        os.environ, APPSCHEDULE_CLUSTER_DIR=str(args.cluster_dir), APPSCHEDULE_PORT_OFFSET=str(args.port_offset)
    )


def cluster_up(args: argparse.Namespace) -> bool:
    """Start the bench cluster unless it runs; True when this run started it."""
    env = cluster_env(args)
    running = subprocess.run([sys.executable, str(LOCALCLUSTER), "status"], env=env, capture_output=True)
    if running.returncode == 0:
        print(f"reusing the bench cluster in {args.cluster_dir}", flush=True)
        return False
    subprocess.run([sys.executable, str(LOCALCLUSTER), "up"], env=env, check=True, stdout=subprocess.DEVNULL)
    print(f"started the bench cluster in {args.cluster_dir} (port offset {args.port_offset})", flush=True)
    return True


def cluster_down(args: argparse.Namespace) -> None:
    subprocess.run([sys.executable, str(LOCALCLUSTER), "down"], env=cluster_env(args), check=False)


def install_crd(kubeconfig: Path, crd: Path) -> None:
    """The AppSchedule CRD, and the AppScheduleCalendar CRD beside it when the operator measured has one (its
    calendars watch then lists an empty kind instead of retrying a missing one)."""
    kubectl = [str(KUBECTL), f"--kubeconfig={kubeconfig}"]
    calendars = crd.parent / "appschedule.dev_appschedulecalendars.yaml"
    files = [arg for path in (crd, calendars) if path.exists() for arg in ("-f", str(path))]
    subprocess.run([*kubectl, "apply", "--server-side", "--force-conflicts", *files], check=True)
    subprocess.run(
        [*kubectl, "wait", "--for=condition=Established", "--timeout=60s", f"crd/{PLURAL}.{GROUP}"], check=True
    )


async def check_proxy(api: Api, proxy: Proxy) -> Json:
    """The kubernetes client works through the proxy, and a watch event reaches an aiohttp client (kopf's
    transport) while its watch is still open, i.e. responses are streamed, not buffered."""

    def with_client() -> int:
        from kubernetes import client, config, watch

        api_client = config.new_client_from_config(str(proxy.kubeconfig))
        core = client.CoreV1Api(api_client)
        events = list(watch.Watch().stream(core.list_namespace, timeout_seconds=1))
        api_client.close()
        return len(events)

    namespaces = await asyncio.to_thread(with_client)
    name = f"bench-proxy-check-{os.getpid()}"
    url = f"http://127.0.0.1:{proxy.port}/api/v1/namespaces/default/configmaps"
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, params={"watch": "true", "timeoutSeconds": "30"}) as response,
    ):
        await asyncio.sleep(0.5)
        created = now()
        await api.call("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": name}})
        try:
            async with asyncio.timeout(10):
                async for line in response.content:
                    if name.encode() in line:
                        break
        except TimeoutError:
            raise BenchError("the proxy did not stream a watch event within 10 s") from None
        streamed = now() - created
    await api.call("DELETE", f"/api/v1/namespaces/default/configmaps/{name}")
    print(
        f"proxy check: kubernetes client watch saw {namespaces} namespaces; an aiohttp watch got an event "
        f"{streamed * 1000:.0f} ms after it happened",
        flush=True,
    )
    return {"kubernetes_client_watch_events": namespaces, "aiohttp_watch_event_ms": streamed * 1000}


def describe_operator(args: argparse.Namespace, env: Mapping[str, str]) -> Json:
    imported = subprocess.run(
        [args.operator_python, "-c", "import appschedule; print(appschedule.__file__)"],
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    source = Path(imported).resolve().parents[1]
    git = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(source), "status", "--porcelain", "--", "."], capture_output=True, text=True
    )
    return {
        "python": args.operator_python,
        "operator_path": args.operator_path,
        "imported_from": imported,
        "commit": git.stdout.strip() or None,
        "uncommitted_changes": bool(dirty.stdout.strip()),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cluster", description=(cluster.__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--label", default="run", help="names the results file: bench/results/<time>-<label>.json")
    parser.add_argument("--sizes", help="numbers of AppSchedules (default 100,1000)")
    parser.add_argument("--scenarios", default="cold,change,rollout,idle,restart,admission,fires")
    parser.add_argument("--idle-seconds", type=float, help="idle window at the largest size (default 300)")
    parser.add_argument("--edits", type=int, help="measured edits in the change scenario (default 100)")
    parser.add_argument("--rollout-size", type=int, help="AppSchedules on the Deployment (default 100)")
    parser.add_argument("--fires-sizes", help="AppSchedules of 3 every-minute tasks in fires (default 100,300)")
    parser.add_argument("--fires-minutes", type=float, help="the measured window of fires (default 5)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: N = 20 and 100, idle 30 s, 20 edits")
    parser.add_argument("--operator-python", default=sys.executable, help="the Python that runs the operator")
    parser.add_argument("--operator-path", help="put first on the operator's PYTHONPATH (a checkout's operator/)")
    parser.add_argument("--crd", type=Path, help="default: crds/ beside --operator-path, else this repository's")
    parser.add_argument("--timeout", type=float, default=1800, help="deadline of every wait, seconds")
    parser.add_argument("--cluster-dir", type=Path, default=CACHE / "bench-cluster")
    parser.add_argument("--port-offset", type=int, default=1000)
    parser.add_argument("--keep-cluster", action="store_true", help="leave a cluster this run started running")
    args = parser.parse_args(argv)
    quick = args.quick
    args.sizes = [int(s) for s in (args.sizes or ("20,100" if quick else "100,1000")).split(",")]
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = set(args.scenarios) - {"cold", "change", "rollout", "idle", "restart", "admission", "fires", "shares"}
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    args.idle_seconds = args.idle_seconds or (30.0 if quick else 300.0)
    args.edits = args.edits or (20 if quick else 100)
    args.fires_sizes = [int(s) for s in (args.fires_sizes or ("20" if quick else "100,300")).split(",")]
    args.fires_minutes = args.fires_minutes or (2.0 if quick else 5.0)
    args.rollout_size = args.rollout_size or (20 if quick else 100)
    if args.crd is None:
        beside = Path(args.operator_path).resolve().parent / "crds" / CRD_NAME if args.operator_path else None
        args.crd = beside if beside is not None and beside.exists() else REPO / "crds" / CRD_NAME
    return args


async def bench_main(args: argparse.Namespace, state: Path) -> Path:
    admin = state / "kubeconfig"
    install_crd(admin, args.crd)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    RESULTS.mkdir(parents=True, exist_ok=True)
    results_path = RESULTS / f"{stamp}-{args.label}.json"
    api = await Api.connect(admin)
    proxy = Proxy("operator", admin, state)
    baseline_proxy = Proxy("baseline", admin, state)
    bench: Bench | None = None
    try:
        checked = await check_proxy(api, proxy)
        bench = Bench(
            args=args,
            api=api,
            proxy=proxy,
            baseline_proxy=baseline_proxy,
            state=state,
            run_id=f"{os.getpid() % 100000}",
            results={
                "label": args.label,
                "started": datetime.now(UTC).isoformat(timespec="seconds"),
                "operator": describe_operator(args, operator_env(args)),
                "crd": str(args.crd),
                "config": {
                    "sizes": args.sizes,
                    "scenarios": args.scenarios,
                    "idle_seconds": args.idle_seconds,
                    "edits": args.edits,
                    "rollout_size": args.rollout_size,
                    "fires_sizes": args.fires_sizes,
                    "fires_minutes": args.fires_minutes,
                    "churn_per_second": CHURN_PER_SECOND,
                    "concurrency_of_floors": CONCURRENCY,
                    "timeout": args.timeout,
                },
                "machine": {"cpus": os.cpu_count(), "loadavg_at_start": list(os.getloadavg())},
                "proxy_check": checked,
            },
            results_path=results_path,
        )
        print(f"operator: {bench.results['operator']['imported_from']}   results: {results_path}", flush=True)
        bench.results["baselines"] = {"import_only": await scenarios.idle.import_only(bench)}
        for n in sorted(args.sizes):
            await bench.size(n, largest=n == max(args.sizes))
        if "rollout" in args.scenarios:
            await scenarios.rollout.rollout(bench, args.rollout_size)
        if "admission" in args.scenarios:
            await scenarios.admission.admission(bench, max(args.sizes))
        if "fires" in args.scenarios:
            for n in args.fires_sizes:
                await scenarios.fires.fires(bench, n, args.fires_minutes)
        if "shares" in args.scenarios:
            for n in args.fires_sizes:
                await scenarios.shares.shares(bench, n, args.fires_minutes)
        bench.results["machine"]["loadavg_at_end"] = list(os.getloadavg())
        bench.results["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        bench.save()
    finally:
        if bench is not None:
            for namespace in list(bench.namespaces):  # what a failure left behind
                with contextlib.suppress(BenchError, aiohttp.ClientError):
                    await api.call("DELETE", f"/api/v1/namespaces/{namespace}", allow=404)
        await proxy.close()
        await baseline_proxy.close()
        await api.close()
    return results_path


def main(argv: list[str]) -> int:
    if argv[:1] == ["proxy"]:
        return proxy_main(argv[1:])
    args = parse_args(argv)
    started = cluster_up(args)
    try:
        results = asyncio.run(bench_main(args, args.cluster_dir))
        print(f"results in {results}")
    finally:
        if started and not args.keep_cluster:
            cluster_down(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
