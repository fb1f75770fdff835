"""The local cluster's build keys: pinned versions are read from the Go modules, and the cache key moves with them."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack" / "cluster"))
import localcluster  # noqa: E402


def test_pinned_versions_are_the_ones_the_issue_asks_for() -> None:
    versions = {tool.module: tool.version() for tool in localcluster.TOOLS}
    assert versions["kubernetes"].startswith(("v1.33.", "v1.32."))
    assert versions["etcd"].startswith("v3.5.")
    assert versions["kwok"].startswith("v0.")
    assert versions["helm"].startswith("v3.")


def test_kubernetes_reports_its_real_version() -> None:
    kubernetes = next(t for t in localcluster.TOOLS if t.module == "kubernetes")
    flags = kubernetes.ldflags()
    assert f"k8s.io/component-base/version.gitVersion={kubernetes.version()}" in flags
    assert f"k8s.io/client-go/pkg/version.gitVersion={kubernetes.version()}" in flags


def test_cache_key_names_the_version_and_changes_with_the_build() -> None:
    tool = localcluster.TOOLS[1]
    key = tool.cache_dir()
    assert key.name.startswith(f"{tool.module}-{tool.version()}-")
    other = localcluster.Tool(tool.module, tool.pinned, (("other", "example.com/other"),))
    assert other.cache_dir() != key


def test_every_staging_module_is_pinned_to_the_matching_release() -> None:
    gomod = (REPO / "hack/cluster/kubernetes/go.mod").read_text()
    version = next(t for t in localcluster.TOOLS if t.module == "kubernetes").version()
    staging = "v0." + version.split(".", 1)[1]
    replaces = [line.split() for line in gomod.splitlines() if "=>" in line]
    assert len(replaces) >= 30
    assert all(parts[-1] == staging for parts in replaces)


def test_the_soak_never_runs_on_the_test_cluster() -> None:
    """The soak stops the API server: its cluster is its own, whatever imported localcluster first (the test
    kit does, and once ran the soak on the test cluster's directory and ports)."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in ("APPSCHEDULE_CLUSTER_DIR", "APPSCHEDULE_PORT_OFFSET")}
    code = "from tests.soak import soak; print(soak.localcluster.STATE.name, soak.localcluster.PORT_OFFSET)"
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["soak-cluster", "2000"]


def test_every_component_is_one_entry_of_the_table_with_its_own_ports() -> None:
    """Ports, command and readiness of each component in one place; the ports below the ephemeral range."""
    assert set(localcluster.COMPONENTS) | set(localcluster.REAL_NODE_COMPONENTS) == set(localcluster.TABLE)
    assert list(localcluster.TABLE)[: len(localcluster.COMPONENTS)] == localcluster.COMPONENTS  # the start order
    owned = [name for component in localcluster.TABLE.values() for name in component.ports]
    assert len(owned) == len(set(owned)) == len(localcluster.PORTS)
    assert {
        name: port + localcluster.PORT_OFFSET
        for name, port in {
            "etcd": 16379, "etcd-peer": 16380, "kube-apiserver": 20443, "kube-controller-manager": 20257,
            "kube-scheduler": 20259, "kwok": 20280, "kubelet": 20250, "kubelet-healthz": 20248,
            "kube-proxy-healthz": 20256, "kube-proxy-metrics": 20249,
        }.items()
    } == localcluster.PORTS  # fmt: skip
    assert len(set(localcluster.PORTS.values())) == len(localcluster.PORTS)
    # at every offset the repository uses (the bench 1000, the soak 2000 and 3000, the real node 4000), no port
    # is one an outgoing connection can hold
    highest = max(port for c in localcluster.TABLE.values() for port in c.ports.values())
    assert highest + localcluster.PORT_OFFSET_MAX < localcluster.EPHEMERAL_PORTS_FROM
    assert all(component.readiness and callable(component.ready) for component in localcluster.TABLE.values())
