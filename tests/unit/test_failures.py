"""What a failed request means (core/failures.py): one table for every write the shell makes."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from appschedule.core.failures import classify
from appschedule.shell import api


@pytest.mark.parametrize(
    ("status", "body", "failure"),
    [
        (422, {"message": "spec.schedule: Invalid value"}, "refused"),
        (400, {"message": "bad request"}, "refused"),
        (500, {"message": "failed to create typed patch object: .spec.x: field not declared in schema"}, "refused"),
        (413, {"message": "Request entity too large"}, "too-large"),
        (500, {"message": "etcdserver: request is too large"}, "too-large"),
        (500, {"message": "Internal error occurred"}, "transient"),
        (503, None, "transient"),
        (429, {"message": "too many requests"}, "transient"),
        (0, None, "transient"),
        (None, None, "transient"),
        (403, {"message": "forbidden"}, "ours"),
        (404, {"message": 'namespaces "gone" not found'}, "ours"),
        (409, {"message": "the object has been modified"}, "conflict"),
        (401, {"message": "Unauthorized"}, "other"),
        (418, "a teapot", "other"),
    ],
)
def test_every_answer_has_one_meaning(status: int | None, body: object, failure: str) -> None:
    text = json.dumps(body) if isinstance(body, dict) else body
    assert classify(status, text) == failure
    error = ApiException(status=status or 0, reason="x")
    error.body = text
    assert api.failure_of(error) == failure  # the shell reads the same table
