"""Leader election (core/lease.py, shell/leader.py) without a cluster: the decisions, and fencing on a clock
that the test moves. The Lease API here is an in-memory one with the API server's rules for a Lease
(404, a create that finds the name taken, a replace with a stale resourceVersion: 409); the real one is
tested in tests/integration/test_leader.py."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from appschedule.core.lease import (
    LEASE_SECONDS,
    RENEW_DEADLINE_SECONDS,
    RETRY_SECONDS,
    LeaseRecord,
    claim,
    may_take,
    released,
)
from appschedule.shell.leader import Fenced, LeaderElector

NOW = datetime(2026, 3, 29, 0, 59, 58, tzinfo=UTC)  # Europe/Berlin's spring change is at 01:00 UTC


def test_may_take() -> None:
    held = LeaseRecord("a", LEASE_SECONDS, None, 3)
    assert may_take(None, "b", 0)  # no Lease yet
    assert may_take(held, "a", 0)  # ours: renew
    assert not may_take(held, "b", LEASE_SECONDS - 0.1)  # another's, seen changing less than a lease ago
    assert may_take(held, "b", LEASE_SECONDS)  # not renewed for a whole lease, by our clock
    assert may_take(LeaseRecord("", 1, None, 3), "b", 0)  # released


def test_claim_renews_or_takes_over() -> None:
    taken = claim(None, "a", NOW)
    assert taken["holderIdentity"] == "a" and taken["leaseTransitions"] == 0
    assert taken["acquireTime"] == taken["renewTime"] == "2026-03-29T00:59:58.000000Z"
    later = datetime(2026, 3, 29, 1, 0, 10, tzinfo=UTC)  # across the DST change: UTC times, no wall clock
    renewed = claim(LeaseRecord.of(taken), "a", later)
    assert renewed["acquireTime"] == taken["acquireTime"] and renewed["renewTime"] == "2026-03-29T01:00:10.000000Z"
    assert renewed["leaseTransitions"] == 0
    stolen = claim(LeaseRecord.of(renewed), "b", later)
    assert stolen["leaseTransitions"] == 1 and stolen["acquireTime"] == stolen["renewTime"]
    assert released(LeaseRecord.of(stolen), later)["holderIdentity"] == ""


@pytest.mark.parametrize("spec", [None, "x", {}, {"holderIdentity": 7, "leaseDurationSeconds": "15"}])
def test_an_odd_lease_reads_as_free_and_never_raises(spec: Any) -> None:
    record = LeaseRecord.of(spec)
    assert record.holder == "" and record.duration == LEASE_SECONDS and record.transitions == 0


class LeaseApi:
    """The API server's rules for one Lease, in memory; ``down`` makes every call fail as a cut would."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.down: set[str] = set()  # identities whose requests fail

    def client(self, identity: str) -> Any:
        def check() -> None:
            if identity in self.down:
                raise ApiException(status=503, reason="Service Unavailable")

        def read(name: str, namespace: str, **_: Any) -> Any:
            check()
            if self.lease is None:
                raise ApiException(status=404, reason="Not Found")
            return SimpleNamespace(data=json.dumps(self.lease).encode())

        def create(namespace: str, body: dict[str, Any], **_: Any) -> None:
            check()
            if self.lease is not None:
                raise ApiException(status=409, reason="AlreadyExists")
            self._store(body)

        def replace(name: str, namespace: str, body: dict[str, Any], **_: Any) -> None:
            check()
            assert self.lease is not None
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                raise ApiException(status=409, reason="Conflict")
            self._store(body)

        return SimpleNamespace(read_namespaced_lease=read, create_namespaced_lease=create,
                               replace_namespaced_lease=replace)  # fmt: skip

    def _store(self, body: dict[str, Any]) -> None:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: LeaseApi, identity: str, clock: Clock, log: list[str]) -> LeaderElector:
    made = LeaderElector(
        None,  # the Lease API is replaced below
        "ops", "appschedule-operator", identity,
        on_lead=lambda: log.append(f"{identity} leads"), on_follow=lambda: log.append(f"{identity} follows"),
        clock=clock,
    )  # fmt: skip
    made.coordination = api.client(identity)
    return made


