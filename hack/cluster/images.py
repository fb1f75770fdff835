"""Container images for the real node (realnode.py), built on this machine without a registry.

Each image is one uncompressed layer in an OCI image archive (``oci-layout``, ``index.json``, blobs), which
``ctr -n k8s.io images import`` loads into the node's containerd under the name the index gives it. The
archives are cached in ``$APPSCHEDULE_CACHE/images/`` under a hash of everything they are built from.

* ``pause``: the pod sandbox, ``pause.c`` compiled static.
* ``testapp``: Debian's busybox-static with a few applets linked: the "app" of the real-node tests.
* ``claim-demo``: examples/claim-demo's app (Python and Node) with the claim libraries of libs/ (the Node
  one packed from its build, ``make node-claim``), pg from npm at package-lock.json's version, and Debian's
  python3, python3-psycopg2 and nodejs (mmdebstrap); user 10001.
* ``operator``: the operator as the Dockerfile builds it (DOCKERFILE_EQUIVALENT says what "as" means):
  a root file system from Debian's packages (mmdebstrap: bookworm's python3 3.11), a virtualenv in
  /opt/appschedule with the project installed under ``--constraint image.lock`` (from wheels resolved on
  this machine by CPython 3.11, so the chroot needs no network), pip and setuptools removed (as the
  Dockerfile does), user 65532, ``appschedule run``. The build fails unless the installed distributions
  are exactly image.lock's; tests/unit/test_image.py checks this module's config against the Dockerfile's.

Usage: images.py pause | testapp | claim-demo | operator  (prints the archive's path)
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("APPSCHEDULE_CACHE", Path.home() / ".cache" / "appschedule-operator"))
IMAGES = CACHE / "images"

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SUITE = "bookworm"  # the Dockerfile's python:3.11.*-slim-bookworm is this Debian release
PYTHON_MINOR = "3.11"  # bookworm's python3, and the Dockerfile's PYTHON_IMAGE
REMOVED_FROM_VENV = ("setuptools", "pip")  # what venv brings and the operator does not run, as in the Dockerfile


@dataclass(frozen=True)
class Config:
    """What an image runs: the OCI image config's ``config`` object."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = (("PATH", BASE_PATH),)
    user: str = ""
    workdir: str = ""
    labels: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def oci(self) -> dict[str, object]:
        config: dict[str, object] = {"Env": [f"{k}={v}" for k, v in self.env]}
        if self.entrypoint:
            config["Entrypoint"] = list(self.entrypoint)
        if self.cmd:
            config["Cmd"] = list(self.cmd)
        if self.user:
            config["User"] = self.user
        if self.workdir:
            config["WorkingDir"] = self.workdir
        if self.labels:
            config["Labels"] = dict(self.labels)
        return config


# The Dockerfile's final stage, field by field (tests/unit/test_image.py parses the Dockerfile and compares).
OPERATOR_CONFIG = Config(
    entrypoint=("appschedule",),
    cmd=("run",),
    env=(
        ("PATH", f"/opt/appschedule/bin:{BASE_PATH}"),
        ("LANG", "C.UTF-8"),
        ("HOME", "/tmp"),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("PYTHONUNBUFFERED", "1"),
    ),
    user="65532:65532",
    workdir="/tmp",
    labels=(
        ("org.opencontainers.image.title", "appschedule-operator"),
        (
            "org.opencontainers.image.description",
            "An app's scheduled tasks as CronJobs, every run keyed, missed and doubled runs reported",
        ),
        ("org.opencontainers.image.licenses", "Apache-2.0"),
    ),
)

PAUSE_REF = "localhost/appschedule/pause:1"
TESTAPP_REF = "localhost/appschedule/testapp:1"
DEMO_REF = "localhost/appschedule/claim-demo:1"
DEMO = REPO / "examples" / "claim-demo"
NODE_LIB = REPO / "libs" / "node"
PYTHON_LIB = REPO / "libs" / "python" / "appschedule_claim"
TESTAPP_APPLETS = ("sh", "cat", "date", "echo", "env", "hostname", "ls", "mkdir", "printf", "sleep", "test", "[")


def operator_ref() -> str:
    """The operator image's name: the chart's default repository, at the project's version."""
    version = _project_version()
    return f"localhost/appschedule-operator:{version}"


