"""Shards (``--shards S``): each replica leads a share of the AppSchedules, on a Lease per shard.

Every ``RETRY_SECONDS`` the loop lists the Leases of this deployment (one request, by label), renews this
replica's member Lease, asks core/shards.py which shards are this replica's (``assign`` over the members it
sees alive) and, for each shard:

* assigned here: takes or renews the shard's Lease with the resourceVersion it read, as leader.py does the
  single Lease (a conflict means another replica wrote it first: it tries again next round);
* held here but assigned elsewhere (a replica joined): stops writing for it at once (the fence below), and
  releases the Lease at a later round once no write for it is in flight (api.Cluster.in_flight: a write that
  passed the fence has ended, or timed out before the Lease could pass), so its new holder takes it at its
  next retry, not after the lease;
* held here and not renewed within ``RENEW_DEADLINE_SECONDS`` (the API server away): no more writes for it.

Fencing, per shard, as the single Lease's: ``fence(key)`` refuses a write for an AppSchedule whose shard this
replica holds no recent renewal of, else returns the seconds the write may take (until ``FENCE_SLACK`` before
another replica could take that shard's Lease). api.py asks it before every write, with the AppSchedule the
write is for (``api.WRITING_FOR``).

A replica that stops on purpose (SIGTERM) stops its workers, then releases its shards and its member Lease,
so the others take its shards at their next retry. One that dies is noticed when its member Lease stops
changing for a lease duration; its shards' Leases run out at the same time. Every replica keeps every watch
and the whole view (a shard moves to a replica that is ready to plan it at once); what is shared is the
planning and the writing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from ..core.lease import LEASE_SECONDS, RENEW_DEADLINE_SECONDS, RETRY_SECONDS, LeaseRecord, claim, may_take, released
from ..core.shards import alive, assign, forgotten, member_lease, shard_lease, shard_of
from .leader import FENCE_SLACK, TIMEOUT, Fenced
from .workqueue import Key

log = logging.getLogger("appschedule.shards")
LABEL_GROUP = "appschedule.dev/shards"  # on every Lease of one deployment's shards: its name
LABEL_KIND = "appschedule.dev/lease"  # "member" or "shard"
RELEASE_AFTER = RETRY_SECONDS  # a shard given up is released no sooner (a write past the fence has begun by then)


class ShardElector:
    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        count: int,
        *,
        on_gain: Callable[[set[int]], None],
        on_lose: Callable[[set[int]], None],
        writing: Callable[[Callable[[Key], bool]], bool] = lambda which: False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.coordination = client.CoordinationV1Api(api)
        self.namespace, self.name, self.identity, self.count = namespace, name, identity, count
        self.on_gain, self.on_lose, self.writing, self.clock = on_gain, on_lose, writing, clock
        self.member = member_lease(name, identity)
        self.renewed: dict[int, float] = {}  # the shards held: monotonic start of the round that last renewed each
        self.leaving: dict[int, float] = {}  # shards given up: when the fence closed on them (released after)
        self.owners: dict[int, str] = {}  # the last assignment computed
        self._seen: dict[str, tuple[str, float]] = {}  # Lease name -> (resourceVersion, when first seen so)

    def shard(self, key: Key) -> int:
        return shard_of(key[0], key[1], self.count)

    def owns(self, key: Key) -> bool:
        """Whether this replica holds the shard of ``key`` (the workers plan only those)."""
        return self.shard(key) in self.renewed

    def held(self) -> list[int]:
        return sorted(self.renewed)

    def fence(self, key: Key | None = None) -> float:
        """Raise ``Fenced`` unless this replica may write for the AppSchedule ``key`` now: it holds its shard and
        renewed that shard's Lease within the renew deadline; else the seconds the write may take."""
        if key is None:
            raise Fenced("a write for no AppSchedule: no shard fences it")
        shard = self.shard(key)
        at = self.renewed.get(shard)
        if at is None or self.clock() - at >= RENEW_DEADLINE_SECONDS:
            raise Fenced(f"shard {shard} of {key[0]}/{key[1]} is not held here: no write")
        return at + LEASE_SECONDS - FENCE_SLACK - self.clock()

    # -- one round, in a thread (the client is synchronous)

    def _list(self) -> dict[str, dict[str, Any]]:
        selector = f"{LABEL_GROUP}={self.name}"
        response = self.coordination.list_namespaced_lease(
            self.namespace, label_selector=selector, _preload_content=False, _request_timeout=TIMEOUT
        )
        items = json.loads(response.data).get("items") or []
        return {str((item.get("metadata") or {}).get("name")): item for item in items if isinstance(item, dict)}

    def _unchanged_for(self, name: str, lease: dict[str, Any], now: float) -> float:
        version = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        seen = self._seen.get(name)
        if seen is None or seen[0] != version:
            self._seen[name] = seen = (version, now)
        return now - seen[1]

    def _write(self, name: str, kind: str, lease: dict[str, Any] | None, spec: dict[str, Any]) -> bool:
        """Create or replace (with the resourceVersion read) one Lease of ours; False on a conflict."""
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": self.namespace,
            "labels": {LABEL_GROUP: self.name, LABEL_KIND: kind},
        }
        if lease is not None:
            metadata["resourceVersion"] = (lease.get("metadata") or {}).get("resourceVersion")
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}
        try:
            if lease is None:
                self.coordination.create_namespaced_lease(self.namespace, body, _request_timeout=TIMEOUT)
            else:
                self.coordination.replace_namespaced_lease(name, self.namespace, body, _request_timeout=TIMEOUT)
        except ApiException as error:
            if error.status == 409:  # another replica wrote it first
                return False
            raise
        return True

    def attempt(self) -> tuple[set[int], set[int]]:
        """One round; the shards gained and the shards given up (the fence closed on them already). Raises on
        errors of the API server listing the Leases (every renewal of the round failed)."""
        started = self.clock()
        now = datetime.now(UTC)
        leases = self._list()
        mine = leases.get(self.member)
        self._write(self.member, "member", mine, claim(LeaseRecord.of(mine.get("spec")) if mine else None,
                                                       self.identity, now))  # fmt: skip
        observed = self.clock()
        self._seen = {k: v for k, v in self._seen.items() if k in leases}
        unchanged = {name: self._unchanged_for(name, lease, observed) for name, lease in leases.items()}
        members = {self.identity}
        for name, lease in leases.items():
            if (lease.get("metadata") or {}).get("labels", {}).get(LABEL_KIND) != "member" or name == self.member:
                continue
            record = LeaseRecord.of(lease.get("spec"))
            if alive(record, self.identity, unchanged[name]):
                members.add(record.holder)
            elif forgotten(record, self.identity, unchanged[name]):
                self._forget(name, lease)
        holders = {
            shard: record.holder
            for shard in range(self.count)
            if (held := leases.get(shard_lease(self.name, shard))) is not None
            for record in [LeaseRecord.of(held.get("spec"))]
            if record.holder
        }
        self.owners = assign(self.count, members, holders)
        gained: set[int] = set()
        lost: set[int] = set()
        for shard in range(self.count):
            name = shard_lease(self.name, shard)
            found = leases.get(name)
            if self.owners.get(shard) == self.identity:
                self.leaving.pop(shard, None)
                if self._take(name, found, now, unchanged.get(name, 0.0)):
                    if shard not in self.renewed:
                        gained.add(shard)
                    self.renewed[shard] = started
                continue
            if shard in self.renewed:  # assigned elsewhere now: no more writes for it, released a little later
                del self.renewed[shard]
                self.leaving[shard] = self.clock()
                lost.add(shard)
            if shard in self.leaving and self.clock() - self.leaving[shard] >= RELEASE_AFTER:
                if self.writing(lambda key, shard=shard: self.shard(key) == shard):  # type: ignore[misc]
                    continue  # a write that passed the fence is still out: released once it has ended
                del self.leaving[shard]
                self._release(name, found, now)
        return gained, lost

    def _take(self, name: str, lease: dict[str, Any] | None, now: datetime, unchanged_for: float) -> bool:
        record = LeaseRecord.of(lease.get("spec")) if lease is not None else None
        if lease is not None and not may_take(record, self.identity, unchanged_for):
            return False
        spec = {**((lease or {}).get("spec") or {}), **claim(record, self.identity, now)}
        try:
            return self._write(name, "shard", lease, spec)
        except (ApiException, HTTPError, OSError) as error:  # this shard only: the others go on
            log.warning("Lease %s/%s: %s", self.namespace, name, error)
            return False

    def _release(self, name: str, lease: dict[str, Any] | None, now: datetime) -> None:
        record = LeaseRecord.of(lease.get("spec")) if lease is not None else None
        if lease is None or record is None or record.holder != self.identity:
            return  # taken over already (it ran out): nothing to give back
        try:
            self._write(name, "shard", lease, {**(lease.get("spec") or {}), **released(record, now)})
            log.info("released Lease %s/%s", self.namespace, name)
        except (ApiException, HTTPError, OSError) as error:
            log.warning("could not release Lease %s/%s (it runs out by itself): %s", self.namespace, name, error)

    def _forget(self, name: str, lease: dict[str, Any]) -> None:
        version = (lease.get("metadata") or {}).get("resourceVersion")
        try:
            self.coordination.delete_namespaced_lease(
                name, self.namespace, body=client.V1DeleteOptions(preconditions=client.V1Preconditions(
                    resource_version=version)), _request_timeout=TIMEOUT,
            )  # fmt: skip
            log.info("deleted the member Lease %s/%s of a replica long gone", self.namespace, name)
        except (ApiException, HTTPError, OSError) as error:  # another replica did, or it renewed: next time
            log.debug("member Lease %s/%s not deleted: %s", self.namespace, name, error)

    # -- on the event loop

    async def step(self) -> None:
        """One round: take, renew and give up shards, then tell the controller what it gained and lost."""
        try:
            gained, lost = await asyncio.to_thread(self.attempt)
        except (ApiException, HTTPError, OSError) as error:
            gained, lost = set(), set()
            log.warning("Leases of %s in %s: %s", self.name, self.namespace, error)
        lapsed = {s for s, at in self.renewed.items() if self.clock() - at >= RENEW_DEADLINE_SECONDS}
        for shard in lapsed:  # not renewed in time: its Lease runs out by itself, nothing to release
            del self.renewed[shard]
        lost |= lapsed
        if lost:
            log.warning("stopped leading shards %s of %d: %s", sorted(lost), self.count,
                        "no renewal within the deadline" if lapsed else "assigned to another replica")  # fmt: skip
            self.on_lose(lost)
        if gained:
            self.on_gain(gained)
        if gained or lost:  # the last such line says what this replica leads
            log.info("leads shards %s of %d as %s", self.held(), self.count, self.identity)

    async def run(self) -> None:
        log.info("waiting for shards of %s (%d) in %s as %s", self.name, self.count, self.namespace, self.identity)
        while True:
            await self.step()
            await asyncio.sleep(RETRY_SECONDS)

    def release(self) -> None:
        """Give every shard and the member Lease up (the workers have stopped): the others take them at once."""
        self.renewed.clear()
        now = datetime.now(UTC)
        try:
            leases = self._list()
        except (ApiException, HTTPError, OSError) as error:
            log.warning("could not release the shards of %s (they run out by themselves): %s", self.name, error)
            return
        for shard in range(self.count):
            self._release(shard_lease(self.name, shard), leases.get(shard_lease(self.name, shard)), now)
        mine = leases.get(self.member)
        if mine is not None:
            self._forget(self.member, mine)