def test_one_leader_and_a_cut_off_leader_stops_writing_before_another_may_take_over() -> None:
    api, clock, log = LeaseApi(), Clock(), list[str]()
    a, b = elector(api, "a", clock, log), elector(api, "b", clock, log)

    async def rounds(seconds: float) -> list[tuple[float, bool, bool]]:
        """Both replicas step every RETRY_SECONDS; (time, a may write, b leads) after each round."""
        seen = []
        end = clock.now + seconds
        while clock.now < end:
            await a.step()
            await b.step()
            seen.append((clock.now, a.may_write(), b.leading))
            clock.now += RETRY_SECONDS
        return seen

    asyncio.run(rounds(10))
    assert a.leading and a.may_write() and not b.leading and log == ["a leads"]
    a.fence()  # the leader may write
    with pytest.raises(Fenced):
        b.fence()  # the standby may not
    cut = clock.now
    last_renewal = a.renewed_at
    assert last_renewal is not None
    api.down.add("a")  # a's requests fail from now on: it cannot renew
    history = asyncio.run(rounds(30))
    # fencing: never both; a stopped writing within the renew deadline of its last renewal; b took over
    # only after a whole lease without change, as it observed it
    assert not any(a_writes and b_leads for _, a_writes, b_leads in history)
    a_stopped = next(t for t, a_writes, _ in history if not a_writes)
    b_leads_at = next(t for t, _, b_leads in history if b_leads)
    assert a_stopped - last_renewal <= RENEW_DEADLINE_SECONDS
    assert b_leads_at - last_renewal >= LEASE_SECONDS
    assert b_leads_at - cut <= LEASE_SECONDS + 2 * RETRY_SECONDS
    with pytest.raises(Fenced):
        a.fence()
    assert log == ["a leads", "a follows", "b leads"]
    assert api.lease is not None and api.lease["spec"]["leaseTransitions"] == 1


def test_a_leader_that_stops_releases_the_lease_and_a_standby_takes_it_at_its_next_retry() -> None:
    api, clock, log = LeaseApi(), Clock(), list[str]()
    a, b = elector(api, "a", clock, log), elector(api, "b", clock, log)
    asyncio.run(a.step())
    asyncio.run(b.step())
    assert a.leading and not b.leading
    a.release()
    assert not a.may_write()
    clock.now += RETRY_SECONDS
    asyncio.run(b.step())
    assert b.leading and log == ["a leads", "b leads"]


def test_a_release_right_after_a_takeover_keeps_the_count_of_transitions() -> None:
    """Found by the integration test: a leader stopped before its first renewal released the Lease with
    the count it had read before taking it over."""
    api, clock, log = LeaseApi(), Clock(), list[str]()
    a, b, c = (elector(api, name, clock, log) for name in "abc")
    asyncio.run(a.step())
    api.down.add("a")
    for _ in range(LEASE_SECONDS // RETRY_SECONDS + 2):
        clock.now += RETRY_SECONDS
        asyncio.run(b.step())
    assert b.leading and api.lease is not None and api.lease["spec"]["leaseTransitions"] == 1
    b.release()
    asyncio.run(c.step())
    assert c.leading and api.lease["spec"]["leaseTransitions"] == 2


def test_a_slow_write_is_abandoned_before_the_lease_can_pass() -> None:
    """A write that passed the fence just before it closed, to an API server that takes its time: the client
    gives up and closes the connection before another replica could take the Lease (a real HTTP server on
    loopback that never answers; the status PUT, which urllib3 would retry as idempotent, included)."""
    import socket
    import threading
    import time
    from collections.abc import Callable

    from kubernetes import client as k8s
    from urllib3.exceptions import HTTPError

    from appschedule.shell.api import Cluster
    from appschedule.shell.leader import FENCE_SLACK

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    closed: list[float] = []  # when the server saw each connection closed by the client

    def hold(connection: socket.socket) -> None:
        connection.settimeout(30)
        try:
            while connection.recv(65536):  # read the request, answer nothing, until the client goes
                pass
        except OSError:
            pass
        closed.append(time.monotonic())
        connection.close()

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=hold, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{server.getsockname()[1]}"
    cluster = Cluster(k8s.ApiClient(configuration))
    elector = LeaderElector(
        k8s.ApiClient(configuration), "ns", "lease", "a", on_lead=lambda: None, on_follow=lambda: None
    )
    elector.leading = True
    cluster.fence = elector.fence
    appschedule = {"metadata": {"name": "shop", "namespace": "shop", "resourceVersion": "1"}, "spec": {}}
    try:
        writes: list[Callable[[], object]] = [
            lambda: cluster.replace_status(appschedule, {}),
            lambda: cluster.release_job("shop", "j", "f"),
        ]
        for write in writes:
            elector.renewed_at = time.monotonic() - (RENEW_DEADLINE_SECONDS - 0.5)  # the fence about to close
            lease_passes = elector.renewed_at + LEASE_SECONDS
            with pytest.raises(HTTPError):  # timed out (not Fenced: the write passed the fence)
                write()
            assert time.monotonic() <= lease_passes - FENCE_SLACK + 0.5
            until = time.monotonic() + 5
            while not closed and time.monotonic() < until:
                time.sleep(0.05)
            assert closed and max(closed) < lease_passes  # nothing of it is left on the wire when another leads
            closed.clear()
    finally:
        server.close()
