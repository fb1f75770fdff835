"""Shards (core/shards.py, shell/shards.py) without a cluster: which replica should lead which shard, and three
replicas taking, renewing, handing over and fencing shards on a clock the test moves. The Lease API here keeps
the API server's rules for Leases in memory (a list by label, a create that finds the name taken, a replace or
delete with a stale resourceVersion: 409); the real one is tested in tests/integration/test_shards.py."""

from __future__ import annotations

import asyncio
import copy
import json
import math
from collections import Counter
from itertools import permutations
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from appschedule.core.lease import LEASE_SECONDS, RENEW_DEADLINE_SECONDS, RETRY_SECONDS, LeaseRecord
from appschedule.core.shards import alive, assign, forgotten, member_lease, shard_lease, shard_of
from appschedule.shell.leader import Fenced
from appschedule.shell.shards import LABEL_GROUP, ShardElector

GROUP = "appschedule-operator"


def test_an_appschedule_keeps_its_shard_and_the_shards_are_even() -> None:
    names = [(f"team-{n % 40}", f"app-{n}") for n in range(9000)]
    shards = Counter(shard_of(ns, name, 3) for ns, name in names)
    assert set(shards) == {0, 1, 2} and max(shards.values()) - min(shards.values()) < 9000 * 0.05
    assert [shard_of(ns, name, 3) for ns, name in names[:50]] == [shard_of(ns, name, 3) for ns, name in names[:50]]
    assert shard_of("a", "b", 1) == 0


@pytest.mark.parametrize("count", [1, 3, 6, 12, 64])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_assign_is_the_same_on_every_replica_and_balanced(count: int, size: int) -> None:
    members = [f"pod-{i}_{i * 7919 % 1000:03x}" for i in range(size)]
    owners = assign(count, members)
    assert set(owners) == set(range(count))
    assert max(Counter(owners.values()).values()) <= math.ceil(count / size)
    for order in list(permutations(members))[:24]:  # whatever order each replica saw them in
        assert assign(count, order) == owners
        assert assign(count, order, owners) == owners  # and what holds them now changes nothing
    assert assign(count, []) == {}


@pytest.mark.parametrize("count", [3, 6, 12, 64])
def test_a_member_that_joins_takes_only_what_the_others_give_up_and_one_that_leaves_moves_its_own(count: int) -> None:
    members = ["a_1", "b_2", "c_3"]
    before = assign(count, members)
    joined = assign(count, [*members, "d_4"], before)
    room = math.ceil(count / 4)
    assert max(Counter(joined.values()).values()) <= room
    moved = {s for s in range(count) if joined[s] != before[s]}
    assert all(joined[s] == "d_4" for s in moved)  # only to the newcomer
    assert len(moved) == sum(max(0, n - room) for n in Counter(before.values()).values())  # what others must give
    left = assign(count, members[1:], before)
    assert {s for s in range(count) if left[s] != before[s]} == {s for s in range(count) if before[s] == "a_1"}
    assert max(Counter(left.values()).values()) <= math.ceil(count / 2)


def test_holders_that_are_not_members_or_name_odd_shards_are_ignored() -> None:
    owners = assign(3, ["a", "b", "c"], {0: "gone", 1: "", 7: "a", -1: "b"})
    assert set(owners) == {0, 1, 2} and sorted(Counter(owners.values()).values()) == [1, 1, 1]
    # a holder over its room keeps the shards it ranks highest, the same on every replica
    crowded = assign(4, ["a", "b"], {0: "a", 1: "a", 2: "a", 3: "a"})
    assert Counter(crowded.values()) == {"a": 2, "b": 2}
    assert crowded == assign(4, ["b", "a"], {3: "a", 2: "a", 1: "a", 0: "a"})


def test_a_member_is_alive_while_its_lease_changes() -> None:
    record = LeaseRecord("b", LEASE_SECONDS, None, 0)
    assert alive(record, "a", LEASE_SECONDS - 0.1) and not alive(record, "a", LEASE_SECONDS)
    assert alive(record, "b", 10 * LEASE_SECONDS)  # this replica itself
    assert not alive(LeaseRecord("", 1, None, 0), "a", 0)  # released: stopped on purpose
    assert not forgotten(record, "a", 9 * LEASE_SECONDS) and forgotten(record, "a", 10 * LEASE_SECONDS)
    assert member_lease(GROUP, "pod_1") != member_lease(GROUP, "pod_2") and len(member_lease(GROUP, "x" * 300)) < 63
    assert shard_lease(GROUP, 2) == "appschedule-operator-shard-2"


