#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback, built from pinned Go modules.

etcd, kube-apiserver (RBAC on, service-account tokens signed and verified), kube-controller-manager
(every default controller: cronjob, job, garbage collector, service accounts...), kube-scheduler and
kwok with one fake node. No container image is pulled: kwok plays the kubelet and moves pods through
the stages in ``stages.yaml`` (run, succeed, fail on request, hang on request).

Invariants this file keeps:

* Binaries come from the Go modules under ``hack/cluster/<tool>/`` and are cached in
  ``$APPSCHEDULE_CACHE/tools/<tool>-<version>-<hash of go.mod, go.sum, our main.go and build flags>/``; a directory
  there is complete or absent (built into a temporary directory, then renamed), so ``tools`` does
  nothing when it is already there.
* Everything a running cluster owns lives in one state directory (``$APPSCHEDULE_CLUSTER_DIR``):
  certificates, configs, etcd data, one log per component and ``pids/<component>``, which holds the
  process id and its start time. ``down`` signals exactly those processes (never a process that merely
  reused the id) and removes the directory.
* ``up`` while a healthy cluster runs from the same state directory reuses it; when a port is taken by
  anything else it fails and says which, so two clusters never share ports.
* What the file knows of each component (its ports, its command line, when it is ready) is one entry of
  ``TABLE``. Every port is in ``PORTS``, shifted by ``$APPSCHEDULE_PORT_OFFSET`` (default 0): a second
  cluster needs both its own state directory and its own offset.

Usage: localcluster.py tools | node-tools | prom-tools | db-tools | ruby-tools | php-tools | up | down | status |
       stop C | start C | env
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the kit's wait is tests.kit.wait
from tests.kit.wait import Timeout, wait_for

import images
import realnode

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("APPSCHEDULE_CACHE", Path.home() / ".cache" / "appschedule-operator"))
STATE = Path(os.environ.get("APPSCHEDULE_CLUSTER_DIR", CACHE / "cluster"))
TOOLS_BIN = REPO / ".tools" / "bin"

HOST = "127.0.0.1"
# APPSCHEDULE_PORT_OFFSET moves every port, so a second cluster (with its own APPSCHEDULE_CLUSTER_DIR) can run
# beside the default one, e.g. the cluster benchmark's at offset 1000.
PORT_OFFSET = int(os.environ.get("APPSCHEDULE_PORT_OFFSET", "0"))
# Every port, at every offset used (up to PORT_OFFSET_MAX), stays below Linux's ephemeral range (32768 on): a
# port in it can be the local end of any outgoing connection (an API server's to etcd), and a component then
# fails to bind it ("address already in use": the kwok start that failed once in a while).
EPHEMERAL_PORTS_FROM = 32768
PORT_OFFSET_MAX = 4000
SERVICE_CIDR = "10.0.0.0/24"
NODE_NAME = "kwok-node-0"


# ---------------------------------------------------------------------------------------------------
# Building the binaries


