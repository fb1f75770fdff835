"""Constants and small helpers every part of the cluster benchmark shares."""

from __future__ import annotations

import argparse
import math
import os
import socket
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from tests.kit.wait import Timeout

from appschedule.core import naming

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("APPSCHEDULE_CACHE", Path.home() / ".cache" / "appschedule-operator"))
LOCALCLUSTER = REPO / "hack" / "cluster" / "localcluster.py"
KUBECTL = REPO / ".tools" / "bin" / "kubectl"
RESULTS = REPO / "bench" / "results"
CRD_NAME = "appschedule.dev_appschedules.yaml"

GROUP, VERSION, PLURAL = naming.GROUP, naming.VERSION, naming.PLURAL
MANAGED_BY = f"{naming.MANAGED_BY}={naming.MANAGER}"
LABEL_APPSCHEDULE, LABEL_TASK = naming.LABEL_APPSCHEDULE, naming.LABEL_TASK
IMAGE = "registry.example.com/bench/web:1"
NEW_IMAGE = "registry.example.com/bench/web:2"
TASKS = 3
CONCURRENCY = 4  # the floors' client: 4 requests at a time
CHURN_PER_SECOND = 10.0
EDIT_SPACING = 0.5  # seconds between two measured edits
SETTLE = 10.0  # seconds between convergence and the idle window
QUIET_WINDOW = 10.0  # restart: the request rate is "at idle" over a window this long
TARGET_REQUESTS_PER_MINUTE = 6.0
TARGET_RSS_MIB = 150.0
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FLOOR_RESOURCES = frozenset({"jobs", "cronjobs", "pods"})  # what a run costs the Job and CronJob controllers
# a day of the month at least 12 days away: no task fires during the run
DAY = (datetime.now(UTC).day + 13) % 28 + 1

Json = dict[str, Any]
P = TypeVar("P")


class BenchError(Exception):
    """A scenario cannot go on: a deadline passed, a request failed, the operator exited."""


BENCH_ERRORS = (BenchError, Timeout)  # what ends a scenario (Timeout: the kit's wait reached its deadline)


def now() -> float:
    return time.monotonic()  # CLOCK_MONOTONIC: the same clock in the proxy process


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s" if value < 10 else f"{value:.1f} s"


def ratio(value: float, base: float) -> str:
    return f"{value / base:.1f}x" if base > 0 else "n/a"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def operator_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment of the operator: --operator-path goes before everything (the venv's package is an
    editable install of this repository's operator/)."""
    env = dict(os.environ)
    if args.operator_path:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(args.operator_path).resolve()), os.environ.get("PYTHONPATH")) if p
        )
    return env
