"""Leader election: one replica reconciles and writes; the others keep their watches and store warm.

The loop reads the Lease every ``RETRY_SECONDS``, asks core/lease.py whether this replica may take or
renew it, and writes the claim with the resourceVersion it read (a conflict means another replica
won). The requests run in a thread (the client is synchronous), each bounded by ``TIMEOUT``, so a
silent API server cannot hold the loop past the renew deadline.

Fencing: ``may_write()`` is true only while the last successful renewal *started* less than
``RENEW_DEADLINE_SECONDS`` ago. The API adapter (api.py) asks it before every write of a reconcile and
refuses with ``Fenced`` otherwise, so a leader cut off from the API server stops writing at most 10 s
after its last renewal, 5 s before the 15 s lease lets another replica take over, whether or not this
loop has noticed yet. A write that passed the fence is bounded too: ``fence()`` returns the time left
until 1 s before the lease could pass, and api.py makes that the write's total timeout (connect and
answer), so a slow write is abandoned, its connection closed, before another replica can lead.

A leader that stops on purpose (SIGTERM: a rolling update, a drain) first stops its workers, then
releases the Lease (core/lease.released), so a standby takes over at its next retry, not after the lease.
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

log = logging.getLogger("appschedule.leader")
TIMEOUT = (2.0, 4.0)  # seconds to connect, to answer: one attempt stays well inside the renew deadline
FENCE_SLACK = 1.0  # seconds a write of the leader ends before its Lease could pass (clocks, the answer's way back)


class Fenced(Exception):
    """A write refused because this replica is not (or may no longer be) the leader."""


class LeaderElector:
    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        on_lead: Callable[[], None],
        on_follow: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.coordination = client.CoordinationV1Api(api)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.on_lead, self.on_follow, self.clock = on_lead, on_follow, clock
        self.leading = False
        self.renewed_at: float | None = None  # monotonic start of the last successful acquire or renewal
        self.became_leader_at: float | None = None
        self._seen: tuple[str, float] | None = None  # (resourceVersion, when this replica first saw it)

    def may_write(self) -> bool:
        return self.leading and self.renewed_at is not None and self.clock() - self.renewed_at < RENEW_DEADLINE_SECONDS

    def fence(self, key: tuple[str, str] | None = None) -> float:
        """Raise ``Fenced`` unless this replica may write now, for any AppSchedule ``key`` (api.py calls it before
        every write); else the seconds the write may take: until ``FENCE_SLACK`` before another replica could take
        the Lease (its holder renewed it at ``renewed_at`` at the latest), at least the fence's margin
        (LEASE_SECONDS - RENEW_DEADLINE_SECONDS) minus the slack."""
        if not self.may_write():
            raise Fenced(f"not the leader on Lease {self.namespace}/{self.name}: no write")
        assert self.renewed_at is not None
        return self.renewed_at + LEASE_SECONDS - FENCE_SLACK - self.clock()

    def _read(self) -> dict[str, Any] | None:
        try:
            response = self.coordination.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        body: dict[str, Any] = json.loads(response.data)
        return body

    def attempt(self) -> bool:
        """One try to take or renew the Lease; True when this replica holds it now. Raises on errors of
        the API server (the caller counts them as a failed renewal)."""
        now = datetime.now(UTC)
        lease = self._read()
        if lease is None:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": claim(None, self.identity, now),
            }
            try:
                self.coordination.create_namespaced_lease(self.namespace, body, _request_timeout=TIMEOUT)
            except ApiException as error:
                if error.status == 409:  # another replica created it first
                    return False
                raise
            return True
        metadata = lease.get("metadata") or {}
        version = str(metadata.get("resourceVersion") or "")
        if self._seen is None or self._seen[0] != version:
            self._seen = (version, self.clock())
        record = LeaseRecord.of(lease.get("spec"))
        if not may_take(record, self.identity, self.clock() - self._seen[1]):
            return False
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace, "resourceVersion": version},
            "spec": {**(lease.get("spec") or {}), **claim(record, self.identity, now)},
        }
        try:
            self.coordination.replace_namespaced_lease(self.name, self.namespace, body, _request_timeout=TIMEOUT)
        except ApiException as error:
            if error.status == 409:  # written by another replica since we read it
                return False
            raise
        return True

    def _lead(self) -> None:
        self.leading = True
        self.became_leader_at = self.clock()
        log.info("became the leader on Lease %s/%s as %s", self.namespace, self.name, self.identity)
        self.on_lead()

    def _follow(self, why: str) -> None:
        self.leading = False
        log.warning("stopped leading on Lease %s/%s: %s", self.namespace, self.name, why)
        self.on_follow()

    async def step(self) -> None:
        """One round: try, then lead, keep leading, or stop."""
        started = self.clock()
        try:
            held = await asyncio.to_thread(self.attempt)
        except (ApiException, HTTPError, OSError) as error:
            held = None
            log.warning("Lease %s/%s: %s", self.namespace, self.name, error)
        if held:
            self.renewed_at = started
            if not self.leading:
                self._lead()
        elif self.leading and (held is False or not self.may_write()):
            self._follow("another replica holds the Lease" if held is False else "no renewal within the deadline")

    async def run(self) -> None:
        log.info("waiting to lead on Lease %s/%s as %s", self.namespace, self.name, self.identity)
        while True:
            await self.step()
            await asyncio.sleep(RETRY_SECONDS)

    def release(self) -> None:
        """Give the Lease up (the workers have stopped): a standby may take it at once."""
        if not self.leading:
            return
        self.leading = False
        try:
            lease = self._read()
            record = LeaseRecord.of(lease.get("spec")) if lease is not None else None
            if lease is None or record is None or record.holder != self.identity:
                return
            spec = {**(lease.get("spec") or {}), **released(record, datetime.now(UTC))}
            lease["spec"] = spec
            self.coordination.replace_namespaced_lease(self.name, self.namespace, lease, _request_timeout=TIMEOUT)
            log.info("released Lease %s/%s", self.namespace, self.name)
        except (ApiException, HTTPError, OSError) as error:
            log.warning("could not release Lease %s/%s (it runs out by itself): %s", self.namespace, self.name, error)
