"""Two operator replicas with --leader-elect against the real API server: one leads, the standby writes
nothing, a leader killed with SIGKILL is replaced within the lease, one stopped with SIGTERM at the
standby's next retry. The session operator is stopped for this module (it would reconcile too)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from appschedule.core.lease import LEASE_SECONDS, RETRY_SECONDS
from tests.kit.wait import wait_for

from .conftest import ClusterUnderTest, OperatorProcess
from .test_operator import Namespaced, task

pytestmark = pytest.mark.usefixtures("no_session_operator")
LEASE = "appschedule-test"
TAKEOVER_TARGET = 20.0  # seconds from the leader's death to the new leader's first reconcile (the issue's)


class Replicas:
    def __init__(self, cluster: ClusterUnderTest, namespace: str, workdir: Path) -> None:
        self.cluster, self.namespace, self.workdir = cluster, namespace, workdir
        self.started: list[OperatorProcess] = []

    def start(self, name: str, port: int) -> OperatorProcess:
        replica = OperatorProcess(
            self.cluster.kubeconfig, self.workdir / f"{name}.log", "--namespace", self.namespace,
            "--leader-elect", "--leader-election-namespace", self.namespace, "--leader-election-name", LEASE,
            liveness_port=port,
        )  # fmt: skip
        replica.start_and_wait()
        self.started.append(replica)
        return replica

    def leader(self) -> OperatorProcess | None:
        leading = [r for r in self.started if r.alive() and leads(r)]
        assert len(leading) <= 1, "two replicas say they lead"
        return leading[0] if leading else None


def leads(replica: OperatorProcess) -> bool:
    """Whether its last word on the Lease is that it leads."""
    said = [line for line in replica.lines() if "became the leader" in line or "stopped leading" in line]
    return bool(said) and "became the leader" in said[-1]


def reconciled(replica: OperatorProcess, namespace: str, name: str, since: int = 0) -> list[dict[str, object]]:
    """Its reconciles of one AppSchedule logged after the log offset ``since``."""
    found = []
    for line in replica.text(since).splitlines():
        if '"reconciled ' in line:
            record = json.loads(line)
            if record.get("namespace") == namespace and record.get("appschedule") == name:
                found.append(record)
    return found


@pytest.fixture
def replicas(cluster: ClusterUnderTest, crd: str, namespace: str, tmp_path: Path) -> Iterator[Replicas]:
    made = Replicas(cluster, namespace, tmp_path)
    yield made
    for replica in made.started:
        replica.kill()


def test_one_leader_the_standby_writes_nothing_and_takeover_is_within_the_lease(
    replicas: Replicas, api: client.ApiClient, namespace: str
) -> None:
    world = Namespaced(api, namespace)
    a = replicas.start("a", 20310)
    b = replicas.start("b", 20311)
    world.deployment()
    world.appschedule("shop", [task("report")])
    first = wait_for(replicas.leader, timeout=30, what="one replica to lead")
    standby = b if first is a else a
    wait_for(lambda: "shop-report" in world.cronjobs(), timeout=30, what="the leader to apply the CronJob")
    wait_for(lambda: reconciled(first, namespace, "shop"), timeout=30, what="the leader's reconcile")
    assert reconciled(standby, namespace, "shop") == [], "the standby reconciled"
    assert "became the leader" not in standby.text()

    # SIGKILL: no release, the standby waits for the lease to run out
    mark = standby.size()
    first.kill()
    died = time.monotonic()
    world.patch("shop", {"spec": {"tasks": [task("report", "15 17 * * 5")]}})
    wait_for(lambda: reconciled(standby, namespace, "shop", mark), timeout=40, what="the new leader's reconcile",
             interval=0.1)  # fmt: skip
    takeover = time.monotonic() - died
    print(f"takeover after SIGKILL of the leader: {takeover:.1f} s (lease {LEASE_SECONDS} s)")
    assert takeover <= TAKEOVER_TARGET
    assert takeover >= LEASE_SECONDS - 2 * RETRY_SECONDS, "took the Lease before it could have run out"
    wait_for(lambda: world.cronjobs()["shop-report"]["spec"]["schedule"] == "15 17 * * 5", timeout=30,
             what="the edit made while nobody led to be applied")  # fmt: skip

    # SIGTERM: the leader stops its workers and releases the Lease; a new standby takes it at once
    second = standby
    third = replicas.start("c", 20312)
    mark = third.size()
    second.stop()
    stopped = time.monotonic()
    wait_for(lambda: "became the leader" in third.text(mark), timeout=15, what="the standby to lead", interval=0.1)
    handover = time.monotonic() - stopped
    print(f"takeover after SIGTERM of the leader: {handover:.1f} s")
    assert handover < LEASE_SECONDS - RETRY_SECONDS, "the Lease was not released"
    said = next(line for line in third.lines() if "became the leader" in line)
    lease = client.CoordinationV1Api(api).read_namespaced_lease(LEASE, namespace)
    assert f"as {lease.spec.holder_identity}" in said
    assert lease.spec.lease_transitions == 2  # a, then b, then c
