"""The Node library (libs/node, TypeScript) runs the same conformance suite (libs/conformance/claim.json): on
sql.js (SQLite in the process), on better-sqlite3 (a native build: `make node-claim` compiles it against the
installed Node's own headers) with a connection per racer to one file, and on the real PostgreSQL and MariaDB
servers the Python library's tests use."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from . import servers

NODE_LIB = Path(__file__).resolve().parents[2] / "libs" / "node"
RUNNER = NODE_LIB / "dist" / "conformance.js"
CLI = NODE_LIB / "dist" / "cli.js"
SUITE = json.loads((NODE_LIB.parent / "conformance" / "claim.json").read_text())


def _node(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if not RUNNER.exists():
        raise AssertionError(f"{RUNNER} is not built: run `make node-claim`")
    node = shutil.which("node") or "node"
    return subprocess.run([node, *args], capture_output=True, text=True, timeout=300, env=env)


def _url(server: servers.Server) -> str:
    if server.name == "postgresql":
        return f"postgresql://postgres@127.0.0.1:{server.port}/postgres"
    return f"mysql://root@127.0.0.1:{server.port}/mysql"


def test_the_suite_on_sqlite_in_the_process() -> None:
    done = _node(str(RUNNER), "sqlite:")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("ok   ") == len(SUITE["scenarios"]) + 1  # all but the server-only one, withClaim, errors


def test_the_suite_on_better_sqlite3_with_a_connection_each(tmp_path: Path) -> None:
    done = _node(str(RUNNER), f"better-sqlite3:{tmp_path}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("ok   ") == len(SUITE["scenarios"]) + 1, done.stdout
    assert len(list(tmp_path.glob("*.db"))) >= len(SUITE["scenarios"]) - 1  # a file each: real connections to it


def test_the_command_line_on_sqlite(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    env = dict(os.environ, APPSCHEDULE_TASK="report", APPSCHEDULE_SCHEDULED_TIME="2026-10-25T01:30:00Z")
    env.update(
        APPSCHEDULE_TERMINATION_LOG=str(tmp_path / "log"), APPSCHEDULE_CLAIM_DATABASE=f"sqlite:///{tmp_path}/c.db"
    )
    failed = _node(str(CLI), "--create", "--", "sh", "-c", f"echo fail >> {marker}; exit 3", env=env)
    assert failed.returncode == 3, failed.stderr  # a failure releases the claim: a re-run of the fire works
    won = _node(str(CLI), "--", "sh", "-c", f"echo won >> {marker}", env=env)
    assert won.returncode == 0, won.stderr
    lost = _node(str(CLI), "--", "sh", "-c", f"echo lost >> {marker}", env=env)
    assert lost.returncode == 0 and "claimed by another run" in lost.stderr, lost.stderr
    assert marker.read_text() == "fail\nwon\n"
    relative = _node(str(CLI), "--database", "sqlite://", "--", "true", env=env)
    assert relative.returncode == 2 and "sqlite:///path/to.db" in relative.stderr


def test_the_suite_on_a_server(server: servers.Server) -> None:
    done = _node(str(RUNNER), _url(server))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("ok   ") == len(SUITE["scenarios"]) + 2, done.stdout


def test_the_command_line_runs_the_command_only_for_the_winner(server: servers.Server, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    env = dict(os.environ, APPSCHEDULE_TASK="report", APPSCHEDULE_SCHEDULED_TIME="2026-03-29T01:00:00Z")
    env.update(APPSCHEDULE_TERMINATION_LOG=str(tmp_path / "log"), APPSCHEDULE_JOB_NAME=f"job-a-{server.name}")
    first = _node(str(CLI), "--database", _url(server), "--create", "--", "sh", "-c", f"echo a >> {marker}", env=env)
    assert first.returncode == 0, first.stderr
    env["APPSCHEDULE_JOB_NAME"] = f"job-b-{server.name}"
    second = _node(str(CLI), "--database", _url(server), "--", "sh", "-c", f"echo b >> {marker}", env=env)
    assert second.returncode == 0 and "claimed by another run" in second.stderr, second.stderr
    assert marker.read_text() == "a\n"
    missing = _node(str(CLI), "--", "true", env={k: v for k, v in env.items() if k != "APPSCHEDULE_CLAIM_DATABASE"})
    assert missing.returncode == 2 and "no database" in missing.stderr
