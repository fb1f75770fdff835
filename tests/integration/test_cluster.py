"""The local cluster is the real thing: version, RBAC, garbage collection, Jobs, CronJob fires, outages."""

from __future__ import annotations

import time
import uuid
from functools import partial
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kit.chart import OUTCOME
from tests.kit.wait import seconds_to_next_minute, wait_for

from .conftest import ClusterUnderTest

PAUSE = "registry.k8s.io/pause:3.10"  # never pulled: kwok plays the kubelet


def job_condition(batch: client.BatchV1Api, namespace: str, name: str) -> str | None:
    job = batch.read_namespaced_job(name, namespace)
    for condition in job.status.conditions or []:
        if condition.type in ("Complete", "Failed") and condition.status == "True":
            return str(condition.type)
    return None


def pod_template(outcome: str | None = None) -> client.V1PodTemplateSpec:
    annotations = {OUTCOME: outcome} if outcome else None
    return client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(annotations=annotations),
        spec=client.V1PodSpec(
            restart_policy="Never", containers=[client.V1Container(name="main", image=PAUSE, command=["true"])]
        ),
    )


def test_server_reports_its_real_version(api: client.ApiClient) -> None:
    version = client.VersionApi(api).get_code()
    assert version.git_version.startswith("v1.3"), version.git_version
    assert version.git_version != "v0.0.0"
    assert int(version.minor) >= 32


def test_second_up_reuses_the_running_cluster(cluster: ClusterUnderTest) -> None:
    local = cluster.need_local()
    pids = {c: local.pid(c) for c in ("etcd", "kube-apiserver")}
    assert local.up(real_node=False, build=False) is False
    assert {c: local.pid(c) for c in ("etcd", "kube-apiserver")} == pids


def test_a_second_cluster_never_starts_on_the_same_ports(cluster: ClusterUnderTest, tmp_path: Path) -> None:
    local = cluster.need_local()
    other = type(local)(tmp_path / "other")  # a Cluster with a state directory of its own
    with pytest.raises(SystemExit, match="ports in use"):
        other.up(real_node=False, build=False)
    assert other.running() == []


def test_node_is_ready(api: client.ApiClient) -> None:
    nodes = client.CoreV1Api(api).list_node().items
    ready = [n for n in nodes if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])]
    assert ready, "no Ready node"


def test_rbac_is_enforced_for_service_accounts(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_service_account(namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="sa")))
    token = core.create_namespaced_service_account_token(
        "sa", namespace, client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    ).status.token

    sa_config = client.Configuration()
    sa_config.host = api.configuration.host
    sa_config.ssl_ca_cert = api.configuration.ssl_ca_cert
    sa_config.api_key = {"authorization": f"Bearer {token}"}
    sa_core = client.CoreV1Api(client.ApiClient(sa_config))

    with pytest.raises(ApiException) as refused:
        sa_core.list_namespaced_config_map(namespace)
    assert refused.value.status == 403
    assert f"system:serviceaccount:{namespace}:sa" in str(refused.value.body)

    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role(
        namespace,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="read-cm"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["configmaps"], verbs=["list"])],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="read-cm"),
            role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="read-cm"),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="sa", namespace=namespace)],
        ),
    )
    wait_for(lambda: _allowed(sa_core, namespace), timeout=10, what="the RoleBinding to take effect")


def _allowed(core: client.CoreV1Api, namespace: str) -> bool:
    try:
        core.list_namespaced_config_map(namespace)
    except ApiException as error:
        if error.status == 403:
            return False
        raise
    return True


def test_deleting_an_owner_garbage_collects_its_children(api: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api)
    owner = core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner")))
    reference = client.V1OwnerReference(api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid)
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="child", owner_references=[reference]))
    )
    core.delete_namespaced_config_map("owner", namespace)

    def child_gone() -> bool:
        return not any(cm.metadata.name == "child" for cm in core.list_namespaced_config_map(namespace).items)

    wait_for(child_gone, timeout=30, what="the garbage collector to delete the child")


def test_job_pods_run_succeed_and_fail(api: client.ApiClient, namespace: str) -> None:
    batch = client.BatchV1Api(api)
    for name, outcome in (("ok", None), ("boom", "fail")):
        batch.create_namespaced_job(
            namespace,
            client.V1Job(
                metadata=client.V1ObjectMeta(name=name),
                spec=client.V1JobSpec(backoff_limit=0, template=pod_template(outcome)),
            ),
        )
    assert wait_for(lambda: job_condition(batch, namespace, "ok"), timeout=60, what="job ok to finish") == "Complete"
    assert wait_for(lambda: job_condition(batch, namespace, "boom"), timeout=60, what="job boom to finish") == "Failed"
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector="job-name=boom").items
    assert [p.status.phase for p in pods] == ["Failed"]


def test_controller_manager_outage_and_restart(
    cluster: ClusterUnderTest, api: client.ApiClient, namespace: str
) -> None:
    local = cluster.need_local()
    before = local.pid("kube-controller-manager")
    local.stop("kube-controller-manager")
    assert local.pid("kube-controller-manager") is None
    batch = client.BatchV1Api(api)
    try:
        batch.create_namespaced_job(
            namespace,
            client.V1Job(
                metadata=client.V1ObjectMeta(name="during-outage"),
                spec=client.V1JobSpec(backoff_limit=0, template=pod_template()),
            ),
        )
        assert client.CoreV1Api(api).list_namespaced_pod(namespace).items == [], "a pod without a job controller"
    finally:
        local.start("kube-controller-manager")
    assert local.pid("kube-controller-manager") not in (None, before)
    wait_for(lambda: job_condition(batch, namespace, "during-outage"), timeout=90, what="the job after the restart")


@pytest.mark.cronfire
def test_cronjob_fires_at_the_minute_boundary(api: client.ApiClient, namespace: str) -> None:
    """One minute boundary, two CronJobs: one run succeeds, the other's pod fails and fails its Job."""
    if seconds_to_next_minute() < 5:  # too close to the boundary to be sure the CronJobs exist before it
        wait_for(lambda: seconds_to_next_minute() > 50, timeout=10, what="the minute to turn")
    batch = client.BatchV1Api(api)
    suffix = uuid.uuid4().hex[:4]
    for name, outcome in ((f"ok-{suffix}", None), (f"boom-{suffix}", "fail")):
        batch.create_namespaced_cron_job(
            namespace,
            client.V1CronJob(
                metadata=client.V1ObjectMeta(name=name),
                spec=client.V1CronJobSpec(
                    schedule="* * * * *",
                    job_template=client.V1JobTemplateSpec(
                        spec=client.V1JobSpec(backoff_limit=0, template=pod_template(outcome))
                    ),
                ),
            ),
        )
    boundary = int(time.time() // 60 + 1) * 60

    def job_of(cronjob: str) -> client.V1Job | None:
        jobs = batch.list_namespaced_job(namespace).items
        return next((j for j in jobs if j.metadata.name.startswith(cronjob + "-")), None)

    for cronjob, expected in ((f"ok-{suffix}", "Complete"), (f"boom-{suffix}", "Failed")):
        job = wait_for(partial(job_of, cronjob), timeout=boundary + 30 - time.time(), what=f"{cronjob}'s Job")
        assert job.metadata.name == f"{cronjob}-{boundary // 60}"
        scheduled = job.metadata.annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"]
        assert scheduled == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(boundary))
        assert job.metadata.owner_references[0].kind == "CronJob"
        finished = wait_for(
            partial(job_condition, batch, namespace, job.metadata.name), timeout=60, what=f"{cronjob} to finish"
        )
        assert finished == expected
