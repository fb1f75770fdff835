"""The Dockerfile, image.lock and the chart agree: same dependencies, version, user and entrypoint.

The image cannot be built here (no registry to pull the base from), so what can be checked without
building it is checked: the recipe's facts, against pyproject.toml and the chart.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import appschedule

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "appschedule-operator"


def _lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO / "image.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_lock_satisfies_every_dependency_of_pyproject() -> None:
    pins = _lock()
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"image.lock has no pin for {requirement.name}: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is not {text}"


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    found = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_dockerfile_pins_its_base_runs_as_non_root_and_starts_the_operator() -> None:
    steps = _instructions()
    (base,) = [rest for keyword, rest in steps if keyword == "ARG" and rest.startswith("PYTHON_IMAGE=")]
    image = base.split("=", 1)[1]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+(@sha256:[0-9a-f]{64})?", image), image
    users = [rest for keyword, rest in steps if keyword == "USER"]
    assert users[-1] == "65532:65532"
    assert ("ENTRYPOINT", '["appschedule"]') in steps and steps[-1] == ("CMD", '["run"]')
    assert any("--constraint image.lock" in rest for keyword, rest in steps if keyword == "RUN")
    ignored = (REPO / ".dockerignore").read_text()
    assert "!image.lock" in ignored and "!operator/" in ignored


def test_chart_runs_the_image_of_this_version_as_its_user() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert chart["appVersion"] == project["version"] == appschedule.__version__ == values["image"]["tag"]
    assert values["podSecurityContext"]["runAsUser"] == 65532 == values["podSecurityContext"]["runAsGroup"]
