"""What a user does, start to end: helm install, an AppSchedule beside a Deployment, CronJobs, a run
with its key, the status in `kubectl get appschedules`, helm uninstall leaving nothing behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from appschedule.core import keys, naming
from tests.kit import chart
from tests.kit.chart import Helm, HostedOperator, Kubectl
from tests.kit.wait import seconds_to_next_minute, wait_for
from tests.soak import groundtruth as gt

from . import claim_demo
from .conftest import Target

RELEASE = "appschedule"

# The real node's test app (busybox): print the key, then claim it in a table on the node, as the README's
# claim SQL does. mkdir is atomic, so of two runs with the same key exactly one claims it; a claim whose work
# never finished (no "done" in it: its run failed) is taken over by the next run of that key; a finished one
# refuses every later run. /claims/fail-next makes the next run that claims fail before its work is done.
CLAIM = """
key="$APPSCHEDULE_IDEMPOTENCY_KEY"
echo "$key"
if mkdir "/claims/$key" 2>/dev/null; then verdict=claimed
elif [ ! -e "/claims/$key/done" ]; then verdict=took-over
else echo "$key refused $(hostname)" >> /claims/table; exit 0; fi
if rm /claims/fail-next 2>/dev/null; then echo "$key failed $(hostname)" >> /claims/table; exit 1; fi
touch "/claims/$key/done"
echo "$key $verdict $(hostname)" >> /claims/table
"""


# on the real node it also lives through the operator's restarts over five fires (_through_the_operators_restarts)
@pytest.mark.timeout(1500)
def test_install_schedule_run_see_uninstall(target: Target, kubectl: Kubectl, helm: Helm, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    ops, app = f"appschedule-system-{suffix}", f"shop-{suffix}"
    for namespace in (ops, app):
        kubectl("create", "namespace", namespace)
    kubectl("label", "namespace", ops, "pod-security.kubernetes.io/enforce=restricted")
    operator: HostedOperator | None = None
    try:
        values: dict[str, Any] = {"webhook": {"timeoutSeconds": 8}}
        if target.image:
            repository, _, tag = target.image.rpartition(":")
            values["image"] = {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}
        else:  # no node can run the image: its pod waits, and the operator runs here (see conftest)
            values |= {
                "nodeSelector": {"appschedule.dev/test": "no-such-node"},
                "webhook": {"port": 20401},
                "metrics": {"port": 20402},
                "liveness": {"port": 20403},
            }
        crd = kubectl("get", "crd", "appschedules.appschedule.dev", "-o", "json", check=False)
        if crd.returncode == 0:
            # installed before by kubectl (or by another release): adopt it, as the README says
            chart.adopt_crd(kubectl, RELEASE, ops)
        install = ["install", RELEASE, str(chart.CHART), "-n", ops, "-f", "-", "--timeout=180s"]
        helm(*install, *(["--wait"] if target.image else []), input=json.dumps(values))

        # the app: a Deployment and, beside it, its schedule
        image = target.testapp or target.image or "registry.example.com/shop/web:1.4.2"
        pod: dict[str, Any] = {"containers": [{"name": "app", "image": image}]}
        command = ["python", "-c", "import os; print(os.environ['APPSCHEDULE_IDEMPOTENCY_KEY'])"]
        claims = tmp_path / "claims"
        if target.testapp:  # the real node runs it: the claim table is a directory of this machine
            claims.mkdir()
            claims.chmod(0o777)
            pod["containers"][0]["volumeMounts"] = [{"name": "claims", "mountPath": "/claims"}]
            pod["volumes"] = [{"name": "claims", "hostPath": {"path": str(claims), "type": "Directory"}}]
            command = ["sh", "-c", CLAIM]
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": app},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod},
            },
        }
        schedule = {
            "apiVersion": "appschedule.dev/v1alpha1",
            "kind": "AppSchedule",
            "metadata": {"name": "shop", "namespace": app},
            "spec": {
                "deploymentRef": {"name": "web"},
                "timeZone": "UTC",
                "tasks": [{"name": "print-key", "schedule": "* * * * *", "command": command}],
            },
        }
        kubectl("apply", "-f", "-", input=json.dumps(deployment))
        if not target.image:  # before the AppSchedule: no AppSchedule is stored while no replica reviews it
            operator = HostedOperator(kubectl, target.kubeconfig, RELEASE, ops, tmp_path)
            operator.start()
        chart.apply_reviewed(kubectl, schedule)

        wait_for(
            lambda: kubectl("get", "cronjob", "shop-print-key", "-n", app, check=False).returncode == 0,
            timeout=60,
            what="the task's CronJob",
        )

        def succeeded() -> dict[str, Any] | None:
            status = json.loads(kubectl("get", "appschedule", "shop", "-n", app, "-o", "json").stdout).get("status")
            last = ((status or {}).get("tasks") or [{}])[0].get("lastRun") or {}
            return last if last.get("state") == "Succeeded" else None

        last = wait_for(succeeded, timeout=150, what="a run of the task, recorded")
        job = json.loads(kubectl("get", "job", last["job"], "-n", app, "-o", "json").stdout)
        env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["APPSCHEDULE_IDEMPOTENCY_KEY"] == last["key"] == f"print-key@{last['scheduledTime']}"
        if target.image:  # a real process printed it
            log = kubectl("logs", f"job/{last['job']}", "-n", app).stdout
            assert log.strip() == last["key"]
        if target.testapp:  # a second Job for the same scheduled time: one claim in the table, not two
            second = _duplicate_of(job)
            kubectl("create", "-f", "-", input=json.dumps(second))
            name = second["metadata"]["name"]

            def finished() -> bool:
                got = json.loads(kubectl("get", "job", name, "-n", app, "-o", "json").stdout)
                return any(
                    c["type"] in ("Complete", "Failed") and c["status"] == "True"
                    for c in got.get("status", {}).get("conditions") or []
                )

            wait_for(finished, timeout=90, what="the second Job of the same scheduled time")
            assert kubectl("logs", f"job/{name}", "-n", app).stdout.strip() == last["key"]
            rows = [line.split() for line in (claims / "table").read_text().splitlines()]
            mine = [row for row in rows if row[0] == last["key"]]
            assert sorted(row[1] for row in mine) == ["claimed", "refused"], rows

        table = kubectl("get", "appschedules", "-n", app).stdout
        header, row = table.splitlines()[:2]
        assert header.split()[:4] == ["NAME", "DEPLOYMENT", "TASKS", "READY"]
        assert row.split()[:4] == ["shop", "web", "1", "True"]

        if target.image:  # the chart's own test: metrics and the webhook's TLS, from inside the cluster
            helm("test", RELEASE, "-n", ops, "--timeout=120s")

        if target.image and target.node_ip:  # examples/claim-demo: the claim libraries on a real PostgreSQL
            claim_demo.run_the_claim_demo(kubectl, target.kubeconfig, f"demo-{suffix}", target.node_ip)

        if target.image:  # two replicas through restarts: every run keeps its key
            _through_the_operators_restarts(kubectl, ops, app, target.audit)
        if target.image and target.testapp:  # kubectl appschedule rerun: a fire whose run failed is done once
            _rerun_takes_over_an_unfinished_claim(kubectl, target.kubeconfig, app, claims, last["scheduledTime"])

        # uninstall: the pre-delete hook releases the Jobs; nothing of the release stays but the kept CRD
        manifest = helm("get", "manifest", RELEASE, "-n", ops).stdout
        command = [
            helm.binary,
            f"--kubeconfig={helm.kubeconfig}",
            "uninstall",
            RELEASE,
            "-n",
            ops,
            "--wait",
            "--timeout=180s",
        ]
        uninstall = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if operator:  # the hook's pod waits for a node: its work is done here
            hook = f"{operator.fullname}-release-jobs"
            pods = ("get", "pods", "-n", ops, "-l", f"job-name={hook}", "-o", "name")
            wait_for(lambda: kubectl(*pods).stdout.strip(), timeout=60, what="the pre-delete hook's pod")
            assert re.fullmatch(r"released \d+ Job\(s\)", operator.run_like_kubelet(hook).strip())
        assert uninstall.wait(timeout=240) == 0, uninstall.stdout.read() if uninstall.stdout else ""
        if operator:
            operator.stop()
        for obj in (d for d in yaml.safe_load_all(manifest) if d):
            if obj["kind"] != "CustomResourceDefinition":
                gone = kubectl("get", obj["kind"], obj["metadata"]["name"], "-n", ops, check=False)
                assert gone.returncode != 0, f"{obj['kind']} {obj['metadata']['name']} outlived helm uninstall"
        jobs = json.loads(kubectl("get", "jobs", "-n", app, "-o", "json").stdout)["items"]
        held = [
            j["metadata"]["name"] for j in jobs if "appschedule.dev/ledger" in (j["metadata"].get("finalizers") or [])
        ]
        assert not held, f"Jobs left behind the ledger's finalizer: {held}"
    finally:
        if operator:
            operator.stop()
        if helm("status", RELEASE, "-n", ops, check=False).returncode == 0:
            helm("uninstall", RELEASE, "-n", ops, "--no-hooks", check=False)
        for namespace in (app, ops):
            kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _duplicate_of(job: dict[str, Any]) -> dict[str, Any]:
    """A Job made by hand for the same scheduled time as ``job`` (a retry, a second scheduler)."""
    meta, when = job["metadata"], naming.CRONJOB_SCHEDULED_TIMESTAMP
    generated = ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name")
    template = json.loads(json.dumps(job["spec"]["template"]))
    template["metadata"]["labels"] = {k: v for k, v in template["metadata"]["labels"].items() if k not in generated}
    spec = {k: v for k, v in job["spec"].items() if k not in ("selector", "template", "manualSelector")}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{meta['name'][:50]}-again",
            "namespace": meta["namespace"],
            "labels": {k: v for k, v in meta["labels"].items() if k not in generated},
            "annotations": {when: meta["annotations"][when]},
        },
        "spec": {**spec, "template": template},
    }


def _rerun_takes_over_an_unfinished_claim(
    kubectl: Kubectl, kubeconfig: Path, app: str, claims: Path, fired: str
) -> None:
    """An hour before a recorded fire, a fire that never ran: its first attempt (a rerun, with that fire's key)
    claims it and fails; `kubectl appschedule rerun` of the fire takes the claim over and does the work; a
    second rerun is refused by the finished claim. The ledger counts three re-runs and no duplicate."""
    moment = keys.rfc3339((keys.parse_time(fired) or datetime.now(UTC)) - timedelta(hours=1))
    key = f"print-key@{moment}"
    (claims / "fail-next").touch()
    plugin = Path(sys.executable).parent / "kubectl-appschedule"
    outcomes = []
    for _ in range(3):
        ran = subprocess.run(
            [str(plugin), "rerun", "shop", "print-key", "--time", moment, "-n", app],
            env=dict(os.environ, KUBECONFIG=str(kubeconfig)), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert ran.returncode == 0 and f"key {key})" in ran.stdout, ran.stdout + ran.stderr
        name = ran.stdout.split()[0].removeprefix("job.batch/")

        def ended(job: str = name) -> str | None:
            got = json.loads(kubectl("get", "job", job, "-n", app, "-o", "json").stdout)
            done = [c["type"] for c in got.get("status", {}).get("conditions") or []
                    if c["type"] in ("Complete", "Failed") and c["status"] == "True"]  # fmt: skip
            return done[0] if done else None

        outcomes.append(wait_for(ended, timeout=120, what=f"the rerun {name} of {moment}"))
    rows = [line.split() for line in (claims / "table").read_text().splitlines()]
    verdicts = [row[1] for row in rows if row[0] == key]
    print(f"\nclaim table for {key}: {verdicts}; the three runs: {outcomes}")
    assert verdicts == ["failed", "took-over", "refused"] and outcomes == ["Failed", "Complete", "Complete"], rows
    assert (claims / key / "done").exists()

    def tally() -> dict[str, Any]:
        status = json.loads(kubectl("get", "appschedule", "shop", "-n", app, "-o", "json").stdout).get("status")
        counts: dict[str, Any] = ((status or {}).get("tasks") or [{}])[0].get("counts") or {}
        return counts

    before = tally().get("duplicates", 0)
    wait_for(lambda: tally().get("reruns", 0) >= 3, timeout=60, what="three re-runs counted")
    assert tally().get("duplicates", 0) == before


def _lease(kubectl: Kubectl, ops: str) -> dict[str, Any]:
    (lease,) = json.loads(kubectl("get", "leases", "-n", ops, "-o", "json").stdout)["items"]
    spec: dict[str, Any] = lease["spec"]
    return spec


def _pods(kubectl: Kubectl, ops: str, deployment: str, ready: bool = False) -> list[str]:
    """The Deployment's pods not being deleted (and Ready, with ``ready``)."""
    found = json.loads(kubectl("get", "pods", "-n", ops, "-o", "json").stdout)["items"]
    return sorted(
        p["metadata"]["name"]
        for p in found
        if _replica(deployment, p["metadata"]["name"])
        and not p["metadata"].get("deletionTimestamp")
        and (not ready or any(c["type"] == "Ready" and c["status"] == "True"
                              for c in p.get("status", {}).get("conditions") or []))
    )  # fmt: skip


def _replica(deployment: str, pod: str) -> bool:
    """Whether ``pod`` is one of the Deployment's (<deployment>-<ReplicaSet hash>-<suffix>), not a hook's."""
    return re.fullmatch(rf"{re.escape(deployment)}-[a-z0-9]{{6,10}}-[a-z0-9]{{5}}", pod) is not None


def _two_ready(kubectl: Kubectl, ops: str, deployment: str, gone: str) -> None:
    """Until ``gone`` has left and its replacement is ready: two ready replicas (not `kubectl rollout status`,
    which may answer from a status written before the pod went)."""

    def ready() -> bool:
        pods = _pods(kubectl, ops, deployment, ready=True)
        return gone not in pods and len(pods) == 2

    wait_for(ready, timeout=180, what=f"{gone}'s replacement to be ready", interval=1)


def _evict(kubectl: Kubectl, ops: str, pod: str) -> subprocess.CompletedProcess[str]:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ops}}
    path = f"/api/v1/namespaces/{ops}/pods/{pod}/eviction"
    return kubectl("create", "--raw", path, "-f", "-", input=json.dumps(body), check=False)


