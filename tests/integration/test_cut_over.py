"""kubectl appschedule import cronjob --cut-over across real fires (issue 35 item 1): the old CronJob runs every fire
up to the cut, the task's CronJob every fire after it, no fire twice and none lost, the same key on both sides. The
cut is asked seconds before a fire, and the operator is killed in the middle of the hand-over. One of the two
CronJobs is Forbid and its run never ends: the cut comes during that run, which then holds back the task's next
fire as the CronJob's own run would."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from kubernetes import client

from appschedule.core import cutover, keys, naming
from tests.kit.wait import seconds_to_next_minute, wait_for

from .conftest import ClusterUnderTest, OperatorProcess
from .test_ledger import counts, jobs, keying_operator, task_status  # noqa: F401 (a fixture)
from .test_operator import Namespaced
from .test_plugin import plugin

pytestmark = pytest.mark.cronfire


@pytest.fixture(name="world")
def cut_world(api: client.ApiClient, namespace: str, operator: OperatorProcess) -> Namespaced:
    return Namespaced(api, namespace)


def legacy(world: Namespaced, name: str, script: str, *, forbid_and_hang: bool = False) -> None:
    """A CronJob as a team has one today: every minute, its own env and deadline, Kubernetes' defaults otherwise.
    ``forbid_and_hang``: Forbid, and its runs never end (kwok keeps the pod running: stages.yaml)."""
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": world.namespace},
        "spec": {
            "schedule": "* * * * *",
            "timeZone": "Europe/Berlin",
            "startingDeadlineSeconds": 50,
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "app",
                                    "image": "registry.example.com/shop/web:1.4.2",
                                    "command": ["node", script],
                                    "env": [{"name": "REPORT_BUCKET", "value": "s3://reports"}],
                                }
                            ],
                        }
                    }
                }
            },
        },
    }
    if forbid_and_hang:
        body["spec"]["concurrencyPolicy"] = "Forbid"
        template = body["spec"]["jobTemplate"]["spec"]["template"]
        template["metadata"] = {"annotations": {"test.appschedule.dev/outcome": "hang"}}
    world.batch.create_namespaced_cron_job(world.namespace, body)


def fire_of(job: dict[str, Any]) -> str:
    """The fire a Job is for, in UTC (the controller writes it in the CronJob's zone: +01:00 for Europe/Berlin)."""
    moment = keys.parse_time((job["metadata"].get("annotations") or {}).get(naming.CRONJOB_SCHEDULED_TIMESTAMP))
    return keys.rfc3339(moment) if moment else ""


def minute(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.usefixtures("keying_operator")  # runs keyed while the session's operator is down
def test_a_cut_over_seconds_before_a_fire_with_the_operator_killed_midway(
    world: Namespaced, cluster: ClusterUnderTest, operator: OperatorProcess
) -> None:
    world.deployment()
    # the old CronJobs are made in the minute before the fire B1, so B1 is their first: a hanging run of an earlier
    # fire would have the Forbid one skip B1
    left = seconds_to_next_minute()
    if left < 40:
        time.sleep(left + 1)
    b1 = round(time.time() + seconds_to_next_minute())  # the boundary, to the second
    legacy(world, "legacy-report", "jobs/report.js")
    legacy(world, "legacy-sweep", "jobs/sweep.js", forbid_and_hang=True)  # its B1 run still runs at the cut
    # the import as printed: one task per CronJob, settings as they run, nothing written
    printed = plugin(cluster, "import", "cronjob", "legacy-report", "legacy-sweep", "--deployment", "web",
                     "-n", world.namespace)  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    document = yaml.safe_load(printed.stdout)
    assert [t["name"] for t in document["spec"]["tasks"]] == ["legacy-report", "legacy-sweep"]
    assert document["spec"]["tasks"][0]["env"] == [{"name": "REPORT_BUCKET", "value": "s3://reports"}]
    assert "activeDeadlineSeconds: the CronJob has none" in printed.stderr
    refused = plugin(cluster, "import", "cronjob", "legacy-report", "--deployment", "web", "-n", world.namespace,
                     "--apply")  # fmt: skip
    assert refused.returncode == 1 and "runs every fire twice" in refused.stderr
    assert world.cronjobs().keys() == {"legacy-report", "legacy-sweep"}

    # the cut asked 5-8 s before a fire B1: the operator holds the task's CronJob until that fire is the old one's
    assert time.time() < b1 - 12, "the import took too long to cut before B1"
    time.sleep(max(0.0, b1 - time.time() - 8))
    applied = plugin(cluster, "import", "cronjob", "legacy-report", "legacy-sweep", "--deployment", "web",
                     "-n", world.namespace, "--cut-over", "--apply")  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    old = world.cronjobs()
    assert old["legacy-report"]["metadata"]["labels"] == cutover.labels_for("web")
    assert set(old) == {"legacy-report", "legacy-sweep"}, "a task's CronJob was made seconds before a fire"
    wait_for(
        lambda: task_status(world, "web", "legacy-report").get("trackingSince"),
        timeout=max(1.0, b1 - time.time() - 0.5),
        what="the ledger tracking the task through the old CronJob",
    )
    operator.kill()  # in the middle of the hand-over: held, the old CronJob about to run its last fire
    try:
        wait_for(
            lambda: sum(fire_of(j) == minute(b1) for j in jobs(world)) >= 2,
            timeout=b1 - time.time() + 30,
            what="the old CronJobs' Jobs for the fire B1",
        )
    finally:
        operator.start_and_wait()
    ours = {naming.cronjob_name("web", t) for t in ("legacy-report", "legacy-sweep")}
    wait_for(lambda: ours <= set(world.cronjobs()), timeout=30, what="the tasks' CronJobs")
    wait_for(
        lambda: all(world.cronjobs()[n]["spec"].get("suspend") for n in ("legacy-report", "legacy-sweep")),
        timeout=30,
        what="the old CronJobs suspended after their last fire",
    )
    b2 = b1 + 60
    assert time.time() < b2 - 2, "the hand-over took past the next fire"
    wait_for(
        lambda: sum(fire_of(j) == minute(b2) for j in jobs(world)) >= 2,
        timeout=b2 - time.time() + 30,
        what="the fire B2",
    )
    found = jobs(world)
    for task in ("legacy-report", "legacy-sweep"):
        mine = naming.cronjob_name("web", task)
        by_fire: dict[str, list[str]] = {}
        for job in found:
            owner = job["metadata"]["ownerReferences"][0]["name"]
            if owner in (task, mine):
                by_fire.setdefault(fire_of(job), []).append(owner)
        # B1 the old CronJob's, B2 the task's: each fire once, none lost
        assert by_fire[minute(b1)] == [task], by_fire
        assert by_fire[minute(b2)] == [mine], by_fire
        keyed = {
            j["metadata"]["annotations"].get(naming.ANNOTATION_IDEMPOTENCY_KEY)
            for j in found
            if fire_of(j) in (minute(b1), minute(b2)) and j["metadata"]["ownerReferences"][0]["name"] in (task, mine)
        }
        assert keyed == {f"{task}@{minute(b1)}", f"{task}@{minute(b2)}"}  # the task's key on both sides
        cut = world.cronjobs()[task]["metadata"]["annotations"][cutover.ANNOTATION_CUT]
        assert minute(b1) < cut < minute(b2)
    # a cut during a fire: the old legacy-sweep's B1 run was still running when the task's CronJob took over, and
    # under Forbid it holds back the task's B2 fire as a run of the task's own CronJob would (the key webhook)
    sweep_b2 = next(
        j for j in found if fire_of(j) == minute(b2) and j["metadata"]["ownerReferences"][0]["name"] != "legacy-sweep"
        and j["metadata"]["labels"].get(naming.LABEL_TASK) == "legacy-sweep"
    )  # fmt: skip
    sweep_b1 = next(j for j in found if fire_of(j) == minute(b1) and j["metadata"]["ownerReferences"][0]["name"]
                    == "legacy-sweep")  # fmt: skip
    assert sweep_b2["metadata"]["annotations"].get(naming.ANNOTATION_BLOCKED_BY) == sweep_b1["metadata"]["name"]
    assert sweep_b2["spec"]["completions"] == 0 and not (sweep_b1.get("status") or {}).get("completionTime")
    wait_for(
        lambda: (
            counts(world, "web", "legacy-report").get("runs", 0) >= 2
            and counts(world, "web", "legacy-sweep").get("skipped", 0) >= 1
        ),
        timeout=b2 + 50 + 30 - time.time(),  # a fire is settled once its startingDeadlineSeconds (50) has passed
        what="report's two fires counted as runs, sweep's B2 as skipped behind its B1 run",
    )
    assert counts(world, "web", "legacy-sweep").get("runs", 0) == 1
    for task in ("legacy-report", "legacy-sweep"):
        tally = counts(world, "web", task)
        assert tally.get("duplicates", 0) == 0 and tally.get("missed", 0) == 0, tally
    reasons = {e["reason"] for e in world.events("web")}
    assert {"CutOverStarted", "CutOver"} <= reasons, reasons
    raw = world.batch.list_namespaced_cron_job(world.namespace, _preload_content=False)
    assert len(json.loads(raw.data)["items"]) == 4  # nothing deleted


def test_a_cut_over_the_api_server_refuses_leaves_the_cronjob_as_it_was(
    world: Namespaced, cluster: ClusterUnderTest
) -> None:
    """Every write of --cut-over --apply is first asked as a dry run: an AppSchedule of that name already there (or
    one the webhook refuses) leaves the CronJob unlabelled and its job template untouched, not handed over to an
    AppSchedule that never came."""
    world.deployment()
    legacy(world, "legacy-report", "jobs/report.js")
    before = world.cronjobs()["legacy-report"]
    world.appschedule("web", [{"name": "other", "schedule": "0 9 * * 1", "command": ["true"]}])
    refused = plugin(cluster, "import", "cronjob", "legacy-report", "--deployment", "web", "-n", world.namespace,
                     "--cut-over", "--apply")  # fmt: skip
    assert refused.returncode == 1 and "AlreadyExists" in refused.stderr, refused.stderr
    after = world.cronjobs()["legacy-report"]
    assert after["metadata"].get("labels") == before["metadata"].get("labels")
    assert after["spec"]["jobTemplate"] == before["spec"]["jobTemplate"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
