"""render.py: what a CronJob takes from the Deployment, defaults, errors per task, determinism."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from appschedule.core import naming
from appschedule.core.render import render

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str) -> dict[str, Any]:
    data = yaml.safe_load((EXAMPLES / name).read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture
def appschedule() -> dict[str, Any]:
    data = load("appschedule.yaml")
    data["metadata"]["uid"] = "0f0f0f0f-1111-2222-3333-444444444444"
    return data


def container_of(cronjob: dict[str, Any]) -> dict[str, Any]:
    containers = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def pod_of(cronjob: dict[str, Any]) -> dict[str, Any]:
    return dict(cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"])


def env_names(cronjob: dict[str, Any]) -> list[str]:
    return [v["name"] for v in container_of(cronjob)["env"]]


def test_example_renders_three_cronjobs(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    result = render(appschedule, deployment)
    assert result.errors == []
    assert list(result.cronjobs) == ["weekly-report", "nightly-cleanup", "sync-inventory"]
    assert result.image == "registry.example.com/shop/web:1.4.2"
    weekly = result.cronjobs["weekly-report"]
    assert weekly["metadata"]["name"] == "shop-weekly-report"
    assert weekly["metadata"]["namespace"] == "shop"
    assert weekly["spec"]["schedule"] == "0 17 * * 5"
    assert weekly["spec"]["timeZone"] == "Europe/Berlin"
    assert result.cronjobs["nightly-cleanup"]["spec"]["timeZone"] == "UTC"  # the task overrides the spec


def test_owner_reference_and_labels(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    cronjob = render(appschedule, deployment).cronjobs["sync-inventory"]
    (owner,) = cronjob["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppSchedule",
        "name": "shop",
        "uid": appschedule["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    labels = naming.labels("shop", "sync-inventory")
    assert cronjob["metadata"]["labels"] == labels
    assert cronjob["spec"]["jobTemplate"]["metadata"]["labels"] == labels
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"] == labels  # not app: shop


def test_defaults_task_overrides_and_builtins(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    cronjobs = render(appschedule, deployment).cronjobs
    weekly, cleanup, sync = cronjobs["weekly-report"], cronjobs["nightly-cleanup"], cronjobs["sync-inventory"]
    assert weekly["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 3600  # task
    assert cleanup["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 1800  # spec.defaults
    assert sync["spec"]["startingDeadlineSeconds"] == 60
    assert weekly["spec"]["startingDeadlineSeconds"] == 300  # built-in
    for cronjob in cronjobs.values():
        assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
        assert cronjob["spec"]["jobTemplate"]["spec"]["backoffLimit"] == 0
        assert cronjob["spec"]["suspend"] is False
        assert pod_of(cronjob)["restartPolicy"] == "Never"


def test_spec_suspend_suspends_every_task(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["suspend"] = True
    assert all(c["spec"]["suspend"] for c in render(appschedule, deployment).cronjobs.values())


def test_default_time_zone_is_utc(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    del appschedule["spec"]["timeZone"]
    assert render(appschedule, deployment).cronjobs["weekly-report"]["spec"]["timeZone"] == "UTC"


def test_what_is_copied_from_the_deployment(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    cronjob = render(appschedule, deployment).cronjobs["weekly-report"]
    container, pod = container_of(cronjob), pod_of(cronjob)
    assert container["name"] == "app"
    assert container["image"] == "registry.example.com/shop/web:1.4.2"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["command"] == ["node", "tasks/weekly-report.js"]
    assert "args" not in container  # the task's command replaces the container's command and args
    assert container["envFrom"] == [{"configMapRef": {"name": "shop-config"}}]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False}
    assert container["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}
    for never in ("ports", "readinessProbe", "livenessProbe", "lifecycle"):
        assert never not in container
    assert pod["serviceAccountName"] == "default"
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 10001}
    assert [v["name"] for v in pod["volumes"]] == ["uploads"]  # only what the chosen container mounts
    assert "initContainers" not in pod


def test_resources_override(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    cleanup = render(appschedule, deployment).cronjobs["nightly-cleanup"]
    assert container_of(cleanup)["resources"] == {
        "limits": {"memory": "256Mi"},
        "requests": {"cpu": "100m", "memory": "128Mi"},
    }


def test_container_by_default_is_the_first(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    del appschedule["spec"]["deploymentRef"]["container"]
    assert container_of(render(appschedule, deployment).cronjobs["weekly-report"])["name"] == "app"
    appschedule["spec"]["deploymentRef"]["container"] = "metrics-proxy"
    chosen = render(appschedule, deployment).cronjobs["weekly-report"]
    assert container_of(chosen)["image"] == "registry.example.com/infra/metrics-proxy:2.0"
    assert [v["name"] for v in pod_of(chosen)["volumes"]] == ["proxy-config"]


def test_missing_container_is_an_error_for_every_task(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["deploymentRef"]["container"] = "worker"
    result = render(appschedule, deployment)
    assert result.cronjobs == {}
    (error,) = result.errors
    assert error.field == "spec.deploymentRef.container"
    assert "'worker' not found" in error.message and "app, metrics-proxy" in error.message


def test_env_merge_order(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["defaults"]["env"] = [{"name": "LOG_LEVEL", "value": "info"}, {"name": "X", "value": "d"}]
    appschedule["spec"]["tasks"][2]["env"] = [
        {"name": "NODE_ENV", "value": "task"},  # replaces the Deployment's, in place
        {"name": "X", "value": "t"},  # the task's wins over defaults
        {"name": "SYNC_BATCH_SIZE", "value": "500"},
    ]
    deployment["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "APPSCHEDULE_TASK", "value": "x"})
    cronjob = render(appschedule, deployment).cronjobs["sync-inventory"]
    env = container_of(cronjob)["env"]
    assert [v["name"] for v in env] == [
        "NODE_ENV",
        "DATABASE_URL",
        "LOG_LEVEL",
        "X",
        "SYNC_BATCH_SIZE",
        "APPSCHEDULE_NAME",
        "APPSCHEDULE_NAMESPACE",
        "APPSCHEDULE_TASK",
        "APPSCHEDULE_SCHEDULE",
        "APPSCHEDULE_TIME_ZONE",
        "APPSCHEDULE_JOB_NAME",
        "APPSCHEDULE_ACTIVE_DEADLINE_SECONDS",
    ]
    values = {v["name"]: v.get("value") for v in env}
    assert values["NODE_ENV"] == "task" and values["X"] == "t" and values["APPSCHEDULE_TASK"] == "sync-inventory"
    assert values["APPSCHEDULE_SCHEDULE"] == "*/5 * * * *" and values["APPSCHEDULE_TIME_ZONE"] == "Europe/Berlin"
    assert env[-2]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.labels['batch.kubernetes.io/job-name']"}}
    # the claim libraries take over a claim left unfinished past the run's deadline: the Job's own
    assert values["APPSCHEDULE_ACTIVE_DEADLINE_SECONDS"] == str(
        cronjob["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"]
    )
    appschedule["spec"]["tasks"][2]["activeDeadlineSeconds"] = 90
    rendered = container_of(render(appschedule, deployment).cronjobs["sync-inventory"])["env"]
    assert {v["name"]: v.get("value") for v in rendered}["APPSCHEDULE_ACTIVE_DEADLINE_SECONDS"] == "90"


def test_a_bad_task_is_reported_and_the_others_render(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["tasks"][0]["schedule"] = "0 17 * * 7"
    appschedule["spec"]["tasks"][1]["timeZone"] = "Mars/Phobos"
    result = render(appschedule, deployment)
    assert list(result.cronjobs) == ["sync-inventory"]
    fields = {(e.task, e.field) for e in result.errors}
    assert fields == {("weekly-report", "spec.tasks[0].schedule"), ("nightly-cleanup", "spec.tasks[1].timeZone")}
    assert "task 'weekly-report' (spec.tasks[0].schedule)" in str(result.errors[0])


def test_wrong_types_are_reported_per_task(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["tasks"][1]["command"] = "not a list"
    appschedule["spec"]["tasks"][2]["backoffLimit"] = -1
    appschedule["spec"]["tasks"][2]["env"] = [{"name": "APPSCHEDULE_KEY", "value": "mine"}]
    result = render(appschedule, deployment)
    assert list(result.cronjobs) == ["weekly-report"]
    assert {e.field for e in result.errors} == {"spec.tasks[1].command", "spec.tasks[2].backoffLimit"}
    del appschedule["spec"]["tasks"][2]["backoffLimit"]
    result = render(appschedule, deployment)
    assert {e.field for e in result.errors} == {"spec.tasks[1].command", "spec.tasks[2].env[0].name"}


def test_spec_level_errors_render_nothing(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["deploymentRef"] = {}
    result = render(appschedule, deployment)
    assert result.cronjobs == {} and result.errors[0].field == "spec.deploymentRef.name"
    appschedule["spec"] = {"deploymentRef": {"name": "web"}, "tasks": []}
    assert render(appschedule, deployment).errors[0].field == "spec.tasks"


def test_unknown_fields_are_named(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["tasks"][0]["schedul"] = "typo"
    result = render(appschedule, deployment)
    assert ("spec.tasks[0].schedul", "unknown field") in {(e.field, e.message) for e in result.errors}


def test_deterministic(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    first = yaml.safe_dump(render(appschedule, deployment).cronjobs, sort_keys=False)
    second = yaml.safe_dump(render(copy.deepcopy(appschedule), copy.deepcopy(deployment)).cronjobs, sort_keys=False)
    assert first == second


def test_fifty_tasks_and_long_names(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["metadata"]["name"] = "a-rather-long-appschedule-name-for-the-shop"
    appschedule["spec"]["tasks"] = [
        {"name": f"task-number-{i:02d}-with-a-long-name", "schedule": f"{i} * * * *", "command": ["run", str(i)]}
        for i in range(50)
    ]
    result = render(appschedule, deployment)
    assert result.errors == []
    names = [c["metadata"]["name"] for c in result.cronjobs.values()]
    assert len(set(names)) == 50 and all(len(n) <= 52 for n in names)


def test_unicode_and_over_long_task_names(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["tasks"][0]["name"] = "wöchentlicher-bericht"
    appschedule["spec"]["tasks"][1]["name"] = "x" * 64
    result = render(appschedule, deployment)
    assert list(result.cronjobs) == ["sync-inventory"]
    assert {e.field for e in result.errors} == {"spec.tasks[0].name", "spec.tasks[1].name"}


def test_offline_render_has_no_owner(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    del appschedule["metadata"]["uid"]
    assert "ownerReferences" not in render(appschedule, deployment).cronjobs["sync-inventory"]["metadata"]


def test_reserved_names_in_defaults_env(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    appschedule["spec"]["defaults"]["env"] = [{"name": "APPSCHEDULE_TASK", "value": "x"}]
    result = render(appschedule, deployment)
    assert result.cronjobs == {}
    assert [e.field for e in result.errors] == ["spec.defaults.env[0].name"]


def test_one_variable_per_name(appschedule: dict[str, Any], deployment: dict[str, Any]) -> None:
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    env.append({"name": "NODE_ENV", "value": "later"})  # a duplicate in the Deployment: the later one wins
    appschedule["spec"]["tasks"][0]["env"] = [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]
    names = env_names(render(appschedule, deployment).cronjobs["weekly-report"])
    assert len(names) == len(set(names))
    values = {
        v["name"]: v.get("value")
        for v in container_of(render(appschedule, deployment).cronjobs["weekly-report"])["env"]
    }
    assert values["NODE_ENV"] == "later"
    assert values["A"] == "2"


def test_malformed_input_is_an_error_not_a_crash(appschedule: dict[str, Any]) -> None:
    assert render(appschedule, {"spec": []}).errors[0].field == "spec.deploymentRef"
    assert render({"spec": appschedule["spec"]}, {}).errors[-1].field == "metadata.name"


def test_an_inherited_bad_time_zone_names_where_it_comes_from(
    appschedule: dict[str, Any], deployment: dict[str, Any]
) -> None:
    appschedule["spec"]["defaults"]["timeZone"] = "Mars/Phobos"
    fields = {e.field for e in render(appschedule, deployment).errors}
    assert fields == {"spec.defaults.timeZone"}  # nightly-cleanup sets its own (UTC) and renders
