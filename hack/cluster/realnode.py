"""The local cluster's optional real node (``REAL_NODE=1``): containerd, kubelet and kube-proxy.

kwok's fake node plays the kubelet for the fast tests; this tier runs pods for real: Debian's containerd
and runc, kubelet and kube-proxy built from the pinned Kubernetes module, CoreDNS from its pinned module
(the cluster DNS, on this machine's address, port 53), Debian's CNI plugins (a bridge with host-local
addresses), and images built here (images.py) imported with ``ctr``. A cluster started
with it has this node only (no kwok node), so every pod lands here as on kind.

What it needs of the machine, and how it gets it:

* root (containerd, kubelet and kube-proxy manage namespaces, cgroups, mounts and iptables);
* Debian's containerd, runc, containernetworking-plugins, iptables, conntrack, busybox-static and
  mmdebstrap: ``ensure_packages`` installs the missing ones with apt-get;
* a non-loopback address of this machine (the node's address): pods reach the API server there, through
  kube-proxy's rules for the ``kubernetes`` Service, so the API server listens on every address.

Everything it creates is in the cluster's state directory (containerd's root and state, kubelet's root,
pod logs, CNI config and address leases) except what the kernel keeps elsewhere: the bridge
``appsched0``, the kubelet's, kube-proxy's and the bridge plugin's iptables chains, the ``kubepods``
cgroups and the pods' network namespaces. ``cleanup`` removes exactly those after the components
stopped: shims whose containerd is ours, mounts under the state directory, the bridge, the chains
(``kube-proxy --cleanup``, then every ``KUBE-*`` and ``CNI-*`` chain: one real node per machine), the
cgroups.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from tests.kit.wait import Timeout, wait_for  # the repository's root is on the path (localcluster.py)

NODE_NAME = "appschedule-node-0"
BRIDGE = "appsched0"
POD_CIDR = "10.88.0.0/24"
COMPONENTS = ["containerd", "coredns", "kube-proxy", "kubelet"]  # started in this order after the control plane

# CoreDNS's user, and what it may do: read what its kubernetes plugin serves (as kubeadm grants it)
COREDNS_USER = "system:appschedule-coredns"
COREDNS_RBAC = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": COREDNS_USER},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["services", "endpoints", "pods", "namespaces"],
                    "verbs": ["list", "watch"],
                },
                {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": COREDNS_USER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": COREDNS_USER},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": COREDNS_USER}],
        },
    ],
}

PACKAGES = {  # what must exist -> the Debian package that provides it
    "/usr/bin/containerd": "containerd",
    "/usr/sbin/runc": "runc",
    "/usr/lib/cni/bridge": "containernetworking-plugins",
    "/usr/sbin/iptables": "iptables",
    "/usr/sbin/conntrack": "conntrack",
    "/bin/busybox": "busybox-static",
    "/usr/bin/mmdebstrap": "mmdebstrap",
}


# Prometheus' server and promtool, for the tests of the chart's alerts and dashboard (tests/integration/test_alerts.py)
PROMETHEUS_PACKAGES = {"/usr/bin/promtool": "prometheus", "/usr/bin/prometheus": "prometheus"}
# the claim's conformance suite runs on real servers (tests/claim/servers.py starts and stops them)
# the Fugit that Solid Queue and sidekiq-cron read schedules with: import source's Rails translations are checked on it
FUGIT_PACKAGES = {
    "/usr/bin/ruby": "ruby",
    "/usr/share/rubygems-integration/all/gems/fugit-1.5.2/lib/fugit.rb": "ruby-fugit",
}
# import source's Laravel translations are checked on Laravel's own ManagesFrequencies: tests/unit/test_phpsource.py
LARAVEL_PACKAGES = {
    "/usr/bin/php": "php-cli",
    "/usr/share/php/Illuminate/Console/Scheduling/ManagesFrequencies.php": "php-laravel-framework",
}
# the page of runs (kubectl appschedule ui) is tested in a real browser: tests/integration/test_page.py
BROWSER_PACKAGES = {"/usr/bin/chromium": "chromium", "/usr/bin/chromedriver": "chromium-driver"}
DATABASE_PACKAGES = {"/usr/lib/postgresql/15/bin/postgres": "postgresql", "/usr/sbin/mariadbd": "mariadb-server"}


def missing_packages(packages: dict[str, str] = PACKAGES) -> list[str]:
    return sorted({pkg for path, pkg in packages.items() if not Path(path).exists()})


def ensure_packages(packages: dict[str, str] = PACKAGES, needed_for: str = "the real node") -> None:
    """Install the Debian packages (apt-get, as root) unless they are all there."""
    missing = missing_packages(packages)
    if not missing:
        return
    if os.geteuid() != 0:
        raise SystemExit(f"{needed_for} needs root to install {' '.join(missing)} (or install them first)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    print(f"installing {' '.join(missing)} from Debian's packages ...", flush=True)
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        for command in (["apt-get", "update"], install):
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
                raise SystemExit(f"`{' '.join(command)}` failed (exit {done.returncode}):\n{tail}")


def node_ip() -> str:
    """This machine's address on its default route: where the node's pods reach the API server."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("192.0.2.1", 9))  # no packet is sent: this only asks the kernel for a route
        address = str(sock.getsockname()[0])
    if address.startswith("127."):
        raise SystemExit("the real node needs a non-loopback address (pods reach the API server there)")
    return address


