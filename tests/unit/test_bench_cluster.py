"""The cluster benchmark's own arithmetic (bench/cluster), which its figures rest on: how a request is
classified, where a percentile falls, when the restarted operator is quiet, what the webhooks' histogram says."""

from __future__ import annotations

import math

import pytest
from bench.cluster.common import percentile
from bench.cluster.proxy import request_kind
from bench.cluster.scenarios.admission import webhook_call_shares
from bench.cluster.scenarios.restart import first_quiet


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/apis/batch/v1/namespaces/shop/cronjobs", {"watch": "true"}, ("watch", "cronjobs")),
        ("GET", "/apis/batch/v1/namespaces/shop/cronjobs", {}, ("list", "cronjobs")),
        ("GET", "/apis/batch/v1/namespaces/shop/cronjobs/a", {}, ("get", "cronjobs")),
        ("PATCH", "/apis/batch/v1/namespaces/shop/jobs/a", {}, ("patch", "jobs")),
        ("PUT", "/apis/appschedule.dev/v1alpha1/namespaces/shop/appschedules/a/status", {},
         ("update", "appschedules/status")),
        ("DELETE", "/api/v1/namespaces/shop/pods", {}, ("deletecollection", "pods")),
        ("DELETE", "/api/v1/namespaces/shop", {}, ("delete", "namespaces")),
        ("POST", "/api/v1/namespaces/shop/events", {}, ("create", "events")),
        ("GET", "/apis/batch/v1", {}, ("get", "(discovery)")),
        ("GET", "/healthz", {}, ("get", "(non-resource)")),
    ],
)  # fmt: skip
def test_a_request_is_named_as_the_authorizer_names_it(
    method: str, path: str, query: dict[str, str], expected: tuple[str, str]
) -> None:
    assert request_kind(method, path, query) == expected


def test_a_percentile_is_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50 and percentile(values, 0.99) == 99 and percentile(values, 1.0) == 100
    assert percentile([3.0], 0.99) == 3.0


def test_quiet_from_the_first_window_with_few_enough_requests() -> None:
    times = [1.0, 2.0, 3.0, 30.0]
    assert first_quiet(times, 0.0, 100.0, window=10.0, threshold=0) == 3.0  # nothing in (3, 13]
    assert first_quiet(times, 0.0, 10.0, window=10.0, threshold=0) is None  # no such window has ended yet
    assert first_quiet(times, 0.0, 100.0, window=10.0, threshold=3) == 0.0


def test_webhook_calls_between_two_readings_of_the_histogram() -> None:
    before = {"keys": {0.1: 10.0, 0.5: 10.0, math.inf: 10.0}}
    after = {"keys": {0.1: 108.0, 0.5: 110.0, math.inf: 110.0}, "idle": {0.1: 0.0, math.inf: 0.0}}
    shares = webhook_call_shares(before, after)
    assert shares == {"keys": {"calls": 100, "within_0.1s": 98 / 100, "within_0.5s": 1.0, "p99_at_most": 0.5}}
