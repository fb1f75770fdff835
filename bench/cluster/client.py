"""The benchmark's own client: straight to the API server with the admin certificate, never counted."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

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
# The benchmark's own client (straight to the API server, not counted): kubernetes_asyncio's


async def configuration(kubeconfig: Path) -> k8s.Configuration:
    """The kubeconfig's cluster and credentials, read by kubernetes_asyncio (certificates in files it keeps)."""
    config = k8s.Configuration()
    await k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=config)
    config.connection_pool_maxsize = 64
    return config


def ssl_context(config: k8s.Configuration) -> ssl.SSLContext:
    """The TLS context kubernetes_asyncio's REST client makes of a configuration, for a session of our own."""
    context = ssl.create_default_context(cafile=config.ssl_ca_cert)
    if config.cert_file:
        context.load_cert_chain(config.cert_file, keyfile=config.key_file)
    return context


class Api:
    """The benchmark's client: kubernetes_asyncio's ApiClient (its kubeconfig loading, TLS and credentials),
    asked by path for JSON, so a list of 30,000 objects is never made into models."""

    def __init__(self, client: k8s.ApiClient) -> None:
        self.client = client
        self.server = str(client.configuration.host)
        # plain HTTP to the processes under test (liveness, metrics) goes through the same pool
        self.session: aiohttp.ClientSession = client.rest_client.pool_manager

    @classmethod
    async def connect(cls, kubeconfig: Path) -> Api:
        return cls(k8s.ApiClient(await configuration(kubeconfig)))

    async def close(self) -> None:
        await self.client.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | float = 120,
    ) -> aiohttp.ClientResponse:
        """The response, unread (the caller reads or streams it), whatever its status."""
        response: aiohttp.ClientResponse = await self.client.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        return response

    async def call(self, method: str, path: str, body: Any = None, *, allow: int = 0, **options: Any) -> Any:
        """The response's JSON (``options``: those of ``request``); an error status raises, except ``allow`` (e.g.
        404), which returns None."""
        async with await self.request(method, path, body, **options) as response:
            text = await response.read()
            if response.status == allow:
                return None
            if response.status >= 300:
                raise BenchError(f"{method} {path}: {response.status} {text[:300].decode(errors='replace')}")
            return json.loads(text) if text else None

    async def text(self, path: str) -> str:
        """A plain-text endpoint of the API server (/metrics)."""
        async with await self.request("GET", path) as response:
            if response.status != 200:
                raise BenchError(f"GET {path}: {response.status}")
            return await response.text()

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