@dataclass(frozen=True)
class Tool:
    """One pinned Go module under hack/cluster/<module>/ and the commands built from it."""

    module: str  # directory under hack/cluster and the Go module that is pinned there
    pinned: str  # the Go module whose version names the cache entry
    binaries: tuple[tuple[str, str], ...]  # (output name, Go package)

    @property
    def dir(self) -> Path:
        return HERE / self.module

    def version(self) -> str:
        text = (self.dir / "go.mod").read_text()
        match = re.search(rf"^require {re.escape(self.pinned)} (\S+)", text, re.M)
        if not match:
            raise SystemExit(f"{self.dir}/go.mod does not require {self.pinned}")
        return match.group(1)

    def ldflags(self) -> str:
        version = self.version()
        flags = ["-s", "-w"]
        if self.module == "kubernetes":
            major, minor = version.lstrip("v").split(".")[:2]
            for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
                flags += [
                    f"-X {pkg}.gitVersion={version}",
                    f"-X {pkg}.gitMajor={major}",
                    f"-X {pkg}.gitMinor={minor}",
                    f"-X {pkg}.gitTreeState=clean",
                    f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
                ]
        elif self.module == "helm":
            flags.append(f"-X helm.sh/helm/v3/internal/version.version={version}")
        elif self.module == "kwok":
            flags.append(f"-X sigs.k8s.io/kwok/pkg/consts.Version={version}")
        return " ".join(flags)

    def cache_dir(self) -> Path:
        digest = hashlib.sha256()
        # a main.go of ours (coredns) decides what is built; a tools.go only pins what go.mod already says
        ours = sorted(p for p in self.dir.glob("*.go") if p.name != "tools.go")
        for path in [self.dir / "go.mod", self.dir / "go.sum", *ours]:
            digest.update(path.read_bytes())
        digest.update(self.ldflags().encode())
        digest.update(repr(self.binaries).encode())
        return CACHE / "tools" / f"{self.module}-{self.version()}-{digest.hexdigest()[:10]}"

    def build(self) -> Path:
        """Build into the cache unless there; a failure names the tool and shows go's last lines."""
        target = self.cache_dir()
        if target.is_dir():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.module}-", dir=target.parent))
        started = time.monotonic()
        print(f"building {self.module} {self.version()} ({', '.join(n for n, _ in self.binaries)}) ...", flush=True)
        env = dict(os.environ, CGO_ENABLED="0")
        # one `go build` for all of a module's commands when go names them as we do: their links run in parallel
        together = all(package.rsplit("/", 1)[-1] == name for name, package in self.binaries)
        runs = (
            [[str(tmp) + os.sep, *(package for _, package in self.binaries)]]
            if together
            else [[str(tmp / name), package] for name, package in self.binaries]
        )
        log = target.parent / f"{self.module}-build.log"
        try:
            with log.open("w") as out:
                for output, *packages in runs:
                    command = ["go", "build", "-trimpath", "-ldflags", self.ldflags(), "-o", output, *packages]
                    code = subprocess.run(
                        command, cwd=self.dir, env=env, stdout=out, stderr=subprocess.STDOUT
                    ).returncode
                    if code != 0:
                        out.flush()
                        tail = "\n".join(log.read_text().splitlines()[-20:])
                        raise SystemExit(
                            f"building {self.module} failed after {time.monotonic() - started:.0f}s: "
                            f"`{' '.join(command[:2] + command[-len(packages) :])}` in {self.dir} exited {code}; "
                            f"its last lines ({log}):\n{tail}"
                        )
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log.unlink(missing_ok=True)
        print(f"built {self.module} in {time.monotonic() - started:.0f}s", flush=True)
        return target

    def built(self) -> bool:
        return self.cache_dir().is_dir()


TOOLS = [
    Tool(
        "kubernetes",
        "k8s.io/kubernetes",
        tuple(
            (name, f"k8s.io/kubernetes/cmd/{name}")
            for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
        ),
    ),
    Tool("etcd", "go.etcd.io/etcd/server/v3", (("etcd", "go.etcd.io/etcd/server/v3"),)),
    Tool("kwok", "sigs.k8s.io/kwok", (("kwok", "sigs.k8s.io/kwok/cmd/kwok"),)),
    Tool("helm", "helm.sh/helm/v3", (("helm", "helm.sh/helm/v3/cmd/helm"),)),
]
# The real node's (``REAL_NODE=1``): built only when that tier is asked for, from the same pinned module.
NODE_TOOLS = [
    Tool(
        "kubernetes",
        "k8s.io/kubernetes",
        tuple((name, f"k8s.io/kubernetes/cmd/{name}") for name in ("kubelet", "kube-proxy")),
    ),
    # only the plugins the real node's Corefile uses (hack/cluster/coredns/main.go), not every cloud SDK
    Tool("coredns", "github.com/coredns/coredns", (("coredns", "appschedule.dev/hack/cluster/coredns"),)),
]


