"""The operator on a real control plane: its cost and latency, each as a ratio against a floor in the same run.

    make bench-cluster                                   # python bench/bench_cluster.py; see BENCHMARKS.md
    python bench/bench_cluster.py --quick                # a smoke run: N = 20 and 100, idle 30 s
    python bench/bench_cluster.py --operator-path /tmp/before/operator --label before

Where it runs: a local cluster of its own (``hack/cluster/localcluster.py`` with APPSCHEDULE_PORT_OFFSET=1000
and APPSCHEDULE_CLUSTER_DIR=~/.cache/appschedule-operator/bench-cluster), so it never meets the integration
tests' cluster nor an operator watching that one. It starts that cluster unless it runs, and stops it at the
end when it started it (``--keep-cluster`` keeps it).

What it measures: the operator runs as a subprocess (``<python> -m appschedule run --log-format json
--namespace NS``) whose kubeconfig names a counting proxy: plain http on loopback, forwarding every request to
the API server over TLS with the admin certificate, streaming responses chunk by chunk (watches), counting
requests by method and verb and time-stamping each one. Everything the benchmark itself does (creating
objects, the floors, watching for completion) goes straight to the API server, is not counted, and sees
completion on its own list+watch, never by sleeping.

Scenarios (``--scenarios``), each printing its figure and the ratio against a baseline measured in the run:

cold     N AppSchedules (3 tasks each, one Deployment) exist before the operator starts; from its first write
         until every CronJob exists and every AppSchedule is Ready=True. Floor: the same 3N CronJobs created
         directly, 4 requests at a time.
change   at the largest N, under a churn of 10 task-schedule edits a second to other AppSchedules: from the
         patch of a task's schedule until its CronJob shows it (p50, p99). Floor: the same done to CronJobs
         directly (patch to watch event), under the same churn.
rollout  100 AppSchedules on one Deployment: from the Deployment's image change until all 300 CronJobs run
         the new image. Floor: patching 300 CronJobs directly, 4 at a time.
idle     after convergence, at every N: the operator's requests a minute (watch and other), writes, CPU
         seconds and RSS. Against the targets (6 requests a minute, 0 writes, 150 MiB at N = 1000) and against
         a bare kopf operator watching the same objects with no-op handlers.
admission at the largest N (default 1,000), the operator started cold with both webhooks and its liveness probe:
         while it plans every AppSchedule, a Job created with a server-side dry-run (the key webhook) and the
         liveness probe 4 times a second, and an AppSchedule applied with a server-side dry-run (validation and
         its SubjectAccessReview) twice a second; p50 and p99 of each. Targets: p99 at most 100 ms for the key
         webhook and liveness, 500 ms for validation. Baseline: the same requests with the operator idle after.
restart  at the largest N: SIGKILL, a probe edit, start again; the time until the probe is applied and the
         request rate is back at its idle rate, and the writes other than the probe's (target 0). Against the
         time a bare kopf operator takes to have its watches up on the same objects.

Schedules are ``"{j} {i % 24} {D} * *"`` with D a day of the month two weeks away: no CronJob fires while the
benchmark runs, so "idle" measures the operator, not Jobs starting.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import contextlib
import functools
import json
import math
import os
import random
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from yarl import URL

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script: the test kit is tests.kit
from tests.kit import operator as kit  # noqa: E402
from tests.kit.wait import Timeout, until, wait_for  # noqa: E402

from appschedule.core import naming  # noqa: E402

CACHE = Path(os.environ.get("APPSCHEDULE_CACHE", Path.home() / ".cache" / "appschedule-operator"))
LOCALCLUSTER = REPO / "hack" / "cluster" / "localcluster.py"
KUBECTL = REPO / ".tools" / "bin" / "kubectl"
RESULTS = REPO / "bench" / "results"
CRD_NAME = "appschedule.dev_appschedules.yaml"

GROUP, VERSION, PLURAL = naming.GROUP, naming.VERSION, naming.PLURAL
MANAGED_BY = f"{naming.MANAGED_BY}={naming.MANAGER}"
LABEL_APPSCHEDULE, LABEL_TASK = naming.LABEL_APPSCHEDULE, naming.LABEL_TASK
IMAGE = "registry.example.com/bench/web:1"
NEW_IMAGE = "registry.example.com/bench/web:2"
TASKS = 3
CONCURRENCY = 4  # the floors' client: 4 requests at a time
CHURN_PER_SECOND = 10.0
EDIT_SPACING = 0.5  # seconds between two measured edits
SETTLE = 10.0  # seconds between convergence and the idle window
QUIET_WINDOW = 10.0  # restart: the request rate is "at idle" over a window this long
TARGET_REQUESTS_PER_MINUTE = 6.0
TARGET_RSS_MIB = 150.0
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FLOOR_RESOURCES = frozenset({"jobs", "cronjobs", "pods"})  # what a run costs the Job and CronJob controllers
# a day of the month at least 12 days away: no task fires during the run
DAY = (datetime.now(UTC).day + 13) % 28 + 1

Json = dict[str, Any]
P = TypeVar("P")


class BenchError(Exception):
    """A scenario cannot go on: a deadline passed, a request failed, the operator exited."""


BENCH_ERRORS = (BenchError, Timeout)  # what ends a scenario (Timeout: the kit's wait reached its deadline)


def now() -> float:
    return time.monotonic()  # CLOCK_MONOTONIC: the same clock in the proxy process


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def ratio(value: float, base: float) -> str:
    return f"{value / base:.1f}x" if base > 0 else "n/a"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------------------------------------------
# Credentials and the benchmark's own client (straight to the API server, not counted)


@dataclass(frozen=True)
class Credentials:
    server: str
    ca: str
    cert: bytes
    key: bytes

    @classmethod
    def from_kubeconfig(cls, path: Path) -> Credentials:
        config = json.loads(path.read_text())  # localcluster.py writes its kubeconfigs as JSON
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        return cls(
            server=str(cluster["server"]),
            ca=base64.b64decode(cluster["certificate-authority-data"]).decode(),
            cert=base64.b64decode(user["client-certificate-data"]),
            key=base64.b64decode(user["client-key-data"]),
        )

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca)
        with tempfile.TemporaryDirectory() as tmp:  # load_cert_chain wants a file; the directory is private
            pem = Path(tmp) / "client.pem"
            pem.write_bytes(self.cert + b"\n" + self.key)
            context.load_cert_chain(str(pem))
        return context


class Api:
    """The benchmark's client: JSON over aiohttp, with the admin certificate."""

    def __init__(self, credentials: Credentials) -> None:
        self.server = credentials.server
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=credentials.ssl_context(), limit=64),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )

    async def close(self) -> None:
        await self.session.close()

    async def call(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", allow: int = 0
    ) -> Any:
        """The response's JSON; an error status raises, except ``allow`` (e.g. 404), which returns None."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if body is not None else {}
        async with self.session.request(
            method, self.server + path, data=data, headers=headers, timeout=aiohttp.ClientTimeout(total=120)
        ) as response:
            text = await response.read()
            if response.status == allow:
                return None
            if response.status >= 300:
                raise BenchError(f"{method} {path}: {response.status} {text[:300].decode(errors='replace')}")
            return json.loads(text) if text else None

    async def patch(self, path: str, operations: list[Json]) -> None:
        await self.call("PATCH", path, operations, content_type="application/json-patch+json")

    async def create_namespace(self, name: str) -> None:
        await self.call("POST", "/api/v1/namespaces", {"metadata": {"name": name, "labels": {"bench": "cluster"}}})

    async def delete_namespace(self, name: str, deadline: float) -> float:
        """Delete it and wait until it is gone; the seconds that took."""
        started = now()
        await self.call("DELETE", f"/api/v1/namespaces/{name}", allow=404)
        while await self.call("GET", f"/api/v1/namespaces/{name}", allow=404) is not None:
            if now() > deadline:
                raise BenchError(f"namespace {name} still there after {now() - started:.0f}s")
            await asyncio.sleep(0.5)
        return now() - started


def cronjobs(namespace: str, name: str = "") -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/cronjobs" + (f"/{name}" if name else "")


def appschedules(namespace: str, name: str = "") -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}" + (f"/{name}" if name else "")


def deployments(namespace: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments" + (f"/{name}" if name else "")


async def bulk(calls: Iterable[Callable[[], Awaitable[object]]], concurrency: int = CONCURRENCY) -> tuple[float, float]:
    """Run the calls ``concurrency`` at a time: (time of the first request, time of the last response)."""
    pending = iter(calls)
    first: list[float] = []
    last = 0.0

    async def worker() -> None:
        nonlocal last
        for call in pending:  # one iterator shared by the workers: each call runs once
            if not first:
                first.append(now())
            await call()
            last = max(last, now())

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return (first[0] if first else now()), last


# ---------------------------------------------------------------------------------------------------
# The objects


def asched_name(i: int) -> str:
    return f"as-{i:04d}"  # zero-padded: the API lists in name order, so as-0999 comes last


def task_name(i: int, j: int) -> str:
    return f"t{i}-{j}"


def schedule(i: int, j: int, minute: int | None = None) -> str:
    return f"{j if minute is None else minute} {i % 24} {DAY} * *"


def deployment(image: str = IMAGE) -> Json:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": image, "command": ["serve"]}]},
            },
        },
    }


def appschedule(i: int, *, every_minute: bool = False) -> Json:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AppSchedule",
        "metadata": {"name": asched_name(i)},
        "spec": {
            "deploymentRef": {"name": "web"},
            "tasks": [
                {
                    "name": task_name(i, j),
                    "schedule": "* * * * *" if every_minute else schedule(i, j),
                    "command": ["task", str(j)],
                }
                for j in range(TASKS)
            ],
        },
    }


@dataclass(frozen=True)
class BenchJob:
    finished: bool


def job_view(obj: Json) -> BenchJob:
    conditions = (obj.get("status") or {}).get("conditions") or []
    done = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)
    return BenchJob(done)


def finished_jobs(obj: Json) -> frozenset[str]:
    """The Jobs an AppSchedule's status lists as finished runs (each task's recent runs)."""
    tasks = (obj.get("status") or {}).get("tasks") or []
    return frozenset(
        str(run["job"])
        for task in tasks
        for run in (task.get("recent") or [])
        if run.get("job") and run.get("state") in ("Succeeded", "Failed")
    )


def minimal_cronjob(name: str, cron: str) -> Json:
    """What a CronJob needs to be valid, for the floors (the operator's carry more)."""
    container = {"name": "app", "image": IMAGE, "command": ["task"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": cron,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}},
        },
    }


def schedule_patch(task: int, cron: str) -> list[Json]:
    return [{"op": "replace", "path": f"/spec/tasks/{task}/schedule", "value": cron}]


CRONJOB_SCHEDULE = "/spec/schedule"
CRONJOB_IMAGE = "/spec/jobTemplate/spec/template/spec/containers/0/image"


@dataclass(frozen=True)
class BenchCronJob:
    name: str
    schedule: str
    image: str


def cronjob_view(obj: Json) -> BenchCronJob:
    spec = obj.get("spec") or {}
    pod = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return BenchCronJob(str(obj["metadata"]["name"]), str(spec.get("schedule")), str(containers[0].get("image")))


def task_key(obj: Json) -> str:
    """An operator's CronJob by (AppSchedule, task), from its labels; any other by name."""
    labels = obj["metadata"].get("labels") or {}
    if LABEL_APPSCHEDULE in labels:
        return f"{labels[LABEL_APPSCHEDULE]}/{labels.get(LABEL_TASK)}"
    return str(obj["metadata"]["name"])


def name_key(obj: Json) -> str:
    return str(obj["metadata"]["name"])


def is_ready(obj: Json) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


# ---------------------------------------------------------------------------------------------------
# Watching for completion


class Pulse:
    """Fired on every batch of watch events; waiters re-check a cheap predicate."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def until(
        self, predicate: Callable[[], bool], deadline: float, what: str, guard: Callable[[], None] | None = None
    ) -> float:
        """When ``predicate`` became true (monotonic seconds); BenchError at the deadline."""
        while not predicate():
            if guard is not None:
                guard()
            remaining = deadline - now()
            if remaining <= 0:
                raise BenchError(f"timed out waiting for {what}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), min(remaining, 1.0))
        return now()


class Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


class Informer(Generic[P]):
    """List, then watch, one collection; ``objects`` maps a key to a projection of each object.

    ``ok`` marks the projections a scenario waits for; ``ok_keys`` is kept up to date with every event, so
    "all 3000 CronJobs on the new image" is a comparison of two numbers, not a scan per event."""

    def __init__(
        self,
        api: Api,
        path: str,
        pulse: Pulse,
        *,
        key: Callable[[Json], str],
        project: Callable[[Json], P],
        selector: str = "",
    ) -> None:
        self.api, self.path, self.pulse, self.selector = api, path, pulse, selector
        self.key, self.project = key, project
        self.objects: dict[str, P] = {}
        self.ok: Callable[[P], bool] = lambda _: False
        self.ok_keys: set[str] = set()
        self.listeners: list[Callable[[str, P | None], None]] = []
        self.synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Informer[P]:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.synced.wait(), 120)
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def set_ok(self, ok: Callable[[P], bool]) -> None:
        self.ok = ok
        self.ok_keys = {k for k, v in self.objects.items() if ok(v)}
        self.pulse.fire()

    def _put(self, key: str, value: P | None) -> None:
        if value is None:
            self.objects.pop(key, None)
            self.ok_keys.discard(key)
        else:
            self.objects[key] = value
            if self.ok(value):
                self.ok_keys.add(key)
            else:
                self.ok_keys.discard(key)
        for listener in self.listeners:
            listener(key, value)

    async def _run(self) -> None:
        while True:
            try:
                version = await self._list()
                while True:
                    version = await self._watch(version)
            except Gone:
                continue
            except (aiohttp.ClientError, TimeoutError, BenchError, ValueError) as error:
                print(f"  (watch of {self.path} failed: {error!r}; listing again)", flush=True)
                await asyncio.sleep(1)

    async def _list(self) -> str:
        seen: dict[str, P] = {}
        version, token = "", ""
        while True:
            query = {"limit": "500", "labelSelector": self.selector} | ({"continue": token} if token else {})
            page = await self.api.call("GET", f"{self.path}?{urlencode(query)}")
            version = version or str(page["metadata"]["resourceVersion"])
            for item in page["items"]:
                seen[self.key(item)] = self.project(item)
            token = str(page["metadata"].get("continue") or "")
            if not token:
                break
        for gone in set(self.objects) - set(seen):
            self._put(gone, None)
        for key, value in seen.items():
            self._put(key, value)
        self.synced.set()
        self.pulse.fire()
        return version

    async def _watch(self, version: str) -> str:
        query = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true", "timeoutSeconds": "240"}
        if self.selector:
            query["labelSelector"] = self.selector
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=300)
        async with self.api.session.get(self.api.server + self.path, params=query, timeout=timeout) as response:
            if response.status == 410:
                raise Gone
            if response.status != 200:
                raise BenchError(f"watch {self.path}: {response.status}")
            buffer = b""
            async for chunk in response.content.iter_any():
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        if obj.get("code") == 410:
                            raise Gone
                        raise BenchError(f"watch {self.path}: {obj.get('message')}")
                    version = str(obj["metadata"]["resourceVersion"])
                    if event["type"] != "BOOKMARK":
                        self._put(self.key(obj), None if event["type"] == "DELETED" else self.project(obj))
                if lines:
                    self.pulse.fire()
        return version


# ---------------------------------------------------------------------------------------------------
# The counting proxy (runs in its own process: ``bench_cluster.py proxy``)

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "authorization",
    }
)


def request_kind(method: str, path: str, query: Mapping[str, str]) -> tuple[str, str]:
    """(verb, resource) of a request as the API server's authorizer names them, e.g. ("watch", "cronjobs")."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        return ("get" if method == "GET" else method.lower()), "(non-resource)"
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    if not rest:
        return ("get" if method == "GET" else method.lower()), "(discovery)"
    resource = rest[0] + (f"/{rest[2]}" if len(rest) >= 3 else "")
    named = len(rest) >= 2
    if method == "GET":
        watch = query.get("watch", "").lower() in ("true", "1", "t")
        return ("watch" if watch else "get" if named else "list"), resource
    verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete" if named else "deletecollection"}
    return verbs.get(method, method.lower()), resource


class CountingProxy:
    """Forwards everything to the API server, streaming; keeps (time, method, verb, resource, status, path)."""

    def __init__(self, credentials: Credentials) -> None:
        self.upstream = credentials.server
        self.ssl = credentials.ssl_context()
        self.records: list[list[Any]] = []
        self.session: aiohttp.ClientSession | None = None

    async def serve(self, port: int) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.ssl, limit=0),
            auto_decompress=False,  # bytes pass through as they are; Content-Encoding goes with them
            skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),  # only what the client sent
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/_bench/stats", self.stats)
        app.router.add_route("*", "/{tail:.*}", self.forward)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)  # a client gone ends its watch
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        print(f"proxy on http://127.0.0.1:{port} -> {self.upstream}", flush=True)
        await asyncio.Event().wait()

    async def stats(self, request: web.Request) -> web.Response:
        since = float(request.query.get("since", "0"))
        records = self.records[bisect.bisect_left(self.records, since, key=lambda r: float(r[0])) :]
        counts = Counter(f"{r[1]} {r[2]}" for r in records)
        return web.json_response({"now": now(), "counts": counts, "records": records})

    async def forward(self, request: web.Request) -> web.StreamResponse:
        assert self.session is not None
        verb, resource = request_kind(request.method, request.path, request.query)
        record: list[Any] = [now(), request.method, verb, resource, 0, request.path]
        self.records.append(record)
        body = await request.read()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        url = URL(self.upstream + request.raw_path, encoded=True)
        response: web.StreamResponse | None = None
        try:
            async with self.session.request(request.method, url, headers=headers, data=body or None) as upstream:
                record[4] = upstream.status
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for k, v in upstream.headers.items():
                    if k.lower() not in HOP_BY_HOP:
                        response.headers.add(k, v)
                if upstream.headers.get("Content-Length"):
                    response.content_length = int(upstream.headers["Content-Length"])
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():  # a watch event goes on as soon as it comes
                    await response.write(chunk)
                await response.write_eof()
                return response
        except (aiohttp.ClientError, ConnectionError) as error:
            if response is not None:  # the upstream broke mid-stream: the client sees its stream end
                return response
            record[4] = 502
            return web.Response(status=502, text=f"bench proxy: {error!r}")