def check_machine() -> None:
    """Say why the node cannot start here, before anything is started."""
    if os.geteuid() != 0:
        raise SystemExit("the real node runs containers: it needs root")
    if not Path("/sys/fs/cgroup").is_dir():
        raise SystemExit("the real node needs cgroups mounted at /sys/fs/cgroup")
    if _tcp_open(node_ip(), 53):
        raise SystemExit(f"port 53 of {node_ip()} is taken: the real node's cluster DNS listens there")
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        raise SystemExit(f"the bridge {BRIDGE} exists: another real node runs (one per machine), or a stale one")


def _tcp_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def dns_ready() -> bool:
    return _tcp_open(node_ip(), 53)


# ---------------------------------------------------------------------------------------------------
# Configuration


def prepare(state: Path, ports: dict[str, int], pause_ref: str) -> None:
    """containerd's, kubelet's, kube-proxy's and the CNI's configuration in the state directory."""
    node = state / "node"
    for sub in ("containerd/root", "containerd/state", "cni", "cni-ipam", "kubelet", "pod-logs"):
        (node / sub).mkdir(parents=True, exist_ok=True)
    (node / "containerd.toml").write_text(
        f"""version = 2
root = "{node / "containerd/root"}"
state = "{node / "containerd/state"}"
[grpc]
  address = "{socket_path(state)}"
[ttrpc]
  address = "{node / "containerd/ttrpc.sock"}"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_ref}"
  enable_selinux = false
  # our machines refuse a process a lower oom_score_adj than its parent's (kubelet asks -998 for sandboxes)
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{node / "cni"}"
"""
    )
    conflist = {
        "cniVersion": "1.0.0",
        "name": "appschedule",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(node / "cni-ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    (node / "cni" / "10-appschedule.conflist").write_text(json.dumps(conflist, indent=2))
    (node / "Corefile").write_text(
        f""".:53 {{
    bind {node_ip()}
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {state / "coredns.kubeconfig"} appschedule-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    forward . /etc/resolv.conf
    cache 30
}}
"""
    )
    pki = state / "pki"
    (node / "kubelet.yaml").write_text(
        json.dumps(
            {
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "kind": "KubeletConfiguration",
                "address": node_ip(),
                "port": ports["kubelet"],
                "readOnlyPort": 0,
                "healthzBindAddress": "127.0.0.1",
                "healthzPort": ports["kubelet-healthz"],
                "authentication": {
                    "anonymous": {"enabled": False},
                    "webhook": {"enabled": True},
                    "x509": {"clientCAFile": str(pki / "ca.crt")},
                },
                "authorization": {"mode": "Webhook"},
                "containerRuntimeEndpoint": f"unix://{socket_path(state)}",
                "cgroupDriver": "cgroupfs",
                "failCgroupV1": False,  # our machines have the hybrid layout
                "failSwapOn": False,
                "imageGCHighThresholdPercent": 100,  # the images were imported: nothing could pull them back
                "imageGCLowThresholdPercent": 99,
                "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
                "podLogsDir": str(node / "pod-logs"),
                "resolvConf": "/etc/resolv.conf",
                "clusterDomain": "cluster.local",
                "clusterDNS": [node_ip()],
                "maxPods": 40,
                "serializeImagePulls": False,
                "rotateCertificates": False,
                "protectKernelDefaults": False,
                "registerNode": True,
                "staticPodPath": "",
                "syncFrequency": "10s",
            },
            indent=2,
        )
    )
    (node / "kube-proxy.yaml").write_text(
        json.dumps(
            {
                "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
                "kind": "KubeProxyConfiguration",
                "clientConnection": {"kubeconfig": str(state / "kube-proxy.kubeconfig")},
                "mode": "iptables",
                "hostnameOverride": NODE_NAME,
                "clusterCIDR": POD_CIDR,
                "healthzBindAddress": f"127.0.0.1:{ports['kube-proxy-healthz']}",
                "metricsBindAddress": f"127.0.0.1:{ports['kube-proxy-metrics']}",
                "conntrack": {"maxPerCore": 0},  # leave the machine's conntrack table alone
            },
            indent=2,
        )
    )


def socket_path(state: Path) -> Path:
    return state / "node" / "containerd" / "containerd.sock"


def command(component: str, state: Path, binary: dict[str, str]) -> list[str]:
    node = state / "node"
    if component == "containerd":
        return ["containerd", f"--config={node / 'containerd.toml'}", "--log-level=warn"]
    if component == "kubelet":
        return [
            binary["kubelet"],
            f"--config={node / 'kubelet.yaml'}",
            f"--kubeconfig={state / 'kubelet.kubeconfig'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={node_ip()}",
            f"--root-dir={node / 'kubelet'}",
            f"--cert-dir={node / 'kubelet' / 'pki'}",
            "--node-labels=appschedule.dev/node=real",
            "--v=1",
        ]
    if component == "coredns":
        return [binary["coredns"], "-conf", str(node / "Corefile")]
    if component == "kube-proxy":
        return [binary["kube-proxy"], f"--config={node / 'kube-proxy.yaml'}", "--v=1"]
    raise KeyError(component)


def import_image(state: Path, archive: Path) -> None:
    """Load an OCI archive into the node's containerd, where the CRI (kubelet) finds it."""
    subprocess.run(
        ["ctr", f"--address={socket_path(state)}", "-n", "k8s.io", "images", "import", str(archive)],
        check=True,
        capture_output=True,
    )


def images(state: Path) -> list[str]:
    out = subprocess.run(
        ["ctr", f"--address={socket_path(state)}", "-n", "k8s.io", "images", "ls", "-q"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()


# ---------------------------------------------------------------------------------------------------
# Cleanup


def _processes() -> list[tuple[int, list[str]]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                found.append((int(entry.name), [a.decode(errors="replace") for a in argv if a]))
    return found


def _cgroup_pids(path: Path) -> list[int]:
    pids: list[int] = []
    for procs in path.rglob("cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            pids += [int(p) for p in procs.read_text().split()]
    return pids


def cleanup(state: Path, binary: dict[str, str]) -> None:
    """Remove what the node left outside its processes; safe to call when nothing is left."""
    node = state / "node"
    address = str(socket_path(state))
    # shims of our containerd, and every process in the pods' cgroups
    shims = [pid for pid, argv in _processes() if argv and "containerd-shim" in argv[0] and address in argv]
    cgroups = [Path(f"/sys/fs/cgroup/{c}/kubepods") for c in os.listdir("/sys/fs/cgroup")]
    for pid in shims + [p for c in cgroups if c.is_dir() for p in _cgroup_pids(c)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(Timeout):  # best effort: what is left is reported by the mounts and rules below
        wait_for(lambda: not any(_cgroup_pids(c) for c in cgroups if c.is_dir()), timeout=10, interval=0.1,
                 what="the pods' processes")  # fmt: skip
    # mounts under the state directory (overlay snapshots, volumes, pods' network namespaces), deepest first
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(f"{node}/") or point.startswith("/run/netns/cni-"):
                mounts.append(point)
    for point in sorted(set(mounts), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
    for netns in Path("/run/netns").glob("cni-*") if Path("/run/netns").is_dir() else []:
        with contextlib.suppress(OSError):
            netns.unlink()
    # the kubepods cgroups, leaves first
    for root in cgroups:
        if root.is_dir():
            for directory in sorted(
                (p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
            ):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            with contextlib.suppress(OSError):
                root.rmdir()
    # network: kube-proxy's rules, the kubelet's and the bridge plugin's chains, the bridge
    if "kube-proxy" in binary and Path(binary["kube-proxy"]).exists():
        subprocess.run([binary["kube-proxy"], "--cleanup"], capture_output=True)
    _remove_chains()
    subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)


def _remove_chains(prefixes: tuple[str, ...] = ("KUBE-", "CNI-")) -> None:
    """Drop the chains the kubelet, kube-proxy and the CNI plugins made (one real node per machine), and
    the rules of built-in chains that jump to them, in every table, IPv4 and IPv6."""
    for tool in ("iptables", "ip6tables"):
        if not shutil.which(f"{tool}-save"):
            continue
        for table in ("filter", "nat", "mangle"):
            rules = subprocess.run([f"{tool}-save", "-t", table], capture_output=True, text=True).stdout.splitlines()
            chains = [line[1:].split()[0] for line in rules if line.startswith(":") and line[1:].startswith(prefixes)]
            for line in rules:
                words = shlex.split(line) if line.startswith("-A ") else []
                if words and not words[1].startswith(prefixes) and any(f"-j {c}" in line for c in chains):
                    subprocess.run([tool, "-t", table, "-D", *words[1:]], capture_output=True)
            for flag in ("-F", "-X"):
                for chain in chains:
                    subprocess.run([tool, "-t", table, flag, chain], capture_output=True)
