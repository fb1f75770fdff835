"""examples/claim-demo on the real node: the seed's story with the claim libraries, end to end.

A PostgreSQL on the node (Debian's, listening on the node's address, trusting the pods' network), reached by
the pods as the Service ``postgres``; the demo's web app of three replicas and its AppSchedule of two tasks,
one per claim library (Python, Node), applied from examples/claim-demo/demo.yaml as a user would. At one
fire, a second Job for each task (``kubectl create job --from=cronjob/...``, a duplicate of that fire) and
then ``kubectl appschedule rerun`` of the fire: one row of the app's table did the work per task, the claim
table holds the fire finished, and the ledger counts one duplicate, absorbed by the claim, and one rerun;
the plugin's status and history show it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import yaml

from appschedule.core import naming
from tests.claim import servers
from tests.kit import chart
from tests.kit.chart import REPO, Kubectl
from tests.kit.wait import seconds_to_next_minute, wait_for

sys.path.insert(0, str(REPO / "hack" / "cluster"))
import realnode

DEMO = REPO / "examples" / "claim-demo" / "demo.yaml"
NAME = "digests"
TASKS = ("digest-py", "digest-node")


def run_the_claim_demo(kubectl: Kubectl, kubeconfig: Path, namespace: str, node_ip: str) -> None:
    kubectl("create", "namespace", namespace)
    try:
        with servers.postgresql(listen=node_ip, clients=(realnode.POD_CIDR, f"{node_ip}/32")) as server:
            _story(kubectl, kubeconfig, namespace, node_ip, server.port)
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _sql(port: int, database: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname={database}", autocommit=True) as c:
        cursor = c.execute(statement)
        return cursor.fetchall() if cursor.description else []


def _database_service(namespace: str, node_ip: str, port: int) -> list[dict[str, Any]]:
    """The Service ``postgres`` for the database on the node: no selector, one EndpointSlice to its address."""
    meta = {"name": "postgres", "namespace": namespace}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"ports": [{"name": "postgres", "port": 5432, "targetPort": port}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
         "metadata": {**meta, "name": "postgres-node", "labels": {"kubernetes.io/service-name": "postgres"}},
         "endpoints": [{"addresses": [node_ip]}], "ports": [{"name": "postgres", "port": port, "protocol": "TCP"}]},
    ]  # fmt: skip


def _story(kubectl: Kubectl, kubeconfig: Path, namespace: str, node_ip: str, port: int) -> None:
    _sql(port, "postgres", "CREATE ROLE demo LOGIN")
    _sql(port, "postgres", "CREATE DATABASE demo OWNER demo")
    for obj in _database_service(namespace, node_ip, port):
        kubectl("apply", "-f", "-", input=json.dumps(obj))
    objects = [d for d in yaml.safe_load_all(DEMO.read_text()) if d]
    for obj in objects:
        obj["metadata"]["namespace"] = namespace
        if obj["kind"] == "AppSchedule":
            chart.apply_reviewed(kubectl, obj)
        else:
            kubectl("apply", "-f", "-", input=json.dumps(obj))
    kubectl("rollout", "status", "deployment/web", "-n", namespace, "--timeout=180s")
    ready = int(json.loads(kubectl("get", "deployment", "web", "-n", namespace, "-o", "json").stdout)["status"]
                .get("readyReplicas", 0))  # fmt: skip
    assert ready == 3, f"{ready} of the demo's 3 replicas ready"

    # the next fire that starts at least 15 s from now: its Jobs, and at once a second Job of each task's
    if seconds_to_next_minute() < 15:
        wait_for(lambda: seconds_to_next_minute() > 50, timeout=20, what="a new minute", interval=0.2)
    fire = time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(time.time() + seconds_to_next_minute() + 1))
    by_hand: dict[str, str] = {}
    for task in TASKS:
        cronjob = f"{NAME}-{task}"

        def fired(task: str = task) -> str | None:
            return next((j["metadata"]["name"] for j in _jobs(kubectl, namespace, task)
                         if (j["metadata"].get("annotations") or {}).get(naming.ANNOTATION_IDEMPOTENCY_KEY)
                         == f"{task}@{fire}" and not j["metadata"]["name"].endswith("-by-hand")), None)  # fmt: skip

        wait_for(fired, timeout=90, what=f"the CronJob's Job of {task} at {fire}", interval=0.2)
        by_hand[task] = f"{cronjob}-by-hand"
        kubectl("create", "job", by_hand[task], f"--from=cronjob/{cronjob}", "-n", namespace)
    made = time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime())
    assert made == fire, f"the Jobs by hand were made in the minute of {made}, not the fire's"
    wait_for(lambda: all(_ended(kubectl, namespace, j) for j in by_hand.values()), timeout=120,
             what="the Jobs by hand to end")  # fmt: skip

    # a rerun of the fire, for each task: the fire is done, so its claim loses
    plugin = Path(sys.executable).parent / "kubectl-appschedule"
    env = dict(os.environ, KUBECONFIG=str(kubeconfig))
    for task in TASKS:
        ran = subprocess.run([str(plugin), "rerun", NAME, task, "--time", fire, "-n", namespace],
                             env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert ran.returncode == 0 and f"key {task}@{fire})" in ran.stdout, ran.stdout + ran.stderr
        rerun = ran.stdout.split()[0].removeprefix("job.batch/")
        ended = wait_for(functools.partial(_ended, kubectl, namespace, rerun), timeout=120, what=f"the rerun {rerun}")
        assert ended == "Complete", (rerun, ended)

    # the app's tables: one row did the work per task, the fire's claim finished and never taken over
    rows = _sql(port, "demo", f"SELECT task, COUNT(*) FROM digests WHERE key LIKE '%@{fire}' GROUP BY task")
    claims = _sql(port, "demo", f"SELECT task, finished_at IS NOT NULL, takeovers FROM appschedule_claims "
                                f"WHERE scheduled_for = '{fire}'")  # fmt: skip
    print(f"\nclaim demo at {fire}: digests {rows}, claims {claims}")
    assert sorted(rows) == sorted((task, 1) for task in TASKS), rows
    assert sorted(claims) == sorted((task, True, 0) for task in TASKS), claims

    # the ledger: per task one duplicate, absorbed by its claim, and one rerun, at that fire
    def counted() -> dict[str, dict[str, Any]] | None:
        status = json.loads(kubectl("get", "appschedule", NAME, "-n", namespace, "-o", "json").stdout).get("status")
        tasks = {t["name"]: t for t in (status or {}).get("tasks") or []}
        done = all((tasks.get(t, {}).get("counts") or {}).get("reruns") == 1 and
                   (tasks[t]["counts"]).get("absorbed") == 1 for t in TASKS)  # fmt: skip
        return tasks if done else None

    tasks = wait_for(counted, timeout=90, what="the duplicates absorbed and the reruns counted", interval=1)
    for task in TASKS:
        counts = tasks[task]["counts"]
        assert counts["duplicates"] == 1 and counts["absorbed"] == 1, (task, counts)
        (entry,) = [r for r in tasks[task]["recent"] if r["scheduledTime"] == fire]
        assert entry.get("duplicates") == 1 and entry.get("absorbed") == 1 and entry.get("reruns") == 1, entry

    # the plugin shows it: the status' claims line, the history's fire
    shown = subprocess.run([str(plugin), "status", NAME, "-n", namespace], env=env, capture_output=True,
                           text=True, timeout=60).stdout  # fmt: skip
    history = subprocess.run([str(plugin), "history", NAME, "-n", namespace, "-o", "json"], env=env,
                             capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    print(shown)
    assert shown.count("claims    absorbed 1 of 1 duplicates") == len(TASKS), shown
    for task in json.loads(history)["tasks"]:
        (entry,) = [f for f in task["fires"] if f["scheduledTime"] == fire]
        assert entry["absorbed"] == 1 and entry["mark"] == "R", entry  # run again outranks an absorbed duplicate
    kubectl("patch", "appschedule", NAME, "-n", namespace, "--type=merge", "-p", '{"spec": {"suspend": true}}')


def _jobs(kubectl: Kubectl, namespace: str, task: str) -> list[dict[str, Any]]:
    selector = f"{naming.LABEL_TASK}={task}"
    found: list[dict[str, Any]] = json.loads(
        kubectl("get", "jobs", "-n", namespace, "-l", selector, "-o", "json").stdout
    )["items"]
    return found


def _ended(kubectl: Kubectl, namespace: str, job: str) -> str | None:
    got = json.loads(kubectl("get", "job", job, "-n", namespace, "-o", "json").stdout)
    done = [c["type"] for c in got.get("status", {}).get("conditions") or []
            if c["type"] in ("Complete", "Failed") and c["status"] == "True"]  # fmt: skip
    return done[0] if done else None
