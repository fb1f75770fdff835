"""The counting proxy between the operator and the API server: every request time-stamped and classified."""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import ssl
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from tests.kit.wait import wait_for
from yarl import URL

from .client import configuration, ssl_context
from .common import (
    REPO,
    WRITES,
    BenchError,
    Json,
    free_port,
    now,
    port_open,
)

# ---------------------------------------------------------------------------------------------------
# The counting proxy (runs in its own process: ``python -m bench.cluster proxy``)

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

    def __init__(self, upstream: str, context: ssl.SSLContext) -> None:
        self.upstream = upstream
        self.ssl = context
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
    parser = argparse.ArgumentParser(prog="python -m bench.cluster proxy")
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)

    async def serve() -> None:
        config = await configuration(args.kubeconfig)
        await CountingProxy(str(config.host), ssl_context(config)).serve(args.port)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
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
                [
                    sys.executable,
                    "-m",
                    "bench.cluster",
                    "proxy",
                    "--kubeconfig",
                    str(admin_kubeconfig),
                    "--port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=REPO,  # where bench.cluster is importable
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
