"""The Helm chart against the real API server: lint, server-side dry-runs, least privilege, Pod Security,
install/upgrade/uninstall, and the operator running as the chart's ServiceAccount (tests/chart.py).

The session operator of the other files is stopped while these run: two operators reconciling the same
AppSchedules would blur what is proven.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from appschedule.shell import metrics
from tests.kit import chart
from tests.kit.chart import OUTCOME, Helm, HostedOperator, of_kind
from tests.kit.wait import wait_for

from .conftest import ClusterUnderTest, Kubectl

# the chart's operator must be the only one reconciling
pytestmark = pytest.mark.usefixtures("no_session_operator")

ALL_ON: dict[str, Any] = {
    "webhook": {"certManager": {"enabled": True}},
    "metrics": {"serviceMonitor": {"enabled": True}},
    "prometheusRule": {"enabled": True},
    "grafanaDashboard": {"enabled": True},
}
# kwok would "run" the operator pod at a fake address; kept Pending, it is admitted (Pod Security
# checked) while the operator itself runs on this machine as the chart's ServiceAccount
NO_NODE = {"nodeSelector": {"appschedule.dev/test": "no-such-node"}}
# both tasks fire every minute: a run counts only for a time after the task began to be tracked, so the
# proof of key and ledger is a real fire (the two chart tests each wait for one minute boundary)
EVERY_MINUTE = "* * * * *"


@pytest.fixture(scope="module")
def helm(cluster: ClusterUnderTest) -> Helm:
    return Helm(cluster.kubeconfig)


def new_namespace(kubectl: Kubectl, *, restricted: bool = False) -> str:
    name = f"c-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    if restricted:
        kubectl(
            "label",
            "namespace",
            name,
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/enforce-version=latest",
        )
    wait_for(
        lambda: kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode == 0,
        timeout=30,
        what=f"the default ServiceAccount in {name}",
    )
    return name


@pytest.fixture
def namespaces(kubectl: Kubectl, helm: Helm) -> Iterator[list[str]]:
    """Namespaces a test makes; at its end, a release it left installed (it failed) goes first, as do the
    ledger's finalizers, so no cluster-scoped object or stuck Job outlives the test."""
    made: list[str] = []
    yield made
    for name in made:
        for release in helm("list", "-n", name, "-q", check=False).stdout.split():
            helm("uninstall", release, "-n", name, "--no-hooks", check=False)
        subprocess.run(
            [sys.executable, "-m", "appschedule", "release-jobs", "-n", name],
            capture_output=True,
            env=dict(os.environ, KUBECONFIG=str(kubectl.kubeconfig)),
            check=False,
        )
        kubectl("delete", "namespace", name, "--wait=false", check=False)


# -- the chart offline


def test_lint_default_and_every_option(helm: Helm, tmp_path: Path) -> None:
    options = tmp_path / "all-on.yaml"
    options.write_text(yaml.safe_dump({**ALL_ON, "watchNamespaces": ["a", "b"]}))
    for extra in ([], ["-f", str(options)]):
        out = helm("lint", "--strict", f"--kube-version={chart.KUBE_VERSION}", str(chart.CHART), *extra)
        assert "0 chart(s) failed" in out.stdout


def test_values_schema_refuses_what_the_chart_cannot_do(helm: Helm) -> None:
    for bad, field in (
        ({"replicaCount": -1}, "replicaCount"),
        ({"webhook": {"validationFailurePolicy": "Sometimes"}}, "validationFailurePolicy"),
        ({"imagee": {}}, "imagee"),
        ({"webhook": {"timeoutSeconds": 31}}, "timeoutSeconds"),
        ({"logFormat": "xml"}, "logFormat"),
        ({"watchNamespaces": ["Not_A_Name"]}, "watchNamespaces"),
    ):
        with pytest.raises(AssertionError, match=field):
            helm.template(bad)


