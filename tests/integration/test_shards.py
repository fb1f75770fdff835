"""Three operator replicas with --shards 3 against the real API server: each leads one shard (a Lease each) and
reconciles only its AppSchedules; a replica killed with SIGKILL has its shard taken within the lease, one that
joins gets a share of its own (handed over, not run out), one stopped with SIGTERM releases its shard at once.
The session operator is stopped for this module (it would reconcile too)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from appschedule.core.lease import LEASE_SECONDS, RETRY_SECONDS
from appschedule.core.shards import shard_lease, shard_of
from tests.kit.wait import wait_for

from .conftest import ClusterUnderTest, OperatorProcess
from .test_leader import reconciled
from .test_operator import Namespaced, task

pytestmark = pytest.mark.usefixtures("no_session_operator")
GROUP = "appschedule-shards"
SHARDS = 3
PER_SHARD = 2


class Replicas:
    def __init__(self, cluster: ClusterUnderTest, namespace: str, workdir: Path, api: client.ApiClient) -> None:
        self.cluster, self.namespace, self.workdir = cluster, namespace, workdir
        self.leases = client.CoordinationV1Api(api)
        self.started: dict[str, OperatorProcess] = {}

    def start(self, name: str, port: int) -> OperatorProcess:
        replica = OperatorProcess(
            self.cluster.kubeconfig, self.workdir / f"{name}.log", "--namespace", self.namespace,
            "--shards", str(SHARDS), "--leader-election-namespace", self.namespace, "--leader-election-name", GROUP,
            liveness_port=port,
        )  # fmt: skip
        replica.start_and_wait()
        self.started[name] = replica
        return replica

    def identity(self, name: str) -> str | None:
        """The identity a replica said it campaigns as; None until its log says it (a replica just started, on a
        busy machine, may not have come to it yet)."""
        line = next((line for line in self.started[name].lines() if "waiting for shards" in line), None)
        return None if line is None else line.split(" as ")[-1].split('"')[0]

    def holders(self) -> dict[int, str]:
        """Each shard's holder, by replica name ("" when free or held by none of them)."""
        names = {i: n for n in self.started if (i := self.identity(n)) is not None}
        found = {}
        for shard in range(SHARDS):
            try:
                lease = self.leases.read_namespaced_lease(shard_lease(GROUP, shard), self.namespace)
            except client.ApiException:
                found[shard] = ""
                continue
            found[shard] = names.get(lease.spec.holder_identity or "", "")
        return found

    def settled(self, alive: set[str]) -> dict[int, str] | None:
        """The holders once every shard is held by one of ``alive`` and each of them holds its share."""
        holders = self.holders()
        counts = [list(holders.values()).count(n) for n in alive]
        share = -(-SHARDS // len(alive))
        return holders if set(holders.values()) <= alive and sum(counts) == SHARDS and max(counts) <= share else None


@pytest.fixture
def replicas(cluster: ClusterUnderTest, crd: str, namespace: str, tmp_path: Path, api: client.ApiClient
             ) -> Iterator[Replicas]:  # fmt: skip
    made = Replicas(cluster, namespace, tmp_path, api)
    yield made
    for replica in made.started.values():
        replica.kill()


def work(name: str) -> str:
    return name.replace("app-", "job-")


def names_by_shard(namespace: str) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {s: [] for s in range(SHARDS)}
    for n in range(200):
        name = f"app-{n}"
        shard = shard_of(namespace, name, SHARDS)
        if len(found[shard]) < PER_SHARD:
            found[shard].append(name)
    return found


def test_three_replicas_each_lead_a_shard_through_a_kill_a_join_and_a_stop(
    replicas: Replicas, api: client.ApiClient, namespace: str
) -> None:
    world = Namespaced(api, namespace)
    for name, port in (("a", 20320), ("b", 20321), ("c", 20322)):
        replicas.start(name, port)
    world.deployment()
    shards = names_by_shard(namespace)
    holders = wait_for(lambda: replicas.settled({"a", "b", "c"}), timeout=40, what="one shard for each replica")
    assert sorted(holders.values()) == ["a", "b", "c"]
    marks = {n: r.size() for n, r in replicas.started.items()}
    for names in shards.values():
        for name in names:
            world.appschedule(name, [task(work(name))])  # a task's name is one AppSchedule's in a namespace
    every = [name for names in shards.values() for name in names]
    wait_for(lambda: {f"{n}-{work(n)}" for n in every} <= set(world.cronjobs()), timeout=40, what="every CronJob")
    for shard, names in shards.items():  # each AppSchedule reconciled by its shard's replica, by no other
        for name in names:
            for replica, process in replicas.started.items():
                done = reconciled(process, namespace, name, marks[replica])
                assert bool(done) == (replica == holders[shard]), f"{name} (shard {shard}) by {replica}: {done}"

    # SIGKILL: no release; its shard stays with nobody for the lease, then one of the others takes it
    victim = holders[0]
    replicas.started[victim].kill()
    killed = time.monotonic()
    survivors = {"a", "b", "c"} - {victim}
    edited = shards[0][0]
    world.patch(edited, {"spec": {"tasks": [task(work(edited), "15 17 * * 5")]}})
    wait_for(lambda: world.cronjobs()[f"{edited}-{work(edited)}"]["spec"]["schedule"] == "15 17 * * 5", timeout=45,
             what="the edit of an AppSchedule of the dead replica's shard", interval=0.2)  # fmt: skip
    took = time.monotonic() - killed
    print(f"shard 0 taken over {took:.1f} s after SIGKILL of its holder (lease {LEASE_SECONDS} s)")
    assert took >= LEASE_SECONDS - 2 * RETRY_SECONDS, "a shard was taken before its Lease could have run out"
    del replicas.started[victim]
    wait_for(lambda: replicas.settled(survivors), timeout=30, what="the survivors to hold every shard")

    # a replica joins: one of the survivors hands a shard over (released, not run out)
    joined = time.monotonic()
    replicas.start("d", 20323)
    holders = wait_for(lambda: replicas.settled(survivors | {"d"}), timeout=30, what="a shard for the newcomer")
    assert sorted(holders.values()) == sorted(survivors | {"d"})
    assert time.monotonic() - joined < 2 * LEASE_SECONDS
    (mine,) = [s for s, n in holders.items() if n == "d"]
    mark = replicas.started["d"].size()
    world.patch(shards[mine][1], {"spec": {"tasks": [task(work(shards[mine][1]), "20 17 * * 5")]}})
    wait_for(lambda: reconciled(replicas.started["d"], namespace, shards[mine][1], mark), timeout=30,
             what="the newcomer to reconcile an AppSchedule of its shard")  # fmt: skip

    # SIGTERM: the replica releases its shard and its member Lease; another takes the shard at its next retry
    leaving = sorted(survivors)[0]
    (theirs,) = [s for s, n in holders.items() if n == leaving]
    replicas.started[leaving].stop()
    stopped = time.monotonic()
    del replicas.started[leaving]
    rest = survivors - {leaving} | {"d"}
    wait_for(lambda: replicas.holders()[theirs] in rest, timeout=20, what="the released shard taken", interval=0.2)
    handover = time.monotonic() - stopped
    print(f"shard {theirs} taken {handover:.1f} s after SIGTERM of its holder")
    assert handover < LEASE_SECONDS - RETRY_SECONDS, "the shard was not released"
    wait_for(lambda: replicas.settled(rest), timeout=30, what="the last two to hold every shard")
