"""The chart's alert rules and dashboard, as Prometheus reads them, and a real Prometheus server for tests.

``rules(helm, values)`` renders the chart and returns its PrometheusRule's ``spec`` (the rule-file form
promtool and the server read) and the scrape job name its OperatorDown alert watches. ``Prometheus`` is the
server from Debian's package (``make prom-tools``), started on loopback with a directory of its own,
scraping given targets every second and evaluating the rules every second; it is stopped by the test.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from .chart import Helm
from .wait import wait_for

PROMTOOL = "/usr/bin/promtool"
SERVER = "/usr/bin/prometheus"
DASHBOARD = Path(__file__).resolve().parents[2] / "charts" / "appschedule-operator" / "files" / "dashboard.json"


def require() -> None:
    """Fail naming the target when Prometheus is not installed (never installed inside a test's timeout)."""
    missing = [p for p in (PROMTOOL, SERVER) if not Path(p).exists()]
    if missing:
        raise AssertionError(f"not installed: {', '.join(missing)}; run `make prom-tools` first")


def rules(helm: Helm, values: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """The chart's rule groups (the PrometheusRule's spec) and the job name AppScheduleOperatorDown watches."""
    objects = helm.template({"prometheusRule": {"enabled": True, **(values or {})}})
    (rule,) = [o for o in objects if o.get("kind") == "PrometheusRule"]
    spec: dict[str, Any] = rule["spec"]
    down = next(r for g in spec["groups"] for r in g["rules"] if r["alert"] == "AppScheduleOperatorDown")
    found = re.search(r'job="([^"]+)"', down["expr"])
    assert found, down["expr"]
    return spec, found.group(1)


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


class Prometheus:
    """A Prometheus server on 127.0.0.1:``port`` scraping ``targets`` (job name -> host:port) every second, each
    target given ``labels`` (as a ServiceMonitor gives its Service's namespace)."""

    def __init__(
        self,
        workdir: Path,
        port: int,
        targets: dict[str, str],
        groups: dict[str, Any],
        labels: dict[str, str] | None = None,
    ) -> None:
        require()
        self.workdir, self.port = workdir, port
        self.url = f"http://127.0.0.1:{port}"
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "rules.yaml").write_text(yaml.safe_dump(groups))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(workdir / "rules.yaml")],
            "scrape_configs": [
                # honor_labels: as the chart's ServiceMonitor (honorLabels), so a metric's own namespace label
                # (the AppSchedule's) is kept, not replaced by the target's (the operator's)
                {
                    "job_name": job,
                    "honor_labels": True,
                    "static_configs": [{"targets": [address], "labels": labels or {}}],
                }
                for job, address in targets.items()
            ],
        }
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "prometheus.log"

    def start(self) -> None:
        data = self.workdir / "data"
        shutil.rmtree(data, ignore_errors=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    SERVER,
                    f"--config.file={self.workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={data}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--web.enable-lifecycle",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(self._ready, timeout=60, what=f"Prometheus on {self.url} ready", interval=0.2)

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"Prometheus exited ({self.process.returncode}): {self.tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as answer:
            body = json.loads(answer.read())
        assert body.get("status") == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> dict[str, Any]:
        """An instant query: {"resultType": ..., "result": [...]}."""
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        found: dict[str, Any] = self._get("/api/v1/query", **params)
        return found

    def query_range(self, expr: str, start: float, end: float, step: float) -> dict[str, Any]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        found: dict[str, Any] = self._get("/api/v1/query_range", **params)
        return found

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts of Prometheus' own alerts API (pending and firing), each with labels and state."""
        found: list[dict[str, Any]] = self._get("/api/v1/alerts")["alerts"]
        return found

    def targets_up(self) -> bool:
        active = self._get("/api/v1/targets")["activeTargets"]
        return bool(active) and all(t.get("health") == "up" for t in active)


def dashboard_queries(variables: dict[str, str]) -> list[tuple[str, str, str]]:
    """Every query of the dashboard: (panel title, panel type, expr) with the variables substituted."""
    board = json.loads(DASHBOARD.read_text())
    found = []
    for panel in board["panels"]:
        for target in panel.get("targets") or []:
            expr = str(target["expr"])
            for name in sorted(variables, key=len, reverse=True):  # $__rate_interval before $__interval
                expr = expr.replace(f"${name}", variables[name])
            assert "$" not in expr, f"{panel['title']}: a variable left in {expr}"
            found.append((str(panel["title"]), str(panel["type"]), expr))
    return found