def _build_all(tools: list[Tool]) -> None:
    """Two builds at a time: go compiles in parallel already, but a module's download, its linking and its
    slowest packages leave a core idle that the other build takes."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(tool.build) for tool in tools]:
            future.result()


def build_tools() -> Path:
    """Build (or find) every tool and link them all into .tools/bin (git-ignored)."""
    _build_all(TOOLS)
    return link_tools()


def link_tools() -> Path:
    TOOLS_BIN.mkdir(parents=True, exist_ok=True)
    for tool in TOOLS:
        for name, _ in tool.binaries:
            link = TOOLS_BIN / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(tool.cache_dir() / name)
    return TOOLS_BIN


def build_node_tools() -> None:
    _build_all(NODE_TOOLS)


def _timed(what: str, step: Callable[[], object]) -> None:
    started = time.monotonic()
    step()
    print(f"{what}: {time.monotonic() - started:.1f}s", flush=True)


def node_tools() -> None:
    """Everything the real node's tier needs beyond `tools`: Debian's packages, kubelet, kube-proxy, CoreDNS
    and the images it imports (pause, the operator's, the test app's, the claim demo's), each step timed."""
    _timed("node packages", realnode.ensure_packages)
    _timed("node binaries", build_node_tools)
    _timed("pause image", images.pause)
    _timed("test app image", images.testapp)
    _timed("claim demo image", images.claim_demo)
    _timed("operator image", images.operator)


def require_built(*, real_node: bool) -> None:
    """What a test's fixture calls instead of building: fail at once, naming the make target, when a
    prerequisite is missing, so that a test's timeout never holds a build."""
    missing = [f"{t.module} ({t.cache_dir()})" for t in TOOLS if not t.built()]
    if missing:
        raise SystemExit(f"not built: {', '.join(missing)}; run `make tools` first")
    if real_node:
        missing = [f"{t.module} ({t.cache_dir()})" for t in NODE_TOOLS if not t.built()]
        missing += [f"Debian's {p}" for p in realnode.missing_packages()]
        missing += [f"the {name} image" for name, built in images.built().items() if not built]
        if missing:
            raise SystemExit(f"not built: {', '.join(missing)}; run `make node-tools` first")


def binary(name: str) -> str:
    for tool in TOOLS + NODE_TOOLS:
        for out, _ in tool.binaries:
            if out == name:
                path = tool.cache_dir() / name
                if not path.exists():
                    raise SystemExit(f"{name} is not built: run `make tools`")
                return str(path)
    raise KeyError(name)


# ---------------------------------------------------------------------------------------------------
# Certificates and configuration


SERVER_NAMES = (
    "127.0.0.1",
    "10.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
PKI_VALIDITY_DAYS = 3650


def _certs() -> Any:
    """The project's one certificate helper, appschedule.shell.certs (found in the source tree when this
    Python does not have the project installed; it needs the ``cryptography`` package)."""
    with contextlib.suppress(ImportError):
        from appschedule.shell import certs

        return certs
    sys.path.append(str(REPO / "operator"))
    try:
        from appschedule.shell import certs
    except ImportError as error:
        raise SystemExit(
            f"the local cluster's certificates need the project's Python packages ({error}): "
            f"run `make cluster-up`, or {REPO / '.venv/bin/python'} {Path(__file__).name} up"
        ) from None
    return certs


def _write_pki(pki: Path, users: dict[str, tuple[str, str | None]], server_ips: tuple[str, ...]) -> None:
    """The cluster's CA, the API server's serving certificate, a client certificate per user (name ->
    (CN, O)), and the service-account signing key pair."""
    certs = _certs()
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    now = datetime.datetime.now(datetime.UTC)
    validity = datetime.timedelta(days=PKI_VALIDITY_DAYS)
    authority = certs.Authority.create("appschedule-local-ca", now, validity)
    certs.write_pem(pki / "ca.crt", authority.cert)
    certs.write_pem(pki / "ca.key", authority.key)
    hosts = (*server_ips, *SERVER_NAMES)
    apiserver = certs.subject("kube-apiserver")
    issued = {
        "kube-apiserver": authority.issue(apiserver, now, hosts=hosts, server=True, client=True, validity=validity)
    }
    for user, (common_name, organization) in users.items():
        issued[user] = authority.issue(certs.subject(common_name, organization), now, client=True, validity=validity)
    for name, (key, cert) in issued.items():
        certs.write_pem(pki / f"{name}.crt", cert)
        certs.write_pem(pki / f"{name}.key", key)
    signing = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (pki / "sa.key").touch(mode=0o600)
    pem, pkcs8, spki = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.PublicFormat
    (pki / "sa.key").write_bytes(signing.private_bytes(pem, pkcs8, serialization.NoEncryption()))
    (pki / "sa.pub").write_bytes(signing.public_key().public_bytes(pem, spki.SubjectPublicKeyInfo))


def _kubeconfig(path: Path, pki: Path, user: str) -> None:
    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "appschedule-local",
                "cluster": {
                    "server": f"https://{HOST}:{PORTS['kube-apiserver']}",
                    "certificate-authority-data": b64("ca.crt"),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate-data": b64(f"{user}.crt"), "client-key-data": b64(f"{user}.key")},
            }
        ],
        "contexts": [{"name": "appschedule-local", "context": {"cluster": "appschedule-local", "user": user}}],
        "current-context": "appschedule-local",
    }
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)


