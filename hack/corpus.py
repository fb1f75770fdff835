"""Real published code with in-app schedules, for `appschedule import source`'s corpus test (tests/unit/test_corpus.py).

    make corpus          # = .venv/bin/python hack/corpus.py

Each artifact is downloaded once from its registry (npm's tarball, PyPI's wheel or sdist through the simple index),
checked against the SHA-256 pinned here, and unpacked under ~/.cache/appschedule-operator/corpus/<name>-<version>/
(APPSCHEDULE_CORPUS elsewhere). A Debian package's crontab (``/etc/cron.d/<x>``, for ``appschedule import
crontab``) is the one file taken from the package Debian's archive serves today (``apt-get download``), checked
against the SHA-256 of that file pinned here, so a rebuild of the package that keeps the file keeps the pin.
Nothing of them is committed: each keeps its own licence (listed), and the test only reads them. Chosen because
their published files schedule with node-cron, Celery beat or APScheduler, each with literal schedules beside
forms the import must list (a schedule built at run time, an interval, a seconds field, a callback the file does
not export, a directory that is not a Python identifier), or are system crontabs as Debian installs them (tabs
and runs of spaces between fields, a user field, SHELL and PATH lines, ``\\%`` and ``$(...)`` in a command).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Artifact:
    registry: str  # npm | pypi | debian (version: the one pinned was seen with; the file's SHA-256 is checked)
    name: str
    version: str
    filename: str
    sha256: str
    licence: str

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


CORPUS = (
    Artifact("npm", "thepopebot", "1.2.82", "thepopebot-1.2.82.tgz",
             "e56837cdd46604aa57dec6b901155b84368973cab6371bc9959146c43443c60e", "MIT"),
    Artifact("npm", "create-nodeapi-backend", "2.0.0", "create-nodeapi-backend-2.0.0.tgz",
             "a7c7256a5ecfaaa29d86dae02d61e498d432af494b4a9c5701cfbdedae1f9e17", "MIT"),
    Artifact("pypi", "Superdesk-Core", "2.5.3", "Superdesk_Core-2.5.3-py3-none-any.whl",
             "cf7cae91b31bb174adc9eae0755c158287500ce40333c19bc5559635b360910f", "AGPL-3.0"),
    Artifact("pypi", "superdesk-planning", "2.4.0", "superdesk-planning-2.4.0.tar.gz",
             "b87ff6e8575b47d2a7f73387f69c2421eb064f4c9dfaca477e40ae02caa76b43", "AGPL-3.0"),
    Artifact("pypi", "superdesk-analytics", "2.1.2", "superdesk-analytics-2.1.2.tar.gz",
             "f56e9810f79048d0cd3870644508ce4a6b89f31a79bedfe26a7ee03b8c4d49a5", "MIT"),
    Artifact("pypi", "nonebot-plugin-daily-bing", "1.0.1", "nonebot_plugin_daily_bing-1.0.1-py3-none-any.whl",
             "3504a597a85abf785c823b997019793626348e5c2eb6134ce6e490301adfbd2e", "MIT"),
    Artifact("debian", "certbot", "2.1.0-4", "etc/cron.d/certbot",
             "2fa6b230c2a8733329c08b1b42fd426159a81ec671e68d65b95d87b6b24db86e", "Apache-2.0"),
    Artifact("debian", "mdadm", "4.2-5", "etc/cron.d/mdadm",
             "66ceb933bf7f2518dc8185c5587e1b935813e7933556853c1d947604ba26d6d1", "Artistic-2.0"),
    Artifact("debian", "php-common", "2:93", "etc/cron.d/php",
             "cde3e914bfaf28862ca4a00bdf972a7ebe57676c895df86e7a5f105fb59155c7", "GPL-2.0+"),
    Artifact("debian", "sysstat", "12.6.1-1", "etc/cron.d/sysstat",
             "47a67deba0d029d43209e6e512399543a945172f2a640021a6c21422a66adb1a", "GPL-2.0+"),
    Artifact("pypi", "nonebot-plugin-auto-sendlike", "0.0.12", "nonebot_plugin_auto_sendlike-0.0.12-py3-none-any.whl",
             "7053c4b6296c90018c95e01320fe32e28543fbdd0212186fd096efaa8209a7f9", "MIT"),
)  # fmt: skip


def root() -> Path:
    return Path(os.environ.get("APPSCHEDULE_CORPUS") or Path.home() / ".cache" / "appschedule-operator" / "corpus")


def _get(url: str, accept: str | None = None) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=120) as response:
        data: bytes = response.read()
        return data


def _url(artifact: Artifact) -> str:
    if artifact.registry == "npm":
        return f"https://registry.npmjs.org/{artifact.name}/-/{artifact.filename}"
    index = json.loads(_get(f"https://pypi.org/simple/{artifact.name.lower()}/", "application/vnd.pypi.simple.v1+json"))
    found = [f["url"] for f in index["files"] if f["filename"] == artifact.filename]
    if not found:
        raise SystemExit(f"{artifact.filename}: not in PyPI's index of {artifact.name}")
    return str(found[0])


def _unpack(artifact: Artifact, data: bytes, into: Path) -> None:
    if artifact.filename.endswith(".whl"):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            archive.extractall(into)
        return
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(into, filter="data")


def _debian_file(artifact: Artifact) -> bytes:
    """The one file ``artifact.filename`` of the Debian package the archive serves today (apt-get download)."""
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(["apt-get", "download", artifact.name], cwd=scratch, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        debs = list(Path(scratch).glob("*.deb"))
        if done.returncode != 0 or not debs:
            raise SystemExit(f"apt-get download {artifact.name}: {done.stderr.strip()[-300:]}")
        contents = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(debs[0])], capture_output=True, timeout=120,
                                  check=True).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(contents)) as archive:
        member = archive.extractfile(f"./{artifact.filename}")
        if member is None:
            raise SystemExit(f"{artifact.name}: no {artifact.filename} in the package")
        return member.read()


def fetch(artifact: Artifact) -> Path:
    """The unpacked artifact, downloaded and checked when it is not there yet."""
    where = root() / artifact.key
    if (where / ".complete").exists():
        return where
    if artifact.registry == "debian":
        data = _debian_file(artifact)
        digest = hashlib.sha256(data).hexdigest()
        if digest != artifact.sha256:
            raise SystemExit(f"{artifact.name}'s {artifact.filename}: SHA-256 {digest}, pinned {artifact.sha256}")
        shutil.rmtree(where, ignore_errors=True)
        (where / artifact.filename).parent.mkdir(parents=True)
        (where / artifact.filename).write_bytes(data)
        (where / ".complete").write_text(artifact.sha256)
        return where
    data = _get(_url(artifact))
    digest = hashlib.sha256(data).hexdigest()
    if digest != artifact.sha256:
        raise SystemExit(f"{artifact.filename}: SHA-256 {digest}, pinned {artifact.sha256}: not unpacked")
    shutil.rmtree(where, ignore_errors=True)
    _unpack(artifact, data, where)
    (where / ".complete").write_text(artifact.sha256)
    return where


def main() -> int:
    for artifact in CORPUS:
        where = fetch(artifact)
        print(f"{artifact.registry:4} {artifact.key:36} {artifact.licence:9} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
