"""What a run came to beyond its Job's condition: whether its claim won or lost (a duplicate the claim absorbed,
or one that did the work again), which runs claimed nothing, and why a run failed, read from its pods
(core/view.project_pod) by the ledger. Every time-related test is in Europe/Berlin around the fall-back, with
two fires in the repeated hour."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from appschedule.core import keys
from appschedule.core.keys import rfc3339 as stamp
from appschedule.core.ledger import POD_WAIT, TaskConfig, advance, claim_of, failure_of
from appschedule.core.models import TaskStatus, printable
from appschedule.core.view import PodView, project_pod
from appschedule.shell.store import Store

from .test_ledger import counts, job

FALL_BACK = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)  # Europe/Berlin: 03:00 CEST becomes 02:00 CET
FIRST_0230 = FALL_BACK - timedelta(minutes=30)  # 02:30 CEST
SECOND_0230 = FALL_BACK + timedelta(minutes=30)  # 02:30 CET, the repeated wall time: a fire of its own


def cfg() -> TaskConfig:
    from appschedule.core.schedule import parse

    return TaskConfig(task="report", cronjob="shop-report", schedule=parse("*/30 * * * *", "Europe/Berlin"))


def pod(
    job_name: str,
    *,
    claim: str | None = None,
    key: str | None = None,
    failure: str | None = None,
    finished: bool = True,
    created: datetime = FALL_BACK,
    name: str | None = None,
) -> PodView:
    return PodView(
        namespace="shop",
        name=name or f"{job_name}-pod",
        resource_version="1",
        job=job_name,
        created=stamp(created),
        finished=finished,
        claim=(claim, key or "") if claim else None,
        failure=failure,
    )


def begun() -> TaskStatus:
    return advance(None, cfg(), [], FIRST_0230 - timedelta(hours=1)).status


def test_a_duplicate_the_claim_absorbed_is_told_from_one_that_did_the_work_across_the_fall_back() -> None:
    """02:30 CEST: the run wins its claim, a duplicate made by hand loses it (absorbed: it did nothing). 02:30 CET
    (the repeated wall time, a fire of its own with its own key): the run claims nothing (no library) and its
    duplicate wins (it did the work). Counts, the fires' entries, lastRun and the Events say so."""
    first_key, second_key = keys.key_of("report", FIRST_0230), keys.key_of("report", SECOND_0230)
    assert first_key != second_key
    jobs = [
        job(FIRST_0230, outcome="Complete"),
        job(FIRST_0230, outcome="Complete", name="report-by-hand", created=FIRST_0230 + timedelta(seconds=20)),
        job(SECOND_0230, outcome="Complete"),
        job(SECOND_0230, outcome="Complete", name="report-again", created=SECOND_0230 + timedelta(seconds=20)),
    ]
    pods = {
        jobs[0].name: [pod(jobs[0].name, claim="won", key=first_key)],
        "report-by-hand": [pod("report-by-hand", claim="lost", key=first_key)],
        jobs[2].name: [pod(jobs[2].name)],  # finished, no claim line: no library
        "report-again": [pod("report-again", claim="won", key=second_key)],
    }
    result = advance(begun(), cfg(), jobs, SECOND_0230 + timedelta(minutes=5), pods)
    status = result.status
    # 02:00 CEST and 02:00 CET got no Job: two fires missed, apart
    assert counts(status) == {"runs": 2, "succeeded": 2, "missed": 2, "duplicates": 2, "absorbed": 1, "unclaimed": 1}
    entries = {r.scheduled_time: r for r in status.recent or []}
    assert entries[stamp(FIRST_0230)].duplicates == 1 and entries[stamp(FIRST_0230)].absorbed == 1
    assert entries[stamp(SECOND_0230)].duplicates == 1 and entries[stamp(SECOND_0230)].absorbed is None
    assert status.last_run is not None and status.last_run.key == second_key and status.last_run.claim == "none"
    (absorbed,) = [e for e in result.events if e.reason == "DuplicateAbsorbed"]
    assert absorbed.type == "Normal" and "report-by-hand" in absorbed.message and first_key in absorbed.message
    # the next step keeps lastRun's claim (it was found when the run ended) and counts nothing again
    later = advance(status, cfg(), jobs, SECOND_0230 + timedelta(minutes=6), pods).status
    assert counts(later) == counts(status) and later.last_run == status.last_run


def test_the_claim_of_the_run_itself_lost_when_a_duplicate_claimed_first() -> None:
    """A Job made by hand for the fire claimed it before the CronJob's own run did: the run is the one the
    claim absorbed, and the fire was done once."""
    key = keys.key_of("report", SECOND_0230)
    run = job(SECOND_0230, outcome="Complete", created=SECOND_0230 + timedelta(seconds=30))
    early = job(SECOND_0230, outcome="Complete", name="report-early", created=SECOND_0230 + timedelta(seconds=40))
    pods = {
        run.name: [pod(run.name, claim="lost", key=key)],
        "report-early": [pod("report-early", claim="won", key=key)],
    }
    status = advance(begun(), cfg(), [run, early], SECOND_0230 + timedelta(minutes=5), pods).status
    assert counts(status)["absorbed"] == 1 and status.last_run is not None and status.last_run.claim == "lost"