def _prepare(state: Path, *, real_node: bool = False) -> None:
    pki = state / "pki"
    pki.mkdir(parents=True)
    users: dict[str, tuple[str, str | None]] = {
        "admin": ("kubernetes-admin", "system:masters"),
        "kube-controller-manager": ("system:kube-controller-manager", None),
        "kube-scheduler": ("system:kube-scheduler", None),
        "kwok": ("kwok-controller", "system:masters"),
    }
    if real_node:  # the Node authorizer and NodeRestriction know the kubelet by this name and group
        users["kubelet"] = (f"system:node:{realnode.NODE_NAME}", "system:nodes")
        users["kube-proxy"] = ("system:kube-proxy", None)  # bound to system:node-proxier by default
        users["coredns"] = (realnode.COREDNS_USER, None)  # may only read what it serves (COREDNS_RBAC)
    _write_pki(pki, users, (realnode.node_ip(),) if real_node else ())
    for user in users:
        _kubeconfig(state / f"{user}.kubeconfig", pki, user)
    shutil.copy(state / "admin.kubeconfig", state / "kubeconfig")
    (state / "kube-scheduler.yaml").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        f"clientConnection: {{kubeconfig: {state / 'kube-scheduler.kubeconfig'}}}\n"
        "leaderElection: {leaderElect: false}\n"
    )
    (state / "audit-policy.yaml").write_text(AUDIT_POLICY)
    (state / "logs").mkdir()
    (state / "pids").mkdir()
    if real_node:
        realnode.prepare(state, PORTS, images.PAUSE_REF)
        (state / "real-node").write_text(realnode.node_ip() + "\n")


# The API server's audit log (logs/audit.log, JSON lines): the ground truth of the soak (tests/soak), which
# rebuilds every task's runs from it without asking the operator, and of the real-node e2e's replicas (who led
# when, who wrote what). Only what those need is written: Job creations and Job status writes (with the object
# as stored), CronJob writes (suspension, duplicates); and, for ServiceAccounts outside kube-system (an
# operator in a pod: its token names the pod), their Lease writes with the Lease and every other write's
# metadata.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  verbs: [create]
  resources: [{group: batch, resources: [jobs]}]
- level: RequestResponse
  verbs: [update, patch]
  resources: [{group: batch, resources: [jobs/status]}]
- level: RequestResponse
  verbs: [create, update, patch, delete]
  resources: [{group: batch, resources: [cronjobs]}]
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
- level: RequestResponse
  userGroups: ["system:serviceaccounts"]
  verbs: [create, update, patch]
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
  verbs: [create, update, patch, delete, deletecollection]
