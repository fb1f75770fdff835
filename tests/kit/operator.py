"""The operator launched for real: ``python -m appschedule ARGS`` as a process of its own, its output
appended to a log. The one launcher of the integration tests, the chart tests, the soak and the cluster
benchmark; each passes the arguments its tier needs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .wait import wait_for

STARTED = "Activity 'startup' succeeded"  # kopf logs it once the operator's startup handlers ran
LISTED = "initial listing done"  # the controller logs it once every watch has listed the world


class Exited(AssertionError):
    """The process exited while it was awaited."""


def command(*args: str, python: str = sys.executable) -> list[str]:
    """The command line of the operator (or any ``appschedule`` subcommand) under ``python``."""
    return [python, "-m", "appschedule", *args]


class Process:
    """A process under test, its output (stdout and stderr) appended to ``log``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        kubeconfig: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name, self.argv, self.log, self.cwd = name, list(argv), log, cwd
        self.env = dict(os.environ if env is None else env)
        if kubeconfig is not None:
            self.env["KUBECONFIG"] = str(kubeconfig)
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0  # time.monotonic() at the last start

    def start(self) -> None:
        with open(self.log, "ab") as out:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            out.write(f"\n==== {self.name} start {stamp}: {' '.join(self.argv)}\n".encode())
            out.flush()
            self.started = time.monotonic()
            self.process = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        assert self.process is not None, f"{self.name} was never started"
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def guard(self) -> None:
        """Raise ``Exited`` when the process has exited (a wait on it would be pointless)."""
        if self.process is not None and self.process.poll() is not None:
            raise Exited(f"{self.name} exited with {self.process.returncode}; its log: {self.log}\n{self.tail()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        """Send ``sig`` and wait for the exit (SIGKILL after ``timeout``); the exit status, None if never started."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def kill(self) -> int | None:
        return self.stop(signal.SIGKILL)

    def size(self) -> int:
        """Where the log ends now: pass it to ``text(since=...)`` to read only what comes after."""
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def text(self, since: int = 0) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(since)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def lines(self) -> list[str]:
        return self.text().splitlines()

    def tail(self, count: int = 40) -> str:
        return "\n".join(f"  {self.name}| {line}" for line in self.lines()[-count:])


class Operator(Process):
    """``python -m appschedule ARGS``, started and awaited until it says ``ready`` in its log."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        log: Path,
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
        python: str = sys.executable,
        cwd: Path | None = None,
        name: str = "operator",
    ) -> None:
        super().__init__(name, command(*args, python=python), log=log, env=env, kubeconfig=kubeconfig, cwd=cwd)

    def start_and_wait(self, *, ready: str = STARTED, timeout: float = 60) -> None:
        """Start it and wait until ``ready`` appears in what it logs from now on; fails if it exits first."""
        mark = self.size()
        self.start()
        try:
            wait_for(
                lambda: ready in self.text(mark),
                timeout=timeout,
                what=f"{self.name} to log {ready!r}",
                interval=0.1,
                guard=self.guard,
            )
        except BaseException:  # never left running: it would hold its ports and retry for whoever comes next
            self.stop()
            raise

    def reconciles(self, namespace: str, name: str) -> list[dict[str, object]]:
        """The reconciles of one AppSchedule it logged (with ``--log-format json``)."""
        found = []
        for line in self.lines():
            if '"reconciled ' not in line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("namespace") == namespace and record.get("appschedule") == name:
                found.append(record)
        return found
