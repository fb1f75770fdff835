"""An in-memory API server for the shell's unit tests: what ``shell.api.Cluster`` offers the controller, on
objects held here, with the answers the API server gives (404, 409, the resourceVersion moving on every write),
every request recorded, and failures injected per verb. The models are Kubernetes' own fakes for its
controllers (pkg/controller/cronjob/injection.go: a fake job and cronjob control that record each call and
return the error a test sets) and kopf's k8s_mocked.

It is a stand-in for the API server only: the store, the planning, the queue and the ledger under test are
the operator's own."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubernetes.client.rest import ApiException

from appschedule.core import naming
from appschedule.core.events import Event


def api_error(status: int, message: str = "") -> ApiException:
    error = ApiException(status=status, reason=message or str(status))
    error.body = json.dumps({"kind": "Status", "message": message, "code": status})
    return error


@dataclass
class FakeCluster:
    deployments: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    cronjobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    jobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # written through /status
    events: list[tuple[str, Event]] = field(default_factory=list)  # (AppSchedule name, Event)
    calls: list[str] = field(default_factory=list)  # "verb namespace/name", in order
    failures: dict[str, list[ApiException]] = field(default_factory=dict)  # verb -> errors to raise, in order
    fence: Callable[[], float] | None = None  # as Cluster.fence: asked before every write
    requests: dict[str, int] = field(default_factory=dict)
    version: int = 100

    def fail(self, verb: str, *errors: ApiException) -> None:
        """The next calls of ``verb`` raise these errors, one each, in order."""
        self.failures.setdefault(verb, []).extend(errors)

    def oldest_call(self) -> float:
        return 0.0

    def _call(self, verb: str, namespace: str, name: str, *, write: bool) -> None:
        if write and self.fence is not None:
            self.fence()
        self.calls.append(f"{verb} {namespace}/{name}")
        self.requests[namespace] = self.requests.get(namespace, 0) + 1
        pending = self.failures.get(verb)
        if pending:
            raise pending.pop(0)

    def _stored(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.version += 1
        stored = copy.deepcopy(dict(body))
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        return stored

    # -- reads

    def read_deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._call("read_deployment", namespace, name, write=False)
        found = self.deployments.get((namespace, name))
        return copy.deepcopy(found) if found else None

    def list_jobs(self, namespace: str, appschedule: str) -> list[dict[str, Any]]:
        self._call("list_jobs", namespace, appschedule, write=False)
        return [
            copy.deepcopy(job)
            for (ns, _), job in sorted(self.jobs.items())
            if ns == namespace and job["metadata"].get("labels", {}).get(naming.LABEL_APPSCHEDULE) == appschedule
        ]

    def controller_of(self, namespace: str, name: str) -> str | None:
        self._call("controller_of", namespace, name, write=False)
        found = self.cronjobs.get((namespace, name))
        if found is None:
            return None
        owners = found["metadata"].get("ownerReferences") or []
        return next((str(o.get("uid")) for o in owners if o.get("controller")), "")

    # -- writes

    def apply_cronjob(self, manifest: Mapping[str, Any], *, force: bool) -> dict[str, Any]:
        meta = manifest["metadata"]
        self._call("apply_cronjob", meta["namespace"], meta["name"], write=True)
        stored = self._stored(manifest)
        stored["metadata"].setdefault("uid", f"cj-{meta['name']}")
        self.cronjobs[meta["namespace"], meta["name"]] = stored
        return copy.deepcopy(stored)

    def delete_cronjob(self, namespace: str, name: str, uid: str | None) -> None:
        self._call("delete_cronjob", namespace, name, write=True)
        self.cronjobs.pop((namespace, name), None)

    def suspend_cronjob(self, namespace: str, name: str, uid: str, annotations: Mapping[str, str]) -> dict[str, Any]:
        self._call("suspend_cronjob", namespace, name, write=True)
        found = copy.deepcopy(self.cronjobs[namespace, name])
        found["metadata"].setdefault("annotations", {}).update(annotations)
        found["spec"]["suspend"] = True
        self.cronjobs[namespace, name] = self._stored(found)
        return copy.deepcopy(self.cronjobs[namespace, name])

    def create_job(self, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = manifest["metadata"]
        name = meta.get("name") or f"{meta.get('generateName', 'job-')}{self.version}"
        self._call("create_job", meta["namespace"], name, write=True)
        if (meta["namespace"], name) in self.jobs:
            return None
        stored = self._stored({**manifest, "metadata": {**meta, "name": name, "uid": f"job-{name}"}})
        self.jobs[meta["namespace"], name] = stored
        return copy.deepcopy(stored)

    def delete_job(self, namespace: str, name: str) -> None:
        self._call("delete_job", namespace, name, write=True)
        self.jobs.pop((namespace, name), None)

    def release_job(self, namespace: str, name: str, finalizer: str) -> dict[str, Any] | None:
        self._call("release_job", namespace, name, write=True)
        job = self.jobs.get((namespace, name))
        if job is None:
            return None
        meta = job["metadata"]
        meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != finalizer]
        meta.setdefault("annotations", {})[naming.ANNOTATION_FILED] = "true"
        self.jobs[namespace, name] = self._stored(job)
        return copy.deepcopy(self.jobs[namespace, name])

    def replace_status(self, appschedule: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        meta = appschedule["metadata"]
        self._call("replace_status", meta["namespace"], meta["name"], write=True)
        self.statuses[meta["namespace"], meta["name"]] = copy.deepcopy(dict(status))
        return self._stored({**appschedule, "status": status})

    def post_event(self, appschedule: Mapping[str, Any], event: Event, now: datetime) -> None:
        meta = appschedule["metadata"]
        self._call("post_event", meta["namespace"], meta["name"], write=True)
        self.events.append((str(meta["name"]), event))

    def reasons(self) -> list[str]:
        return [event.reason for _, event in self.events]
