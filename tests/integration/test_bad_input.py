"""The corpus of invalid AppSchedules (tests/data/invalid-appschedules.yaml) against the API server: refused
at `kubectl create` naming the field while the validating webhook serves; written while it is down, each
is refused by the CRD's schema or reported in the Ready condition naming the field, without a crash and
without touching a valid neighbour."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.kit.wait import wait_for

from .conftest import ClusterUnderTest, Kubectl, OperatorProcess
from .test_ledger import webhook_only_operator
from .test_operator import Namespaced

CORPUS = Path(__file__).resolve().parents[1] / "data" / "invalid-appschedules.yaml"


def cases(namespace: str) -> list[tuple[dict[str, Any], str]]:
    """(AppSchedule, what the refusal must say): the corpus, a 1,000-task object and a 1 MiB object."""
    found = []
    for doc in yaml.safe_load_all(CORPUS.read_text()):
        doc["metadata"]["namespace"] = namespace
        found.append((doc, doc["metadata"]["annotations"]["test.appschedule.dev/field"]))
    many = [{"name": f"t{i}", "schedule": "* * * * *", "command": ["true"]} for i in range(1000)]
    found.append((_appschedule(namespace, "bad-many", many), "spec.tasks"))
    big = [{"name": "t", "schedule": "* * * * *", "command": ["sh", "-c", "x" * 60000], "args": ["y" * 60000] * 17}]
    found.append((_appschedule(namespace, "bad-huge", big), "an AppSchedule's spec may be at most 144 KiB"))
    return found


def _appschedule(namespace: str, name: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppSchedule",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"deploymentRef": {"name": "web"}, "tasks": tasks},
    }


@pytest.fixture
def validating(cluster: ClusterUnderTest, crd: str, tmp_path: Path, api: client.ApiClient) -> Iterator[OperatorProcess]:
    yield from webhook_only_operator(cluster, api, tmp_path / "validating.log", "validation", 20297)


def test_every_bad_appschedule_is_refused_at_create_naming_the_field(
    validating: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    for doc, field in cases(namespace):
        out = kubectl("create", "-f", "-", input=json.dumps(doc), check=False)
        assert out.returncode != 0, f"{doc['metadata']['name']} was admitted"
        assert field in out.stderr, (doc["metadata"]["name"], out.stderr[:500])
    assert "Traceback" not in "\n".join(validating.lines())


def test_a_bad_calendar_is_refused_at_create_naming_the_rule(
    validating: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    """What the AppScheduleCalendar's schema cannot say (the rules between fields, a day the calendar lacks) the
    validating webhook says; what it can (a day not written YYYY-MM-DD) the API server says without it."""

    def calendar(name: str, blackout: dict[str, Any]) -> str:
        metadata = {"name": name, "namespace": namespace}
        body = {"apiVersion": "appschedule.dev/v1alpha1", "kind": "AppScheduleCalendar", "metadata": metadata}
        return json.dumps({**body, "spec": {"blackouts": [blackout]}})

    for name, blackout, said in (
        ("range", {"name": "x", "from": "2026-12-26", "to": "2026-12-24"}, "to (2026-12-24) is before from"),
        ("day", {"name": "x", "dates": ["2026-02-30"]}, "'2026-02-30' is not a day of the calendar"),
        ("forms", {"name": "x", "dates": ["2026-12-24"], "from": "2026-12-24", "to": "2026-12-25"}, "exactly one"),
        ("format", {"name": "x", "dates": ["24.12.2026"]}, "spec.blackouts[0].dates[0]"),
    ):
        out = kubectl("create", "-f", "-", input=calendar(name, blackout), check=False)
        assert out.returncode != 0 and said in out.stderr, (name, out.stderr[:500])
    good = kubectl("create", "-f", "-", input=calendar("good", {"name": "x", "dates": ["2026-12-24"]}), check=False)
    assert good.returncode == 0, good.stderr
    assert "Traceback" not in "\n".join(validating.lines())


def test_bad_appschedules_written_while_the_webhook_is_down_are_reported(
    operator: OperatorProcess, api: client.ApiClient, kubectl: Kubectl, namespace: str
) -> None:
    world = Namespaced(api, namespace)
    world.deployment()
    good = {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppSchedule",
        "metadata": {"name": "good", "namespace": namespace},
        "spec": {
            "deploymentRef": {"name": "web"},
            "tasks": [{"name": "report", "schedule": "0 17 * * 5", "command": ["node", "report.js"]}],
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(good))
    ready = wait_for(lambda: _ready(kubectl, namespace, "good"), timeout=30, what="the neighbour Ready")
    assert ready["status"] == "True"
    cronjob = json.loads(kubectl("get", "cronjob", "good-report", "-n", namespace, "-o", "json").stdout)

    admitted: dict[str, str] = {}
    for doc, field in cases(namespace):
        out = kubectl("create", "-f", "-", input=json.dumps(doc), check=False)
        if out.returncode != 0:  # the CRD's schema, which needs no webhook
            assert field in out.stderr, (doc["metadata"]["name"], out.stderr[:500])
        else:
            admitted[doc["metadata"]["name"]] = field
    assert len(admitted) >= 25, "most of the corpus passes the schema and must be caught by the operator"
    for name, field in admitted.items():
        condition = wait_for(_ready_of(kubectl, namespace, name), timeout=60, what=f"{name}'s Ready")
        assert condition["status"] == "False" and condition["reason"] == "InvalidSpec", (name, condition)
        assert field in condition["message"], (name, condition["message"])
    assert kubectl("get", "cronjobs", "-n", namespace, "-o", "name").stdout.split() == ["cronjob.batch/good-report"]
    after = json.loads(kubectl("get", "cronjob", "good-report", "-n", namespace, "-o", "json").stdout)
    assert after["metadata"]["resourceVersion"] == cronjob["metadata"]["resourceVersion"]
    assert (_ready(kubectl, namespace, "good") or {}).get("status") == "True"
    assert "Traceback" not in "\n".join(operator.lines())


def _ready_of(kubectl: Kubectl, namespace: str, name: str) -> Callable[[], dict[str, Any] | None]:
    return lambda: _ready(kubectl, namespace, name)


def _ready(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any] | None:
    body = json.loads(kubectl("get", "appschedule", name, "-n", namespace, "-o", "json").stdout)
    generation = body["metadata"]["generation"]
    for condition in (body.get("status") or {}).get("conditions") or []:
        if condition["type"] == "Ready" and condition.get("observedGeneration") == generation:
            found: dict[str, Any] = condition
            return found
    return None
