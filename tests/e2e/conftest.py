"""The user-level scenario against whatever cluster KUBECONFIG names (kind: `make e2e-kind`), or the
local cluster of hack/cluster when KUBECONFIG is unset (started for the session, stopped at its end).

With APPSCHEDULE_E2E_IMAGE (an operator image the cluster's nodes have, e.g. loaded into kind) the
chart's own pod runs the operator. Without it, the cluster has no node that can run the image (the local
one: kwok), and the operator runs on this machine as the chart's ServiceAccount (tests/chartkit.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.chartkit import REPO, Helm, Kubectl

sys.path.insert(0, str(REPO / "hack" / "cluster"))
import localcluster


@dataclass
class Target:
    kubeconfig: Path
    image: str | None  # the operator image the nodes run; None: the operator runs here


@pytest.fixture(scope="session")
def target() -> Iterator[Target]:
    image = os.environ.get("APPSCHEDULE_E2E_IMAGE") or None
    given = os.environ.get("KUBECONFIG")
    if given:
        yield Target(Path(given.split(os.pathsep)[0]), image)
        return
    local = localcluster.Cluster()
    started = local.up()
    try:
        yield Target(local.kubeconfig, image)
    finally:
        if started:
            local.down()


@pytest.fixture(scope="session")
def kubectl(target: Target) -> Kubectl:
    return Kubectl(target.kubeconfig)


@pytest.fixture(scope="session")
def helm(target: Target) -> Helm:
    return Helm(target.kubeconfig)
