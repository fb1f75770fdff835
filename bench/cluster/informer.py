"""Watching for completion: a list+watch per resource, and a pulse the waiters wake on."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Generic
from urllib.parse import urlencode

import aiohttp
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