- level: None
"""


def _audit_flags(state: Path) -> list[str]:
    policy = state / "audit-policy.yaml"
    if not policy.exists():  # a cluster prepared before the audit log existed
        return []
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={state / 'logs' / 'audit.log'}",
        "--audit-log-format=json",
        # 0 would mean 100 MB to the log rotator, which a 60-minute soak passes: 100 GB, and the soak reads any
        # rotated segment (audit-<time>.log) too
        "--audit-log-maxsize=102400",
        "--audit-log-mode=blocking",  # written before the response: nothing answered is missing from it
    ]


def _etcd(state: Path) -> list[str]:
    client = f"http://{HOST}:{PORTS['etcd']}"
    peer = f"http://{HOST}:{PORTS['etcd-peer']}"
    return [
        binary("etcd"),
        "--name=local",
        f"--data-dir={state / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=local={peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
        "--listen-metrics-urls=",
    ]


def _kube_apiserver(state: Path) -> list[str]:
    pki = state / "pki"
    # with a real node its pods reach the API server at the node's address (kube-proxy's rules for the
    # `kubernetes` Service), and the API server reaches the kubelet (logs) with the admin's certificate
    node_ip = (state / "real-node").read_text().strip() if (state / "real-node").exists() else None
    node_flags = [
        "--bind-address=0.0.0.0",
        f"--advertise-address={node_ip}",
        f"--kubelet-client-certificate={pki / 'admin.crt'}",
        f"--kubelet-client-key={pki / 'admin.key'}",
        "--kubelet-preferred-address-types=InternalIP",  # the node's name is in no DNS
        "--authorization-mode=Node,RBAC",
    ]
    loopback_flags = [
        f"--bind-address={HOST}",
        f"--advertise-address={HOST}",
        "--authorization-mode=RBAC",
        # webhooks and aggregated APIs are called at a Service's endpoint addresses, not its ClusterIP:
        # kwok's cluster has no kube-proxy (the chart's webhook Service is tested through this); the real
        # node's has, and the API server reaches the webhooks at the Service's ClusterIP as on kind
        "--enable-aggregator-routing=true",
    ]
    return [
        binary("kube-apiserver"),
        f"--etcd-servers=http://{HOST}:{PORTS['etcd']}",
        *(node_flags if node_ip else loopback_flags),
        f"--secure-port={PORTS['kube-apiserver']}",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'kube-apiserver.crt'}",
        f"--tls-private-key-file={pki / 'kube-apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        f"--requestheader-client-ca-file={pki / 'ca.crt'}",
        "--requestheader-allowed-names=front-proxy",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        "--profiling=false",
        "--v=1",
        *_audit_flags(state),
    ]


def _kube_controller_manager(state: Path) -> list[str]:
    pki, kubeconfig = state / "pki", state / "kube-controller-manager.kubeconfig"
    return [
        binary("kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--controllers=*",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}",
        f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--leader-elect=false",
        # every CronJob of the soak fires on the same second: at the default 20 requests a second the
        # controllers would take 40 s to start 200 runs (a busy real cluster raises this too)
        "--kube-api-qps=100",
        "--kube-api-burst=200",
        f"--bind-address={HOST}",
        f"--secure-port={PORTS['kube-controller-manager']}",
        "--profiling=false",
        "--v=1",
    ]


def _kube_scheduler(state: Path) -> list[str]:
    kubeconfig = state / "kube-scheduler.kubeconfig"
    return [
        binary("kube-scheduler"),
        f"--config={state / 'kube-scheduler.yaml'}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={HOST}",
        f"--secure-port={PORTS['kube-scheduler']}",
        "--v=1",
    ]


def _kwok(state: Path) -> list[str]:
    return [
        binary("kwok"),
        f"--kubeconfig={state / 'kwok.kubeconfig'}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        f"--server-address={HOST}:{PORTS['kwok']}",
        f"--config={HERE / 'stages.yaml'}",
    ]


def _node_binaries() -> dict[str, str]:
    return {n: binary(n) for n in ("kubelet", "kube-proxy", "coredns")}


def _node(component: str) -> Callable[[Path], list[str]]:
    """The real node's command for ``component`` (realnode.py), with the binaries built here."""
    return lambda state: realnode.command(
        component, state, {n: binary(n) for n in ("kubelet", "kube-proxy", "coredns")}
    )


# ---------------------------------------------------------------------------------------------------
# Processes