def test_every_value_is_commented_by_its_name() -> None:
    lines = (chart.CHART / "values.yaml").read_text().splitlines()
    path: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        found = re.match(r"^( *)([A-Za-z][A-Za-z0-9]*):", line)
        if not found:
            continue
        depth = len(found.group(1))
        path = [(d, k) for d, k in path if d < depth] + [(depth, found.group(2))]
        value = line.split(":", 1)[1].strip()
        if not value:
            continue  # a section: its leaves are commented
        dotted = ".".join(k for _, k in path)
        if not _declared(dotted):
            continue  # inside a Kubernetes structure (resources, securityContext): its own documentation
        above = number - 1
        while above >= 0 and lines[above].strip().startswith("#"):
            above -= 1
        block = lines[above + 1 : number]
        assert block and block[0].strip().startswith((f"# {dotted} ", f"# {dotted},", f"# {dotted}:")), (
            f"values.yaml line {number + 1}: {dotted} has no comment naming it"
        )


def _declared(dotted: str) -> bool:
    """Whether values.schema.json names this key itself (not as part of a free-form object)."""
    node = json.loads((chart.CHART / "values.schema.json").read_text())
    for key in dotted.split("."):
        node = node.get("properties", {}).get(key)
        if node is None:
            return False
    return True


def test_schema_closes_every_object() -> None:
    schema = json.loads((chart.CHART / "values.schema.json").read_text())

    def walk(node: dict[str, Any], where: str) -> None:
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, f"{where} accepts unknown keys"
            for key, child in node["properties"].items():
                walk(child, f"{where}.{key}")

    walk(schema, "values")


def test_rbac_is_least_privilege(helm: Helm) -> None:
    for values in ({}, {"watchNamespaces": ["a", "b"]}, ALL_ON):
        objects = helm.template(values)
        rules = chart.rbac_rules(objects)
        assert rules
        for kind, name, rule in rules:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule.get(field, []), f"{kind} {name} grants a wildcard in {field}: {rule}"
            assert not {"secrets", "serviceaccounts"} & set(rule["resources"]), f"{kind} {name}: {rule}"
            if "pods" in rule["resources"]:  # the ledger reads its runs' pods, and nothing else of pods
                assert rule == {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}, rule
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), f"{kind} {name}: {rule}"
            assert not {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} & set(rule["resources"])
        cluster_roles = of_kind(objects, "ClusterRole")
        if values.get("watchNamespaces"):
            (review,) = cluster_roles  # nothing cluster-wide but asking who may create Jobs
            assert review["rules"] == [
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
            ], "watchNamespaces must not grant anything else cluster-wide"
            roles = [r for r in of_kind(objects, "Role") if not r["metadata"]["name"].endswith("-leader-election")]
            assert {r["metadata"]["namespace"] for r in roles} == {"a", "b"}
        else:
            assert len(cluster_roles) == 1
        # leader election: the Lease in the release's namespace, nothing cluster-wide
        (election,) = [r for r in of_kind(objects, "Role") if r["metadata"]["name"].endswith("-leader-election")]
        assert election["metadata"]["namespace"] == "ops"
        assert election["rules"] == [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
        ]
        assert not any("leases" in rule["resources"] for kind, _, rule in rules if kind == "ClusterRole")


