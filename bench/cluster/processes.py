"""The processes under test (the operator, the baselines) and what they cost."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.kit import operator as kit

from .common import (
    BenchError,
)

# ---------------------------------------------------------------------------------------------------
# Processes under test


def _proc_stat(pid: int) -> list[str]:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()


def _proc_status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


class Process(kit.Process):
    """A process under test (the operator or a baseline; the kit's launcher), started at once, with what it
    costs: CPU and memory of it and its children."""

    def __init__(self, name: str, command: list[str], env: Mapping[str, str], log: Path, cwd: Path) -> None:
        super().__init__(name, command, log=log, env=env, cwd=cwd)
        self.start()

    def guard(self) -> None:
        try:
            super().guard()
        except kit.Exited as exited:
            raise BenchError(str(exited).splitlines()[0]) from None

    def tree(self) -> list[int]:
        """The process and its live children (the operator's admission process): every figure counts them
        all; RSS is summed, so pages a fork shares are counted twice (an upper bound)."""
        pids = [self.pid]
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                pids += [int(child) for child in (task / "children").read_text().split()]
        return pids

    def _sum(self, read: Callable[[int], float]) -> float:
        total = 0.0
        for pid in self.tree():
            with contextlib.suppress(OSError, IndexError, ValueError):
                total += read(pid)
        return total

    def cpu_seconds(self) -> float:
        def cpu(pid: int) -> float:
            fields = _proc_stat(pid)
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, every thread

        return self._sum(cpu)

    def rss_kib(self) -> int:
        return int(self._sum(lambda pid: _proc_status_kib(pid, "VmRSS")))

    def peak_kib(self) -> int:
        return int(self._sum(lambda pid: _proc_status_kib(pid, "VmHWM")))


BARE_KOPF = """
import asyncio, sys
import kopf, kubernetes  # what the operator imports; kopf logs in through the kubernetes client's kubeconfig

@kopf.on.startup()
async def configure(settings, **_):
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330

@kopf.on.event("appschedule.dev", "v1alpha1", "appschedules")
async def appschedule(**_): pass

@kopf.on.event("apps", "v1", "deployments")
async def deployment(**_): pass

@kopf.on.event("batch", "v1", "cronjobs", labels={"app.kubernetes.io/managed-by": "appschedule-operator"})
async def cronjob(**_): pass

asyncio.run(kopf.operator(standalone=True, clusterwide=False, namespaces=[sys.argv[1]]))
"""

IMPORT_ONLY = "import time, kopf, kubernetes; print('imported', flush=True); time.sleep(600)"