def proxy_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench_cluster.py proxy")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(CountingProxy(Credentials.from_kubeconfig(args.kubeconfig)).serve(args.port))
    return 0


@dataclass(frozen=True)
class Request:
    t: float
    method: str
    verb: str
    resource: str
    status: int
    path: str

    @property
    def write(self) -> bool:
        return self.method in WRITES

    @property
    def watch(self) -> bool:
        return self.verb == "watch"


def summary(requests: Sequence[Request], minutes: float | None = None) -> Json:
    """Counts by method and verb (and resource), and per minute when ``minutes`` is given."""
    watch = sum(r.watch for r in requests)
    writes = sum(r.write for r in requests)
    out: Json = {
        "requests": len(requests),
        "watch": watch,
        "other": len(requests) - watch,
        "writes": writes,
        "by_verb": dict(Counter(f"{r.method} {r.verb}" for r in requests).most_common()),
        "by_resource": dict(Counter(f"{r.method} {r.verb} {r.resource}" for r in requests).most_common()),
        "errors": dict(Counter(f"{r.status} {r.method} {r.verb} {r.resource}" for r in requests if r.status >= 400)),
    }
    if minutes:
        out["per_minute"] = {k: out[k] / minutes for k in ("requests", "watch", "other", "writes")}
    return out