def test_why_a_run_failed_is_the_containers_then_the_jobs() -> None:
    failed = job(FIRST_0230, outcome="Failed", reason="BackoffLimitExceeded")
    deadline = job(SECOND_0230, outcome="Failed", reason="DeadlineExceeded")
    pods = {
        failed.name: [pod(failed.name, failure="OOMKilled")],
        deadline.name: [pod(deadline.name, failure="exit 137")],  # killed for the deadline: the deadline says why
    }
    result = advance(begun(), cfg(), [failed, deadline], SECOND_0230 + timedelta(minutes=5), pods)
    entries = {r.scheduled_time: r for r in result.status.recent or []}
    assert entries[stamp(FIRST_0230)].failure == "OOMKilled" and entries[stamp(FIRST_0230)].state == "Failed"
    assert entries[stamp(SECOND_0230)].failure == "DeadlineExceeded"
    assert result.status.last_run is not None and result.status.last_run.failure == "DeadlineExceeded"
    (event,) = [e for e in result.events if e.reason == "RunFailed"]
    assert "OOMKilled" in event.message and "DeadlineExceeded" in event.message
    # no pod seen (gone already, or no rights to read pods): the Job's condition; anything odd read as text
    assert failure_of(failed, []) == "BackoffLimitExceeded"
    odd = dataclasses.replace(failed, reason="Bäckoff\nLimit" + "x" * 40)
    assert failure_of(odd, []) == printable(odd.reason or "", 20) and len(failure_of(odd, [])) <= 20


def test_a_finished_job_waits_a_little_for_its_pods_last_state() -> None:
    """The Job's Complete arrived before its pod's last update (two watches): counted once the pod says what its
    claim came to, and at the latest POD_WAIT after the Job finished, without it."""
    done = job(FIRST_0230, outcome="Complete")
    finished_at = FIRST_0230 + timedelta(seconds=6)  # job(): created one second after its time, done 5 s later
    running = {done.name: [pod(done.name, finished=False)]}
    early = advance(begun(), cfg(), [done], finished_at + timedelta(seconds=2), running)
    assert counts(early.status).get("succeeded") is None and early.wake_at == finished_at + POD_WAIT
    assert done.name not in early.release
    key = keys.key_of("report", FIRST_0230)
    told = advance(
        early.status,
        cfg(),
        [done],
        finished_at + timedelta(seconds=3),
        {done.name: [pod(done.name, claim="won", key=key)]},
    )
    assert counts(told.status)["succeeded"] == 1 and told.status.last_run is not None
    assert told.status.last_run.claim == "won" and done.name in told.release
    late = advance(early.status, cfg(), [done], finished_at + POD_WAIT, running)
    assert counts(late.status)["succeeded"] == 1 and late.status.last_run is not None
    assert late.status.last_run.claim is None and "unclaimed" not in counts(late.status)  # not known: not "none"


def test_a_claim_is_the_last_pods_and_only_of_the_runs_own_key() -> None:
    key = keys.key_of("report", FIRST_0230)
    first = pod("j", claim="won", key=key, created=FIRST_0230, name="a")
    retry = pod("j", claim="taken-over", key=key, created=FIRST_0230 + timedelta(seconds=30), name="b")
    assert claim_of([retry, first], key) == "taken-over"  # the attempt that stands
    other = pod("j", claim="won", key=keys.key_of("report", SECOND_0230))
    assert claim_of([other], key) == "none"  # it claimed another fire: not this one
    assert claim_of([pod("j", finished=False)], key) is None and claim_of([], key) is None


def terminated(message: Any = None, reason: str = "Completed", code: Any = 0) -> dict[str, Any]:
    return {"name": "run", "state": {"terminated": {"reason": reason, "exitCode": code, "message": message}}}


def body(phase: str = "Succeeded", containers: list[Any] | None = None, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": "shop",
            "name": "shop-report-1-abcde",
            "resourceVersion": "7",
            "creationTimestamp": "2026-10-25T00:30:01Z",
            "labels": {"batch.kubernetes.io/job-name": "shop-report-1", "appschedule.dev/task": "report"},
        },
        "status": {"phase": phase, "containerStatuses": containers or [], **status},
    }


