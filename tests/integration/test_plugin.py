"""`kubectl appschedule` found by the real kubectl as a plugin on PATH, reading the real API server."""

from __future__ import annotations

import fcntl
import json
import os
import struct
import subprocess
import sys
import termios
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kubernetes import client

from appschedule.core import keys
from appschedule.core.schedule import hashed_seed, resolve_hashed
from tests.kit.chart import tool
from tests.kit.wait import wait_for

from .conftest import ClusterUnderTest, OperatorProcess
from .test_operator import Namespaced, task


def plugin(cluster: ClusterUnderTest, *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl running the plugin as a user would: the package's scripts on PATH, the kubeconfig in KUBECONFIG."""
    env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([tool("kubectl"), "appschedule", *args], env=env, capture_output=True, text=True, timeout=60)


def in_terminal(cluster: ClusterUnderTest, *args: str) -> str:
    """kubectl running the plugin in a real terminal of 80 columns and 24 rows (a pty with that window size),
    as a person would; what the terminal received, its line ends as printed."""
    env = dict(os.environ, KUBECONFIG=str(cluster.kubeconfig), TERM="xterm", COLUMNS="80", LINES="24")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = subprocess.Popen([tool("kubectl"), "appschedule", *args], stdin=slave, stdout=slave, stderr=slave,
                               env=env, close_fds=True)  # fmt: skip
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    assert process.wait(timeout=60) == 0, received.decode(errors="replace")
    return received.decode().replace("\r\n", "\n")


def test_status_and_history_through_kubectl(
    cluster: ClusterUnderTest, api: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    world = Namespaced(api, namespace)
    world.deployment()
    world.appschedule("shop", [task("report", "H 17 * * 5"), task("sync", "*/5 * * * *")])
    wait_for(
        lambda: len([t for t in (world.get("shop").get("status") or {}).get("tasks") or [] if t.get("schedule")]) == 2,
        timeout=30,
        what="both tasks tracked",
    )
    shown = plugin(cluster, "status", "shop", "-n", namespace)
    assert shown.returncode == 0, shown.stderr
    resolved = resolve_hashed("H 17 * * 5", hashed_seed(namespace, "shop", "report"))
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"{namespace}/shop  deployment web  ready True")
    assert f"  report  {resolved}  UTC" in lines and "  sync  */5 * * * *  UTC" in lines
    assert sum(1 for line in lines if line.rstrip().endswith("Z") and ":" in line) == 6  # 3 fires per task
    assert max(len(line) for line in lines) <= 80

    as_json = json.loads(plugin(cluster, "status", "shop", "-n", namespace, "-o", "json").stdout)
    report = next(t for t in as_json["tasks"] if t["name"] == "report")
    assert report["schedule"] == resolved and len(report["next"]) == 3 and report["counts"]["runs"] == 0

    everywhere = plugin(cluster, "status", "-A", "-o", "json")
    assert any(item["namespace"] == namespace for item in json.loads(everywhere.stdout))

    past = plugin(cluster, "history", "shop", "-n", namespace)
    assert past.returncode == 0, past.stderr
    assert [line.split()[0] for line in past.stdout.splitlines()[1:3]] == ["report", "sync"]
    assert "(none yet)" in past.stdout and max(len(line) for line in past.stdout.splitlines()) <= 80
    one = json.loads(plugin(cluster, "history", "shop", "sync", "-n", namespace, "-o", "json").stdout)
    assert [t["name"] for t in one["tasks"]] == ["sync"]
    no_task = plugin(cluster, "history", "shop", "nope", "-n", namespace)
    assert no_task.returncode == 1 and 'has no task "nope"' in no_task.stderr

    missing = plugin(cluster, "status", "nope", "-n", namespace)
    assert missing.returncode == 1 and missing.stdout == ""
    assert f'appschedules.appschedule.dev "nope" not found in namespace {namespace}' in missing.stderr


def test_run_and_rerun_carry_their_keys_and_are_counted_as_what_they_are(
    cluster: ClusterUnderTest, api: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """A real fire, then `run` (a key of its own) and `rerun` of that fire (its key): counted manual 1 and
    reruns 1, no duplicate; a time that is not a fire is refused naming the nearest."""
    world = Namespaced(api, namespace)
    world.deployment()
    world.appschedule("shop", [task("tick", "* * * * *")])

    def tick() -> dict[str, Any]:
        found: dict[str, Any] = next(
            (t for t in (world.get("shop").get("status") or {}).get("tasks") or [] if t["name"] == "tick"), {}
        )
        return found

    wait_for(lambda: tick().get("trackingSince"), timeout=30, what="tracking")
    fired = wait_for(lambda: (tick().get("lastRun") or {}).get("scheduledTime"), timeout=90, what="a fire recorded")
    jobs = client.BatchV1Api(api)

    def key_of(name: str) -> str:
        job = jobs.read_namespaced_job(name, namespace)
        return str((job.metadata.annotations or {}).get("appschedule.dev/idempotency-key"))

    ran = plugin(cluster, "run", "shop", "tick", "-n", namespace)
    assert ran.returncode == 0 and "(manual, fire time " in ran.stdout, ran.stderr
    manual_job = ran.stdout.split()[0].removeprefix("job.batch/")
    assert key_of(manual_job).startswith("tick@") and not key_of(manual_job).endswith(":00Z")  # not a fire's

    again = plugin(cluster, "rerun", "shop", "tick", "--time", fired, "-n", namespace)
    assert again.returncode == 0, again.stderr
    rerun_job = again.stdout.split()[0].removeprefix("job.batch/")
    original = next(j for j in jobs.list_namespaced_job(namespace).items
                    if (j.metadata.annotations or {}).get("appschedule.dev/scheduled-time") == fired
                    and "appschedule.dev/run-kind" not in (j.metadata.annotations or {}))  # fmt: skip
    assert key_of(rerun_job) == key_of(original.metadata.name) == f"tick@{fired}"

    off = fired.replace(":00Z", ":30Z")
    refused = plugin(cluster, "rerun", "shop", "tick", "--time", off, "-n", namespace)
    assert (
        refused.returncode == 1 and f"{off} is not a fire of '* * * * *' (UTC); the nearest: {fired}" in refused.stderr
    )
    wait_for(
        lambda: {k: (tick().get("counts") or {}).get(k) for k in ("manual", "reruns")} == {"manual": 1, "reruns": 1},
        timeout=30,
        what="the manual run and the re-run counted",
    )
    assert not (tick().get("counts") or {}).get("duplicates")


def test_backfill_of_ten_fires_two_at_a_time_survives_a_sigkill_of_the_operator(
    cluster: ClusterUnderTest, api: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """`kubectl appschedule backfill` of 10 past fires with --parallel 2: the operator runs each fire once
    with that fire's key, oldest first, never more than 2 at once, also across a SIGKILL of the operator
    halfway; the ledger counts them backfilled (not runs, not duplicates); --remove deletes its Jobs."""
    world = Namespaced(api, namespace)
    world.deployment()
    world.appschedule("shop", [task("tick", "*/5 * * * *")])
    wait_for(lambda: world.cronjobs(), timeout=30, what="the CronJob")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    first = now - timedelta(hours=2) - timedelta(minutes=now.minute % 5)
    last = first + timedelta(minutes=45)  # ten fires of */5
    span = ["--from", keys.rfc3339(first), "--to", keys.rfc3339(last), "-n", namespace]

    listed = plugin(cluster, "backfill", "shop", "tick", *span, "--dry-run")
    assert listed.returncode == 0, listed.stderr
    fires = [keys.rfc3339(first + timedelta(minutes=5 * i)) for i in range(10)]
    assert listed.stdout.splitlines() == [f"{f}  tick@{f}" for f in fires] + ["10 fires (dry run)"]
    assert "backfills" not in world.get("shop")["spec"]  # a dry run records nothing
    too_many = plugin(cluster, "backfill", "shop", "tick", *span, "--max", "9")
    assert too_many.returncode == 1 and "more than 9 fires" in too_many.stderr and "--max" in too_many.stderr
    future = plugin(cluster, "backfill", "shop", "tick", "--from", keys.rfc3339(now), "--to",
                    keys.rfc3339(now + timedelta(hours=1)), "-n", namespace)  # fmt: skip
    assert future.returncode == 1 and "is in the future" in future.stderr

    asked = plugin(cluster, "backfill", "shop", "tick", *span, "--parallel", "2", "--backfill-name", "fill")
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.startswith("appschedule.appschedule.dev/shop backfill fill requested: 10 fires of task tick")
    batch = client.BatchV1Api(api)

    def mine() -> list[client.V1Job]:
        return [j for j in batch.list_namespaced_job(namespace).items
                if str((j.metadata.annotations or {}).get("appschedule.dev/backfill")).startswith("fill.")]  # fmt: skip

    def active(jobs: list[client.V1Job]) -> int:
        return sum(1 for j in jobs if not any(c.status == "True" and c.type in ("Complete", "Failed")
                                              for c in (j.status.conditions or [])))  # fmt: skip

    most = 0

    def started(count: int) -> bool:
        nonlocal most
        jobs = mine()
        most = max(most, active(jobs))
        return len(jobs) >= count

    wait_for(lambda: started(4), timeout=60, what="4 fires of the backfill started", interval=0.1)
    operator.kill()
    at_kill = len(mine())
    assert 4 <= at_kill < 10, f"{at_kill} fires started when the operator was killed: not halfway"
    operator.start_and_wait()
    wait_for(lambda: started(10) and active(mine()) == 0, timeout=120, what="all 10 fires run", interval=0.1)
    assert most <= 2, f"{most} runs of the backfill were active at once (parallel 2)"
    jobs = mine()
    times = sorted((j.metadata.annotations or {})["appschedule.dev/scheduled-time"] for j in jobs)
    assert times == fires  # each fire once
    assert sorted((j.metadata.annotations or {})["appschedule.dev/idempotency-key"] for j in jobs) == [
        f"tick@{f}" for f in fires
    ]
    assert all(j.metadata.owner_references[0].kind == "AppSchedule" for j in jobs)

    def progress() -> dict[str, Any]:
        found: dict[str, Any] = next(iter((world.get("shop").get("status") or {}).get("backfills") or []), {})
        return found

    wait_for(lambda: progress().get("state") == "Complete", timeout=30, what="the backfill Complete")
    assert {k: progress().get(k) for k in ("fires", "started", "succeeded", "failed")} == {
        "fires": 10, "started": 10, "succeeded": 10, "failed": 0
    }  # fmt: skip

    def tick_counts() -> dict[str, Any]:
        entry: dict[str, Any] = next(
            (t for t in (world.get("shop").get("status") or {}).get("tasks") or [] if t["name"] == "tick"), {}
        )
        return {k: v for k, v in (entry.get("counts") or {}).items() if v}

    wait_for(lambda: tick_counts().get("backfilled") == 10, timeout=30, what="10 backfilled runs counted")
    assert not {"runs", "duplicates", "missed"} & tick_counts().keys()
    shown = plugin(cluster, "status", "shop", "-n", namespace)
    assert "  backfill fill (tick)  Complete\n    started 10/10  active 0  succeeded 10  failed 0\n" in shown.stdout
    assert max(len(line) for line in shown.stdout.splitlines()) <= 80

    for shown_in_terminal in (in_terminal(cluster, "status", "shop", "-n", namespace),
                              in_terminal(cluster, "history", "shop", "-n", namespace)):  # fmt: skip
        lines = shown_in_terminal.splitlines()
        assert lines and max(len(line) for line in lines) <= 80, shown_in_terminal  # nothing wraps
        assert "\x1b" not in shown_in_terminal  # plain text, no escape sequences
    assert "backfill fill (tick)  Complete" in in_terminal(cluster, "status", "shop", "-n", namespace)

    removed = plugin(cluster, "backfill", "shop", "--remove", "fill", "-n", namespace)
    assert removed.returncode == 0, removed.stderr
    wait_for(lambda: not mine(), timeout=30, what="the backfill's Jobs deleted")
    wait_for(lambda: not (world.get("shop").get("status") or {}).get("backfills"), timeout=30, what="no backfill")
