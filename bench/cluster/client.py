"""The benchmark's own client: straight to the API server with the admin certificate, never counted."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from .common import (
    CONCURRENCY,
    GROUP,
    PLURAL,
    VERSION,
    BenchError,
    Json,
    now,
)

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