def test_operator_pods_are_restricted_and_highly_available(helm: Helm) -> None:
    objects = helm.template({})
    (deployment,) = of_kind(objects, "Deployment")
    spec = deployment["spec"]
    # two replicas, one leading on a Lease; a new pod is ready before an old one goes; a drain leaves one
    assert spec["replicas"] == 2 and spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    (budget,) = of_kind(objects, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    spread = spec["template"]["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert spread[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert "--leader-elect" in spec["template"]["spec"]["containers"][0]["args"]
    assert spec["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": "webhook",
        "scheme": "HTTPS",
    }
    assert not of_kind(helm.template({"replicaCount": 1}), "PodDisruptionBudget")  # it would block every drain
    # replicas that share the work: a Lease per shard, which the replicas list, and a gone member's they delete
    sharded = helm.template({"replicaCount": 3, "shards": 3})
    (args,) = [d["spec"]["template"]["spec"]["containers"][0]["args"] for d in of_kind(sharded, "Deployment")]
    assert "--shards=3" in args and "--leader-elect" not in args
    (election,) = [r for r in of_kind(sharded, "Role") if r["metadata"]["name"].endswith("-leader-election")]
    assert election["rules"][0]["verbs"] == ["get", "list", "create", "update", "delete"]
    # the AppSchedule webhook fails closed, away from the operator's namespace and kube-system; keys fail open
    (validating,) = of_kind(objects, "ValidatingWebhookConfiguration")[0]["webhooks"]
    assert validating["failurePolicy"] == "Fail"
    assert validating["namespaceSelector"]["matchExpressions"][0] == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "ops"],
    }
    assert [r["resources"] for r in validating["rules"]] == [["appschedules", "appschedulecalendars"]]  # no /status
    (keys,) = of_kind(objects, "MutatingWebhookConfiguration")[0]["webhooks"]
    assert keys["failurePolicy"] == "Ignore"
    ignoring = of_kind(
        helm.template({"webhook": {"validationFailurePolicy": "Ignore"}}), "ValidatingWebhookConfiguration"
    )
    assert ignoring[0]["webhooks"][0]["failurePolicy"] == "Ignore"
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "checksum/webhook-tls" in spec["template"]["metadata"]["annotations"]
    assert not re.search(r":latest$", container["image"])
    # a stopping replica keeps answering admissions until the Service no longer routes them to it (a preStop
    # sleep, from Kubernetes 1.30; older clusters have no such handler and get none)
    assert container["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}

    def container_of(values: dict[str, Any], kube_version: str = chart.KUBE_VERSION) -> dict[str, Any]:
        (rendered,) = of_kind(helm.template(values, kube_version=kube_version), "Deployment")
        found: dict[str, Any] = rendered["spec"]["template"]["spec"]["containers"][0]
        return found

    assert "lifecycle" not in container_of({}, kube_version="1.29.4")
    assert "lifecycle" not in container_of({"shutdownDelaySeconds": 0})


def test_hook_and_test_pods_are_never_behind_the_operators_services(helm: Helm) -> None:
    objects = helm.template({}, release="a-release-name-long-enough-to-need-truncation")
    selector = of_kind(objects, "Service")[0]["spec"]["selector"]
    (hook,) = of_kind(objects, "Job")
    assert len(hook["metadata"]["name"]) <= 63
    test_pod = next(p for p in of_kind(objects, "Pod") if "helm.sh/hook" in p["metadata"]["annotations"])
    for labels in (hook["spec"]["template"]["metadata"]["labels"], test_pod["metadata"]["labels"]):
        assert not selector.items() <= labels.items(), labels
    (deployment,) = of_kind(objects, "Deployment")
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    (secret,) = of_kind(objects, "Secret")
    (webhook,) = of_kind(objects, "MutatingWebhookConfiguration")
    assert webhook["webhooks"][0]["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]


def test_the_chart_crd_is_the_generated_one(helm: Helm) -> None:
    crds = {c["metadata"]["name"]: c for c in of_kind(helm.template({}), "CustomResourceDefinition")}
    assert set(crds) == {"appschedules.appschedule.dev", "appschedulecalendars.appschedule.dev"}
    for crd in crds.values():
        plural = crd["metadata"]["name"].split(".")[0]
        generated = yaml.safe_load((chart.REPO / "crds" / f"appschedule.dev_{plural}.yaml").read_text())
        assert crd["spec"] == generated["spec"]
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}


def test_alerts_and_dashboard_query_metrics_the_operator_exports(helm: Helm) -> None:
    exported = {m.name for m in metrics.REGISTRY.collect()}
    exported |= {f"{name}_total" for name in exported} | {f"{name}_bucket" for name in exported} | {"up"}
    objects = helm.template(ALL_ON)
    (monitor,) = of_kind(objects, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True  # the AppSchedule's namespace label survives
    (rule,) = of_kind(objects, "PrometheusRule")
    alerts = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == {
        "AppScheduleMissedRun",
        "AppScheduleRunFailed",
        "AppScheduleRunStuck",
        "AppScheduleDuplicateRun",
        "AppScheduleTaskPaused",
        "AppScheduleOperatorDown",
    }
    (dashboard,) = [c for c in of_kind(objects, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    panels = json.loads(dashboard["data"]["appschedule.json"])["panels"]
    exprs = [*alerts.values(), *(t["expr"] for p in panels for t in p["targets"])]
    for expr in exprs:
        used = set(re.findall(r"\b(appschedule_[a-z_]+|up)\b(?=\{|\[|\))", expr))
        assert used, expr
        assert used <= exported, f"{expr}: {used - exported} not exported"
    assert {"Missed runs per task", "Duplicate runs per task", "Runs started per task"} <= {p["title"] for p in panels}


# -- against the API server


def test_everything_rendered_passes_a_server_side_dry_run(
    helm: Helm, kubectl: Kubectl, crd: str, namespaces: list[str], tmp_path: Path
) -> None:
    for third_party in chart.third_party_crds(tmp_path):
        kubectl("apply", "--server-side", "-f", "-", input=json.dumps(third_party))
        kubectl.wait_established(third_party["metadata"]["name"])
    namespace = new_namespace(kubectl)
    namespaces.append(namespace)
    watched = new_namespace(kubectl)
    namespaces.append(watched)
    for values in ({}, ALL_ON, {**ALL_ON, "watchNamespaces": [watched]}):
        objects = helm.template(values, release="dry", namespace=namespace)
        kinds = {o["kind"] for o in objects}
        if values is ALL_ON:
            assert {"ServiceMonitor", "PrometheusRule", "Certificate", "Issuer", "ConfigMap"} <= kinds
        # the CRD exists already (the session's): a dry-run of its update, which must be accepted too
        out = kubectl(
            "apply",
            "--dry-run=server",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input="\n---\n".join(json.dumps(o) for o in objects),
        )
        assert out.stdout.count("(server dry run)") == len(objects), out.stdout


def test_install_operate_upgrade_uninstall_as_the_chart_serviceaccount(
    helm: Helm, kubectl: Kubectl, cluster: ClusterUnderTest, crd: str, namespaces: list[str], tmp_path: Path
) -> None:
    ops = new_namespace(kubectl, restricted=True)
    app = new_namespace(kubectl)
    namespaces += [ops, app]
    release = f"r{uuid.uuid4().hex[:6]}"
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                **NO_NODE,
                "webhook": {"port": 20301, "timeoutSeconds": 8},
                "metrics": {"port": 20302},
                "liveness": {"port": 20303},
            }
        )
    )
    # the session installed the CRD with kubectl: the release adopts it, as a user moving to the chart would
    chart.adopt_crd(kubectl, release, ops)
    # no --wait: without a node the operator pod never becomes ready (the operator runs here instead)
    helm("install", release, str(chart.CHART), "-n", ops, "-f", str(values), "--timeout=120s")
    manifest = [d for d in yaml.safe_load_all(helm("get", "manifest", release, "-n", ops).stdout) if d]
    for obj in manifest:
        where = ["-n", ops] if obj["metadata"].get("namespace") else []
        kubectl("get", obj["kind"], obj["metadata"]["name"], *where)

    # Pod Security restricted admitted the operator's pod, and really is enforced in that namespace
    fullname = f"{release}-appschedule-operator"
    wait_for(
        lambda: kubectl(
            "get", "pods", "-n", ops, "-l", f"app.kubernetes.io/instance={release}", "-o", "name"
        ).stdout.strip(),
        timeout=30,
        what="the operator pod",
    )
    root = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "root", "namespace": ops},
        "spec": {"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": True}}]},
    }
    refused = kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(root), check=False)
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr

    # the ServiceAccount may not do what the operator must never do (it creates Jobs: the runs of backfills and
    # catch-up, from the task's CronJob; no more than creating CronJobs, which it must, already allows)
    who = f"--as=system:serviceaccount:{ops}:{fullname}"
    for verb, resource, scope in (
        ("get", "secrets", ["-n", app]),
        ("list", "secrets", ["-A"]),
        ("create", "pods", ["-n", app]),
        ("escalate", "clusterroles", []),
        ("impersonate", "users", []),
        ("patch", "mutatingwebhookconfigurations", []),
    ):
        answer = kubectl("auth", "can-i", verb, resource, *scope, who, check=False).stdout.strip()
        assert answer == "no", f"the chart's ServiceAccount may {verb} {resource}"

    # the app's Deployment first: the operator reports its initial listing once it has seen an object
    _deployment(kubectl, app)
    # failurePolicy Fail: while no replica answers, no AppSchedule is stored unreviewed
    refused = kubectl("apply", "-f", "-", input=json.dumps(_shop(app)), check=False)
    assert refused.returncode != 0 and "check-appschedules.appschedule.dev" in refused.stderr, refused.stderr
    operator = HostedOperator(kubectl, cluster.kubeconfig, release, ops, tmp_path)
    try:
        operator.start()
        chart.apply_reviewed(kubectl, _shop(app))
        _reconcile_key_and_record(kubectl, app)

        # a spec change goes through the validating webhook, which asks a SubjectAccessReview as the
        # chart's ServiceAccount (refused when it cannot: the check fails closed)
        kubectl(
            "patch",
            "appschedule",
            "shop",
            "-n",
            app,
            "--type=json",
            "-p",
            '[{"op": "replace", "path": "/spec/tasks/0/args", "value": ["--verbose"]}]',
        )
        # a bad schedule is refused at apply, through the chart's ValidatingWebhookConfiguration and Service
        bad = _appschedule(app, "bad", [{"name": "x", "schedule": "61 * * * *", "command": ["true"]}])
        out = kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
        assert out.returncode != 0 and "spec.tasks[0].schedule" in out.stderr, out.stderr

        # helm upgrade keeps every AppSchedule and its status
        before = json.loads(kubectl("get", "appschedule", "shop", "-n", app, "-o", "json").stdout)
        tls_before = _webhook_tls(kubectl, ops, fullname)
        helm(
            "upgrade",
            release,
            str(chart.CHART),
            "-n",
            ops,
            "-f",
            str(values),
            "--set",
            "logFormat=plain",
        )
        after = json.loads(kubectl("get", "appschedule", "shop", "-n", app, "-o", "json").stdout)
        # the certificate, the caBundle and so the Deployment's checksum are kept (the operator keeps serving)
        assert _webhook_tls(kubectl, ops, fullname) == tls_before
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        for old, new in zip(before["status"]["tasks"], after["status"]["tasks"], strict=True):
            assert new["trackingSince"] == old["trackingSince"]
            assert all(new["counts"][k] >= v for k, v in old["counts"].items()), (old["counts"], new["counts"])

        # a run still going holds the ledger's finalizer; helm uninstall must not leave it stuck
        hanging = _last_run(kubectl, app, "hang")["job"]
        wait_for(
            lambda: "appschedule.dev/ledger" in _finalizers(kubectl, app, hanging),
            timeout=30,
            what="the running Job to hold the ledger's finalizer",
        )
        forbidden = operator.forbidden()
        assert re.fullmatch(r"released [1-9][0-9]* Job\(s\)", _uninstall(helm, kubectl, operator))
        assert "appschedule.dev/ledger" not in _finalizers(kubectl, app, hanging)
    finally:
        operator.stop()
    assert not forbidden, forbidden

    # every object of the release is gone but the CRD (kept), and the AppSchedules with it
    for obj in manifest:
        where = ["-n", ops] if obj["metadata"].get("namespace") else []
        gone = kubectl("get", obj["kind"], obj["metadata"]["name"], *where, check=False)
        if obj["kind"] == "CustomResourceDefinition":
            assert gone.returncode == 0
        else:
            assert gone.returncode != 0 and "NotFound" in gone.stderr, f"{obj['kind']} {obj['metadata']['name']}"
    kubectl("get", "appschedule", "shop", "-n", app)
    stuck = [
        j
        for j in json.loads(kubectl("get", "jobs", "-n", app, "-o", "json").stdout)["items"]
        if "appschedule.dev/ledger" in (j["metadata"].get("finalizers") or [])
    ]
    assert not stuck