class Proxy:
    """A counting proxy process and the kubeconfig that names it."""

    def __init__(self, name: str, admin_kubeconfig: Path, state: Path) -> None:
        self.port = free_port()
        self.log = state / f"bench-proxy-{name}.log"
        self.kubeconfig = state / f"bench-proxy-{name}.kubeconfig"
        self.kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "bench-proxy", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
                    "users": [{"name": "bench", "user": {}}],
                    "contexts": [{"name": "bench-proxy", "context": {"cluster": "bench-proxy", "user": "bench"}}],
                    "current-context": "bench-proxy",
                },
                indent=2,
            )
        )
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, __file__, "proxy", "--kubeconfig", str(admin_kubeconfig), "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

        def guard() -> None:
            if self.process.poll() is not None:
                raise BenchError(f"the proxy exited with {self.process.returncode}: see {self.log}")

        wait_for(
            lambda: port_open(self.port),
            timeout=30,
            what=f"the proxy to listen (its log: {self.log})",
            interval=0.05,
            guard=guard,
        )
        self.session = aiohttp.ClientSession()

    async def requests(self, since: float, until: float | None = None) -> list[Request]:
        async with self.session.get(f"http://127.0.0.1:{self.port}/_bench/stats", params={"since": str(since)}) as r:
            data = await r.json()
        return [Request(*record) for record in data["records"] if until is None or record[0] <= until]

    async def close(self) -> None:
        await self.session.close()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ---------------------------------------------------------------------------------------------------
