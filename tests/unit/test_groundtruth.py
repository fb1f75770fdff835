"""The soak's ground truth (tests/soak/groundtruth.py): audit events in, the counts the ledger must report out."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.soak import groundtruth as gt

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
TASK = ("ns", "shop", "report")


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def labels(task: tuple[str, str, str] = TASK) -> dict[str, str]:
    return {gt.LABEL_APPSCHEDULE: task[1], gt.LABEL_TASK: task[2]}


def event(
    verb: str,
    resource: str,
    name: str,
    when: datetime,
    obj: dict[str, Any],
    *,
    sub: str = "",
    code: int = 200,
    namespace: str = "ns",
) -> str:
    ref = {"resource": resource, "namespace": namespace, "name": name, "apiGroup": "batch"}
    if sub:
        ref["subresource"] = sub
    return json.dumps(
        {
            "stage": "ResponseComplete",
            "verb": verb,
            "objectRef": ref,
            "responseStatus": {"code": code},
            "stageTimestamp": when.isoformat().replace("+00:00", "Z"),
            "responseObject": obj,
        }
    )


def job_created(
    name: str, scheduled: datetime, created: datetime, *, task: tuple[str, str, str] = TASK, keyed: bool = True
) -> str:
    annotations = {gt.CONTROLLER_TIME: stamp(scheduled)}
    if keyed:  # what the key webhook adds
        annotations |= {gt.OUR_TIME: stamp(scheduled), gt.OUR_KEY: f"{task[2]}@{stamp(scheduled)}"}
    meta = {
        "name": name,
        "namespace": task[0],
        "uid": f"uid-{name}",
        "labels": labels(task),
        "annotations": annotations,
        "creationTimestamp": stamp(created),
    }
    return event("create", "jobs", name, created, {"metadata": meta}, code=201)


def job_ended(name: str, outcome: str, when: datetime) -> str:
    status: dict[str, Any] = {"conditions": [{"type": outcome, "status": "True", "lastTransitionTime": stamp(when)}]}
    if outcome == "Complete":
        status["completionTime"] = stamp(when)
    return event("update", "jobs", name, when, {"metadata": {"uid": f"uid-{name}"}, "status": status}, sub="status")


def cronjob(verb: str, name: str, when: datetime, *, suspend: bool = False, task: tuple[str, str, str] = TASK) -> str:
    obj = {"metadata": {"name": name, "namespace": task[0], "labels": labels(task)}, "spec": {"suspend": suspend}}
    return event(verb, "cronjobs", name, when, obj, code=201 if verb == "create" else 200)


def count(
    lines: list[str],
    *,
    forbid: bool = True,
    since: datetime = T0,
    until: datetime | None = None,
    schedule: str = "* * * * *",
) -> dict[str, int]:
    until = until or at(10)
    history = gt.read_audit(lines)
    return gt.expected(history, TASK, schedule=schedule, forbid=forbid, since=since, until=until).as_dict()


def test_every_fire_with_a_job_is_a_run_and_the_rest_are_missed() -> None:
    lines = [cronjob("create", "shop-report", at(-1))]
    for minute in (1, 2, 3, 5, 6, 7, 8, 9, 10):
        lines.append(job_created(f"shop-report-{minute}", at(minute), at(minute) + timedelta(seconds=1)))
        lines.append(job_ended(f"shop-report-{minute}", "Complete", at(minute) + timedelta(seconds=3)))
    assert count(lines) == {"runs": 9, "duplicates": 0, "failed": 0, "missed": 1, "unkeyed": 0}


def test_a_second_job_for_one_time_is_a_duplicate_and_only_the_first_counts_as_failed() -> None:
    lines = [
        job_created("a", at(1), at(1) + timedelta(seconds=1)),
        job_ended("a", "Failed", at(1) + timedelta(seconds=5)),
        job_created("a-dup", at(1), at(1) + timedelta(seconds=20), keyed=False),  # a duplicate counts unkeyed too
        job_ended("a-dup", "Complete", at(1) + timedelta(seconds=25)),
        job_created("b", at(2), at(2) + timedelta(seconds=1)),
        job_ended("b", "Complete", at(2) + timedelta(seconds=5)),
    ]
    assert count(lines, until=at(2)) == {"runs": 2, "duplicates": 1, "failed": 1, "missed": 0, "unkeyed": 1}


def test_suspended_times_are_not_missed() -> None:
    lines = [
        cronjob("create", "shop-report", at(0)),
        cronjob("patch", "shop-report", at(2.5), suspend=True),
        cronjob("patch", "shop-report", at(5.5), suspend=False),
    ]
    # 1, 2, 6..10 missed; 3, 4, 5 suspended
    assert count(lines)["missed"] == 7


def test_under_forbid_an_active_job_blocks_fires_and_under_allow_it_does_not() -> None:
    lines = [
        job_created("hang", at(1), at(1) + timedelta(seconds=1)),
        job_ended("hang", "Failed", at(3) + timedelta(seconds=31)),  # active over 2 and 3
    ]
    assert count(lines, until=at(4))["missed"] == 1  # 4
    assert count(lines, until=at(4), forbid=False)["missed"] == 3  # 2, 3, 4
    still_active = lines[:1]
    assert count(still_active, until=at(4))["missed"] == 0


def test_jobs_before_tracking_began_are_not_counted_and_other_tasks_are_apart() -> None:
    other = ("ns", "shop", "cleanup")
    lines = [
        job_created("old", at(1), at(1), keyed=False),  # before tracking: not counted unkeyed either
        job_ended("old", "Complete", at(1) + timedelta(seconds=2)),
        job_created("new", at(3), at(3)),
        job_created("theirs", at(4), at(4), task=other),
    ]
    expected = {"runs": 1, "duplicates": 0, "failed": 0, "missed": 1, "unkeyed": 0}
    assert count(lines, since=at(2), until=at(4), forbid=False) == expected


def test_a_job_is_keyed_when_its_stored_object_has_the_key_and_its_request_times_are_kept() -> None:
    created = json.loads(job_created("bare", at(1), at(1) + timedelta(seconds=1), keyed=False))
    created["requestReceivedTimestamp"] = "2026-12-03T10:01:00.950000Z"
    lines = [json.dumps(created), job_created("keyed", at(2), at(2) + timedelta(seconds=1))]
    jobs = {job.name: job for job in gt.read_audit(lines).jobs.values()}
    assert (jobs["bare"].keyed, jobs["keyed"].keyed) == (False, True)
    assert jobs["bare"].received == at(1) + timedelta(seconds=0.95)
    assert jobs["bare"].answered == at(1) + timedelta(seconds=1)
    assert count(lines)["unkeyed"] == 1


def test_refused_requests_and_unlabelled_objects_are_ignored() -> None:
    refused = json.loads(job_created("x", at(1), at(1)))
    refused["responseStatus"]["code"] = 409
    foreign = json.loads(job_created("y", at(2), at(2)))
    foreign["responseObject"]["metadata"]["labels"] = {}
    assert count([json.dumps(refused), json.dumps(foreign)], until=at(2))["runs"] == 0


def test_two_cronjobs_of_one_task_at_once_are_reported_and_one_after_the_other_is_not() -> None:
    history = gt.read_audit(
        [
            cronjob("create", "shop-report", at(0)),
            event("delete", "cronjobs", "shop-report", at(1), {"kind": "Status"}),
            cronjob("create", "shop-report", at(2)),
        ]
    )
    assert history.duplicate_cronjobs == []
    history = gt.read_audit([cronjob("create", "shop-report", at(0)), cronjob("create", "shop-report-x", at(1))])
    assert history.duplicate_cronjobs == ["ns/shop-report-x beside shop-report for ('ns', 'shop', 'report')"]


def test_compare_sets_the_ledger_beside_the_truth() -> None:
    lines = [job_created("a", at(1), at(1)), job_ended("a", "Complete", at(1) + timedelta(seconds=2))]
    status = {"trackingSince": stamp(T0), "checkedUntil": stamp(at(2)), "counts": {"runs": 1, "missed": 1}}
    rows = gt.compare(gt.read_audit(lines), {TASK: status}, schedules={TASK: "* * * * *"}, forbid={TASK: True})
    assert rows[0].same
    wrong = {**status, "counts": {"runs": 1}}
    rows = gt.compare(gt.read_audit(lines), {TASK: wrong}, schedules={TASK: "* * * * *"}, forbid={TASK: True})
    assert not rows[0].same and rows[0].truth.missed == 1 and rows[0].ledger.missed == 0


def test_fires_follow_the_schedule() -> None:
    assert gt.fires("*/2 * * * *", at(0), at(6)) == [at(2), at(4), at(6)]
    assert gt.fires("* * * * *", at(0.5), at(2)) == [at(1), at(2)]


def pod_write(pod: str, verb: str, resource: str, name: str, when: datetime, holder: str | None = None) -> str:
    group, _, sub = resource.partition("/")
    line = json.loads(event(verb, group, name, when, {} if holder is None else {"spec": {"holderIdentity": holder}},
                            sub=sub, namespace="ops"))  # fmt: skip
    line["user"] = {"username": "system:serviceaccount:ops:op", "extra": {gt.POD_NAME: [pod]}}
    return json.dumps(line)


def test_the_lease_holders_and_the_writes_of_a_replica_that_did_not_hold_it() -> None:
    lines = [
        pod_write("op-a", "update", "leases", "op", at(0), holder="op-a_1"),
        pod_write("op-a", "patch", "appschedules/status", "shop", at(0.5)),
        pod_write("op-b", "create", "subjectaccessreviews", "", at(0.6)),  # its webhook: not a write of state
        pod_write("op-a", "update", "leases", "op", at(1), holder="op-a_1"),  # renewed
        pod_write("op-a", "update", "leases", "op", at(2), holder=""),  # released
        pod_write("op-b", "patch", "jobs", "shop-report-1", at(2.5)),  # nobody leads: a standby's write
        pod_write("op-b", "update", "leases", "op", at(3), holder="op-b_2"),
        pod_write("op-b", "patch", "appschedules/status", "shop", at(4)),
        event("patch", "appschedules", "shop", at(5), {}, sub="status"),  # no pod: not a replica's
    ]
    writes = gt.pod_writes(lines)
    assert len(writes) == 8
    spans = gt.leading(writes, "ops", "op")
    assert spans == [("op-a", at(0), at(2)), ("op-b", at(3), None)]
    assert [(w.pod, w.resource, w.name) for w in gt.standby_writes(writes, spans)] == [
        ("op-b", "jobs", "shop-report-1")
    ]
    assert {w.user for w in writes} == {"system:serviceaccount:ops:op"}
