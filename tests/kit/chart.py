"""kubectl and helm against the cluster under test, and the Helm chart's operator run on this machine.

On a cluster without a real node (the local one: kwok plays the kubelet) the chart's operator pod is
admitted and scheduled but never runs. ``HostedOperator`` stands in for it: the operator process runs
here with exactly the container arguments of the chart's Deployment, authenticated as the chart's
ServiceAccount (a token from the TokenRequest API, so RBAC decides everything it may do), with the
webhook certificate of the chart's Secret; and the chart's webhook Service is pointed at this machine
(its pod selector replaced by an Endpoints object with this host's address), so the API server calls
the webhooks through the chart's configurations, Service and certificate. The local API server routes
webhook calls to endpoint addresses (``--enable-aggregator-routing``), as there is no kube-proxy.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "appschedule-operator"
KUBE_VERSION = "1.33.0"
# the pod annotation from which kwok plays a task pod's outcome on the local cluster (hack/cluster/stages.yaml)
OUTCOME = "test.appschedule.dev/outcome"
CLAIM = "test.appschedule.dev/claim"  # kwok's pod stages: the claim line its container writes (stages.yaml)
sys.path.insert(0, str(REPO / "hack" / "cluster"))
import localcluster  # noqa: E402

from .operator import LISTED, Operator, command  # noqa: E402
from .wait import wait_for  # noqa: E402

Run = Callable[..., subprocess.CompletedProcess[str]]


def tool(name: str) -> str:
    built = localcluster.TOOLS_BIN / name
    return str(built) if built.exists() else name


class Kubectl:
    """kubectl against the cluster under test (the pinned build when it is there, else the one on PATH)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.binary = tool("kubectl")
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.binary, f"--kubeconfig={self.kubeconfig}", *args], input=input, capture_output=True, text=True
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        return result

    def wait_established(self, crd: str, timeout: float = 60) -> None:
        """Wait for a CRD's Established condition. Not `kubectl wait`: on a CRD created a moment ago, which has
        no conditions yet, it fails ("accessor error: <nil>") instead of waiting."""
        jsonpath = "jsonpath={.status.conditions[?(@.type=='Established')].status}"
        wait_for(
            lambda: self("get", "crd", crd, "-o", jsonpath, check=False).stdout.strip() == "True",
            timeout=timeout,
            what=f"CRD {crd} to be Established",
        )


def user_role(namespace: str, user: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    """A Role with ``rules`` bound to the User ``user`` in ``namespace``, as one List to apply."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": user, "namespace": namespace},
        "rules": rules,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": user, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return {"apiVersion": "v1", "kind": "List", "items": [role, binding]}


class Helm:
    def __init__(self, kubeconfig: Path) -> None:
        self.binary = tool("helm")
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.binary, f"--kubeconfig={self.kubeconfig}", *args], input=input, capture_output=True, text=True
        )
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
        return result

    def template(
        self, values: dict[str, Any], *, release: str = "r", namespace: str = "ops", kube_version: str = KUBE_VERSION
    ) -> list[dict[str, Any]]:
        """The chart rendered offline (no lookup: the certificate is made anew) for a cluster of ``kube_version``."""
        out = subprocess.run(
            [
                self.binary,
                "template",
                release,
                str(CHART),
                "-n",
                namespace,
                f"--kube-version={kube_version}",
                "--include-crds",
                "-f",
                "-",
            ],
            input=json.dumps(values),
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            raise AssertionError(f"helm template failed: {out.stderr.strip()}")
        return [d for d in yaml.safe_load_all(out.stdout) if d]


def apply_reviewed(kubectl: Run, body: dict[str, Any], timeout: float = 30) -> None:
    """``kubectl apply`` of an object a failurePolicy Fail webhook reviews, retried while the API server
    cannot reach the webhook yet (a replica just became ready, an Endpoints object was just written);
    any other refusal fails at once."""

    def applied() -> bool:
        out = kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
        if out.returncode == 0:
            return True
        if "failed calling webhook" not in out.stderr:
            raise AssertionError(f"kubectl apply refused {body['metadata']['name']}: {out.stderr.strip()}")
        return False

    wait_for(applied, timeout=timeout, what=f"the API server to reach the webhook for {body['metadata']['name']}")


def host_address() -> str:
    """This machine's address on its default route (an Endpoints address may not be loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.123", 9))  # no packet is sent: this only picks the route
        address: str = probe.getsockname()[0]
    if address.startswith("127."):
        raise AssertionError("no non-loopback IPv4 address to point the webhook Service at")
    return address


def service_account_kubeconfig(kubectl: Run, namespace: str, name: str, admin: Path, path: Path) -> Path:
    """A kubeconfig that authenticates as a ServiceAccount with a bound token, nothing else."""
    token = kubectl("create", "token", name, "-n", namespace, "--duration=2h").stdout.strip()
    config = yaml.safe_load(admin.read_text())
    cluster = config["clusters"][0]["cluster"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "sa",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}],
            }
        )
    )
    return path


def adopt_crd(kubectl: Run, release: str, namespace: str) -> None:
    """Let a Helm release take over the AppSchedule and AppScheduleCalendar CRDs installed by kubectl (README:
    "Upgrading"), each that exists."""
    for crd in ("crd/appschedules.appschedule.dev", "crd/appschedulecalendars.appschedule.dev"):
        if kubectl("get", crd, check=False).returncode != 0:
            continue
        kubectl("label", "--overwrite", crd, "app.kubernetes.io/managed-by=Helm")
        kubectl(
            "annotate",
            "--overwrite",
            crd,
            f"meta.helm.sh/release-name={release}",
            f"meta.helm.sh/release-namespace={namespace}",
        )