def test_watch_namespaces_confines_the_operator(
    helm: Helm, kubectl: Kubectl, cluster: ClusterUnderTest, crd: str, namespaces: list[str], tmp_path: Path
) -> None:
    ops, watched, other = new_namespace(kubectl), new_namespace(kubectl), new_namespace(kubectl)
    namespaces += [ops, watched, other]
    release = f"w{uuid.uuid4().hex[:6]}"
    fullname = f"{release}-appschedule-operator"
    values = {
        **NO_NODE,
        "crds": {"enabled": False},
        "watchNamespaces": [watched],
        "webhook": {"port": 20311, "timeoutSeconds": 8},
        "metrics": {"port": 20312},
        "liveness": {"port": 20313},
    }
    helm(
        "install",
        release,
        str(chart.CHART),
        "-n",
        ops,
        "-f",
        "-",
        input=json.dumps(values),
    )
    who = f"--as=system:serviceaccount:{ops}:{fullname}"
    for verb, resource in (
        ("create", "cronjobs"),
        ("list", "appschedules"),
        ("patch", "jobs"),
        ("create", "jobs"),
        ("list", "deployments"),
    ):
        assert kubectl("auth", "can-i", verb, resource, "-n", watched, who, check=False).stdout.strip() == "yes"
        assert kubectl("auth", "can-i", verb, resource, "-n", other, who, check=False).stdout.strip() == "no"
    for namespace in (other, watched):
        _deployment(kubectl, namespace)
    # not watched: the webhook does not see it (no replica need answer)
    kubectl("apply", "-f", "-", input=json.dumps(_shop(other)))
    operator = HostedOperator(kubectl, cluster.kubeconfig, release, ops, tmp_path)
    try:
        operator.start()
        chart.apply_reviewed(kubectl, _shop(watched))
        _reconcile_key_and_record(kubectl, watched)
        assert kubectl("get", "cronjobs", "-n", other, "-o", "name").stdout.strip() == ""
        status = json.loads(kubectl("get", "appschedule", "shop", "-n", other, "-o", "json").stdout).get("status")
        assert not status
        # the key webhook sees only the watched namespace
        manual = _job_with_task_label(kubectl, other)
        assert "APPSCHEDULE_IDEMPOTENCY_KEY" not in kubectl("get", "job", manual, "-n", other, "-o", "json").stdout
        forbidden = operator.forbidden()
        # the hook, as the ServiceAccount with Roles only, releases the watched namespace's running Job
        assert re.fullmatch(r"released [1-9][0-9]* Job\(s\)", _uninstall(helm, kubectl, operator))
    finally:
        operator.stop()
    assert not forbidden, forbidden


