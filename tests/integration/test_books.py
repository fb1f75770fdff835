"""Nobody can freeze the books, on the real API server with the operator and its key webhook running: a Job
stating a time the cluster did not state is keyed from its creation, never held, reported once; a Job whose
labels are removed after admission is let go whatever happened to them (DESIGN "The ledger"); a backlog: in
test_ledger.py, beside the other runs made while the ledger is down."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from appschedule.core import naming

from .conftest import OperatorProcess
from .test_ledger import counts, jobs
from .test_operator import Namespaced, task, until

LEDGER_FINALIZER = naming.LEDGER_FINALIZER


@pytest.fixture(name="world")
def books_world(api: client.ApiClient, namespace: str, operator: OperatorProcess) -> Namespaced:
    return Namespaced(api, namespace)


def _job(world: Namespaced, name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Job an author with Job rights makes: the task's labels, a container, whatever annotations they like."""
    labels = {naming.LABEL_TASK: "tick", naming.LABEL_APPSCHEDULE: "books"}
    pod = {"restartPolicy": "Never", "containers": [{"name": "app", "image": "x", "command": ["x"]}]}
    body = {
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "spec": {"template": {"metadata": {"labels": {}}, "spec": pod}},
    }
    made: dict[str, Any] = world.batch.create_namespaced_job(world.namespace, body).to_dict()
    return made


def _finalizers(world: Namespaced, name: str) -> list[str]:
    return list(world.batch.read_namespaced_job(name, world.namespace).metadata.finalizers or [])


def test_a_job_claiming_a_future_time_is_never_held_and_is_reported_once(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("books", [task("tick", "0 * * * *")])
    until(lambda: "books-tick" in world.cronjobs(), "the task's CronJob")
    _job(world, "evil-2099", {naming.ANNOTATION_SCHEDULED_TIME: "2099-01-01T00:00:00Z"})
    assert LEDGER_FINALIZER not in _finalizers(world, "evil-2099")  # the key webhook holds nothing
    keyed = next(j for j in jobs(world) if j["metadata"]["name"] == "evil-2099")
    assert "2099" not in keyed["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY]
    until(lambda: counts(world, "books", "tick").get("refused") == 1, "the refused Job counted")
    odd = until(lambda: [e for e in world.events("books") if e["reason"] == "OddJob"], "an OddJob Event naming the Job")
    assert "evil-2099" in odd[0]["message"] and "2099-01-01T00:00:00Z" in odd[0]["message"]
    assert counts(world, "books", "tick").get("runs") is None  # never a run, never lastRun
    filed = world.batch.read_namespaced_job("evil-2099", world.namespace).metadata.annotations
    assert filed.get(naming.ANNOTATION_FILED) == "true"  # said once: the next reconcile skips it


def test_a_job_whose_labels_are_removed_after_admission_is_let_go(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("books", [task("tick", "0 * * * *")])
    until(lambda: "books-tick" in world.cronjobs(), "the task's CronJob")
    for name in ("no-appschedule", "no-task"):
        _job(world, name)
        assert LEDGER_FINALIZER in _finalizers(world, name)  # admitted as a run of the task, held for the ledger
    strip = {"metadata": {"labels": {naming.LABEL_APPSCHEDULE: None}}}
    world.batch.patch_namespaced_job("no-appschedule", world.namespace, strip)
    world.batch.patch_namespaced_job("no-task", world.namespace, {"metadata": {"labels": {naming.LABEL_TASK: None}}})

    def released() -> bool:
        return all(LEDGER_FINALIZER not in _finalizers(world, n) for n in ("no-appschedule", "no-task"))

    until(released, "both Jobs released though their labels are gone", timeout=30)
    world.batch.delete_namespaced_job("no-task", world.namespace, body=client.V1DeleteOptions())
    until(lambda: "no-task" not in [j["metadata"]["name"] for j in jobs(world)], "the Job deleted, nothing holds it")
