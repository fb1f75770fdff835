"""Real PostgreSQL and MariaDB servers for the claim's conformance suite: Debian's packages (`make db-tools`
installs them), each started on loopback with a data directory of its own and stopped at the end."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.kit.wait import wait_for

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
MARIADBD = Path("/usr/sbin/mariadbd")
INSTALL_DB = Path("/usr/bin/mariadb-install-db")


@dataclass(frozen=True)
class Server:
    name: str
    port: int


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _missing(path: Path) -> None:
    if not path.exists():
        raise AssertionError(f"{path} is not installed: run `make db-tools` (Debian's packages)")


@contextmanager
def _process(command: list[str], log: Path, port: int, what: str) -> Iterator[None]:
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def alive() -> None:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with {process.returncode}:\n{log.read_text(errors='replace')[-2000:]}")

    try:
        wait_for(lambda: _listening(port), timeout=60, what=f"{what} to listen on {port}", interval=0.1, guard=alive)
        yield
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def postgresql(listen: str = "127.0.0.1", clients: tuple[str, ...] = ()) -> Iterator[Server]:
    """PostgreSQL 15 as the ``postgres`` user (it never runs as root), trust on loopback, fsync off. ``listen``:
    another address of this machine it listens on too; ``clients``: the networks (CIDR) it trusts there."""
    _missing(POSTGRES_BIN / "postgres")
    home = Path(tempfile.mkdtemp(prefix="claim-pg-", dir="/tmp"))
    data = home / "data"
    user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    try:
        os.chmod(home, 0o755)
        if user:
            shutil.chown(home, "postgres")
        init = [*user, str(POSTGRES_BIN / "initdb"), "-D", str(data), "--auth=trust", "-U", "postgres", "--no-sync"]
        subprocess.run(init, check=True, capture_output=True)
        with open(data / "pg_hba.conf", "a") as hba:
            hba.writelines(f"host all all {network} trust\n" for network in clients)
        port = _free_port()
        addresses = ",".join(dict.fromkeys(("127.0.0.1", listen)))
        command = [*user, str(POSTGRES_BIN / "postgres"), "-D", str(data), "-p", str(port), "-k", str(home),
                   "-c", f"listen_addresses={addresses}", "-c", "fsync=off", "-c", "max_connections=200"]  # fmt: skip
        with _process(command, home / "log", port, "PostgreSQL"):
            yield Server("postgresql", port)
    finally:
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def mariadb() -> Iterator[Server]:
    """MariaDB on loopback without grant tables (root, no password), its data in a directory of its own."""
    _missing(MARIADBD)
    home = Path(tempfile.mkdtemp(prefix="claim-mariadb-", dir="/tmp"))
    data = home / "data"
    try:
        install = [str(INSTALL_DB), "--no-defaults", f"--datadir={data}", "--user=root", "--skip-test-db",
                   "--auth-root-authentication-method=normal"]  # fmt: skip
        subprocess.run(install, check=True, capture_output=True)
        port = _free_port()
        command = [str(MARIADBD), "--no-defaults", f"--datadir={data}", f"--socket={home / 'socket'}",
                   f"--port={port}", "--bind-address=127.0.0.1", "--user=root", "--skip-grant-tables",
                   "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0", "--max-connections=200"]  # fmt: skip
        with _process(command, home / "log", port, "MariaDB"):
            yield Server("mariadb", port)
    finally:
        shutil.rmtree(home, ignore_errors=True)
