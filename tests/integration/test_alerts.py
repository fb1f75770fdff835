"""The chart's alerts as Prometheus evaluates them: `promtool check rules` on the rules as the chart renders
them, and `promtool test rules` with input series for every alert, firing for the case it is written for
and silent for a healthy task, a task just created, an operator restart and a task deleted. The server
itself, scraping the operator on the local cluster, is in test_ledger.py (a real missed run) and the
dashboard's queries with it.

Series are sampled every minute; the rules' window is the chart's default (15m). An alert's value is the
counter's increase over a window whose samples span it exactly, so it is the plain difference (1), and
its annotations are the rule's with that value and the series' labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit import prometheus
from tests.kit.chart import Helm

from .conftest import ClusterUnderTest

SHOP = {"namespace": "shop", "appschedule": "shop", "task": "report"}
SELECTOR = 'namespace="shop", appschedule="shop", task="report"'
ALERTS = {  # alert -> the counter series it watches
    "AppScheduleMissedRun": f"appschedule_missed_runs_total{{{SELECTOR}}}",
    "AppScheduleRunFailed": f'appschedule_runs_total{{{SELECTOR}, result="failed"}}',
    "AppScheduleRunStuck": f'appschedule_runs_total{{{SELECTOR}, result="stuck"}}',
    "AppScheduleDuplicateRun": f"appschedule_duplicate_runs_total{{{SELECTOR}}}",
}
ABSORBED = f"appschedule_duplicate_runs_absorbed_total{{{SELECTOR}}}"  # the operator exports it at 0 with the rest


@pytest.fixture(scope="module")
def rendered(cluster: ClusterUnderTest) -> tuple[dict[str, Any], str]:
    prometheus.require()
    return prometheus.rules(Helm(cluster.kubeconfig))


def expanded(spec: dict[str, Any], alert: str, labels: dict[str, str], value: str) -> dict[str, str]:
    """The rule's annotations as Prometheus expands them for ``labels`` and ``value`` (humanized)."""
    rule = next(r for g in spec["groups"] for r in g["rules"] if r["alert"] == alert)
    out = {}
    for key, text in rule["annotations"].items():
        for name, label in labels.items():
            text = text.replace(f"{{{{ $labels.{name} }}}}", label)
        out[key] = text.replace("{{ $value | humanize }}", value)
    return out


