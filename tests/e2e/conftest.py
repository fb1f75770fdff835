"""The user-level scenario against whatever cluster KUBECONFIG names (kind: `make e2e-kind`), or the
local cluster of hack/cluster when KUBECONFIG is unset (started for the session, stopped at its end).

With APPSCHEDULE_E2E_IMAGE (an operator image the cluster's nodes have, e.g. loaded into kind) the
chart's own pod runs the operator. Without it, the cluster has no node that can run the image (the local
one: kwok), and the operator runs on this machine as the chart's ServiceAccount (tests/kit/chart.py).

With REAL_NODE=1 (`make e2e-node`) the local cluster has a real node (hack/cluster/realnode.py) instead:
the operator image, a small test app and examples/claim-demo's app are built here (hack/cluster/images.py)
and imported into the node, the chart's pod runs the operator, and the task's pods really run. When the
node cannot start the session fails and says why; APPSCHEDULE_ALLOW_NO_REAL_NODE=1 turns that into a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kit.chart import REPO, Helm, Kubectl

sys.path.insert(0, str(REPO / "hack" / "cluster"))
import images
import localcluster
import realnode


@dataclass
class Target:
    kubeconfig: Path
    image: str | None  # the operator image the nodes run; None: the operator runs here
    testapp: str | None = None  # a small app image of ours the nodes run (the real node's)
    audit: Path | None = None  # the directory of the API server's audit log (a local cluster's)
    node_ip: str | None = None  # the real node's address: the claim demo's PostgreSQL listens there


@pytest.fixture(scope="session")
def target() -> Iterator[Target]:
    image = os.environ.get("APPSCHEDULE_E2E_IMAGE") or None
    given = os.environ.get("KUBECONFIG")
    if given:
        yield Target(Path(given.split(os.pathsep)[0]), image)
        return
    local = localcluster.LocalCluster()
    if os.environ.get("REAL_NODE") == "1":
        yield from _real_node(local)
        return
    started = local.up(real_node=False, build=False)
    try:
        yield Target(local.kubeconfig, image)
    finally:
        if started:
            local.down()


def _real_node(local: localcluster.LocalCluster) -> Iterator[Target]:
    try:
        started = local.up(real_node=True, build=False)
        archives = [images.operator(build=False), images.testapp(build=False), images.claim_demo(build=False)]
    except (SystemExit, OSError, subprocess.CalledProcessError) as error:
        why = f"the real node cannot start here: {error}"
        if os.environ.get("APPSCHEDULE_ALLOW_NO_REAL_NODE") == "1":
            pytest.skip(why)
        pytest.fail(why + " (APPSCHEDULE_ALLOW_NO_REAL_NODE=1 makes this a skip)")
    try:
        for archive in archives:
            realnode.import_image(local.state, archive)
        yield Target(local.kubeconfig, images.operator_ref(), images.TESTAPP_REF, audit=local.state / "logs",
                     node_ip=realnode.node_ip())  # fmt: skip
    finally:
        if started:
            local.down()


@pytest.fixture(scope="session")
def kubectl(target: Target) -> Kubectl:
    return Kubectl(target.kubeconfig)


@pytest.fixture(scope="session")
def helm(target: Target) -> Helm:
    return Helm(target.kubeconfig)
