"""The processes under test (the operator, the baselines) and what they cost."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path

import psutil
from tests.kit import operator as kit

from .common import (
    BenchError,
)

# ---------------------------------------------------------------------------------------------------
# Processes under test


def _peak_kib(pid: int) -> int:
    """The process' peak resident set (VmHWM): psutil has no figure for it on Linux."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
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

    def tree(self) -> list[psutil.Process]:
        """The process and its live children (the operator's admission process): every figure counts them all."""
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def _sum(self, read: Callable[[psutil.Process], float]) -> float:
        total = 0.0
        for process in self.tree():
            with contextlib.suppress(psutil.Error, OSError):  # a child gone between the listing and the read
                total += read(process)
        return total

    def cpu_seconds(self) -> float:
        """User and system time of every thread of the processes."""
        return self._sum(lambda p: (times := p.cpu_times()).user + times.system)

    def own_cpu_seconds(self) -> float:
        """User and system time of the process alone (not its children)."""
        with contextlib.suppress(psutil.Error, OSError):
            return (times := psutil.Process(self.pid).cpu_times()).user + times.system
        return 0.0

    def rss_kib(self) -> int:
        """Resident sets summed: the pages a fork shares are counted in each process (an upper bound)."""
        return int(self._sum(lambda p: p.memory_info().rss) / 1024)

    def pss_kib(self) -> int:
        """Proportional set sizes summed: a shared page is split between the processes that map it, so the sum is
        what the processes cost the machine."""
        return int(self._sum(lambda p: p.memory_full_info().pss) / 1024)

    def peak_kib(self) -> int:
        return int(self._sum(lambda p: _peak_kib(p.pid)))


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
