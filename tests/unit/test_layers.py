"""The functional core imports nothing of kopf or the cluster (STYLE.md: layers that can be seen)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "appschedule"
PURE = [
    "models.py",
    "schedule.py",
    "naming.py",
    "render.py",
    "state.py",
    "ownership.py",
    "cronjobs.py",
    "status.py",
    "events.py",
    "reconcile.py",
]


@pytest.mark.parametrize("module", PURE)
def test_core_modules_are_pure(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    assert not imported & {"kopf", "kubernetes", "requests", "urllib3", "aiohttp", "socket", "time"}