class HostedOperator:
    """The chart's operator, run on this machine as the chart's ServiceAccount (see the module docstring)."""

    def __init__(self, kubectl: Run, admin: Path, release: str, namespace: str, workdir: Path) -> None:
        self.kubectl = kubectl
        self.admin = admin
        self.release = release
        self.namespace = namespace
        self.workdir = workdir
        self.fullname = f"{release}-appschedule-operator"
        self.log = workdir / "operator.log"
        self.operator: Operator | None = None
        self.kubeconfig = workdir / "sa.kubeconfig"

    def _get(self, kind: str, name: str) -> dict[str, Any]:
        out = self.kubectl("get", kind, name, "-n", self.namespace, "-o", "json").stdout
        found: dict[str, Any] = json.loads(out)
        return found

    def args(self) -> list[str]:
        """The chart Deployment's container arguments, with the certificate directory of this machine."""
        container = self._get("deployment", self.fullname)["spec"]["template"]["spec"]["containers"][0]
        certs = self.workdir / "webhook-tls"
        return [re.sub(r"^--webhook-cert-dir=.*", f"--webhook-cert-dir={certs}", a) for a in container["args"]]

    def _write_certificate(self) -> None:
        certs = self.workdir / "webhook-tls"
        certs.mkdir(exist_ok=True)
        data = self._get("secret", f"{self.fullname}-webhook-tls")["data"]
        for key in ("tls.crt", "tls.key", "ca.crt"):
            (certs / key).write_bytes(base64.b64decode(data[key]))

    def route_webhooks_here(self, port: int) -> None:
        """The webhook Service sends to this machine instead of the (never running) operator pod."""
        service = f"{self.fullname}-webhook"
        if self._get("service", service)["spec"].get("selector"):
            self.kubectl(
                "patch",
                "service",
                service,
                "-n",
                self.namespace,
                "--type=json",
                "-p",
                '[{"op": "remove", "path": "/spec/selector"}]',
            )
        endpoints = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": service, "namespace": self.namespace},
            "subsets": [{"addresses": [{"ip": host_address()}], "ports": [{"name": "https", "port": port}]}],
        }
        self.kubectl("apply", "-f", "-", input=json.dumps(endpoints))

    def start(self) -> None:
        self._write_certificate()
        args = self.args()
        port = int(next(a.split("=", 1)[1] for a in args if a.startswith("--webhook-port=")))
        self.route_webhooks_here(port)
        service_account_kubeconfig(self.kubectl, self.namespace, self.fullname, self.admin, self.kubeconfig)
        self.operator = Operator(args, log=self.log, kubeconfig=self.kubeconfig, name="the chart's operator")
        self.operator.start_and_wait(ready=LISTED)

    def run_like_kubelet(self, job: str) -> str:
        """Play the kubelet for a Job of the chart whose pod waits unscheduled: run its container's
        arguments here as the ServiceAccount, then bind the pod to the fake node, which reports it done."""
        body = self._get("job", job)
        (container,) = body["spec"]["template"]["spec"]["containers"]
        out = subprocess.run(
            command(*container["args"]),
            capture_output=True,
            text=True,
            env=dict(os.environ, KUBECONFIG=str(self.kubeconfig)),
            timeout=120,
        )
        if out.returncode != 0:
            raise AssertionError(f"{job}: {out.stderr}")
        pods = json.loads(
            self.kubectl("get", "pods", "-n", self.namespace, "-l", f"job-name={job}", "-o", "json").stdout
        )
        for pod in pods["items"]:
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": pod["metadata"]["name"], "namespace": self.namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "kwok-node-0"},
            }
            self.kubectl("create", "-f", "-", input=json.dumps(binding))
        return out.stdout

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """Stop it as the kubelet would (SIGTERM); returns its exit status."""
        return self.operator.stop(sig) if self.operator is not None else None

    def text(self) -> str:
        return self.operator.text() if self.operator is not None else ""

    def forbidden(self) -> list[str]:
        return [line for line in self.text().splitlines() if "Forbidden" in line or " 403" in line]


def rbac_rules(objects: Iterable[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, name, rule) for every rule of every Role and ClusterRole."""
    return [
        (o["kind"], o["metadata"]["name"], rule)
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
        for rule in o.get("rules") or []
    ]


def of_kind(objects: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


# The CRDs of the chart's optional parts, from the projects' own Go modules (pinned; the module proxy is
# reachable where the cluster tools are built), so a server-side dry-run validates those objects too.
THIRD_PARTY_CRDS = {
    "github.com/prometheus-operator/prometheus-operator@v0.79.2": [
        "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
        "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
    ],
    "github.com/cert-manager/cert-manager@v1.16.2": [
        "deploy/crds/crd-certificates.yaml",
        "deploy/crds/crd-issuers.yaml",
    ],
}


def third_party_crds(workdir: Path) -> list[dict[str, Any]]:
    crds = []
    for module, files in THIRD_PARTY_CRDS.items():
        out = subprocess.run(
            ["go", "mod", "download", "-json", module],
            cwd=workdir,
            capture_output=True,
            text=True,
            env=dict(os.environ, GOFLAGS="-mod=mod", GO111MODULE="on"),
        )
        if out.returncode != 0:
            raise AssertionError(f"go mod download {module}: {out.stdout} {out.stderr}")
        directory = Path(json.loads(out.stdout)["Dir"])
        for name in files:
            crd = yaml.safe_load((directory / name).read_text())
            # cert-manager's files are also its chart's templates: drop the templated labels
            crd["metadata"] = {"name": crd["metadata"]["name"]}
            crds.append(crd)
    return crds
