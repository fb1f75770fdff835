"""kubectl appschedule import cronjob (core/cronjob_import.py): the task a CronJob becomes, what it says it left
out, and the hand-over patch whose runs carry the same key as the task's own CronJob's."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from appschedule.core import admission, cronjob_import, cutover, naming
from appschedule.core.admission import check_appschedule, mutate_job
from appschedule.core.render import render


def cronjob(**changes: Any) -> dict[str, Any]:
    """A CronJob as the API server returns one made by ``kubectl create cronjob`` (its defaults filled in)."""
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly-report", "namespace": "shop", "uid": "uid-old", "resourceVersion": "41"},
        "spec": {
            "schedule": "30 2 * * *",
            "timeZone": "Europe/Berlin",
            "concurrencyPolicy": "Allow",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {
                "metadata": {},
                "spec": {
                    "backoffLimit": 6,
                    "template": {
                        "metadata": {"annotations": {"vault.hashicorp.com/role": "report"}},
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "containers": [
                                {
                                    "name": "report",
                                    "image": "registry.example.com/shop/web:1.4.1",
                                    "command": ["node", "jobs/report.js"],
                                    "args": ["--since", "1d"],
                                    "env": [
                                        {"name": "NODE_ENV", "value": "production"},
                                        {"name": "REPORT_BUCKET", "value": "s3://reports"},
                                    ],
                                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                                }
                            ],
                            "volumes": [{"name": "scratch", "emptyDir": {}}],
                        },
                    },
                },
            },
        },
    }
    body["spec"].update(changes)
    return body


def test_a_cronjob_becomes_a_task_with_its_own_settings(deployment: dict[str, Any]) -> None:
    found = cronjob_import.translate(cronjob(), deployment)
    assert found.refused is None and found.task is not None
    task = found.task
    assert task == {
        "name": "nightly-report",
        "schedule": "30 2 * * *",
        "timeZone": "Europe/Berlin",
        "command": ["node", "jobs/report.js"],
        "args": ["--since", "1d"],
        # as the CronJob runs: Kubernetes' defaults, not the AppSchedule's
        "suspend": False,
        "concurrencyPolicy": "Allow",
        "backoffLimit": 6,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 1,
        "env": [{"name": "REPORT_BUCKET", "value": "s3://reports"}],  # NODE_ENV is the Deployment's already
        "podAnnotations": {"vault.hashicorp.com/role": "report"},
    }
    left = "\n".join(found.left)
    for said in (
        "image: the CronJob ran 'registry.example.com/shop/web:1.4.1'",
        "volumeMounts /scratch",
        "activeDeadlineSeconds: the CronJob has none",
        "startingDeadlineSeconds: the CronJob has none",
        "backoffLimit: 6",
        "concurrencyPolicy: Allow",
        "restartPolicy: OnFailure",
        "env: the task also gets the Deployment's DATABASE_URL",
    ):
        assert said in left, said
    appschedule = {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppSchedule",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"deploymentRef": {"name": "web"}, "tasks": [{**task, "cutOverFrom": "nightly-report"}]},
    }
    assert check_appschedule(appschedule) is None
    assert render(appschedule, deployment).errors == []


def test_what_cannot_become_a_task_says_why(deployment: dict[str, Any]) -> None:
    entrypoint = cronjob()
    del entrypoint["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "no command" in str(cronjob_import.translate(entrypoint, deployment).refused)
    every = cronjob_import.translate(cronjob(schedule="@every 5m"), deployment)
    assert every.task is None and "@every" in str(every.refused)
    assert "no container 'worker'" in str(cronjob_import.translate(cronjob(), deployment, "worker").refused)


def test_a_tz_prefix_becomes_the_zone_and_a_long_name_a_task_name(deployment: dict[str, Any]) -> None:
    body = cronjob(schedule="CRON_TZ=America/New_York 0 9 * * 1-5")
    del body["spec"]["timeZone"]
    body["metadata"]["name"] = "quarterly.revenue-report"  # a CronJob name may have dots, a task name not
    found = cronjob_import.translate(body, deployment)
    assert found.task is not None
    assert (found.task["schedule"], found.task["timeZone"]) == ("0 9 * * 1-5", "America/New_York")
    assert found.task["name"] == "quarterly-revenue-report"
    assert any("name: the task is 'quarterly-revenue-report'" in line for line in found.left)
    assert any("CRON_TZ= prefix" in line for line in found.left)


def test_the_old_cronjobs_runs_carry_the_tasks_key(deployment: dict[str, Any]) -> None:
    """A Job of the handed-over CronJob and a Job of the task's own CronJob for the same fire get one key from the
    webhook: a claim absorbs a fire both sides ran. Fires of Europe/Berlin's fall-back night included."""
    old = cronjob()
    patch = cronjob_import.handover_patch(old, "web", "shop", "nightly-report")
    assert patch["metadata"]["labels"] == cutover.labels_for("web")
    assert patch["metadata"]["resourceVersion"] == "41"
    template = copy.deepcopy(old["spec"]["jobTemplate"])
    template["metadata"] = patch["spec"]["jobTemplate"]["metadata"]
    template["spec"]["template"]["spec"]["containers"] = patch["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"
    ]
    appschedule = {
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web"},
        "spec": {"deploymentRef": {"name": "web"}, "tasks": [cronjob_import.translate(old, deployment).task]},
    }
    ours = render(appschedule, deployment).cronjobs["nightly-report"]["spec"]["jobTemplate"]
    for fire in ("2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-03-29T00:30:00Z"):
        keys = []
        for owner, job_template in (("nightly-report", template), (naming.cronjob_name("web", "nightly-report"), ours)):
            job = {
                "metadata": {
                    "name": f"{owner}-29000000",
                    "labels": job_template["metadata"]["labels"],
                    "annotations": {naming.CRONJOB_SCHEDULED_TIMESTAMP: fire},
                    "ownerReferences": [{"kind": "CronJob", "name": owner, "controller": True}],
                    "creationTimestamp": fire,
                },
                "spec": job_template["spec"],
            }
            mutated = mutate_job(job, datetime(2026, 10, 25, 3, tzinfo=UTC))
            keys.append(mutated["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY])
        assert keys[0] == keys[1], (fire, keys)
    # the second 02:30 of the fall-back is a repeat of the first: one key, as for the task's own CronJob
    assert keys[0].startswith("nightly-report@")


def test_a_mount_of_another_source_at_the_deployments_path_and_resources_left_unset_are_said(
    deployment: dict[str, Any],
) -> None:
    app = copy.deepcopy(deployment)
    pod = app["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "config", "configMap": {"name": "web-config"}}]
    pod["containers"][0]["volumeMounts"] = [{"name": "config", "mountPath": "/etc/app"}]
    pod["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    body = cronjob()
    template = body["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    template["volumes"] = [{"name": "config", "configMap": {"name": "report-config"}}]  # same name and path
    template["containers"][0]["volumeMounts"] = [{"name": "config", "mountPath": "/etc/app"}]
    left = "\n".join(cronjob_import.translate(body, app).left)
    assert "volumeMounts /etc/app: the Deployment mounts another volume" in left
    assert "resources: the CronJob set none; the task runs with the Deployment container's" in left
    template["volumes"] = [{"name": "config", "configMap": {"name": "web-config"}}]  # the very same: nothing said
    assert "volumeMounts" not in "\n".join(cronjob_import.translate(body, app).left)


@pytest.mark.parametrize("policy", ["Forbid", "Allow"])
def test_under_forbid_a_run_of_the_old_cronjob_holds_back_the_tasks_first_fires(
    deployment: dict[str, Any], policy: str
) -> None:
    """The CronJob controller's Forbid sees only a CronJob's own runs: the old CronJob's run still active when the
    task's CronJob fires (its ``status.active``, also a run that began before the hand-over labelled its Jobs; here
    longer than the time between Berlin's two 02:xx fires of the fall-back night) holds that fire back through the
    key webhook, as a run of the task's own CronJob would. Nothing else holds it: a Job of another CronJob with
    the task's labels, or the old CronJob once its runs have ended. Under Allow both run, and nothing is read."""
    old = cronjob(schedule="*/30 2 * * *", concurrencyPolicy=policy)
    task = {**cast(dict[str, Any], cronjob_import.translate(old, deployment).task), "cutOverFrom": "nightly-report"}
    appschedule = {
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web"},
        "spec": {"deploymentRef": {"name": "web"}, "tasks": [task]},
    }
    ours = render(appschedule, deployment).cronjobs["nightly-report"]["spec"]["jobTemplate"]
    after = "2026-10-25T01:00:00Z"  # 02:00 CET, the repeated hour, after the cut at 02:30 CEST
    mine = naming.cronjob_name("web", "nightly-report")
    first = {
        "metadata": {
            "name": f"{mine}-29366580",
            "labels": ours["metadata"]["labels"],
            "annotations": {**ours["metadata"].get("annotations", {}), naming.CRONJOB_SCHEDULED_TIMESTAMP: after},
            "ownerReferences": [{"kind": "CronJob", "name": mine, "controller": True}],
            "creationTimestamp": after,
        },
        "spec": {"completions": 1, "parallelism": 1},
    }
    running = copy.deepcopy(old)  # its 00:30Z run, begun before the hand-over: unlabelled, still active
    running["status"] = {"active": [{"kind": "Job", "name": "nightly-report-29366550", "namespace": "shop"}]}
    now = datetime(2026, 10, 25, 1, 0, 1, tzinfo=UTC)
    if policy == "Allow":
        assert admission.cut_over_check(first, "shop") is None  # nothing read
        assert "completions" not in mutate_job(first, now, old=running).get("spec", {})
        return
    assert admission.cut_over_check(first, "shop") == ("shop", "nightly-report")
    assert admission.forbid_check(first, "shop") is None  # the task's Jobs are not what is read
    held = mutate_job(first, now, old=running)
    assert held["spec"] == {"completions": 0, "parallelism": 0}
    assert held["metadata"]["annotations"][naming.ANNOTATION_BLOCKED_BY] == "nightly-report-29366550"
    assert held["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY].startswith("nightly-report@")
    ended = copy.deepcopy(old)
    ended["status"] = {"lastScheduleTime": "2026-10-25T00:30:00Z"}  # no active run: the task's fire runs
    stranger = {"metadata": {"name": "other-1", "labels": ours["metadata"]["labels"],
                             "ownerReferences": [{"kind": "CronJob", "name": "other"}]}, "status": {}}  # fmt: skip
    for others, cronjob_now in (([], ended), ([stranger], ended), ([], None)):
        assert "completions" not in mutate_job(first, now, others, cronjob_now).get("spec", {})