# Processes under test


def _proc_stat(pid: int) -> list[str]:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()


def _proc_status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class Process(kit.Process):
    """A process under test (the operator or a baseline; the kit's launcher), started at once, with what it
    costs: CPU and memory of it and its children."""

    def __init__(self, name: str, command: list[str], env: Mapping[str, str], log: Path, cwd: Path) -> None:
        super().__init__(name, command, log=log, env=env, cwd=cwd)
        self.start()

    def guard(self) -> None:
        try:
            super().guard()
        except kit.Exited as exited:
            raise BenchError(str(exited).splitlines()[0]) from None

    def tree(self) -> list[int]:
        """The process and its live children (the operator's admission process): every figure counts them
        all; RSS is summed, so pages a fork shares are counted twice (an upper bound)."""
        pids = [self.pid]
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                pids += [int(child) for child in (task / "children").read_text().split()]
        return pids

    def _sum(self, read: Callable[[int], float]) -> float:
        total = 0.0
        for pid in self.tree():
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += read(pid)
        return total

    def cpu_seconds(self) -> float:
        def cpu(pid: int) -> float:
            fields = _proc_stat(pid)
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, every thread

        return self._sum(cpu)

    def rss_kib(self) -> int:
        return int(self._sum(lambda pid: _proc_status_kib(pid, "VmRSS")))

    def peak_kib(self) -> int:
        return int(self._sum(lambda pid: _proc_status_kib(pid, "VmHWM")))


BARE_KOPF = """
import asyncio, sys
import kopf, kubernetes  # what the operator imports; kopf logs in through the kubernetes client's kubeconfig

@kopf.on.startup()
async def configure(settings, **_):
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330

@kopf.on.event("appschedule.dev", "v1alpha1", "appschedules")
async def appschedule(**_): pass

@kopf.on.event("apps", "v1", "deployments")
async def deployment(**_): pass

@kopf.on.event("batch", "v1", "cronjobs", labels={"app.kubernetes.io/managed-by": "appschedule-operator"})
async def cronjob(**_): pass

asyncio.run(kopf.operator(standalone=True, clusterwide=False, namespaces=[sys.argv[1]]))
"""