def _project_version() -> str:
    for line in (REPO / "pyproject.toml").read_text().splitlines():
        if line.startswith("version"):
            return line.split("=", 1)[1].strip().strip('"')
    raise SystemExit("pyproject.toml has no version")


# ---------------------------------------------------------------------------------------------------
# OCI archives


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_archive(ref: str, layer: Path, config: Config, out: Path) -> None:
    """An OCI image archive of one uncompressed layer (a tar of the root file system) named ``ref``."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        root = Path(tmp)
        blobs = root / "blobs" / "sha256"
        blobs.mkdir(parents=True)

        def blob(data: bytes, media_type: str) -> dict[str, object]:
            digest = hashlib.sha256(data).hexdigest()
            (blobs / digest).write_bytes(data)
            return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

        layer_digest = _sha256_file(layer)
        shutil.copy(layer, blobs / layer_digest)
        layer_desc = {
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": f"sha256:{layer_digest}",
            "size": layer.stat().st_size,
        }
        image_config = {
            "architecture": "amd64",
            "os": "linux",
            "created": "1970-01-01T00:00:00Z",
            "config": config.oci(),
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "hack/cluster/images.py"}],
        }
        config_desc = blob(
            json.dumps(image_config, sort_keys=True).encode(), "application/vnd.oci.image.config.v1+json"
        )
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config_desc,
            "layers": [layer_desc],
        }
        manifest_desc = blob(
            json.dumps(manifest, sort_keys=True).encode(), "application/vnd.oci.image.manifest.v1+json"
        )
        manifest_desc["annotations"] = {
            "io.containerd.image.name": ref,
            "org.opencontainers.image.ref.name": ref.rpartition(":")[2],
        }
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [manifest_desc],
        }
        (root / "index.json").write_text(json.dumps(index, sort_keys=True))
        (root / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
        partial = out.with_name(f".{out.name}.partial")
        with tarfile.open(partial, "w") as archive:
            for name in ("oci-layout", "index.json", "blobs"):
                archive.add(root / name, arcname=name)
        partial.rename(out)


def _cached(name: str, inputs: list[bytes], build: Callable[[Path], None], *, allowed: bool = True) -> Path:
    """The archive of these inputs, built unless there; ``allowed=False``: fail naming the make target."""
    digest = hashlib.sha256()
    for item in inputs:
        digest.update(hashlib.sha256(item).digest())
    out = IMAGES / f"{name}-{digest.hexdigest()[:12]}.tar"
    if out.exists():
        return out
    if not allowed:
        raise SystemExit(f"the {name} image of these sources is not built ({out}): run `make node-tools` first")
    IMAGES.mkdir(parents=True, exist_ok=True)
    build(out)
    for older in IMAGES.glob(f"{name}-*.tar"):  # what other inputs built: never used again
        if older != out:
            older.unlink()
    return out


def _tar_of(files: dict[str, tuple[bytes, int]], links: dict[str, str], dirs: tuple[str, ...]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------------
# The images


def pause(*, build: bool = True) -> Path:
    source = (HERE / "pause.c").read_bytes()

    def build_(out: Path) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            binary = Path(tmp) / "pause"
            subprocess.run(["gcc", "-static", "-Os", "-o", str(binary), str(HERE / "pause.c")], check=True)
            layer = Path(tmp) / "layer.tar"
            layer.write_bytes(_tar_of({"pause": (binary.read_bytes(), 0o755)}, {}, ()))
            write_archive(PAUSE_REF, layer, Config(entrypoint=("/pause",), user="65535:65535"), out)

    return _cached("pause", [source, _gcc_version()], build_, allowed=build)


def testapp(*, build: bool = True) -> Path:  # noqa: PT028 (an image, not a test)
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        raise SystemExit("/bin/busybox is missing: Debian's busybox-static (realnode.py installs it)")

    def build_(out: Path) -> None:
        links = {f"bin/{applet}": "busybox" for applet in TESTAPP_APPLETS}
        files = {"bin/busybox": (busybox.read_bytes(), 0o755)}
        with tempfile.TemporaryDirectory() as tmp:
            layer = Path(tmp) / "layer.tar"
            layer.write_bytes(_tar_of(files, links, ("bin", "tmp")))
            write_archive(TESTAPP_REF, layer, Config(cmd=("sh",)), out)

    return _cached("testapp", [busybox.read_bytes(), repr(TESTAPP_APPLETS).encode()], build_, allowed=build)


def _demo_sources() -> list[Path]:
    files = [NODE_LIB / "package.json", NODE_LIB / "package-lock.json", HERE / "images.py"]
    for root, pattern in ((DEMO / "app", "*"), (PYTHON_LIB, "*.py"), (NODE_LIB / "dist", "*")):
        files += sorted(p for p in root.rglob(pattern) if p.is_file() and "__pycache__" not in p.parts)
    return files


def claim_demo(*, build: bool = True) -> Path:
    """examples/claim-demo's image: its app, both claim libraries and their drivers, on bookworm."""
    if not (NODE_LIB / "dist" / "index.js").exists():
        raise SystemExit(f"{NODE_LIB / 'dist'} is not built: run `make node-claim` first")
    sources = _demo_sources()
    inputs = [str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes() for p in sources]
    lock = json.loads((NODE_LIB / "package-lock.json").read_text())
    pg = lock["packages"]["node_modules/pg"]["version"]

    def build_(out: Path) -> None:
        for tool, package in (("mmdebstrap", "mmdebstrap"), ("npm", "npm")):
            if not shutil.which(tool):
                raise SystemExit(f"{tool} is missing: Debian's {package}")
        with tempfile.TemporaryDirectory(dir=IMAGES) as tmp:
            app = Path(tmp) / "app"
            shutil.copytree(DEMO / "app", app, ignore=shutil.ignore_patterns("__pycache__"))
            npm = ["npm", "--no-audit", "--no-fund", "--loglevel=error"]
            packed = subprocess.run([*npm, "pack", "--pack-destination", tmp, str(NODE_LIB)], check=True,
                                    capture_output=True, text=True).stdout.split()[-1]  # fmt: skip
            subprocess.run([*npm, "install", "--prefer-offline", "--omit=dev", "--no-package-lock", "--prefix",
                            str(app), str(Path(tmp) / packed), f"pg@{pg}"], check=True)  # fmt: skip
            (app / "package.json").unlink(missing_ok=True)
            python = Path(tmp) / "python"
            shutil.copytree(PYTHON_LIB, python / "appschedule_claim", ignore=shutil.ignore_patterns("__pycache__"))
            site = f"/usr/local/lib/python{PYTHON_MINOR}/dist-packages"
            hooks = [
                f'cp -a {app} "$1/app"',
                f'mkdir -p "$1{site}" && cp -a {python}/appschedule_claim "$1{site}/"',
                'chmod -R a+rX "$1/app" "$1/usr/local/lib"',
                'chroot "$1" python3 -c "import appschedule_claim, psycopg2"',
                'chroot "$1" sh -c "cd /app && node -e \'require(\\"pg\\"); require(\\"@appschedule/claim\\")\'"',
                'rm -rf "$1/var/cache/apt/archives/"*.deb "$1/var/cache/apt/"*.bin "$1/var/lib/apt/lists/"*',
            ]
            layer = Path(tmp) / "rootfs.tar"
            slim = [f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "locale", "info")]
            command = [
                "mmdebstrap", "--quiet", "--mode=root", "--variant=minbase", "--format=tar", *slim,
                "--include=python3,python3-psycopg2,nodejs,ca-certificates",
                *[f"--customize-hook={hook}" for hook in hooks], SUITE, str(layer),
            ]  # fmt: skip
            subprocess.run(command, check=True)
            config = Config(cmd=("python3", "/app/web.py"), user="10001:10001", workdir="/app")
            write_archive(DEMO_REF, layer, config, out)

    return _cached("claim-demo", inputs, build_, allowed=build)


