"""The generated CRD on the real API server: it installs, explains itself, and rejects bad objects."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Kubectl

EXAMPLE = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples" / "appschedule.yaml").read_text())


def manifest(namespace: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(EXAMPLE)
    data["metadata"]["namespace"] = namespace
    data["spec"].update(changes)
    return data


def apply(kubectl: Kubectl, data: dict[str, Any]) -> Any:
    return kubectl("apply", "-f", "-", input=yaml.safe_dump(data), check=False)


def test_explain_reads_well(crd: str, kubectl: Kubectl) -> None:
    out = kubectl("explain", "appschedule.spec.tasks").stdout
    assert "The app's scheduled tasks; each becomes one CronJob." in out
    for field in ("schedule", "command", "concurrencyPolicy", "missedRunGraceSeconds", "timeZone"):
        assert field in out
    schedule = kubectl("explain", "appschedule.spec.tasks.schedule").stdout
    assert "Kubernetes CronJob syntax" in schedule


def test_valid_example_applies_and_lists_with_columns(crd: str, kubectl: Kubectl, namespace: str) -> None:
    result = apply(kubectl, manifest(namespace))
    assert result.returncode == 0, result.stderr
    header = kubectl("get", "appschedules", "-n", namespace).stdout.splitlines()[0].split()
    assert header == [
        "NAME",
        "DEPLOYMENT",
        "TASKS",
        "READY",
        "LAST",
        "RUN",
        "NEXT",
        "RUN",
        "MISSED",
        "DUPLICATES",
        "FAILED",
        "AGE",
    ]
    assert "asched" in kubectl("api-resources", "--api-group=appschedule.dev").stdout


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"tasks": []}, ["spec.tasks", "should have at least 1 items"]),
        ({"tasks": "weekly"}, ["spec.tasks", "must be of type array"]),
        ({"suspend": "yes"}, ["spec.suspend", "must be of type boolean"]),
        ({"deploymentRef": {"container": "app"}}, ["spec.deploymentRef.name", "Required value"]),
        (
            {"tasks": [{"name": "Weekly_Report", "schedule": "0 17 * * 5", "command": ["x"]}]},
            ["spec.tasks[0].name", "should match"],
        ),
        (
            {"tasks": [{"name": "x" * 64, "schedule": "0 17 * * 5", "command": ["x"]}]},
            ["spec.tasks[0].name", "may not be more than 63"],
        ),
        ({"tasks": [{"name": "a", "schedule": "0 17 * * 5", "command": []}]}, ["spec.tasks[0].command"]),
        (
            {"tasks": [{"name": "a", "schedule": "0 * * * *", "command": ["x"], "backoffLimit": "2"}]},
            ["spec.tasks[0].backoffLimit", "must be of type integer"],
        ),
        (
            {"tasks": [{"name": "a", "schedule": "0 * * * *", "command": ["x"], "concurrencyPolicy": "Never"}]},
            ["spec.tasks[0].concurrencyPolicy", "Unsupported value"],
        ),
        (
            {
                "tasks": [
                    {"name": "a", "schedule": "0 * * * *", "command": ["x"]},
                    {"name": "a", "schedule": "5 * * * *", "command": ["y"]},
                ]
            },
            ["Duplicate value"],
        ),
    ],
)
def test_api_server_rejects_bad_objects(
    crd: str, kubectl: Kubectl, namespace: str, change: dict[str, Any], words: list[str]
) -> None:
    result = apply(kubectl, manifest(namespace, **change))
    assert result.returncode != 0
    for word in words:
        assert word in result.stderr, result.stderr