# -- helpers


def _webhook_tls(kubectl: Kubectl, namespace: str, fullname: str) -> tuple[str, str, str]:
    secret = json.loads(kubectl("get", "secret", f"{fullname}-webhook-tls", "-n", namespace, "-o", "json").stdout)
    config = json.loads(kubectl("get", "mutatingwebhookconfiguration", fullname, "-o", "json").stdout)
    deployment = json.loads(kubectl("get", "deployment", fullname, "-n", namespace, "-o", "json").stdout)
    checksum = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/webhook-tls"]
    return secret["data"]["tls.crt"], config["webhooks"][0]["clientConfig"]["caBundle"], checksum


def _uninstall(helm: Helm, kubectl: Kubectl, operator: HostedOperator) -> str:
    """helm uninstall, its pre-delete hook played here (its pod waits for a node); returns the hook's output."""
    command = [
        helm.binary,
        f"--kubeconfig={helm.kubeconfig}",
        "uninstall",
        operator.release,
        "-n",
        operator.namespace,
        "--wait",
        "--timeout=120s",
    ]
    uninstall = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    hook = f"{operator.fullname}-release-jobs"
    try:
        pods = ("get", "pods", "-n", operator.namespace, "-l", f"job-name={hook}", "-o", "name")
        wait_for(lambda: kubectl(*pods).stdout.strip(), timeout=60, what="the pre-delete hook's pod")
        output = operator.run_like_kubelet(hook).strip()
        status = uninstall.wait(timeout=150)
    finally:
        if uninstall.poll() is None:
            uninstall.kill()
    assert status == 0, uninstall.stdout.read() if uninstall.stdout else ""
    return output