def _first_reconcile_after(kubectl: Kubectl, ops: str, pod: str, moment: float) -> float | None:
    """When ``pod`` logged its first reconcile after ``moment`` (time.time()), None if not yet."""
    for line in kubectl("logs", pod, "-n", ops, check=False).stdout.splitlines():
        if '"reconciled ' not in line:
            continue
        with contextlib.suppress(ValueError, KeyError):
            at = datetime.fromisoformat(json.loads(line)["timestamp"]).timestamp()
            if at >= moment:
                return at
    return None


def _through_the_operators_restarts(kubectl: Kubectl, ops: str, app: str, audit: Path | None) -> None:
    """The chart's two replicas on the real node, across at least five fires of ``* * * * *``, each of these
    across a fire of its own: a rollout restart of the operator 6 s before a fire; the leader's pod deleted
    8 s before the next (the time from its deletion to the new leader's first reconcile measured); one pod
    evicted through the PodDisruptionBudget 3 s before the next (a second eviction at once refused) and,
    while only one replica is up, an AppSchedule written by an author who may not create Jobs (refused:
    still reviewed, failurePolicy Fail). Then every Job carries its key (the ledger counts none unkeyed) and,
    with the API server's audit log (a local cluster's), the ledger's counts equal the log's and no replica
    wrote while it did not hold the Lease."""
    deployment = f"{RELEASE}-appschedule-operator"
    begun = time.time()

    # a rollout restart 6 s before a fire, which falls in it (maxUnavailable 0: a new pod is ready before an
    # old one stops)
    wait_for(lambda: 4 < seconds_to_next_minute() < 8, timeout=70, what="6 s before a fire", interval=0.2)
    kubectl("rollout", "restart", f"deployment/{deployment}", "-n", ops)
    kubectl("rollout", "status", f"deployment/{deployment}", "-n", ops, "--timeout=240s")
    print(f"rollout restart done in {time.time() - begun:.0f} s")

    # the leader's pod deleted 8 s before the next fire
    wait_for(lambda: 3 < seconds_to_next_minute() < 9, timeout=70, what="8 s before a fire", interval=0.2)

    def leading_pod() -> str | None:  # a ready pod holds the Lease (the rollout's last handover is done)
        holder = str(_lease(kubectl, ops).get("holderIdentity") or "")
        return holder if holder.rsplit("_", 1)[0] in _pods(kubectl, ops, deployment, ready=True) else None

    leader = wait_for(leading_pod, timeout=5, what="a ready leader", interval=0.2)
    pod = leader.rsplit("_", 1)[0]  # POD_NAME_<uuid>
    deleted = time.time()
    kubectl("delete", "pod", pod, "-n", ops, "--wait=false")
    successor = wait_for(
        lambda: (
            (holder := (_lease(kubectl, ops).get("holderIdentity") or "")) not in ("", leader)
            and holder.rsplit("_", 1)[0]
        ),
        timeout=40,
        what="another replica to take the Lease",
        interval=0.5,
    )
    first = wait_for(
        lambda: _first_reconcile_after(kubectl, ops, successor, deleted), timeout=40, what="the new leader's reconcile"
    )
    takeover = first - deleted
    print(f"leader's pod deleted before a fire: {successor} reconciled {takeover:.1f} s later")
    assert takeover <= 20.0
    _two_ready(kubectl, ops, deployment, gone=pod)

    # an eviction through the PDB, a second one refused, and a review while one replica is down
    kubectl("apply", "-f", "-", input=json.dumps(_author_without_jobs(app, "eve")))
    wait_for(lambda: kubectl("auth", "can-i", "patch", "appschedules.appschedule.dev", "-n", app, "--as=eve",
                             check=False).stdout.strip() == "yes", timeout=30, what="eve's Role")  # fmt: skip
    jsonpath = "jsonpath={.status.disruptionsAllowed}"
    wait_for(lambda: kubectl("get", "pdb", deployment, "-n", ops, "-o", jsonpath).stdout.strip() == "1", timeout=60,
             what="the PodDisruptionBudget to allow one disruption")  # fmt: skip
    # 3 s before a fire: its Jobs are admitted while one replica is gone and its replacement starts
    wait_for(lambda: 2 < seconds_to_next_minute() < 4, timeout=70, what="3 s before a fire", interval=0.2)
    first_pod, second_pod = _pods(kubectl, ops, deployment)
    evicted = _evict(kubectl, ops, first_pod)
    assert evicted.returncode == 0, evicted.stderr
    refused = _evict(kubectl, ops, second_pod)
    assert refused.returncode != 0 and "disruption budget" in refused.stderr, refused.stderr
    change = '[{"op": "replace", "path": "/spec/tasks/0/command", "value": ["sh", "-c", "echo stolen"]}]'
    patched = kubectl("patch", "appschedule", "shop", "-n", app, "--as=eve", "--type=json", "-p", change, check=False)
    ready = json.loads(kubectl("get", "deployment", deployment, "-n", ops, "-o", "json").stdout)["status"]
    print(f"a spec change while {ready.get('readyReplicas')} of 2 replicas were ready: {patched.stderr.strip()}")
    assert patched.returncode != 0 and "eve may not create Jobs" in patched.stderr, patched.stderr
    _two_ready(kubectl, ops, deployment, gone=first_pod)

    # at least five fires since the start, the last of them recorded
    fifth = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(begun - begun % 60 + 5 * 60))

    def task_status() -> dict[str, Any]:
        status = json.loads(kubectl("get", "appschedule", "shop", "-n", app, "-o", "json").stdout).get("status")
        found: dict[str, Any] = ((status or {}).get("tasks") or [{}])[0]
        return found

    def recorded() -> bool:
        last = task_status().get("lastRun") or {}
        return str(last.get("scheduledTime", "")) >= fifth and last.get("state") in ("Succeeded", "Failed")

    wait_for(recorded, timeout=330, what=f"the fire of {fifth} recorded", interval=2)
    # suspended between fires, then settled: the audit log and the ledger are read over the same fires
    wait_for(lambda: 20 < seconds_to_next_minute() < 45, timeout=70, what="the middle of a minute", interval=0.2)
    kubectl("patch", "appschedule", "shop", "-n", app, "--type=merge", "-p", '{"spec": {"suspend": true}}')
    last_fire = time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime())

    def settled() -> dict[str, Any] | None:
        task = task_status()
        done = str(task.get("checkedUntil", "")) >= last_fire and all(r.get("finished") for r in task.get("jobs") or [])
        return task if done else None

    task = wait_for(settled, timeout=120, what=f"the ledger settled up to {last_fire}", interval=2)

    status_counts = task.get("counts") or {}
    assert not status_counts.get("unkeyed"), status_counts
    events = kubectl("get", "events", "-n", app, "--field-selector", "reason=KeyNotInjected", "-o", "name")
    assert events.stdout.strip() == "", events.stdout
    if audit is None:  # a cluster not our own (kind): the Jobs still there carry their keys
        jobs = json.loads(kubectl("get", "jobs", "-n", app, "-o", "json").stdout)["items"]
        assert all(naming.ANNOTATION_IDEMPOTENCY_KEY in (j["metadata"].get("annotations") or {}) for j in jobs)
        return

    # the audit log's account of it (the cluster may hold earlier runs: only this task, this release)
    segments = [*sorted(audit.glob("audit-*.log")), audit / "audit.log"]
    lines = [line for segment in segments for line in segment.read_text().splitlines()]
    history = gt.read_audit(lines)
    key = (app, "shop", "print-key")
    mine = [j for j in history.jobs.values() if j.task == key]
    unkeyed = [j.name for j in mine if not j.keyed]
    assert mine and not unkeyed, f"Jobs without their key: {unkeyed}"
    cronjob = json.loads(kubectl("get", "cronjob", "shop-print-key", "-n", app, "-o", "json").stdout)
    (row,) = gt.compare(
        history,
        {key: task},
        schedules={key: "* * * * *"},
        forbid={key: cronjob["spec"].get("concurrencyPolicy") == "Forbid"},
    )
    fires = len(gt.fires("* * * * *", datetime.fromtimestamp(begun, UTC), datetime.fromisoformat(fifth)))
    print(f"{fires} fires since the restarts began; ledger {row.ledger.as_dict()}, audit log {row.truth.as_dict()}")
    assert row.same and row.ledger.unkeyed == 0 and row.ledger.missed == 0
    account = f"system:serviceaccount:{ops}:"
    writes = [w for w in gt.pod_writes(lines) if w.user.startswith(account) and _replica(deployment, w.pod)]
    spans = gt.leading(writes, ops, deployment)
    assert spans, "the audit log holds no Lease writes: a cluster prepared before its policy logged them?"
    standby = gt.standby_writes(writes, spans)
    by_pod = {pod: sum(1 for w in writes if w.pod == pod and w.resource.split("/")[0] not in gt.NOT_STATE)
              for pod in sorted({w.pod for w in writes})}  # fmt: skip
    print(f"leaders: {[(pod, f'{start:%H:%M:%S}') for pod, start, _ in spans]}; writes by pod: {by_pod}; "
          f"writes by a replica that did not lead: {len(standby)}")  # fmt: skip
    assert len(spans) >= 3 and sum(by_pod.values()) > 0
    assert not standby, standby[:5]


def _author_without_jobs(namespace: str, user: str) -> dict[str, Any]:
    """A Role and RoleBinding: ``user`` may write AppSchedules in ``namespace`` but not create Jobs."""
    verbs = ["get", "list", "create", "update", "patch"]
    return chart.user_role(
        namespace, user, [{"apiGroups": ["appschedule.dev"], "resources": ["appschedules"], "verbs": verbs}]
    )
