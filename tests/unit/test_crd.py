"""The CRD is generated from models.py, checked in, structural and described everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from appschedule import cli
from appschedule.core import models

REPO = Path(__file__).resolve().parents[2]


def test_checked_in_crd_is_up_to_date() -> None:
    for path in (cli.CRD_PATH, cli.CHART_CRD_PATH):
        assert (REPO / path).read_text() == cli.crd_yaml(), f"{path} is stale: run `make crd`"
    for path in (cli.CALENDAR_CRD_PATH, cli.CHART_CALENDAR_CRD_PATH):
        assert (REPO / path).read_text() == cli.crd_yaml(calendar=True), f"{path} is stale: run `make crd`"


def walk(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, child in (node.get("properties") or {}).items():
        found += walk(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        found += walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        found += walk(node["additionalProperties"], f"{path}{{}}")
    return found


def schema() -> dict[str, Any]:
    return dict(models.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


def test_every_field_is_described_and_typed() -> None:
    for path, node in walk(schema(), ""):
        if path in ("", ".metadata") or path.endswith("[]") or path.endswith("}"):
            continue
        assert node.get("description"), f"{path} has no description"
        assert node.get("type") or node.get("x-kubernetes-int-or-string"), f"{path} has no type"


def test_structural_no_defaults_no_preserve_unknown() -> None:
    text = yaml.safe_dump(models.crd())
    for forbidden in (
        "x-kubernetes-preserve-unknown-fields",
        "default:",
        "anyOf",
        "$ref",
        "additionalProperties: false",
    ):
        assert forbidden not in text


def test_names_columns_and_subresources() -> None:
    spec = models.crd()["spec"]
    assert spec["names"]["shortNames"] and spec["names"]["categories"]
    version = spec["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"] if not c.get("priority")]
    assert columns == ["Deployment", "Tasks", "Ready", "Last Run", "Next Run", "Missed", "Duplicates", "Failed", "Age"]
    assert any(c.get("priority") == 1 for c in version["additionalPrinterColumns"])


def test_tasks_are_a_list_map_keyed_by_name() -> None:
    tasks = schema()["properties"]["spec"]["properties"]["tasks"]
    assert tasks["x-kubernetes-list-type"] == "map" and tasks["x-kubernetes-list-map-keys"] == ["name"]
    assert tasks["minItems"] == 1
    assert tasks["items"]["properties"]["name"]["pattern"]