def _appschedule(namespace: str, name: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppSchedule",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"deploymentRef": {"name": "web"}, "timeZone": "UTC", "tasks": tasks},
    }


def _deployment(kubectl: Kubectl, namespace: str) -> None:
    deployment = yaml.safe_load((chart.REPO / "examples" / "deployment.yaml").read_text())
    deployment["metadata"]["namespace"] = namespace
    deployment["spec"]["replicas"] = 0
    kubectl("apply", "-f", "-", input=json.dumps(deployment))


def _shop(namespace: str) -> dict[str, Any]:
    tasks: list[dict[str, Any]] = [
        {"name": "report", "schedule": EVERY_MINUTE, "command": ["node", "report.js"]},
        {
            "name": "hang",
            "schedule": EVERY_MINUTE,
            "command": ["node", "hang.js"],
            "podAnnotations": {OUTCOME: "hang"},
        },
    ]
    return _appschedule(namespace, "shop", tasks)


def _finalizers(kubectl: Kubectl, namespace: str, job: str) -> list[str]:
    found = kubectl("get", "job", job, "-n", namespace, "-o", "jsonpath={.metadata.finalizers}", check=False)
    return json.loads(found.stdout) if found.stdout.strip() else []


def _status(kubectl: Kubectl, namespace: str) -> dict[str, Any]:
    body = json.loads(kubectl("get", "appschedule", "shop", "-n", namespace, "-o", "json").stdout)
    return body.get("status") or {}


