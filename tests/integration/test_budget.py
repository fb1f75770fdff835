"""The whole object's budget on the real API server (models.py, "The whole object has one budget"): the
largest spec its shares allow, applied with kubectl (so its last-applied copy is in the annotations), and the
largest status the schema allows, written through the status subresource: etcd stores the object, and its
managedFields stay within their share and under the estimate the shares are checked with."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from kubernetes import client

from appschedule.core import naming
from appschedule.core.models import (
    MANAGED_FIELDS_BYTES_MAX,
    OBJECT_BYTES_MAX,
    SPEC_BYTES_MAX,
    SPEC_MAP_LISTS,
    STATUS_MAP_LISTS,
    AppScheduleStatus,
    fields_bytes,
)
from appschedule.core.render import parse_spec
from tests.kit.wait import wait_for
from tests.unit.test_status_size import large_task, largest

from .conftest import Kubectl


@pytest.fixture
def quiet(no_session_operator: None, crd: str) -> None:
    """No operator: the status written here stays as written."""


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def test_the_largest_spec_and_status_are_stored_within_the_object_budget(
    quiet: None, api: client.ApiClient, kubectl: Kubectl, namespace: str, tmp_path: Any
) -> None:
    spec: dict[str, Any] = {"deploymentRef": {"name": "web"}, "tasks": [large_task(i) for i in range(100)]}
    pad = SPEC_BYTES_MAX - _size(spec) - 64  # the rest of the spec's share in one long argument
    spec["tasks"][0]["args"].append("p" * pad)
    assert parse_spec(spec).errors == [] and SPEC_BYTES_MAX - 128 <= _size(spec) <= SPEC_BYTES_MAX
    body = {"apiVersion": naming.API_VERSION, "kind": naming.KIND, "metadata": {"name": "big"}, "spec": spec}
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(body))
    kubectl("apply", "-n", namespace, "-f", str(path))  # client-side: the last-applied copy in an annotation
    custom = client.CustomObjectsApi(api)
    status = largest(AppScheduleStatus, [], "status")
    AppScheduleStatus.model_validate(status)

    def write_status() -> bool:  # the API server validates it against the CRD's schema and etcd stores it
        stored = custom.get_namespaced_custom_object(naming.GROUP, naming.VERSION, namespace, naming.PLURAL, "big")
        try:
            custom.replace_namespaced_custom_object_status(
                naming.GROUP, naming.VERSION, namespace, naming.PLURAL, "big", {**stored, "status": status}
            )
        except client.ApiException as error:
            if error.status == 409:  # written meanwhile (another reconciler of the cluster): read it again
                return False
            raise
        return True

    wait_for(write_status, timeout=30, what="the largest status written")
    raw = custom.get_namespaced_custom_object(
        naming.GROUP, naming.VERSION, namespace, naming.PLURAL, "big", _preload_content=False
    )
    whole = json.loads(raw.data)
    managed = whole["metadata"]["managedFields"]
    estimate = fields_bytes(spec, SPEC_MAP_LISTS) + fields_bytes(status, STATUS_MAP_LISTS) + 512 * len(managed)
    print(
        f"object {_size(whole):,} of {OBJECT_BYTES_MAX:,} bytes; managedFields {_size(managed):,} "
        f"(estimate {estimate:,}, share {MANAGED_FIELDS_BYTES_MAX:,}); status {_size(whole['status']):,}; "
        f"annotations {_size(whole['metadata']['annotations']):,}"
    )
    assert whole["status"]["tasks"][99]["name"] == status["tasks"][99]["name"]  # all of it was stored
    assert _size(managed) <= estimate <= MANAGED_FIELDS_BYTES_MAX
    assert _size(whole) <= OBJECT_BYTES_MAX