def _start_time(pid: int) -> str | None:
    """The kernel's start time of a process (field 22 of /proc/PID/stat), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie is gone for our purposes
        return None
    return fields[19]


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((HOST, port)) == 0


@dataclass(frozen=True)
class Component:
    """One process of the cluster, all it takes in one place: its ports (before ``PORT_OFFSET``), its command
    line, and when it is ready (``ready``, said as ``readiness`` while it is awaited)."""

    name: str
    ports: dict[str, int]
    command: Callable[[Path], list[str]]
    readiness: str
    ready: Callable[[LocalCluster], bool]


def _listening(port: str) -> Callable[[LocalCluster], bool]:
    return lambda _: _port_open(PORTS[port])


def _healthz(port: str) -> Callable[[LocalCluster], bool]:
    return lambda cluster: cluster.get("/healthz", port=PORTS[port])[0] == 200


# Every component, in the order they start (the control plane, then kwok's node or the real node's processes).
TABLE = {
    c.name: c
    for c in [
        Component("etcd", {"etcd": 16379, "etcd-peer": 16380}, _etcd, "etcd to listen", _listening("etcd")),
        Component(
            "kube-apiserver",
            {"kube-apiserver": 20443},
            _kube_apiserver,
            "the API server to be ready",
            lambda cluster: cluster.get("/readyz")[0] == 200,
        ),
        Component(
            "kube-controller-manager",
            {"kube-controller-manager": 20257},
            _kube_controller_manager,
            "kube-controller-manager to be healthy",
            _healthz("kube-controller-manager"),
        ),
        Component(
            "kube-scheduler",
            {"kube-scheduler": 20259},
            _kube_scheduler,
            "kube-scheduler to be healthy",
            _healthz("kube-scheduler"),
        ),
        Component("kwok", {"kwok": 20280}, _kwok, "kwok to serve", _listening("kwok")),
        # the real node's (REAL_NODE=1), in realnode.COMPONENTS' order
        Component(
            "containerd",
            {},
            _node("containerd"),
            "containerd to serve",
            lambda cluster: realnode.socket_path(cluster.state).exists(),
        ),
        Component("coredns", {}, _node("coredns"), "CoreDNS to serve", lambda _: realnode.dns_ready()),
        Component(
            "kube-proxy",
            {"kube-proxy-healthz": 20256, "kube-proxy-metrics": 20249},
            _node("kube-proxy"),
            "kube-proxy to serve",
            _listening("kube-proxy-healthz"),
        ),
        Component(
            "kubelet",
            {"kubelet": 20250, "kubelet-healthz": 20248},
            _node("kubelet"),
            "the kubelet to be healthy",
            _listening("kubelet-healthz"),
        ),
    ]
}
PORTS = {name: port + PORT_OFFSET for c in TABLE.values() for name, port in c.ports.items()}
if not 0 <= PORT_OFFSET <= PORT_OFFSET_MAX:
    raise SystemExit(f"APPSCHEDULE_PORT_OFFSET={PORT_OFFSET}: from 0 to {PORT_OFFSET_MAX} (ports below 32768)")
CONTROL_PLANE = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
COMPONENTS = [*CONTROL_PLANE, "kwok"]
# REAL_NODE=1 at `up`: a real node (realnode.py) instead of kwok's fake one; the state directory remembers it
REAL_NODE_COMPONENTS = [*CONTROL_PLANE, *realnode.COMPONENTS]


class LocalCluster:
    """The cluster whose state lives in ``state``. All methods are safe to call repeatedly."""

    state: Path
    kubeconfig: Path

    def __init__(self, state: Path = STATE) -> None:
        self.state = state
        self.kubeconfig = state / "kubeconfig"

    @property
    def real_node(self) -> bool:
        """Whether this cluster was started with the real node (REAL_NODE=1)."""
        return (self.state / "real-node").exists()

    @property
    def components(self) -> list[str]:
        return REAL_NODE_COMPONENTS if self.real_node else COMPONENTS

    # -- process bookkeeping

    def _pidfile(self, component: str) -> Path:
        return self.state / "pids" / component

    def pid(self, component: str) -> int | None:
        """The id of the component's process when the process we started is still the one running."""
        try:
            pid_text, started = self._pidfile(component).read_text().split()
        except (OSError, ValueError):
            return None
        pid = int(pid_text)
        return pid if _start_time(pid) == started else None

    def log(self, component: str) -> Path:
        return self.state / "logs" / f"{component}.log"

    def running(self) -> list[str]:
        return [c for c in self.components if self.pid(c) is not None]

    def start(self, component: str) -> None:
        if self.pid(component) is not None:
            return
        with open(self.log(component), "ab") as log:
            log.write(f"\n==== start {time.strftime('%Y-%m-%dT%H:%M:%S')} ====\n".encode())
            log.flush()
            process = subprocess.Popen(
                TABLE[component].command(self.state),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.state,
            )
        started = None
        for _ in range(100):
            started = _start_time(process.pid)
            if started:
                break
            time.sleep(0.01)
        self._pidfile(component).write_text(f"{process.pid} {started}\n")
        self._wait_component(component, process)

    def stop(self, component: str, *, sig: signal.Signals = signal.SIGTERM, timeout: float = 20) -> None:
        """Stop the component's process (exactly the one we started) and wait until it is gone."""
        pid = self.pid(component)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

            def gone() -> bool:
                self._reap(pid)
                return self.pid(component) is None

            try:
                wait_for(gone, timeout=timeout, what=f"{component} to stop", interval=0.05)
            except Timeout:
                os.kill(pid, signal.SIGKILL)
                wait_for(gone, timeout=timeout, what=f"{component} to stop after SIGKILL", interval=0.05)
        self._pidfile(component).unlink(missing_ok=True)

    @staticmethod
    def _reap(pid: int) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)

    # -- readiness

    def _ssl(self) -> ssl.SSLContext:
        pki = self.state / "pki"
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        return context

    def get(self, path: str, *, port: int | None = None) -> tuple[int, str]:
        url = f"https://{HOST}:{port or PORTS['kube-apiserver']}{path}"
        context = self._ssl()
        if port is not None:  # component health endpoints serve self-signed certificates
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        try:
            with urllib.request.urlopen(url, context=context, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except (OSError, ssl.SSLError) as error:
            return 0, str(error)

    def _wait(
        self,
        what: str,
        check: Callable[[], bool],
        component: str,
        process: subprocess.Popen[bytes] | None = None,
        timeout: float = 90,
    ) -> None:
        """The kit's wait (tests/kit/wait.py); what fails it ends the command, with the component's log."""

        def alive() -> None:
            if process is not None and process.poll() is not None:
                raise SystemExit(
                    f"{component} exited with {process.returncode} before {what}:\n" + self.tail(component)
                )

        try:
            wait_for(check, timeout=timeout, what=what, interval=0.2, guard=alive)
        except Timeout as error:
            raise SystemExit(f"{error}:\n" + self.tail(component)) from None

    def _wait_component(self, component: str, process: subprocess.Popen[bytes]) -> None:
        spec = TABLE[component]
        self._wait(spec.readiness, lambda: spec.ready(self), component, process)

    def tail(self, component: str, lines: int = 30) -> str:
        try:
            text = self.log(component).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no log for {component})"
        return "\n".join(f"  {component}| {line}" for line in text)

    def healthy(self) -> bool:
        return self.running() == self.components and self.get("/readyz")[0] == 200

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        result = subprocess.run(
            [binary("kubectl"), f"--kubeconfig={self.kubeconfig}", *args], input=input, capture_output=True, text=True
        )
        if check and result.returncode != 0:
            raise SystemExit(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    # -- whole cluster

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One up or down at a time per state directory (two would remove each other's state)."""
        self.state.parent.mkdir(parents=True, exist_ok=True)
        with open(self.state.parent / f".{self.state.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def up(self, *, real_node: bool | None = None, build: bool = True) -> bool:
        """Start the cluster, or reuse the one running from this state directory. True when started.

        ``real_node`` (default: ``REAL_NODE=1`` in the environment) starts the real node instead of kwok's.
        ``build=False`` (the tests' fixtures): build and install nothing, fail at once when something is
        missing (``require_built``)."""
        if real_node is None:
            real_node = os.environ.get("REAL_NODE") == "1"
        with self._locked():
            return self._up(real_node, build)

    def _up(self, real_node: bool, build: bool) -> bool:
        if self.running() and self.real_node != real_node:
            raise SystemExit(
                f"the cluster running in {self.state} {'has' if self.real_node else 'does not have'} the real node;"
                " run `make cluster-down` first"
            )
        if self.running():
            if self.healthy():
                print(f"reusing the running cluster in {self.state}")
                return False
            raise SystemExit(
                f"a cluster in {self.state} is partly running ({', '.join(self.running())}); "
                "run `make cluster-down` first"
            )
        busy = [f"{name} ({port})" for name, port in PORTS.items() if _port_open(port)]
        if busy:
            raise SystemExit(
                f"ports in use by a process this cluster did not start: {', '.join(busy)}; "
                "is another local cluster running from a different APPSCHEDULE_CLUSTER_DIR?"
            )
        if build:
            build_tools()
            if real_node:
                node_tools()
        else:
            require_built(real_node=real_node)
            link_tools()
        if self.real_node:  # a real node whose processes were killed (a run stopped hard): clear what it left
            print(f"a real node in {self.state} was stopped without `make cluster-down`: removing what it left")
            self._down(quiet=True)
        if real_node:
            realnode.check_machine()
            pause = images.pause(build=False)
        started = time.monotonic()
        if self.state.exists():
            shutil.rmtree(self.state)
        _prepare(self.state, real_node=real_node)
        try:
            for component in self.components:
                if component == "coredns":
                    self.kubectl("apply", "-f", "-", input=json.dumps(realnode.COREDNS_RBAC))
                self.start(component)
                if component == "containerd":
                    realnode.import_image(self.state, pause)
            if real_node:
                self._wait_node(realnode.NODE_NAME, "the real node")
            else:
                self._add_node()
        except BaseException:
            self._down(quiet=True)
            raise
        print(f"cluster up in {time.monotonic() - started:.1f}s")
        return True

    def _add_node(self) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": NODE_NAME,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {
                    "kubernetes.io/hostname": NODE_NAME,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
            },
        }
        self.kubectl("apply", "-f", "-", input=json.dumps(node))
        self._wait_node(NODE_NAME, "the fake node")

    def _wait_node(self, name: str, what: str) -> None:
        def node_ready() -> bool:
            out = self.kubectl(
                "get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False
            )
            return out.strip() == "True"

        def default_service_account() -> bool:
            return bool(
                self.kubectl("get", "serviceaccount", "default", "-n", "default", "-o", "name", check=False).strip()
            )

        self._wait(f"{what} to be Ready", node_ready, "kubelet" if self.real_node else "kwok", timeout=120)
        self._wait("the default ServiceAccount", default_service_account, "kube-controller-manager")

    def down(self, *, quiet: bool = False) -> None:
        """Stop exactly the processes this state directory started, newest first, and remove the state."""
        with self._locked():
            self._down(quiet=quiet)

    def _down(self, *, quiet: bool = False) -> None:
        real_node = self.real_node
        for component in reversed(self.components):
            self.stop(component)
        if real_node:  # what the node's processes leave outside them: containers, mounts, bridge, rules
            node_binaries = {n: str(t.cache_dir() / n) for t in NODE_TOOLS for n, _ in t.binaries}
            realnode.cleanup(self.state, node_binaries)
        if self.state.exists():
            shutil.rmtree(self.state)
        if not quiet:
            print(f"cluster stopped; removed {self.state}")


def usage(cluster: LocalCluster) -> str:
    return (
        f"kubeconfig: {cluster.kubeconfig}\n"
        f"  export KUBECONFIG={cluster.kubeconfig} PATH={TOOLS_BIN}:$PATH\n"
        f"  kubectl get nodes\n"
        f"logs: {cluster.state / 'logs'}/<component>.log"
    )


def main(argv: list[str]) -> int:
    cluster = LocalCluster()
    command = argv[1] if len(argv) > 1 else "status"
    if command == "tools":
        started = time.monotonic()
        print(f"tools in {build_tools()} ({time.monotonic() - started:.1f}s)")
    elif command == "node-tools":
        started = time.monotonic()
        node_tools()
        print(f"node tools ({time.monotonic() - started:.1f}s)")
    elif command == "prom-tools":
        started = time.monotonic()
        realnode.ensure_packages(realnode.PROMETHEUS_PACKAGES, "the tests of the alerts and the dashboard")
        print(f"prometheus and promtool from Debian's packages ({time.monotonic() - started:.1f}s)")
    elif command == "browser-tools":
        started = time.monotonic()
        realnode.ensure_packages(realnode.BROWSER_PACKAGES, "the page of runs' tests in a real browser")
        print(f"Chromium and chromium-driver from Debian's packages ({time.monotonic() - started:.1f}s)")
    elif command == "ruby-tools":
        started = time.monotonic()
        realnode.ensure_packages(realnode.FUGIT_PACKAGES, "the check of import source's Rails schedules")
        print(f"Ruby and Fugit from Debian's packages ({time.monotonic() - started:.1f}s)")
    elif command == "php-tools":
        started = time.monotonic()
        realnode.ensure_packages(realnode.LARAVEL_PACKAGES, "the check of import source's Laravel schedules")
        print(f"PHP and Laravel from Debian's packages ({time.monotonic() - started:.1f}s)")
    elif command == "db-tools":
        started = time.monotonic()
        realnode.ensure_packages(realnode.DATABASE_PACKAGES, "the claim's conformance suite")
        print(f"PostgreSQL and MariaDB from Debian's packages ({time.monotonic() - started:.1f}s)")
    elif command == "up":
        cluster.up()
        print(usage(cluster))
    elif command == "down":
        cluster.down()
    elif command == "status":
        for component in cluster.components:
            print(f"{component:24} {cluster.pid(component) or 'stopped'}")
        return 0 if cluster.healthy() else 1
    elif command in ("stop", "start") and len(argv) == 3 and argv[2] in cluster.components:
        getattr(cluster, command)(argv[2])
    elif command == "env":
        print(f"export KUBECONFIG={cluster.kubeconfig} PATH={TOOLS_BIN}:$PATH")
    else:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