def built() -> dict[str, bool]:
    """Whether each image the real node's tier imports is in the cache for the current sources."""
    result = {}
    for name, make in (("pause", pause), ("testapp", testapp), ("claim-demo", claim_demo), ("operator", operator)):
        try:
            make(build=False)
            result[name] = True
        except SystemExit:
            result[name] = False
    return result


def _operator_sources() -> list[Path]:
    files = [REPO / "pyproject.toml", REPO / "README.md", REPO / "image.lock"]
    files += sorted(p for p in (REPO / "operator").rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return files


def operator(*, build: bool = True) -> Path:
    """The operator image from Debian's packages and PyPI, as the Dockerfile's final stage."""
    sources = _operator_sources()
    inputs = [str(p.relative_to(REPO)).encode() + b"\0" + p.read_bytes() for p in sources]
    inputs.append(json.dumps(OPERATOR_CONFIG.oci(), sort_keys=True).encode())
    inputs.append((HERE / "images.py").read_bytes())

    def build_(out: Path) -> None:
        if not shutil.which("mmdebstrap"):
            raise SystemExit("mmdebstrap is missing: Debian's mmdebstrap (realnode.py installs it)")
        with tempfile.TemporaryDirectory(dir=IMAGES) as tmp:
            src = Path(tmp) / "src"
            for path in sources:
                target = src / path.relative_to(REPO)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)
            # wheels resolved here, with this machine's index and certificates, for bookworm's CPython 3.11: the
            # root file system installs them without a network
            if sys.version_info[:2] != (3, 11):
                raise SystemExit(
                    f"the operator image's wheels are resolved by CPython {PYTHON_MINOR}, not {sys.version}"
                )
            wheels = src / "wheels"
            pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check"]
            subprocess.run(
                [*pip, "--constraint", str(src / "image.lock"), "--wheel-dir", str(wheels), str(src)], check=True
            )
            (src / "check_lock.py").write_text(CHECK_LOCK)
            hooks = [
                f'cp -a {src} "$1/src"',
                'chroot "$1" python3 -m venv /opt/appschedule',
                'chroot "$1" env PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INDEX=1 PIP_FIND_LINKS= '
                "/opt/appschedule/bin/pip install --quiet --no-index --find-links /src/wheels "
                "--constraint /src/image.lock appschedule-operator",
                f'chroot "$1" /opt/appschedule/bin/pip uninstall --quiet --yes {" ".join(REMOVED_FROM_VENV)}',
                'chroot "$1" /opt/appschedule/bin/python /src/check_lock.py /src/image.lock',
                'chroot "$1" /opt/appschedule/bin/appschedule --help >/dev/null',
                f'chroot "$1" python3 -c "import sys; assert sys.version.startswith(\'{PYTHON_MINOR}.\'), sys.version"',
                'rm -rf "$1/src" "$1/var/cache/apt/archives/"*.deb "$1/var/cache/apt/"*.bin "$1/var/lib/apt/lists/"*',
                'find "$1/opt/appschedule" -name __pycache__ -prune -exec rm -rf {} +',
            ]
            layer = Path(tmp) / "rootfs.tar"
            slim = [f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "locale", "info")]
            command = [
                "mmdebstrap",
                "--quiet",
                "--mode=root",
                "--variant=minbase",
                "--format=tar",
                *slim,
                "--include=python3,python3-venv,ca-certificates",
                *[f"--customize-hook={hook}" for hook in hooks],
                SUITE,
                str(layer),
            ]
            subprocess.run(command, check=True)
            write_archive(operator_ref(), layer, OPERATOR_CONFIG, out)

    return _cached("operator", inputs, build_, allowed=build)


# Run by the image's own Python: the installed distributions are exactly image.lock's pins.
CHECK_LOCK = """\
import importlib.metadata, re, sys

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

have = sorted(f"{norm(d.metadata['Name'])}=={d.version}" for d in importlib.metadata.distributions()
              if norm(d.metadata["Name"]) != "appschedule-operator")
want = sorted(norm(n) + "==" + v for n, v in (line.strip().split("==") for line in open(sys.argv[1])
              if line.strip() and not line.startswith("#")))
if have != want:
    sys.exit(f"installed {sorted(set(have) - set(want))}, image.lock {sorted(set(want) - set(have))}")
"""


def _gcc_version() -> bytes:
    return subprocess.run(["gcc", "--version"], capture_output=True, check=True).stdout


BUILDERS = {"pause": pause, "testapp": testapp, "claim-demo": claim_demo, "operator": operator}


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in BUILDERS:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    print(BUILDERS[sys.argv[1]]())
