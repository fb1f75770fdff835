"""Fixtures the unit tests share: the example Deployment every AppSchedule of examples/ references."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def deployment() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
    return data
