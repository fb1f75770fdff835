"""Watching for completion: a list+watch per resource, and a pulse the waiters wake on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Generic

import aiohttp
from kubernetes_asyncio import watch
from kubernetes_asyncio.client.exceptions import ApiException
from tests.kit.wait import until

from .client import Api
from .common import (
    BenchError,
    Json,
    P,
    now,
)

# ---------------------------------------------------------------------------------------------------
# Watching for completion


class Pulse:
    """Fired on every batch of watch events; waiters re-check a cheap predicate."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, _: float) -> None:
        """Until the next batch of events (the kit's ``until`` bounds the wait)."""
        await self._event.wait()

    async def until(
        self, predicate: Callable[[], bool], deadline: float, what: str, guard: Callable[[], None] | None = None
    ) -> float:
        """When ``predicate`` became true (monotonic seconds): the kit's wait, woken by each batch of events;
        Timeout at the deadline."""

        async def holds() -> bool:
            return predicate()

        await until(holds, timeout=deadline - now(), what=what, interval=1.0, guard=guard, wake=self.wait)
        return now()


class RawWatch(watch.Watch):  # type: ignore[misc]  # kubernetes_asyncio is untyped
    """kubernetes_asyncio's watch (its stream reading, bookmarks, resourceVersion kept, an ERROR event raised
    as an ApiException), its objects left as JSON: a model per event of 30,000 CronJobs would cost the
    benchmark more CPU than the operator it measures."""

    def get_return_type(self, func: object) -> str:
        return ""


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
            except ApiException as error:
                if error.status != 410:  # 410: the resourceVersion is too old, list again
                    print(f"  (watch of {self.path} failed: {error.status} {error.reason}; listing again)", flush=True)
                    await asyncio.sleep(1)
            except (aiohttp.ClientError, TimeoutError, BenchError, ValueError) as error:
                print(f"  (watch of {self.path} failed: {error!r}; listing again)", flush=True)
                await asyncio.sleep(1)

    async def _list(self) -> str:
        seen: dict[str, P] = {}
        version, token = "", ""
        while True:
            query = {"limit": "500", "labelSelector": self.selector} | ({"continue": token} if token else {})
            page = await self.api.call("GET", self.path, query=query)
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

    async def _request(self, **params: Any) -> aiohttp.ClientResponse:
        """The watch request kubernetes_asyncio's Watch makes (it passes ``watch`` and ``resource_version``)."""
        query = {"watch": "1", "resourceVersion": str(params["resource_version"]), "allowWatchBookmarks": "true"}
        query |= {"timeoutSeconds": str(params["timeout_seconds"])}
        if self.selector:
            query["labelSelector"] = self.selector
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=300)
        response = await self.api.request("GET", self.path, query=query, timeout=timeout)
        if response.status != 200:
            response.release()
            raise ApiException(status=response.status, reason=f"watch {self.path}")
        return response

    async def _watch(self, version: str) -> str:
        """One watch until the server ends it (``timeoutSeconds``); the resourceVersion to go on from."""
        stream = RawWatch()
        try:
            async for event in stream.stream(self._request, resource_version=version, timeout_seconds=240):
                if event["type"] != "BOOKMARK":
                    obj = event["raw_object"]
                    self._put(self.key(obj), None if event["type"] == "DELETED" else self.project(obj))
                self.pulse.fire()
        finally:
            await stream.close()
        return str(stream.resource_version or version)