def _reconcile_key_and_record(kubectl: Kubectl, namespace: str) -> None:
    """An AppSchedule reconciled into CronJobs, a run keyed by the webhook, recorded by the ledger."""
    wait_for(
        lambda: kubectl("get", "cronjob", "shop-report", "shop-hang", "-n", namespace, check=False).returncode == 0,
        timeout=30,
        what="the CronJobs",
    )

    def ready() -> bool:
        return any(
            c["type"] == "Ready" and c["status"] == "True" for c in _status(kubectl, namespace).get("conditions", [])
        )

    wait_for(ready, timeout=30, what="Ready=True in the status")

    def recorded() -> dict[str, Any] | None:
        last = _last_run(kubectl, namespace, "report")
        return last if last.get("state") == "Succeeded" else None

    last = wait_for(recorded, timeout=100, what="a fire of the task, recorded by the ledger")
    body = json.loads(kubectl("get", "job", last["job"], "-n", namespace, "-o", "json").stdout)
    env = {e["name"]: e.get("value") for e in body["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["APPSCHEDULE_IDEMPOTENCY_KEY"] == f"report@{last['scheduledTime']}" == last["key"], (env, last)
    wait_for(lambda: not _finalizers(kubectl, namespace, last["job"]), timeout=30, what="the finalizer released")
    hang = wait_for(lambda: _last_run(kubectl, namespace, "hang"), timeout=45, what="the hanging run recorded")
    assert hang["state"] == "Active"


def _last_run(kubectl: Kubectl, namespace: str, task: str) -> dict[str, Any]:
    tasks = {t["name"]: t for t in _status(kubectl, namespace).get("tasks", [])}
    last: dict[str, Any] = tasks.get(task, {}).get("lastRun") or {}
    return last


def _job_with_task_label(kubectl: Kubectl, namespace: str) -> str:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "labelled", "namespace": namespace, "labels": {"appschedule.dev/task": "report"}},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "command": ["true"]}]}
            }
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(job))
    return "labelled"