def run_promtool_tests(tmp_path: Path, spec: dict[str, Any], tests: list[dict[str, Any]]) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests})
    )
    done = prometheus.promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_as_rendered_pass_promtool_check(rendered: tuple[dict[str, Any], str], tmp_path: Path) -> None:
    spec, _ = rendered
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(spec))
    checked = prometheus.promtool("check", "rules", str(tmp_path / "rules.yaml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 6 rules found" in checked.stdout


def test_each_run_alert_fires_for_its_case_within_the_window_and_resolves_after(
    rendered: tuple[dict[str, Any], str], tmp_path: Path
) -> None:
    """One run missed (failed, stuck, duplicated) at minute 16: its alert fires (missed, failed, stuck at once;
    a duplicate once no claim has absorbed it for the chart's `duplicateRunFor`, 10m), carries the task's labels
    and says how many; it is silent before, and again once the window has passed. A duplicate the claim absorbed
    (it lost its claim: it did nothing) never fires."""
    spec, _ = rendered
    tests = []
    for alert, series in ALERTS.items():
        labels = {**SHOP, "severity": "warning"}
        firing = "28m" if alert == "AppScheduleDuplicateRun" else "20m"
        tests.append(
            {
                "interval": "1m",
                "input_series": [{"series": series, "values": "0x15 1x30"}, {"series": ABSORBED, "values": "0x45"}],
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": alert, "exp_alerts": []},
                    {
                        "eval_time": firing,
                        "alertname": alert,
                        "exp_alerts": [{"exp_labels": labels, "exp_annotations": expanded(spec, alert, SHOP, "1")}],
                    },
                    {"eval_time": "40m", "alertname": alert, "exp_alerts": []},
                ],
            }
        )
    duplicate = ALERTS["AppScheduleDuplicateRun"]
    tests.append(
        {
            "name": "a duplicate the claim absorbed",
            "interval": "1m",
            "input_series": [{"series": duplicate, "values": "0x15 1x30"}, {"series": ABSORBED, "values": "0x18 1x27"}],
            "alert_rule_test": [
                {"eval_time": f"{minute}m", "alertname": "AppScheduleDuplicateRun", "exp_alerts": []}
                for minute in (20, 26, 28, 30, 40)
            ],
        }
    )
    tests.append(
        {
            "name": "a duplicate still running is not yet said to have done the work",
            "interval": "1m",
            "input_series": [{"series": duplicate, "values": "0x15 1x30"}, {"series": ABSORBED, "values": "0x45"}],
            "alert_rule_test": [{"eval_time": "20m", "alertname": "AppScheduleDuplicateRun", "exp_alerts": []}],
        }
    )
    run_promtool_tests(tmp_path, spec, tests)


def test_no_alert_for_a_healthy_task_a_new_task_an_operator_restart_or_a_deleted_task(
    rendered: tuple[dict[str, Any], str], tmp_path: Path
) -> None:
    """Healthy: runs start every minute, every problem counter stays 0. New: its series appear at 0 (the
    operator exports every counter of a task at 0 first). Restart: every counter drops to 0 and stays
    (increase() reads a drop as a reset, not as anything counted). Deleted: its series go stale."""
    spec, _ = rendered
    cases = {
        "healthy": {"started": "0+1x45", "problems": "0x45"},
        "new": {"started": "_x20 0+1x25", "problems": "_x20 0x25"},
        "restart": {"started": "0+1x20 0+1x25", "problems": "4x20 0x25"},
        "deleted": {"started": "0+1x15 stale", "problems": "0x15 stale"},
    }
    tests = []
    for case, values in cases.items():
        series = [{"series": f'appschedule_runs_total{{{SELECTOR}, result="started"}}', "values": values["started"]}]
        series += [{"series": s, "values": values["problems"]} for s in [*ALERTS.values(), ABSORBED]]
        checks = [
            {"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": []}
            for alert in ALERTS
            for minute in (5, 16, 21, 25, 30, 44)
        ]
        tests.append({"name": case, "interval": "1m", "input_series": series, "alert_rule_test": checks})
    run_promtool_tests(tmp_path, spec, tests)


def test_operator_down_fires_after_its_for_and_not_while_it_is_scraped(
    rendered: tuple[dict[str, Any], str], tmp_path: Path
) -> None:
    """up == 0 (or no up series at all) for the chart's `operatorDownFor` (5m) fires AppScheduleOperatorDown;
    a shorter gap, or up == 1, does not."""
    spec, job = rendered
    up = f'up{{job="{job}", namespace="ops", instance="10.0.0.1:8080"}}'
    labels = {"severity": "critical"}
    expected = expanded(spec, "AppScheduleOperatorDown", {}, "")
    tests: list[dict[str, Any]] = [
        {
            "name": "down",
            "interval": "1m",
            "input_series": [{"series": up, "values": "1x10 0x20"}],
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "AppScheduleOperatorDown", "exp_alerts": []},
                {"eval_time": "14m", "alertname": "AppScheduleOperatorDown", "exp_alerts": []},  # pending
                {
                    "eval_time": "17m",
                    "alertname": "AppScheduleOperatorDown",
                    "exp_alerts": [{"exp_labels": labels, "exp_annotations": expected}],
                },
            ],
        },
        {
            "name": "never scraped",
            "interval": "1m",
            "input_series": [{"series": 'up{job="something-else", namespace="ops"}', "values": "1x20"}],
            "alert_rule_test": [
                {
                    "eval_time": "6m",
                    "alertname": "AppScheduleOperatorDown",
                    "exp_alerts": [{"exp_labels": labels, "exp_annotations": expected}],
                },
            ],
        },
        {
            "name": "a short gap, and up",
            "interval": "1m",
            "input_series": [{"series": up, "values": "1x10 0x3 1x20"}],
            "alert_rule_test": [
                {"eval_time": f"{m}m", "alertname": "AppScheduleOperatorDown", "exp_alerts": []} for m in (5, 13, 20)
            ],
        },
    ]
    run_promtool_tests(tmp_path, spec, tests)


def test_task_paused_fires_while_the_gauge_says_so_and_resolves_on_resume(
    rendered: tuple[dict[str, Any], str], tmp_path: Path
) -> None:
    """appschedule_task_paused is 1 while a task is paused after its failures (suspendAfterFailures): the alert
    fires at once and resolves when the task is resumed (the gauge 0) or deleted (the series stale)."""
    spec, _ = rendered
    expected = expanded(spec, "AppScheduleTaskPaused", SHOP, "1")
    firing = [{"exp_labels": {**SHOP, "severity": "warning"}, "exp_annotations": expected}]
    cases = {"resumed": "0x5 1x10 0x10", "deleted": "0x5 1x10 stale"}
    tests = [
        {
            "name": case,
            "interval": "1m",
            "input_series": [{"series": f"appschedule_task_paused{{{SELECTOR}}}", "values": values}],
            "alert_rule_test": [
                {"eval_time": "3m", "alertname": "AppScheduleTaskPaused", "exp_alerts": []},
                {"eval_time": "8m", "alertname": "AppScheduleTaskPaused", "exp_alerts": firing},
                {"eval_time": "20m", "alertname": "AppScheduleTaskPaused", "exp_alerts": []},
            ],
        }
        for case, values in cases.items()
    ]
    run_promtool_tests(tmp_path, spec, tests)
