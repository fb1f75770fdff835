"""Fixtures for tests against a real Kubernetes API server and controllers.

The cluster is the one named by APPSCHEDULE_TEST_KUBECONFIG when set; otherwise the local control plane
of hack/cluster, reused when it already runs, else started for this session and stopped at its end.
Every test gets its own namespace. A failing test shows the tail of each component's log.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.kit.chart import Helm  # re-exported for the tests
from tests.kit.chart import Kubectl as Kubectl
from tests.kit.operator import Operator
from tests.kit.prometheus import Prometheus, rules
from tests.kit.wait import wait_for

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack" / "cluster"))
import localcluster  # noqa: E402


@dataclass
class ClusterUnderTest:
    kubeconfig: Path
    local: localcluster.LocalCluster | None  # None when the cluster was given from outside

    def need_local(self) -> localcluster.LocalCluster:
        if self.local is None:
            pytest.skip("needs the local cluster (stops and starts its components)")
        return self.local


_session_cluster: ClusterUnderTest | None = None


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterUnderTest]:
    global _session_cluster
    given = os.environ.get("APPSCHEDULE_TEST_KUBECONFIG")
    if given:
        _session_cluster = ClusterUnderTest(Path(given), None)
        yield _session_cluster
        return
    local = localcluster.LocalCluster()
    started = local.up(real_node=False, build=False)
    _session_cluster = ClusterUnderTest(local.kubeconfig, local)
    try:
        yield _session_cluster
    finally:
        if started:
            local.down()


@pytest.fixture(scope="session")
def api(cluster: ClusterUnderTest) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(cluster.kubeconfig))


@pytest.fixture
def namespace(api: client.ApiClient) -> Iterator[str]:
    """A fresh namespace with its default ServiceAccount in place (pods are refused until it is)."""
    core = client.CoreV1Api(api)
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    def default_sa() -> bool:
        return any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items)

    wait_for(default_sa, timeout=30, what=f"the default ServiceAccount in {name}")
    yield name
    core.delete_namespace(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and report.when in ("setup", "call") and _session_cluster and _session_cluster.local:
        for component in localcluster.COMPONENTS:
            report.sections.append((f"{component} log (tail)", _session_cluster.local.tail(component, 15)))
    if report.failed and report.when in ("setup", "call") and _operator is not None:
        report.sections.append(("operator log (tail)", "\n".join(_operator.lines()[-40:])))
    return report


@pytest.fixture(scope="session")
def kubectl(cluster: ClusterUnderTest) -> Kubectl:
    return Kubectl(cluster.kubeconfig)


@pytest.fixture(scope="session")
def crd(kubectl: Kubectl) -> str:
    """The AppSchedule and AppScheduleCalendar CRDs installed from crds/ (as a user would) and Established."""
    for name in ("appschedules", "appschedulecalendars"):
        path = REPO / "crds" / f"appschedule.dev_{name}.yaml"
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        kubectl.wait_established(f"{name}.appschedule.dev")
    # the schema reaches the published OpenAPI (what kubectl explain reads) a moment after Established
    wait_for(
        lambda: kubectl("explain", "appschedule.spec", check=False).returncode == 0,
        timeout=60,
        what="the AppSchedule schema in the published OpenAPI",
    )
    return "appschedules.appschedule.dev"


class OperatorProcess(Operator):
    """The operator as the integration tests run it (the kit's launcher): resyncs every 3 s, JSON logs,
    the liveness endpoint on ``liveness_port``, plus ``extra`` arguments."""

    def __init__(
        self, kubeconfig: Path, log: Path, *extra: str, liveness_port: int = 20290, tmp: Path | None = None
    ) -> None:
        self.liveness = f"http://127.0.0.1:{liveness_port}/healthz"
        self.tmp = tmp  # its TMPDIR, when given
        args = ["run", "--resync-seconds", "3", "--full-resync-every", "1", "--log-format", "json"]
        env = {**os.environ, "TMPDIR": str(tmp)} if tmp is not None else None
        super().__init__([*args, "--liveness", self.liveness, *extra], log=log, kubeconfig=kubeconfig, env=env)


_operator: OperatorProcess | None = None
METRICS_PORT = 20292
PROMETHEUS_PORT = 20297
RELEASE_NAMESPACE = "ops"  # the namespace the chart's rules say the operator runs in (its `up` series carry it)
SESSION_WEBHOOKS = (
    "--webhook-port",
    "20291",
    "--webhooks",
    "keys",
    "--webhook-config-name",
    "test-keys.appschedule.dev",
)


@pytest.fixture(scope="session")
def operator(
    cluster: ClusterUnderTest, crd: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    global _operator
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    tmp = tmp_path_factory.mktemp("operator-tmp")  # where it makes its webhook certificate (none given)
    # the key webhook on Jobs (validation of AppSchedules is tested with an operator of its own: the tests
    # here write invalid specs on purpose, as a user could while the webhook is down)
    _operator = OperatorProcess(
        cluster.kubeconfig, log, *SESSION_WEBHOOKS, "--metrics-port", str(METRICS_PORT), tmp=tmp
    )
    _operator.start_and_wait()
    yield _operator
    _operator.stop()


@pytest.fixture(scope="module")
def no_session_operator() -> Iterator[None]:
    """For a module whose own operators must be the only ones reconciling: the session's operator is
    stopped (when an earlier test started it) and started again after the module."""
    session = _operator
    running = session is not None and session.alive()
    if running and session:
        session.stop()
    yield
    if running and session:
        session.start_and_wait()


@pytest.fixture
def prometheus_server(cluster: ClusterUnderTest, tmp_path: Path) -> Iterator[Prometheus]:
    """Prometheus (Debian's server) scraping the session operator's metrics every second, as the chart's
    ServiceMonitor would (the job name, the namespace label), with the chart's rules (window 5m)."""
    groups, job = rules(Helm(cluster.kubeconfig), {"window": "5m"})
    targets = {job: f"127.0.0.1:{METRICS_PORT}"}
    server = Prometheus(tmp_path / "prometheus", PROMETHEUS_PORT, targets, groups, {"namespace": RELEASE_NAMESPACE})
    server.start()
    try:
        yield server
    finally:
        server.stop()
