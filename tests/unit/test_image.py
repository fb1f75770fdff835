"""The Dockerfile, image.lock and the chart agree: same dependencies, version, user and entrypoint.

The Dockerfile's image cannot be built here (no registry to pull the base from), so what can be checked
without building it is checked: the recipe's facts, against pyproject.toml and the chart, and against the
image the real node runs (hack/cluster/images.py builds it from Debian's packages; its build checks the
installed distributions against image.lock and the Python version, this file the rest of its config).
"""

from __future__ import annotations

import io
import json
import re
import sys
import tarfile
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import appschedule

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack" / "cluster"))
import images  # noqa: E402

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


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def _env_of(stage: list[tuple[str, str]], base_path: str) -> dict[str, str]:
    env = {"PATH": base_path, "LANG": "C.UTF-8"}  # what the python:*-slim base sets and the stage keeps
    for keyword, rest in stage:
        if keyword == "ENV":
            for name, value in re.findall(r'(\w+)=("[^"]*"|\S+)', rest):
                env[name] = value.strip('"').replace("$PATH", env["PATH"])
    return env


def test_the_real_nodes_image_runs_what_the_dockerfile_runs() -> None:
    stage = _final_stage()
    config = images.OPERATOR_CONFIG.oci()
    assert [json.loads(rest) for keyword, rest in stage if keyword == "ENTRYPOINT"] == [config["Entrypoint"]]
    assert [json.loads(rest) for keyword, rest in stage if keyword == "CMD"] == [config["Cmd"]]
    assert [rest for keyword, rest in stage if keyword == "USER"] == [config["User"]]
    assert [rest for keyword, rest in stage if keyword == "WORKDIR"] == [config["WorkingDir"]]
    assert dict(images.OPERATOR_CONFIG.env) == _env_of(stage, images.BASE_PATH)
    labels = dict(re.findall(r'(\S+)="([^"]*)"', " ".join(rest for keyword, rest in stage if keyword == "LABEL")))
    assert labels == config["Labels"]
    # the same Python: the Dockerfile's base is CPython 3.11 on the Debian release images.py builds from
    (base,) = [
        rest.split("=", 1)[1] for keyword, rest in _instructions() if keyword == "ARG" and "PYTHON_IMAGE=" in rest
    ]
    assert base.startswith(f"python:{images.PYTHON_MINOR}.") and f"-slim-{images.SUITE}" in base
    # the same project and dependencies: both install the package with image.lock as constraints
    runs = " ".join(rest for keyword, rest in _instructions() if keyword == "RUN")
    assert "pip install --constraint image.lock ." in runs
    assert f"pip uninstall --yes {' '.join(images.REMOVED_FROM_VENV)} " in runs
    assert images.operator_ref().endswith(":" + appschedule.__version__)


def test_an_oci_archive_names_its_image_and_carries_the_config(tmp_path: Path) -> None:
    layer = tmp_path / "layer.tar"
    with tarfile.open(layer, "w") as tar:
        data = b"hello"
        info = tarfile.TarInfo("greeting")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    out = tmp_path / "image.tar"
    images.write_archive("localhost/x/y:1", layer, images.Config(cmd=("sh",), user="1:1"), out)
    with tarfile.open(out) as archive:
        names = archive.getnames()
        index = json.load(archive.extractfile("index.json"))  # type: ignore[arg-type]
        (manifest_desc,) = index["manifests"]
        assert manifest_desc["annotations"]["io.containerd.image.name"] == "localhost/x/y:1"

        def blob(descriptor: dict[str, str]) -> bytes:
            member = archive.extractfile("blobs/sha256/" + descriptor["digest"].split(":")[1])
            assert member is not None
            return member.read()

        manifest = json.loads(blob(manifest_desc))
        config = json.loads(blob(manifest["config"]))
        assert config["config"] == {"Cmd": ["sh"], "User": "1:1", "Env": [f"PATH={images.BASE_PATH}"]}
        assert blob(manifest["layers"][0]) == layer.read_bytes()
        assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    assert "oci-layout" in names