IMPORT_ONLY = "import time, kopf, kubernetes; print('imported', flush=True); time.sleep(600)"


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

    async def floor_cold(self, n: int) -> float:
        namespace = await self.namespace(f"floor-cold-{n}")
        first, last = await self.create_cronjobs(namespace, TASKS * n)
        await self.drop(namespace)
        return last - first

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

    async def cold(self, world: Population, floor: float) -> None:
        n = world.size
        operator = self.start_operator(world)
        done = await self.converge(world)
        requests = await self.proxy.requests(operator.started, done)
        writes = [r.t for r in requests if r.write]
        first_write = min(writes) if writes else done
        took = done - first_write
        self.record(
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
        self.report(
            f"cold     N={n:<5} {seconds(took):>9} from the first write to {TASKS * n} CronJobs and {n} Ready "
            f"({seconds(done - operator.started)} from start, {len(requests)} requests, {len(writes)} writes)"
            f"   floor {seconds(floor)} ({TASKS * n} CronJobs, {CONCURRENCY} at a time)   ratio {ratio(took, floor)}"
        )

    # -- idle

    async def idle(self, world: Population, duration: float) -> Json:
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
        requests = await self.proxy.requests(start, end)
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
            "rss_peak_in_window_kib": max(peak, rss),
            "rss_high_water_kib": operator.peak_kib(),
        }

    def idle_line(self, n: int, idle: Json, bare: Json | None) -> str:
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
        if n >= 1000:
            line += f"   RSS target {TARGET_RSS_MIB:.0f} MiB: ratio {ratio(rss_mib, TARGET_RSS_MIB)}"
        return line

    # -- baselines for idle and restart

    async def bare_kopf(self, world: Population) -> Json:
        """A kopf operator with no-op handlers on the same three resources: when its watches are up, its RSS."""
        command = [self.args.operator_python, "-c", BARE_KOPF, world.namespace]
        log = self.state / "bench-bare-kopf.log"
        env = dict(os.environ, KUBECONFIG=str(self.baseline_proxy.kubeconfig))
        bare = Process("bare-kopf", command, env, log, self.state)
        try:
            wanted = {"appschedules", "deployments", "cronjobs"}
            deadline = self.deadline()
            while True:
                bare.guard()
                requests = await self.baseline_proxy.requests(bare.started)
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
            return {"watches_ready_seconds": ready, "rss_kib": bare.rss_kib(), "cpu_seconds": bare.cpu_seconds()}
        finally:
            bare.stop()

    async def import_only(self) -> Json:
        """RSS of the same Python having imported kopf and kubernetes, doing nothing."""
        process = subprocess.Popen(
            [self.args.operator_python, "-c", IMPORT_ONLY],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        try:
            assert process.stdout is not None
            await asyncio.to_thread(process.stdout.readline)
            return {"rss_kib": _proc_status_kib(process.pid, "VmRSS")}
        finally:
            process.kill()
            process.wait()

    # -- change

    async def edits(
        self,
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
                await self.api.patch(path, patch)
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
                await self.api.patch(path, patch)
            with contextlib.suppress(BenchError):
                await self.pulse.until(lambda: len(latency) == len(measured), self.deadline(), "edits", guard)
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

    async def floor_change(self, edits: int) -> Json:
        namespace = await self.namespace("floor-change")
        count = edits + 100
        await self.create_cronjobs(namespace, count)
        informer: Informer[BenchCronJob] = Informer(
            self.api, cronjobs(namespace), self.pulse, key=name_key, project=cronjob_view
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
            return await self.edits(measured, churn, informer, expected, None)
        finally:
            await informer.stop()
            await self.drop(namespace)

    async def change(self, world: Population, floor: Json) -> None:
        n, namespace = world.size, world.namespace
        rng = random.Random(42)
        edits = min(int(self.args.edits), n // 2)
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
        result = await self.edits(measured, churn, world.cronjobs, expected_by_key.__getitem__, world.operator.guard)
        result["floor"] = floor
        self.record("change", str(n), result)
        if result["p50"] is None or floor["p50"] is None:
            self.report(f"change   N={n:<5} no edit applied within {self.args.timeout}s")
            return
        p99 = f"{seconds(result['p99'])}" if result["p99"] is not None else f"> {self.args.timeout}s"
        p99_ratio = ratio(result["p99"], floor["p99"]) if result["p99"] is not None and floor["p99"] else "n/a"
        self.report(
            f"change   N={n:<5} p50 {seconds(result['p50'])}  p99 {p99}  ({result['applied']}/{edits} edits applied, "
            f"churn {result['churn_per_second']:.1f}/s)   floor (CronJob patched directly) p50 "
            f"{seconds(floor['p50'])} p99 {seconds(floor['p99'] or 0)}   ratio p50 {ratio(result['p50'], floor['p50'])}"
            f" p99 {p99_ratio}"
        )

    # -- restart

    async def restart(self, world: Population, idle_other_per_second: float | None) -> Json:
        n, namespace = world.size, world.namespace
        operator = world.operator
        assert operator is not None
        if idle_other_per_second is None:  # no idle scenario before: measure the rate now
            start = now()
            await asyncio.sleep(30)
            idle_other_per_second = sum(not r.watch for r in await self.proxy.requests(start)) / (now() - start)
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
            await self.api.patch(appschedules(namespace, probe), schedule_patch(0, cron))
            operator = self.start_operator(world)
            start = operator.started
            deadline = self.deadline()
            quiet: float | None = None
            while True:
                await asyncio.sleep(1)
                operator.guard()
                times = sorted(r.t for r in await self.proxy.requests(start) if not r.watch)
                quiet = first_quiet(times, start, now(), QUIET_WINDOW, threshold)
                if applied and quiet is not None:
                    break
                if now() > deadline:
                    raise BenchError(f"no catch-up after restart (probe applied: {bool(applied)})")
            caught_up = max(applied[0], quiet)
            observe_until = max(start + 90, caught_up + 30)  # covers a 60 s resync
            await asyncio.sleep(max(0.0, observe_until - now()))
            requests = await self.proxy.requests(start, observe_until)
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

    def restart_line(self, n: int, result: Json, bare: Json | None) -> str:
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

    async def rollout(self, n: int) -> None:
        floor_ns = await self.namespace(f"floor-rollout-{n}")
        await self.create_cronjobs(floor_ns, TASKS * n)
        first, last = await bulk(
            functools.partial(
                self.api.patch,
                cronjobs(floor_ns, f"cj-{k}"),
                [{"op": "replace", "path": CRONJOB_IMAGE, "value": NEW_IMAGE}],
            )
            for k in range(TASKS * n)
        )
        floor = last - first
        await self.drop(floor_ns)
        world = await self.world(n, f"rollout-{n}")
        try:
            operator = self.start_operator(world)
            converged = await self.converge(world) - operator.started
            await asyncio.sleep(SETTLE)
            world.cronjobs.set_ok(lambda v: v.image == NEW_IMAGE)
            start = now()
            await self.api.patch(
                deployments(world.namespace, "web"),
                [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": NEW_IMAGE}],
            )
            done = await self.pulse.until(
                lambda: len(world.cronjobs.ok_keys) >= TASKS * n, self.deadline(), "the rollout", operator.guard
            )
            took = done - start
            requests = await self.proxy.requests(start, done)
            self.record(
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
            self.report(
                f"rollout  {n} AppSchedules  {seconds(took):>9} from the Deployment's new image to "
                f"{TASKS * n} CronJobs on it ({len(requests)} requests, {sum(r.write for r in requests)} writes)"
                f"   floor {seconds(floor)} "
                f"({TASKS * n} CronJobs patched, {CONCURRENCY} at a time)   ratio {ratio(took, floor)}"
            )
        except BENCH_ERRORS as error:
            self.failed("rollout", str(n), error, world)
        finally:
            await self.close_world(world)

    # -- admission: the loop answers while the operator plans

    async def admission(self, n: int) -> None:
        world = await self.world(n, f"admission-{n}")
        live = free_port()
        try:
            await self.start_webhook_operator(world, "admission", live)
            samples: dict[str, list[float]] = {"key webhook": [], "validation": [], "liveness": [], "no webhook": []}
            await self.live(world, live)  # the controller has started (its first heartbeat): it plans from now on
            before = await self.webhook_calls()
            stop = asyncio.Event()
            probes = [asyncio.create_task(self._probe(world, samples, live, stop))]
            try:
                await self.converge(world)
            finally:
                stop.set()
                await asyncio.gather(*probes)
            calls = webhook_call_shares(before, await self.webhook_calls())
            busy = {k: list(v) for k, v in samples.items()}
            for values in samples.values():
                values.clear()
            stop = asyncio.Event()
            idle = asyncio.create_task(self._probe(world, samples, live, stop))
            await asyncio.sleep(20)
            stop.set()
            await idle
            targets = {"key webhook": 0.1, "validation": 0.5, "liveness": 0.1, "no webhook": 0.1}
            figures: Json = {"webhook_calls_as_the_api_server_timed_them": calls}
            for hook, share in calls.items():
                self.report(
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
                self.report(f"admission N={n:<5} FAILED probes (not in the figures): {failed}")
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
                self.report(
                    f"admission N={n:<5} {what:11} while planning: p50 {seconds(p50)} p99 {seconds(p99)} "
                    f"({len(values)} requests)   idle p50 {seconds(b50)} p99 {seconds(b99)}   ratio {ratio(p99, b99)}"
                    f"   target p99 {seconds(targets[what])}: {'met' if p99 <= targets[what] else 'MISSED'}"
                )
            self.record("admission", str(n), figures)
        except BENCH_ERRORS as error:
            self.failed("admission", str(n), error, world)
        finally:
            await self.close_world(world)
            await self.drop_webhooks()

    async def live(self, world: Population, port: int) -> None:
        """Until the operator's liveness endpoint answers 200 (its controller has started)."""
        assert world.operator is not None

        async def answers() -> bool:
            async with self.api.session.get(f"http://127.0.0.1:{port}/healthz") as response:
                return response.status == 200

        await until(
            answers,
            timeout=self.deadline() - now(),
            what="the liveness endpoint to answer 200",
            interval=0.1,
            ignore=(aiohttp.ClientError,),
            guard=world.operator.guard,
        )

    async def webhook_calls(self) -> dict[str, dict[float, float]]:
        """apiserver_admission_webhook_admission_duration_seconds of our webhooks: cumulative buckets by name."""
        async with self.api.session.get(self.api.server + "/metrics") as response:
            text = await response.text()
        found: dict[str, dict[float, float]] = {}
        prefix = "apiserver_admission_webhook_admission_duration_seconds_bucket{"
        for line in text.splitlines():
            if not line.startswith(prefix) or self.webhook_config_name not in line:
                continue
            labels = dict(part.split("=", 1) for part in line[len(prefix) : line.rindex("}")].split(","))
            name = labels["name"].strip('"').split(".", 1)[0]
            bound = math.inf if labels["le"].strip('"') == "+Inf" else float(labels["le"].strip('"'))
            buckets = found.setdefault(name, {})
            buckets[bound] = buckets.get(bound, 0.0) + float(line.rsplit(" ", 1)[1])
        return found

    @property
    def webhook_config_name(self) -> str:
        return f"bench-{self.run_id}.appschedule.dev"

    async def start_webhook_operator(self, world: Population, what: str, live: int) -> Process:
        """The operator with both webhooks (under a configuration of its own) and its liveness endpoint,
        once the API server calls its webhooks."""
        name = self.webhook_config_name
        args = ["run", "--log-format", "json", "--namespace", world.namespace, "--webhook-port", str(free_port())]
        args += ["--webhook-config-name", name, "--liveness", f"http://127.0.0.1:{live}/healthz"]
        command = kit.command(*args, python=self.args.operator_python)
        log = self.state / f"bench-operator-{self.args.label}-{what}.log"
        world.operator = Process("operator", command, self.operator_env(self.proxy.kubeconfig), log, self.state)
        configured = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}"
        await until(
            lambda: self.api.call("GET", configured, allow=404),
            timeout=self.deadline() - now(),
            what="the webhook configuration",
            interval=0.2,
            guard=world.operator.guard,
        )
        return world.operator

    async def drop_webhooks(self) -> None:
        with contextlib.suppress(BenchError, aiohttp.ClientError):
            for kind in ("mutating", "validating"):
                path = f"/apis/admissionregistration.k8s.io/v1/{kind}webhookconfigurations/{self.webhook_config_name}"
                await self.api.call("DELETE", path, allow=404)

    async def _probe(self, world: Population, samples: dict[str, list[float]], live: int, stop: asyncio.Event) -> None:
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
            created = await self.api.call("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs?dryRun=All", job)
            if "appschedule.dev/idempotency-key" not in ((created or {}).get("metadata") or {}).get("annotations", {}):
                raise BenchError("the Job was admitted without its key")

        async def liveness() -> None:
            async with self.api.session.get(url, timeout=aiohttp.ClientTimeout(total=30)) as response:
                await response.read()
                if response.status != 200:
                    raise BenchError(f"liveness answered {response.status}")

        pending: set[asyncio.Task[None]] = set()
        while not stop.is_set():
            calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
                ("key webhook", keyed),
                ("liveness", liveness),
                ("no webhook", functools.partial(self.api.call, "POST", configmaps, configmap)),
            ]
            if tick % 2 == 0:
                path = appschedules(namespace) + "?dryRun=All"
                calls.append(("validation", functools.partial(self.api.call, "POST", path, probe)))
            for what, call in calls:
                task = asyncio.create_task(timed(what, call))
                pending.add(task)
                task.add_done_callback(pending.discard)
            tick += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)
        await asyncio.gather(*pending)

    # -- fires

    async def fires(self, n: int, minutes: float) -> None:
        """N AppSchedules x 3 tasks firing every minute, with the webhooks on: the operator's cost per run."""
        what = f"fires-{n}"
        world = await self.world(n, what, every_minute=True)
        jobs: Informer[BenchJob] = Informer(
            self.api,
            f"/apis/batch/v1/namespaces/{world.namespace}/jobs",
            self.pulse,
            key=name_key,
            project=job_view,
            selector=LABEL_TASK,
        )
        filed: Informer[frozenset[str]] = Informer(
            self.api, appschedules(world.namespace), self.pulse, key=name_key, project=finished_jobs
        )
        completed: dict[str, float] = {}  # Job name -> when the benchmark's watch saw it finished
        shown: dict[str, float] = {}  # Job name -> when the AppSchedule's status first listed it finished

        def on_job(name: str, view: BenchJob | None) -> None:
            if view is not None and view.finished and name not in completed:
                completed[name] = now()

        def on_status(_: str, names: frozenset[str] | None) -> None:
            for name in names or ():
                shown.setdefault(name, now())

        jobs.listeners.append(on_job)
        filed.listeners.append(on_status)
        try:
            await jobs.start()
            await filed.start()
            operator = await self.start_webhook_operator(world, what, free_port())
            await self.converge(world)
            await asyncio.sleep(60 - time.time() % 60 + 5)  # the first fire after convergence is under way
            operator.guard()
            start, cpu_start, metrics_start = now(), operator.cpu_seconds(), await self.write_counts()
            peak = operator.rss_kib()
            while now() < start + minutes * 60:
                operator.guard()
                peak = max(peak, operator.rss_kib())
                await asyncio.sleep(min(5.0, max(0.0, start + minutes * 60 - now())))
            end, cpu_end, metrics_end = now(), operator.cpu_seconds(), await self.write_counts()
            requests = await self.proxy.requests(start, end)
            runs = [name for name, t in completed.items() if start <= t <= end]
            settle = end + 30  # the runs that finished at the end of the window get as long as any to show
            await self.pulse.until(
                lambda: all(name in shown for name in runs) or now() > settle, settle + 5, "the status of every run"
            )
            latencies = sorted(max(0.0, shown[name] - completed[name]) for name in runs if name in shown)
            unseen = sum(name not in shown for name in runs)
            ours = sum(r.write and r.resource in FLOOR_RESOURCES for r in requests)
            others = sum(metrics_end.values()) - sum(metrics_start.values()) - ours
            writes = sum(r.write for r in requests)
            figures = {
                "minutes": (end - start) / 60,
                "runs": len(runs),
                "runs_per_minute": len(runs) / ((end - start) / 60),
                "operator": summary(requests, (end - start) / 60),
                "requests_per_run": len(requests) / max(1, len(runs)),
                "writes_per_run": writes / max(1, len(runs)),
                "floor_writes_per_run": others / max(1, len(runs)),
                "floor_writes_by_resource": {k: metrics_end.get(k, 0) - metrics_start.get(k, 0) for k in metrics_end},
                "cpu_seconds_per_minute": (cpu_end - cpu_start) / ((end - start) / 60),
                "rss_kib": operator.rss_kib(),
                "rss_peak_in_window_kib": peak,
                "completion_to_status_p50": percentile(latencies, 0.5) if latencies else None,
                "completion_to_status_p99": percentile(latencies, 0.99) if latencies else None,
                "runs_not_shown_within_30s": unseen,
                "targets": {"writes_per_run": 2.0, "p99_seconds_at_300": 5.0, "cpu_cores_at_300": 0.5},
            }
            self.record("fires", str(n), figures)
            p50 = seconds(latencies[len(latencies) // 2]) if latencies else "-"
            p99 = seconds(percentile(latencies, 0.99)) if latencies else "-"
            per_run = max(1, len(runs))
            self.report(
                f"fires    N={n:<5} {len(runs)} runs in {(end - start) / 60:.1f} min: operator "
                f"{len(requests) / per_run:.2f} requests and {writes / per_run:.2f} writes a run (target 2)   floor "
                f"{others / per_run:.2f} writes a run by the others (jobs, cronjobs, pods)   "
                f"ratio {ratio(writes, others)}   CPU {(cpu_end - cpu_start) / (end - start):.0%} of a core   "
                f"RSS {operator.rss_kib() / 1024:.0f} MiB"
                f"   completion to status p50 {p50} p99 {p99} ({unseen} not shown within 30 s)"
            )
        except BENCH_ERRORS as error:
            self.failed("fires", str(n), error, world)
        finally:
            await jobs.stop()
            await filed.stop()
            await self.close_world(world)
            await self.drop_webhooks()

    async def write_counts(self) -> dict[str, float]:
        """Writes to jobs, cronjobs and pods the API server has served, by resource (apiserver_request_total)."""
        async with self.api.session.get(self.api.server + "/metrics") as response:
            text = await response.text()
        found: dict[str, float] = {}
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels = dict(part.split("=", 1) for part in line[line.index("{") + 1 : line.rindex("}")].split(","))
            verb, resource = labels.get("verb", "").strip('"'), labels.get("resource", "").strip('"')
            if verb in {"POST", "PUT", "PATCH", "DELETE", "APPLY"} and resource in FLOOR_RESOURCES:
                if labels.get("dry_run", '""') != '""':
                    continue
                found[resource] = found.get(resource, 0.0) + float(line.rsplit(" ", 1)[1])
        return found

    # -- one size: cold, idle, restart and change share a world

    async def size(self, n: int, *, largest: bool) -> None:
        scenarios = set(self.args.scenarios)
        here = {"cold", "idle"} & scenarios
        if largest:
            here |= {"restart", "change"} & scenarios
        if not here:
            return
        floor = await self.floor_cold(n) if "cold" in here else None
        change_floor = await self.floor_change(min(int(self.args.edits), n // 2)) if "change" in here else None
        world = await self.world(n, f"n{n}")
        idle: Json | None = None
        restart: Json | None = None
        step = "cold"
        try:
            if floor is not None:
                await self.cold(world, floor)
            else:
                self.start_operator(world)
                await self.converge(world)
            if "idle" in here:
                step = "idle"
                duration = float(self.args.idle_seconds) if largest else min(float(self.args.idle_seconds), 120.0)
                idle = await self.idle(world, duration)
                self.record("idle", str(n), idle)
                print(f"  (idle N={n} measured; its line follows with the bare kopf baseline)", flush=True)
            if "restart" in here:
                step = "restart"
                restart = await self.restart(world, idle["other_per_second"] if idle else None)
                self.record("restart", str(n), restart)
                print(f"  (restart N={n} measured; its line follows with the bare kopf baseline)", flush=True)
            if "change" in here and change_floor is not None:
                step = "change"
                await self.change(world, change_floor)
        except BENCH_ERRORS as error:
            self.failed(step, str(n), error, world)
        if world.operator is not None:
            world.operator.stop()
        bare: Json | None = None
        if idle is not None or restart is not None:
            try:
                bare = await self.bare_kopf(world)
                self.results.setdefault("baselines", {})[f"bare_kopf_{n}"] = bare
            except BENCH_ERRORS as error:
                print(f"  (bare kopf baseline failed: {error})", flush=True)
        if idle is not None:
            idle["bare_kopf"] = bare
            self.record("idle", str(n), idle)
            self.report(self.idle_line(n, idle, bare))
        if restart is not None:
            restart["bare_kopf"] = bare
            self.record("restart", str(n), restart)
            self.report(self.restart_line(n, restart, bare))
        await self.close_world(world)


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


def first_quiet(times: Sequence[float], start: float, until: float, window: float, threshold: int) -> float | None:
    """The first moment (the start, or just after a request) from which ``window`` seconds hold at most
    ``threshold`` requests; None while no such window has ended before ``until``."""
    for candidate in (start, *times):
        if candidate + window > until:
            return None
        if bisect.bisect_right(times, candidate + window) - bisect.bisect_right(times, candidate) <= threshold:
            return candidate
    return None


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
    kubectl = [str(KUBECTL), f"--kubeconfig={kubeconfig}"]
    subprocess.run([*kubectl, "apply", "--server-side", "--force-conflicts", "-f", str(crd)], check=True)
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
    parser = argparse.ArgumentParser(prog="bench_cluster.py", description=__doc__.splitlines()[0] if __doc__ else "")
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
    unknown = set(args.scenarios) - {"cold", "change", "rollout", "idle", "restart", "admission", "fires"}
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
    api = Api(Credentials.from_kubeconfig(admin))
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
        bench.results["baselines"] = {"import_only": await bench.import_only()}
        for n in sorted(args.sizes):
            await bench.size(n, largest=n == max(args.sizes))
        if "rollout" in args.scenarios:
            await bench.rollout(args.rollout_size)
        if "admission" in args.scenarios:
            await bench.admission(max(args.sizes))
        if "fires" in args.scenarios:
            for n in args.fires_sizes:
                await bench.fires(n, args.fires_minutes)
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


def operator_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment of the operator: --operator-path goes before everything (the venv's package is an
    editable install of this repository's operator/)."""
    env = dict(os.environ)
    if args.operator_path:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(args.operator_path).resolve()), os.environ.get("PYTHONPATH")) if p
        )
    return env


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