class Leases:
    """The API server's rules for the Leases of one namespace, in memory; ``down`` fails every call of a replica."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.down: set[str] = set()

    def client(self, identity: str) -> Any:
        def check() -> None:
            if identity in self.down:
                raise ApiException(status=503, reason="Service Unavailable")

        def listed(namespace: str, label_selector: str, **_: Any) -> Any:
            check()
            key, value = label_selector.split("=")
            items = [i for i in self.items.values() if (i["metadata"].get("labels") or {}).get(key) == value]
            return SimpleNamespace(data=json.dumps({"items": items}).encode())

        def create(namespace: str, body: dict[str, Any], **_: Any) -> None:
            check()
            if body["metadata"]["name"] in self.items:
                raise ApiException(status=409, reason="AlreadyExists")
            self._store(body)

        def replace(name: str, namespace: str, body: dict[str, Any], **_: Any) -> None:
            check()
            if body["metadata"].get("resourceVersion") != self.items[name]["metadata"]["resourceVersion"]:
                raise ApiException(status=409, reason="Conflict")
            self._store(body)

        def delete(name: str, namespace: str, body: Any, **_: Any) -> None:
            check()
            if name not in self.items:
                raise ApiException(status=404, reason="Not Found")
            if body.preconditions.resource_version != self.items[name]["metadata"]["resourceVersion"]:
                raise ApiException(status=409, reason="Conflict")
            del self.items[name]

        return SimpleNamespace(list_namespaced_lease=listed, create_namespaced_lease=create,
                               replace_namespaced_lease=replace, delete_namespaced_lease=delete)  # fmt: skip

    def _store(self, body: dict[str, Any]) -> None:
        self.version += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.items[stored["metadata"]["name"]] = stored

    def holder(self, shard: int) -> str:
        lease = self.items.get(shard_lease(GROUP, shard))
        return LeaseRecord.of(lease["spec"]).holder if lease else ""


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


KEYS = {s: next(("ns", f"app-{n}") for n in range(1000) if shard_of("ns", f"app-{n}", 3) == s) for s in range(3)}


class Replica:
    def __init__(self, api: Leases, identity: str, clock: Clock) -> None:
        self.log: list[str] = []
        self.in_flight: set[int] = set()  # shards with a write out (the test says)
        self.elector = ShardElector(
            None, "ops", GROUP, identity, 3,  # the Lease API is replaced below
            on_gain=lambda shards: self.log.append(f"gain {sorted(shards)}"),
            on_lose=lambda shards: self.log.append(f"lose {sorted(shards)}"),
            writing=lambda which: any(which(KEYS[s]) for s in self.in_flight),
            clock=clock,
        )  # fmt: skip
        self.elector.coordination = api.client(identity)

    def may_write(self, shard: int) -> bool:
        try:
            self.elector.fence(KEYS[shard])
        except Fenced:
            return False
        return True


def run(clock: Clock, replicas: list[Replica], seconds: float) -> None:
    """Every replica steps every RETRY_SECONDS; at every moment no shard may be written by two replicas."""

    async def rounds() -> None:
        end = clock.now + seconds
        while clock.now < end:
            for replica in replicas:
                await replica.elector.step()
                for shard in range(3):
                    assert sum(r.may_write(shard) for r in everyone) <= 1, f"shard {shard} written by two"
            clock.now += RETRY_SECONDS

    asyncio.run(rounds())


everyone: list[Replica] = []


def test_three_replicas_share_three_shards_through_a_death_a_join_and_a_stop() -> None:
    api, clock = Leases(), Clock()
    a, b, c = (Replica(api, name, clock) for name in ("a_1", "b_2", "c_3"))
    everyone[:] = [a, b, c]
    run(clock, [a, b, c], 10)
    assert sorted(len(r.elector.held()) for r in (a, b, c)) == [1, 1, 1]
    assert sorted(api.holder(s) for s in range(3)) == ["a_1", "b_2", "c_3"]
    assert all(sum(r.may_write(s) for r in (a, b, c)) == 1 for s in range(3))  # every shard is written by one
    with pytest.raises(Fenced):
        a.elector.fence(None)  # a write for no AppSchedule: nothing fences it

    # c dies (its process is gone: it steps no more); its shard stays fenced for the lease, then moves
    (lost,) = c.elector.held()
    died = clock.now
    run(clock, [a, b], LEASE_SECONDS + 3 * RETRY_SECONDS)
    assert not c.may_write(lost)  # its own fence closed at the renew deadline, before anyone could take over
    assert api.holder(lost) in ("a_1", "b_2") and sorted(len(r.elector.held()) for r in (a, b)) == [1, 2]
    assert clock.now - died >= LEASE_SECONDS

    # d joins: the one with two gives one up (fenced at once), releases it once its write is back, d takes it
    d = Replica(api, "d_4", clock)
    everyone[:] = [a, b, d]
    crowded = a if len(a.elector.held()) == 2 else b
    run(clock, [a, b, d], 2 * RETRY_SECONDS)  # d's member Lease appears, and the others see it
    slow = [s for s in range(3) if crowded.elector.owners.get(s) == "d_4"]
    assert len(slow) == 1 and f"lose {slow}" in crowded.log and not crowded.may_write(slow[0])
    crowded.in_flight = set(slow)  # a write that passed the fence has not answered yet: no release
    run(clock, [a, b, d], 3 * RETRY_SECONDS)
    assert api.holder(slow[0]) == crowded.elector.identity and not d.elector.held()
    crowded.in_flight = set()
    joined = clock.now
    run(clock, [a, b, d], 3 * RETRY_SECONDS)
    assert d.elector.held() == slow and clock.now - joined < LEASE_SECONDS  # handed over, not run out
    assert sorted(len(r.elector.held()) for r in (a, b, d)) == [1, 1, 1]

    # a stops on purpose: it releases its shard and its member Lease; the others take it at their next round
    (mine,) = a.elector.held()
    a.elector.release()
    assert member_lease(GROUP, "a_1") not in api.items and not a.may_write(mine)
    everyone[:] = [b, d]
    run(clock, [b, d], 2 * RETRY_SECONDS)
    assert api.holder(mine) in ("b_2", "d_4")

    # the dead replica's member Lease is deleted once it is long gone
    run(clock, [b, d], LEASE_SECONDS * 10)
    assert member_lease(GROUP, "c_3") not in api.items
    assert all(LABEL_GROUP in lease["metadata"]["labels"] for lease in api.items.values())


def test_a_replica_cut_off_from_the_api_server_stops_writing_before_its_shards_move() -> None:
    api, clock = Leases(), Clock()
    a, b = Replica(api, "a_1", clock), Replica(api, "b_2", clock)
    everyone[:] = [a, b]
    run(clock, [a, b], 10)
    held = a.elector.held()
    api.down.add("a_1")
    cut = clock.now
    run(clock, [a, b], RENEW_DEADLINE_SECONDS + RETRY_SECONDS)
    assert not any(a.may_write(s) for s in held) and any(f"lose {held}" == line for line in a.log)
    run(clock, [a, b], LEASE_SECONDS)
    assert all(api.holder(s) == "b_2" for s in range(3)) and clock.now - cut >= LEASE_SECONDS
    api.down.clear()  # back: it joins again and gets a fair share
    run(clock, [a, b], 6 * RETRY_SECONDS)
    assert sorted(len(r.elector.held()) for r in (a, b)) == [1, 2]


def test_odd_leases_are_read_never_raised() -> None:
    api, clock = Leases(), Clock()
    for name, spec in [(shard_lease(GROUP, 0), {"holderIdentity": 7}), (member_lease(GROUP, "x"), "odd")]:
        api.items[name] = {"metadata": {"name": name, "labels": {LABEL_GROUP: GROUP, "appschedule.dev/lease": "member"},
                                        "resourceVersion": "1"}, "spec": spec}  # fmt: skip
    a = Replica(api, "a_1", clock)
    everyone[:] = [a]
    run(clock, [a], 6)
    assert a.elector.held() == [0, 1, 2]
