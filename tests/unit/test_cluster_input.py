"""One odd Job is one odd Job: whatever a Job's metadata says, plan() and the key webhook return, the Job
is reported (not raised), and every other Job and task goes on. Hypothesis throws names, labels,
annotations, counts and times at them, with the times that used to raise (past year 9999, year 1)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appschedule.core import naming
from appschedule.core.admission import mutate_job
from appschedule.core.keys import rfc3339
from appschedule.core.reconcile import plan
from appschedule.core.view import project_cronjob, project_job
from appschedule.shell import webhook_server
from tests.kit.worlds import world_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOW = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)  # Europe/Berlin's fall-back night
ODD_TIMES = [
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "2026-13-01T00:00:00Z",
    "2026-10-25T02:30:00",
    "",
    "now",
    "1e309",
    "2026-10-25T02:30:00+02:00",
]

times = st.one_of(
    st.sampled_from(ODD_TIMES),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)).map(rfc3339),
    st.text(max_size=30),
)
names = st.one_of(
    st.integers(min_value=0, max_value=9999999999).map(lambda m: f"shop-nightly-cleanup-{m}"),
    st.from_regex(r"[a-z0-9][-a-z0-9]{0,40}", fullmatch=True),
    st.text(max_size=20),
)
counts = st.one_of(st.integers(-5, 1 << 40), st.text(max_size=3), st.none(), st.booleans(), st.floats())
annotation_keys = st.sampled_from(
    [naming.ANNOTATION_SCHEDULED_TIME, naming.CRONJOB_SCHEDULED_TIMESTAMP, naming.ANNOTATION_IDEMPOTENCY_KEY, "other"]
)
anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def jobs(draw: st.DrawFn) -> dict[str, Any]:
    labels = {
        naming.LABEL_APPSCHEDULE: draw(st.sampled_from(["shop", "", "other"])),
        naming.LABEL_TASK: draw(st.sampled_from(["nightly-cleanup", "weekly-report", "", "nope"])),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": draw(names),
            "namespace": "shop",
            "uid": draw(st.uuids()).hex,
            "resourceVersion": "1",
            "labels": draw(st.one_of(st.just(labels), anything)),
            "annotations": draw(st.one_of(st.dictionaries(annotation_keys, times, max_size=3), anything)),
            "creationTimestamp": draw(times),
            "finalizers": draw(st.sampled_from([[naming.LEDGER_FINALIZER], [], "x", None])),
            "deletionTimestamp": draw(st.one_of(st.none(), times)),
            "ownerReferences": draw(
                st.one_of(st.just([{"kind": "CronJob", "name": "shop-nightly-cleanup"}]), anything)
            ),
        },
        "spec": draw(st.one_of(st.just({"template": {"spec": {"containers": [{"name": "app"}]}}}), anything)),
        "status": {
            "active": draw(counts),
            "succeeded": draw(counts),
            "failed": draw(counts),
            "completionTime": draw(st.one_of(st.none(), times)),
            "conditions": draw(
                st.one_of(
                    st.just([{"type": "Complete", "status": "True", "lastTransitionTime": draw(times)}]), anything
                )
            ),
        },
    }


def setup() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    deployment = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
    appschedule = yaml.safe_load((EXAMPLES / "appschedule.yaml").read_text())
    appschedule["metadata"].update(uid="uid-shop", generation=1, creationTimestamp="2026-03-01T00:00:00Z")
    appschedule["spec"]["timeZone"] = "Europe/Berlin"
    first = plan(world_of(appschedule, deployment), NOW - timedelta(hours=2))
    cronjobs = copy.deepcopy(first.apply)
    for cronjob in cronjobs:
        cronjob["metadata"]["uid"] = f"cj-{cronjob['metadata']['name']}"
        cronjob["metadata"]["ownerReferences"][0]["uid"] = "uid-shop"
    return {**appschedule, "status": first.status}, deployment, cronjobs


SETUP = setup()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(jobs(), max_size=4))
def test_plan_returns_whatever_the_jobs_say(odd: list[dict[str, Any]]) -> None:
    appschedule, deployment, cronjobs = SETUP
    result = plan(world_of(appschedule, deployment, cronjobs, jobs=odd), NOW)
    assert not result.apply  # nothing a Job says changes a CronJob
    assert [t["name"] for t in result.status["tasks"]] == ["weekly-report", "nightly-cleanup", "sync-inventory"]


@settings(max_examples=300, deadline=None)
@given(jobs())
def test_the_key_webhook_returns_whatever_the_job_says(job: dict[str, Any]) -> None:
    patch = mutate_job(job, NOW)
    assert isinstance(patch, dict)
    answer = webhook_server.key_job({"request": {"uid": "u", "object": job}}, NOW)  # what the API server receives
    assert answer["response"]["allowed"] is True and answer["response"]["uid"] == "u"
    project_job(job)
    project_cronjob(job)


def odd_job(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": name,
            "resourceVersion": "1",
            "labels": {naming.LABEL_APPSCHEDULE: "shop", naming.LABEL_TASK: "sync-inventory"},
            "annotations": annotations,
            "creationTimestamp": "2026-10-25T01:20:01Z",
            "finalizers": [naming.LEDGER_FINALIZER],
        },
        "status": {"active": 1},
    }


def test_an_odd_job_is_reported_once_released_and_not_filed() -> None:
    appschedule, deployment, cronjobs = SETUP
    good = odd_job("shop-sync-inventory-29871440", {naming.CRONJOB_SCHEDULED_TIMESTAMP: "2026-10-25T01:20:00Z"})
    far = odd_job("shop-sync-inventory-9999999999", {})
    late = odd_job("by-hand", {naming.CRONJOB_SCHEDULED_TIMESTAMP: "9999-12-31T23:59:59Z"})
    first = plan(world_of(appschedule, deployment, cronjobs, jobs=[good, far, late]), NOW)
    assert sorted(first.release) == ["by-hand", "shop-sync-inventory-9999999999"]
    odd_events = [e for e in first.events if e.reason == "OddJob"]
    assert len(odd_events) == 1 and "by-hand" in odd_events[0].message and "9999999999" in odd_events[0].message
    task = next(t for t in first.status["tasks"] if t["name"] == "sync-inventory")
    assert task["counts"]["runs"] == 1  # the good one is filed; the odd ones are not runs
    assert [j["name"] for j in task["jobs"]] == ["shop-sync-inventory-29871440"]
    # the next step: released and marked filed (api.release_job), not reported again
    settled = {**appschedule, "status": first.status}
    filed = {naming.ANNOTATION_FILED: "true"}
    released = [
        good,
        *(
            dict(
                j,
                metadata={**j["metadata"], "finalizers": [], "annotations": {**j["metadata"]["annotations"], **filed}},
            )
            for j in [far, late]
        ),
    ]
    second = plan(world_of(settled, deployment, cronjobs, jobs=released), NOW + timedelta(seconds=30))
    assert not [e for e in second.events if e.reason == "OddJob"]
    assert second.release == []


def test_only_jobs_of_an_appschedules_task_get_the_ledger_finalizer() -> None:
    job = odd_job("x", {})
    job["metadata"]["finalizers"] = []
    assert mutate_job(job, NOW)["metadata"]["finalizers"] == [naming.LEDGER_FINALIZER]
    del job["metadata"]["labels"][naming.LABEL_APPSCHEDULE]
    patch = mutate_job(job, NOW)
    assert "finalizers" not in patch["metadata"] and patch["metadata"]["annotations"]  # keyed, not held


def test_an_ownerless_cronjob_with_our_labels_is_not_adopted() -> None:
    appschedule, deployment, cronjobs = SETUP
    stray = copy.deepcopy(cronjobs[0])
    stray["metadata"].update(name="not-a-task-of-shop", uid="stray", ownerReferences=[])
    stray["metadata"]["labels"][naming.LABEL_TASK] = "stray"
    result = plan(world_of(appschedule, deployment, [*cronjobs, stray]), NOW)
    assert "stray" not in [t["name"] for t in result.status["tasks"]]
    assert "not-a-task-of-shop" not in result.delete


def test_a_job_name_the_status_pattern_refuses_is_recorded_under_a_hash() -> None:
    """Found by the property test above: a name of one control character (ASCII, not printable)."""
    from appschedule.core.ledger import record_name

    for name in ("\x1f", "tab\there", "x" * 70, "ünïcode"):
        recorded = record_name(name)
        assert recorded != name and len(recorded) <= 63 and all(" " <= c <= "~" for c in recorded)
    assert record_name("shop-report-29819100") == "shop-report-29819100"
