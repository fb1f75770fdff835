"""What a user does, start to end: helm install, an AppSchedule beside a Deployment, CronJobs, a run
with its key, the status in `kubectl get appschedules`, helm uninstall leaving nothing behind."""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from appschedule.core import naming
from tests.kit import chart
from tests.kit.chart import Helm, HostedOperator, Kubectl
from tests.kit.wait import seconds_to_next_minute, wait_for

from .conftest import Target

RELEASE = "appschedule"

# The real node's test app (busybox): print the key, then claim it in a table on the node. mkdir is atomic,
# so of two runs with the same key exactly one claims it: what an idempotent task does with its key.
CLAIM = """
key="$APPSCHEDULE_IDEMPOTENCY_KEY"
echo "$key"
if mkdir "/claims/$key" 2>/dev/null; then verdict=claimed; else verdict=refused; fi
echo "$key $verdict $(hostname)" >> /claims/table
"""


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
                "webhook": {"port": 36401},
                "metrics": {"port": 36402},
                "liveness": {"port": 36403},
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

        if target.image:  # two replicas: the leader deleted just before a fire; every run keeps its key
            _leader_deleted_before_a_fire(kubectl, ops, app)

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


def _lease(kubectl: Kubectl, ops: str) -> dict[str, Any]:
    (lease,) = json.loads(kubectl("get", "leases", "-n", ops, "-o", "json").stdout)["items"]
    spec: dict[str, Any] = lease["spec"]
    return spec


def _leader_deleted_before_a_fire(kubectl: Kubectl, ops: str, app: str) -> None:
    """The chart's two replicas on the real node: the leader's pod is deleted 8 s before a fire. The other
    replica serves the key webhook (the Jobs of that fire and the next carry their keys, no
    KeyNotInjected), takes the Lease over and records both runs."""
    leader = _lease(kubectl, ops)["holderIdentity"]
    pod = leader.rsplit("_", 1)[0]  # POD_NAME_<uuid>
    wait_for(lambda: 3 < seconds_to_next_minute() < 9, timeout=70, what="8 s before a minute boundary", interval=0.2)
    fire = round(time.time() + seconds_to_next_minute())  # the boundary, in whole seconds
    deleted = time.monotonic()
    kubectl("delete", "pod", pod, "-n", ops, "--wait=false")
    took = wait_for(
        lambda: _lease(kubectl, ops)["holderIdentity"] not in ("", leader) and time.monotonic() - deleted,
        timeout=40,
        what="another replica to take the Lease",
        interval=0.5,
    )
    print(f"leader's pod deleted; the other replica leads after {took:.1f} s")
    fires = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(fire + 60 * n)) for n in (0, 1)]

    def keyed_jobs() -> dict[str, str] | None:
        jobs = json.loads(kubectl("get", "jobs", "-n", app, "-o", "json").stdout)["items"]
        found = {
            (j["metadata"].get("annotations") or {}).get(naming.ANNOTATION_SCHEDULED_TIME, ""): (
                j["metadata"].get("annotations") or {}
            ).get(naming.ANNOTATION_IDEMPOTENCY_KEY, "")
            for j in jobs
        }
        return found if all(f in found for f in fires) else None

    keys = wait_for(keyed_jobs, timeout=150, what=f"the Jobs of {fires}", interval=1)
    assert [keys[f] for f in fires] == [f"print-key@{f}" for f in fires]

    def recorded() -> bool:
        status = json.loads(kubectl("get", "appschedule", "shop", "-n", app, "-o", "json").stdout).get("status")
        last = ((status or {}).get("tasks") or [{}])[0].get("lastRun") or {}
        return str(last.get("scheduledTime", "")) >= fires[1] and last.get("state") == "Succeeded"

    wait_for(recorded, timeout=90, what="the new leader to record the second run")
    events = kubectl("get", "events", "-n", app, "--field-selector", "reason=KeyNotInjected", "-o", "name")
    assert events.stdout.strip() == "", events.stdout