def test_a_pods_projection_reads_its_claim_line_and_why_it_failed() -> None:
    said = "started\nappschedule.dev/claim: won report@2026-10-25T00:30:00Z\nbye\n"
    view = project_pod(body(containers=[terminated(said)]))
    assert view.job == "shop-report-1" and view.finished and view.claim == ("won", "report@2026-10-25T00:30:00Z")
    relost = "appschedule.dev/claim: won report@x\nappschedule.dev/claim: lost report@x"
    assert project_pod(body(containers=[terminated(relost)])).claim == ("lost", "report@x")  # the last line
    for odd in ("appschedule.dev/claim: maybe report@x", "appschedule.dev/claim: won", 42, ["x"]):
        assert project_pod(body(containers=[terminated(odd)])).claim is None
    assert project_pod(body("Failed", [terminated(reason="OOMKilled", code=137)])).failure == "OOMKilled"
    assert project_pod(body("Failed", [terminated(reason="Error", code=3)])).failure == "exit 3"
    pulling = {"name": "run", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "back-off"}}}
    assert project_pod(body("Pending", [pulling])).failure == "ImagePullBackOff"
    config = {"name": "run", "state": {"waiting": {"reason": "CreateContainerConfigError"}}}
    assert project_pod(body("Pending", [config])).failure == "ContainerConfigError"
    starting = {"name": "run", "state": {"waiting": {"reason": "ContainerCreating"}}}
    assert project_pod(body("Pending", [starting])).failure is None and not project_pod(body("Pending")).finished
    unschedulable = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    assert project_pod(body("Pending", conditions=unschedulable)).failure == "Unschedulable"
    assert project_pod(body("Failed", reason="Evicted")).failure == "Evicted"
    init = {"name": "setup", "state": {"terminated": {"reason": "Error", "exitCode": 2}}}
    assert project_pod(body("Failed", initContainerStatuses=[init])).failure == "exit 2"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    status=st.dictionaries(
        st.sampled_from(["phase", "reason", "containerStatuses", "initContainerStatuses", "conditions"]), json_values
    ),
    metadata=json_values,
)
def test_a_pods_projection_never_raises_whatever_it_holds(status: dict[str, Any], metadata: Any) -> None:
    """Every input from the cluster can be anything: read, never trusted, never raised."""
    view = project_pod({"metadata": metadata, "status": status})
    assert view.failure is None or (len(view.failure) <= 20 and view.failure.isascii())
    assert view.claim is None or view.claim[0] in ("won", "taken-over", "lost")


def test_a_last_run_written_before_it_was_short_still_reads() -> None:
    """lastRun lost duplicates, reruns, caughtUp, stuck and keyInjected (its entry in recent has them): a status
    an older operator wrote still reads, or tracking would start again."""
    old = {
        "name": "report",
        "lastRun": {
            "key": "report@2026-10-25T00:30:00Z",
            "job": "shop-report-1",
            "scheduledTime": "2026-10-25T00:30:00Z",
            "state": "Succeeded",
            "duplicates": 1,
            "reruns": 0,
            "caughtUp": False,
            "stuck": False,
            "keyInjected": False,
        },
    }
    read = TaskStatus.model_validate(old)
    assert read.last_run is not None and read.last_run.state == "Succeeded"
    assert "duplicates" not in read.last_run.model_dump(by_alias=True, exclude_none=True)


def test_text_for_the_status_is_printable_ascii_within_its_bound() -> None:
    assert printable("schedule '⏰ * * * *'\nbad", 100) == "schedule '\\u23f0 * * * *' bad"
    assert printable("x" * 50, 10) == "x" * 10


def test_a_pod_wakes_its_appschedule_only_when_its_job_has_ended() -> None:
    """The Job's own events wake the reconcile that reads its pods: a pod that finishes while its Job still runs
    (the usual order) costs no reconcile of its own; one whose Job ended already (the ledger may be waiting for
    its last state) does, and only when what the ledger reads of it changed."""
    store = Store()
    running = job(FIRST_0230)
    store.put_job(running)
    done = pod(running.name, claim="won", key=keys.key_of("report", FIRST_0230))
    assert store.put_pod(pod(running.name, finished=False)) == set()
    assert store.put_pod(dataclasses.replace(done, resource_version="2")) == set()
    assert store.put_job(dataclasses.replace(running, outcome="Complete", resource_version="2")) == {("shop", "shop")}
    late = dataclasses.replace(done, resource_version="3", failure="exit 1")
    assert store.put_pod(late) == {("shop", "shop")}
    assert store.put_pod(dataclasses.replace(late, resource_version="4")) == set()  # nothing the ledger reads
    assert store.pods_of("shop", running.name) == [dataclasses.replace(late, resource_version="4")]
    # a finished pod going (its Job deleted after the ledger read it) wakes nothing; an unfinished one wakes the
    # ledger that may be waiting for it
    assert store.drop_pod("shop", late.name) == set() and store.pods_of("shop", running.name) == []
    store.put_pod(dataclasses.replace(late, name="retry", finished=False, resource_version="5"))
    assert store.drop_pod("shop", "retry") == {("shop", "shop")}
