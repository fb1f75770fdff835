"""No privilege escalation through an AppSchedule (DESIGN, "Security"): its author must be allowed to
create Jobs in its namespace (the validating webhook asks a SubjectAccessReview), and an AppSchedule never
reaches a Deployment of another namespace."""

from __future__ import annotations

import copy
import json
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from appschedule.shell import webhook_server
from tests.kit.chart import user_role
from tests.kit.wait import wait_for

from .conftest import ClusterUnderTest, Kubectl, OperatorProcess
from .test_ledger import webhook_only_operator
from .test_operator import Namespaced


@pytest.fixture
def validating(cluster: ClusterUnderTest, crd: str, tmp_path: Path, api: client.ApiClient) -> Iterator[OperatorProcess]:
    yield from webhook_only_operator(cluster, api, tmp_path / "validating.log", "validation", 20321)


def _schedule(namespace: str, deployment: str = "web", command: str = "report.js") -> str:
    return json.dumps(
        {
            "apiVersion": "appschedule.dev/v1alpha1",
            "kind": "AppSchedule",
            "metadata": {"name": "shop", "namespace": namespace},
            "spec": {
                "deploymentRef": {"name": deployment},
                "tasks": [{"name": "report", "schedule": "0 17 * * 5", "command": ["node", command]}],
            },
        }
    )


def _grant(kubectl: Kubectl, namespace: str, user: str, rules: list[dict[str, Any]]) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(user_role(namespace, user, rules)))


APPSCHEDULES = {
    "apiGroups": ["appschedule.dev"],
    "resources": ["appschedules"],
    "verbs": ["get", "list", "create", "update", "patch"],
}
JOBS = {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}


def test_an_author_who_may_not_create_jobs_is_refused(
    validating: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    _grant(kubectl, namespace, "alice", [APPSCHEDULES])
    _grant(kubectl, namespace, "bob", [APPSCHEDULES, JOBS])
    wait_for(
        lambda: (
            kubectl("auth", "can-i", "create", "jobs", "-n", namespace, "--as=bob", check=False).stdout.strip() == "yes"
        ),
        timeout=30,
        what="bob's Role in effect",
    )

    refused = kubectl("create", "--as=alice", "-f", "-", input=_schedule(namespace), check=False)
    assert refused.returncode != 0
    assert f"alice may not create Jobs in namespace {namespace}" in refused.stderr, refused.stderr

    kubectl("create", "--as=bob", "-f", "-", input=_schedule(namespace))
    # alice may not change what runs either, but may label it (no spec change, no review)
    change = '[{"op": "replace", "path": "/spec/tasks/0/command/1", "value": "steal.js"}]'
    patched = kubectl(
        "patch", "appschedule", "shop", "-n", namespace, "--as=alice", "--type=json", "-p", change, check=False
    )
    assert patched.returncode != 0 and "alice may not create Jobs" in patched.stderr, patched.stderr
    kubectl("label", "appschedule", "shop", "-n", namespace, "--as=alice", "team=shop")
    kubectl("patch", "appschedule", "shop", "-n", namespace, "--as=bob", "--type=json", "-p", change)
    assert "Traceback" not in "\n".join(validating.lines())


def test_a_burst_of_applies_is_reviewed_every_one_none_left_to_the_timeout(
    validating: OperatorProcess, kubectl: Kubectl, api: client.ApiClient, namespace: str
) -> None:
    """120 dry-run creates at once, 24 in flight, by an author who may not create Jobs: every one is refused
    by the SubjectAccessReview, none for want of time (a 503 from the review deadline) and none admitted (the
    webhook's failurePolicy here is Ignore: a request left to the API server's timeout would have been
    admitted unreviewed). It measures the real queue and SARs; the deadline itself is tested in
    tests/unit/test_webhooks.py against a slow review."""
    _grant(kubectl, namespace, "mallory", [APPSCHEDULES])
    wait_for(
        lambda: kubectl("auth", "can-i", "create", "appschedules.appschedule.dev", "-n", namespace, "--as=mallory",
                        check=False).stdout.strip() == "yes",
        timeout=30,
        what="mallory's Role in effect",
    )  # fmt: skip
    settings = copy.copy(api.configuration)
    settings.connection_pool_maxsize = 24
    as_mallory = client.ApiClient(settings, header_name="Impersonate-User", header_value="mallory")
    custom = client.CustomObjectsApi(as_mallory)

    def create(n: int) -> tuple[float, int, str]:
        body = json.loads(_schedule(namespace))
        body["metadata"]["name"] = f"burst-{n}"
        started = time.monotonic()
        try:
            custom.create_namespaced_custom_object(
                "appschedule.dev", "v1alpha1", namespace, "appschedules", body, dry_run="All", _request_timeout=30
            )
            return time.monotonic() - started, 201, "admitted"
        except client.ApiException as error:
            return time.monotonic() - started, error.status, str(error.body)

    with ThreadPoolExecutor(max_workers=24) as pool:
        results = list(pool.map(create, range(120)))
    as_mallory.close()
    seconds = sorted(r[0] for r in results)
    print(
        f"120 reviews, 24 at once: p50 {seconds[59] * 1000:.0f} ms, p99 {seconds[118] * 1000:.0f} ms, "
        f"max {seconds[-1] * 1000:.0f} ms (deadline {webhook_server.REVIEW_DEADLINE:g} s)"
    )
    wrong = [r for r in results if r[1] != 403 or f"mallory may not create Jobs in namespace {namespace}" not in r[2]]
    assert not wrong, wrong[:3]


def test_an_appschedule_never_reaches_another_namespace(
    operator: OperatorProcess, api: client.ApiClient, kubectl: Kubectl, namespace: str
) -> None:
    other = f"{namespace}-other"
    kubectl("create", "namespace", other)
    try:
        Namespaced(api, other).deployment("elsewhere")
        kubectl("create", "-f", "-", input=_schedule(namespace, deployment="elsewhere"))

        def ready() -> dict[str, Any] | None:
            status = json.loads(kubectl("get", "appschedule", "shop", "-n", namespace, "-o", "json").stdout).get(
                "status"
            )
            return next((c for c in (status or {}).get("conditions", []) if c["type"] == "Ready"), None)

        condition = wait_for(ready, timeout=30, what="the Ready condition")
        assert condition["status"] == "False" and condition["reason"] == "DeploymentNotFound", condition
        assert kubectl("get", "cronjobs", "-n", namespace, "-o", "name").stdout.strip() == ""
        assert kubectl("get", "cronjobs", "-n", other, "-o", "name").stdout.strip() == ""
    finally:
        kubectl("delete", "namespace", other, "--wait=false", check=False)


def test_readiness_is_the_webhook_server_answering_over_tls(validating: OperatorProcess) -> None:
    """What the chart's readinessProbe asks (GET /readyz, HTTPS on the webhook port): the server answers
    with its certificate, so the Service sends admission requests only to replicas that can take them."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # as the kubelet probes: no verification
    with urllib.request.urlopen("https://127.0.0.1:20321/readyz", timeout=10, context=context) as response:
        assert response.status == 200 and json.loads(response.read()) == {"ready": True}
    with socket.create_connection(("127.0.0.1", 20321), timeout=10) as raw, context.wrap_socket(raw) as tls:
        assert tls.getpeercert(binary_form=True)  # the handshake shows the webhook's certificate
