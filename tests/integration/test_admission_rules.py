"""Admission says what the API server will say: each rule the operator checks in a task's env and
resources (models.py, "Kubernetes' rules for what goes into a container's env") is held against the real
API server. The rendered CronJob with the offending piece, created with a server-side dry-run, is refused
by the API server too, except where the operator is deliberately stricter (STRICTER: say why); and what
the API server would silently change (a quantity finer than 1m, rounded up) is refused rather than applied
to drift forever."""

from __future__ import annotations

import json
from typing import Any

import pytest

from appschedule.core.render import render

from .conftest import Kubectl

CONTAINERS = [{"name": "app", "image": "registry.example/web:1"}]
DEPLOYMENT = {"metadata": {"name": "web", "namespace": "x"}, "spec": {"template": {"spec": {"containers": CONTAINERS}}}}

# (what, the task's extra fields): each is refused by the operator
REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("env name with =", {"env": [{"name": "A=B", "value": "1"}]}),
    ("env name not ASCII", {"env": [{"name": "caf\u00e9", "value": "1"}]}),
    ("env value and valueFrom", {"env": [{"name": "A", "value": "1",
                                          "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}),
    ("two sources", {"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"},
                                                          "secretKeyRef": {"name": "s", "key": "k"}}}]}),
    ("no source", {"env": [{"name": "A", "valueFrom": {}}]}),
    ("unsupported fieldPath", {"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}}]}),
    ("unsupported resource", {"env": [{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]}),
    ("config key with a space", {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "a b"}}}]}),
    ("empty secret name", {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "", "key": "k"}}}]}),
    ("env name with a space", {"env": [{"name": "MY VAR", "value": "1"}]}),
    ("env name with a leading digit", {"env": [{"name": "1A", "value": "1"}]}),
    ("cpu finer than 1m", {"resources": {"requests": {"cpu": "1u"}}}),
    ("memory finer than 1m", {"resources": {"limits": {"memory": "0.0001"}}}),
]  # fmt: skip
# refused by the operator, accepted by Kubernetes 1.32 and later (RelaxedEnvironmentVariableValidation), refused
# by the versions before: the operator holds every AppSchedule to the rule all supported versions share
STRICTER = {"env name with a space", "env name with a leading digit"}
# accepted by the API server, but not as given: it stores the quantity rounded up to 1m, so the CronJob would
# never be in sync with what the operator renders (a write every reconcile)
ROUNDED = {"cpu finer than 1m": "1m", "memory finer than 1m": "1m"}
ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("env names of every allowed character", {"env": [{"name": "A.b-c_D9", "value": "1"},
                                                      {"name": "_x", "value": ""}]}),
    ("one source each", {"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                                  {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory",
                                                                                   "divisor": "1Mi"}}},
                                  {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k.e-y_1"}}}]}),
    ("quantities at 1m", {"resources": {"requests": {"cpu": "1m", "memory": "64Mi"}, "limits": {"cpu": "0.5"}}}),
]  # fmt: skip


def appschedule(extra: dict[str, Any]) -> dict[str, Any]:
    task = {"name": "t", "schedule": "*/5 * * * *", "command": ["true"], **extra}
    return {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppSchedule",
        "metadata": {"name": "shop", "namespace": "x", "uid": "u"},
        "spec": {"deploymentRef": {"name": "web"}, "tasks": [task]},
    }


def cronjob_with(extra: dict[str, Any]) -> dict[str, Any]:
    """The CronJob the operator would render, with the offending piece put in it past validation."""
    rendered = render(appschedule({}), DEPLOYMENT)
    (manifest,) = rendered.cronjobs.values()
    container = manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    if "env" in extra:
        container["env"] = [*container.get("env", []), *extra["env"]]
    if "resources" in extra:
        container["resources"] = extra["resources"]
    return manifest


def dry_run(kubectl: Kubectl, namespace: str, manifest: dict[str, Any]) -> tuple[bool, dict[str, Any] | str]:
    manifest = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace, "ownerReferences": []}}
    out = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(manifest), check=False)
    return (True, json.loads(out.stdout)) if out.returncode == 0 else (False, out.stderr)


@pytest.mark.parametrize(("what", "extra"), REFUSED, ids=[w for w, _ in REFUSED])
def test_what_the_operator_refuses_the_api_server_refuses(
    kubectl: Kubectl, namespace: str, what: str, extra: dict[str, Any]
) -> None:
    assert render(appschedule(extra), DEPLOYMENT).errors, f"{what}: the operator admits it"
    accepted, result = dry_run(kubectl, namespace, cronjob_with(extra))
    if what in STRICTER:
        return  # either answer is right: it depends on the API server's version (see STRICTER)
    if what in ROUNDED:
        assert accepted, result
        assert isinstance(result, dict)
        container = result["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        stored = [v for kind in container["resources"].values() for v in kind.values()]
        assert stored == [ROUNDED[what]], f"{what}: the API server stored {stored}"
        return
    assert not accepted, f"{what}: the API server accepts it, so the operator should too"
    assert "is invalid" in str(result)


@pytest.mark.parametrize(("what", "extra"), ACCEPTED, ids=[w for w, _ in ACCEPTED])
def test_what_the_operator_accepts_the_api_server_accepts(
    kubectl: Kubectl, namespace: str, what: str, extra: dict[str, Any]
) -> None:
    assert not render(appschedule(extra), DEPLOYMENT).errors
    accepted, result = dry_run(kubectl, namespace, cronjob_with(extra))
    assert accepted, f"{what}: {result}"
