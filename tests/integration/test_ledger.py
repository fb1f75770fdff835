"""The run ledger and the admission webhooks, with real CronJob fires (DESIGN "The ledger", issue 8).

Tests that need a fire wait for a minute boundary; they are few and each puts several tasks on the
same boundary. Pods are played by kwok: the annotation test.appschedule.dev/outcome (set through a
task's podAnnotations) makes a run fail or hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml
from kubernetes import client, watch

from appschedule.core import naming
from appschedule.core.ledger import SETTLE_SLACK
from tests.kit import prometheus
from tests.kit.chart import CLAIM, OUTCOME
from tests.kit.prometheus import Prometheus
from tests.kit.wait import seconds_to_next_minute, wait_for

from .conftest import METRICS_PORT, ClusterUnderTest, Kubectl, OperatorProcess
from .test_operator import Namespaced, task
from .test_plugin import plugin

pytestmark = pytest.mark.cronfire
LEDGER_FINALIZER = naming.LEDGER_FINALIZER


@pytest.fixture(name="world")
def ledger_world(api: client.ApiClient, namespace: str, operator: OperatorProcess) -> Namespaced:
    return Namespaced(api, namespace)


def jobs(world: Namespaced) -> list[dict[str, Any]]:
    raw = world.batch.list_namespaced_job(world.namespace, _preload_content=False)
    return list(json.loads(raw.data)["items"])


def task_status(world: Namespaced, appschedule: str, name: str) -> dict[str, Any]:
    tasks = (world.get(appschedule).get("status") or {}).get("tasks") or []
    return next((t for t in tasks if t["name"] == name), {})


def counts(world: Namespaced, appschedule: str, name: str) -> dict[str, int]:
    return {k: v for k, v in (task_status(world, appschedule, name).get("counts") or {}).items() if v}


def env_of(job: dict[str, Any]) -> dict[str, str]:
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {v["name"]: v.get("value") for v in container.get("env") or []}


def reasons(world: Namespaced, name: str) -> set[str]:
    return {e["reason"] for e in world.events(name)}


def has_events(world: Namespaced, *wanted: str) -> None:
    wait_for(lambda: set(wanted) <= reasons(world, "shop"), timeout=15, what=f"Events {', '.join(wanted)}")


def wait_for_boundary(margin: float = 8) -> float:
    """The next minute boundary at least ``margin`` seconds away (epoch seconds). When the next one is
    closer, sleep until just after it first: what the test then creates has no fire before the boundary
    returned (a CronJob made seconds before a boundary it was not meant for fires at it, and a controller
    outage begun then would cover a fourth fire)."""
    left = seconds_to_next_minute()
    if left < margin:  # too close to set things up before it: let it pass, take the one after
        time.sleep(left + 0.5)
        left = seconds_to_next_minute()
    return time.time() + left


def blackout_around(boundary: float) -> dict[str, Any]:
    """A blackout of every day from two minutes before now to a minute after ``boundary``, in Berlin's wall clock
    (crossing midnight when it must: `to` before `from` is the next day)."""
    berlin = ZoneInfo("Europe/Berlin")
    start = datetime.fromtimestamp(time.time() - 120, berlin)
    end = datetime.fromtimestamp(boundary + 60, berlin)
    days = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]
    window = {"days": days, "from": f"{start:%H:%M}", "to": f"{end:%H:%M}"}
    return {"name": "night-shift", "reason": "maintenance", "weekly": window}


def test_runs_carry_their_key_and_outcomes_are_counted(
    world: Namespaced, kubectl: Kubectl, cluster: ClusterUnderTest
) -> None:
    """One boundary for: a run with its key in its pod's env that wins its claim, a manual re-run that gets the
    same key, counts as a duplicate and loses its claim (absorbed: it did nothing), a failing run (exit 1), one
    killed by the OOM killer, a run stopped by activeDeadlineSeconds (stuck) and a suspended task (skipped, not
    missed), a task paused after its failed run (suspendAfterFailures) and resumed with the plugin, and a task
    inside a blackout (its CronJob suspended, a Job for its fire refused by the webhook, the fire blacked out). The pods
    are kwok's (stages.yaml): their termination message is the claim libraries' line."""
    world.deployment()
    boundary = wait_for_boundary()
    tasks = [
        task("ok", "* * * * *", podAnnotations={CLAIM: "won"}),
        task("boom", "* * * * *", podAnnotations={OUTCOME: "fail"}),
        task("oom", "* * * * *", podAnnotations={OUTCOME: "oom"}),
        task("hang", "* * * * *", activeDeadlineSeconds=5, podAnnotations={OUTCOME: "hang"}),
        task("paused", "* * * * *", suspend=True),
        task("flaky", "* * * * *", suspendAfterFailures=1, podAnnotations={OUTCOME: "fail"}),
        # a blackout, every day, from two minutes ago to a minute past the boundary, of Berlin's wall clock
        task("dark", "* * * * *", timeZone="Europe/Berlin", blackouts=[blackout_around(boundary)]),
        # several schedules, differing in two fields (two CronJobs): even minutes, and every minute of every day
        {
            "name": "alt",
            "schedules": ["*/2 * * * *", "* * * * 0-6"],
            "command": ["alt"],
            "podAnnotations": {CLAIM: "won"},
        },
    ]
    world.appschedule("shop", tasks)
    wait_for(lambda: len(world.cronjobs()) == 9, timeout=30, what="9 CronJobs (alt's two)")
    # blacked out from the start: its CronJob suspended, said; a Job for the boundary's fire is refused
    wait_for(lambda: world.cronjobs()["shop-dark"]["spec"].get("suspend") is True, timeout=30, what="dark suspended")
    has_events(world, "BlackoutStarted")
    made = kubectl("create", "job", "-n", world.namespace, "dark-at-the-fire", "--from=cronjob/shop-dark",
                   "--dry-run=client", "-o", "json")  # fmt: skip
    body = json.loads(made.stdout)
    body["metadata"]["annotations"][naming.CRONJOB_SCHEDULED_TIMESTAMP] = datetime.fromtimestamp(
        boundary, UTC
    ).strftime("%Y-%m-%dT%H:%M:%SZ")
    refused = kubectl("create", "-f", "-", input=json.dumps(body), check=False)
    assert refused.returncode != 0 and "inside blackout night-shift (maintenance)" in refused.stderr, refused.stderr
    fire = time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(boundary))
    key = f"ok@{fire}"

    def first_run() -> dict[str, Any] | None:
        return next((j for j in jobs(world) if j["metadata"]["labels"]["appschedule.dev/task"] == "ok"), None)

    run = wait_for(first_run, timeout=boundary - time.time() + 40, what="the first run of task ok")
    assert env_of(run)["APPSCHEDULE_IDEMPOTENCY_KEY"] == key
    assert env_of(run)["APPSCHEDULE_SCHEDULED_TIME"] == fire
    assert run["metadata"]["annotations"]["appschedule.dev/idempotency-key"] == key
    assert LEDGER_FINALIZER in run["metadata"].get("finalizers", [])
    # a manual re-run in the same minute: the same key, counted as a duplicate; its claim loses (the run's won)
    duplicated = time.time() - boundary < 50
    if duplicated:
        made = kubectl("create", "job", "-n", world.namespace, "ok-by-hand", "--from=cronjob/shop-ok",
                       "--dry-run=client", "-o", "json")  # fmt: skip
        body = json.loads(made.stdout)
        body["spec"]["template"]["metadata"]["annotations"][CLAIM] = "lost"
        kubectl("create", "-f", "-", input=json.dumps(body))
        manual = world.batch.read_namespaced_job("ok-by-hand", world.namespace, _preload_content=False)
        assert env_of(json.loads(manual.data))["APPSCHEDULE_IDEMPOTENCY_KEY"] == key
        wait_for(lambda: counts(world, "shop", "ok").get("duplicates") == 1, timeout=30, what="a duplicate")
        has_events(world, "DuplicateRun")
        wait_for(lambda: counts(world, "shop", "ok").get("absorbed") == 1, timeout=30, what="the duplicate absorbed")
        has_events(world, "DuplicateAbsorbed")
        entry = next(r for r in task_status(world, "shop", "ok")["recent"] if r["scheduledTime"] == fire)
        assert entry["duplicates"] == 1 and entry["absorbed"] == 1, entry
    wait_for(lambda: counts(world, "shop", "ok").get("succeeded", 0) >= 1, timeout=30, what="ok succeeded")
    wait_for(lambda: counts(world, "shop", "boom").get("failed", 0) >= 1, timeout=30, what="boom failed")
    wait_for(lambda: counts(world, "shop", "hang").get("stuck", 0) >= 1, timeout=60, what="hang stuck")
    has_events(world, "RunFailed", "StuckRun")  # posted just after the status that counts them
    status = world.get("shop")["status"]
    assert status["failed"] >= 2  # boom and hang
    healthy = world.condition("shop", "RunsHealthy")
    assert healthy["status"] == "False" and "boom" in healthy["message"]
    # a suspended task's fire is settled (skipped) once the next fire has come: until then, a resume within the
    # starting deadline could still start it (the controller starts its most recent missed fire)
    wait_for(
        lambda: counts(world, "shop", "paused").get("skipped", 0) >= 1,
        timeout=max(40.0, boundary + 60 + 15 + 25 - time.time()),
        what="paused skipped",
    )
    assert "missed" not in counts(world, "shop", "paused")
    assert task_status(world, "shop", "ok")["lastRun"]["key"].startswith("ok@")
    # what each run's claim came to, and why each failed run failed: from its pod, in the status
    wait_for(lambda: (task_status(world, "shop", "ok").get("lastRun") or {}).get("claim") == "won", timeout=30,
             what="ok's claim in lastRun")  # fmt: skip
    why = {name: (task_status(world, "shop", name).get("lastRun") or {}).get("failure") for name in ("boom", "oom")}
    assert why == {"boom": "exit 1", "oom": "OOMKilled"}, why
    wait_for(lambda: (task_status(world, "shop", "hang").get("lastRun") or {}).get("failure") == "DeadlineExceeded",
             timeout=30, what="hang's failure")  # fmt: skip
    assert "unclaimed" in counts(world, "shop", "boom")  # its pod claimed nothing: no library

    # flaky failed once with suspendAfterFailures: 1: paused (its CronJob suspended), said; resumed by the plugin
    wait_for(lambda: world.cronjobs()["shop-flaky"]["spec"].get("suspend") is True, timeout=30, what="flaky paused")
    has_events(world, "TaskPaused")
    assert "flaky" in world.condition("shop", "RunsHealthy")["message"]
    resumed = plugin(cluster, "resume", "shop", "flaky", "-n", world.namespace)
    assert resumed.returncode == 0, resumed.stderr
    wait_for(lambda: world.cronjobs()["shop-flaky"]["spec"].get("suspend") is False, timeout=30, what="flaky resumed")
    has_events(world, "TaskResumed")

    # the boundary's fire was blacked out, not missed; the CronJob runs again once the blackout ended
    wait_for(lambda: counts(world, "shop", "dark").get("blackedOut") == 1, timeout=60, what="dark's fire blacked out")
    wait_for(lambda: world.cronjobs()["shop-dark"]["spec"].get("suspend") is False, timeout=60, what="dark runs again")
    has_events(world, "BlackoutEnded")
    assert "missed" not in counts(world, "shop", "dark")
    assert not [j for j in jobs(world) if j["metadata"]["labels"]["appschedule.dev/task"] == "dark"
                and j["metadata"]["annotations"].get(naming.ANNOTATION_SCHEDULED_TIME) == fire]  # fmt: skip

    # alt's fires at the boundary and the minute after: one run each, with the fire's key. An even minute is the
    # first schedule's (shop-alt); the second CronJob's Job for it does no work (completions 0, run by shop-alt)
    fires = [time.strftime("%Y-%m-%dT%H:%M:00Z", time.gmtime(boundary + 60 * i)) for i in (0, 1)]

    def alt_jobs(fire: str) -> list[dict[str, Any]]:
        return [j for j in jobs(world) if j["metadata"]["annotations"].get(naming.ANNOTATION_IDEMPOTENCY_KEY)
                == f"alt@{fire}"]  # fmt: skip

    def run_of_each() -> bool:
        return all([j for j in alt_jobs(f) if j["spec"].get("completions") != 0] for f in fires)

    wait_for(run_of_each, timeout=boundary + 60 + 40 - time.time(), what="a run of alt for each of two fires")
    for fire in fires:
        found = alt_jobs(fire)
        ran = [j for j in found if j["spec"].get("completions") != 0]
        idle = [j for j in found if j["spec"].get("completions") == 0]
        even = int(fire[14:16]) % 2 == 0
        assert len(ran) == 1 and ran[0]["metadata"]["ownerReferences"][0]["name"] == (
            "shop-alt" if even else "shop-alt-s1"
        ), (fire, [j["metadata"]["name"] for j in found])
        assert env_of(ran[0])["APPSCHEDULE_IDEMPOTENCY_KEY"] == f"alt@{fire}"
        assert all(j["metadata"]["annotations"][naming.ANNOTATION_RUN_BY] == "shop-alt" for j in idle), idle
        assert not idle or even
    wait_for(lambda: counts(world, "shop", "alt").get("succeeded", 0) >= 2, timeout=30, what="alt's two runs")
    alt = counts(world, "shop", "alt")
    assert "duplicates" not in alt and "missed" not in alt, alt
    assert task_status(world, "shop", "alt")["schedule"] == "*/2 * * * * | * * * * 0-6"

    # every recorded Job lets go of the finalizer; the metrics say what the status says
    def released() -> bool:
        done = [
            j for j in jobs(world) if any(c["status"] == "True" for c in (j.get("status") or {}).get("conditions", []))
        ]
        return bool(done) and all(LEDGER_FINALIZER not in j["metadata"].get("finalizers", []) for j in done)

    wait_for(released, timeout=30, what="finalizers released from finished Jobs")

    wanted = (f'namespace="{world.namespace}"', 'task="boom"', 'result="failed"')

    def failed_metric() -> bool:
        text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5).read().decode()
        series = [line for line in text.splitlines() if line.startswith("appschedule_runs_total{")]
        return any(all(w in line for w in wanted) and float(line.rsplit(" ", 1)[1]) >= 1 for line in series)

    wait_for(failed_metric, timeout=10, what="appschedule_runs_total of boom's failed run")
    if duplicated:
        absorbed = (f'namespace="{world.namespace}"', 'task="ok"')

        def absorbed_metric() -> bool:
            text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5).read().decode()
            series = [line for line in text.splitlines() if line.startswith("appschedule_duplicate_runs_absorbed")]
            return any(all(w in line for w in absorbed) and float(line.rsplit(" ", 1)[1]) >= 1 for line in series)

        wait_for(absorbed_metric, timeout=10, what="appschedule_duplicate_runs_absorbed_total of ok's duplicate")


def test_jobs_start_while_the_operator_is_down_and_are_reported_without_key(
    world: Namespaced, operator: OperatorProcess
) -> None:
    """failurePolicy Ignore: with the operator down a Job still starts; the ledger counts it later and
    says it ran without its key."""
    world.deployment()
    world.appschedule("shop", [task("tick", "* * * * *")])
    wait_for(lambda: world.cronjobs(), timeout=30, what="the CronJob")
    wait_for(lambda: task_status(world, "shop", "tick").get("trackingSince"), timeout=30, what="tracking")
    boundary = wait_for_boundary()
    operator.kill()
    try:
        wait_for(lambda: jobs(world), timeout=boundary - time.time() + 40, what="a Job while the operator is down")
        (job,) = jobs(world)
        assert "appschedule.dev/idempotency-key" not in (job["metadata"].get("annotations") or {})
    finally:
        operator.start_and_wait()
    wait_for(lambda: counts(world, "shop", "tick").get("runs", 0) >= 1, timeout=30, what="the run counted")
    wait_for(lambda: "KeyNotInjected" in reasons(world, "shop"), timeout=30, what="a KeyNotInjected Event")
    recent = task_status(world, "shop", "tick")["recent"]
    assert recent[0]["keyInjected"] is False
    assert counts(world, "shop", "tick").get("unkeyed") == 1  # the run without its key, counted once


def webhook_only_operator(
    cluster: ClusterUnderTest, api: client.ApiClient, log: Path, kind: str, port: int
) -> Iterator[OperatorProcess]:
    """An operator that serves only one webhook (``keys`` or ``validation``) under a configuration of its
    own, and reconciles an empty namespace; its configuration is removed when it stops."""
    name = f"test-{kind}-only.appschedule.dev"
    process = OperatorProcess(
        cluster.kubeconfig,
        log,
        "--namespace",
        "no-such-namespace",
        "--webhook-port",
        str(port),
        "--webhooks",
        kind,
        "--webhook-config-name",
        name,
        liveness_port=port + 1,
    )
    process.start_and_wait()
    admission = client.AdmissionregistrationV1Api(api)
    mutating = kind == "keys"
    wait_for(lambda: _configured(admission, name, mutating=mutating), timeout=30, what=f"the {kind} webhook")
    try:
        yield process
    finally:
        process.kill()
        if mutating:
            admission.delete_mutating_webhook_configuration(name)
        else:
            admission.delete_validating_webhook_configuration(name)


@pytest.fixture
def keying_operator(
    cluster: ClusterUnderTest, crd: str, tmp_path: Path, api: client.ApiClient
) -> Iterator[OperatorProcess]:
    """Jobs get their key and the ledger's finalizer while the session's operator, and its ledger, are down."""
    yield from webhook_only_operator(cluster, api, tmp_path / "keying.log", "keys", 20295)


def test_runs_deleted_by_a_history_limit_while_the_ledger_is_down_are_still_recorded(
    world: Namespaced, operator: OperatorProcess, keying_operator: OperatorProcess
) -> None:
    """The finalizer set at admission holds every Job a history limit of 1 deletes while the ledger is
    down; once it is back, every run is recorded and every Job let go."""
    world.deployment()
    world.appschedule("shop", [task("tick", "* * * * *", successfulJobsHistoryLimit=1)])
    wait_for(lambda: world.cronjobs(), timeout=30, what="the CronJob")
    wait_for(lambda: task_status(world, "shop", "tick").get("trackingSince"), timeout=30, what="tracking")
    boundary = wait_for_boundary()
    operator.kill()
    try:

        def held() -> bool:  # two runs, the older one deleted by the history limit but held by our finalizer
            found = jobs(world)
            return len(found) >= 2 and any(j["metadata"].get("deletionTimestamp") for j in found)

        wait_for(held, timeout=boundary - time.time() + 90, what="a second run, and the first held while deleted")
        assert all(LEDGER_FINALIZER in j["metadata"].get("finalizers", []) for j in jobs(world))
    finally:
        operator.start_and_wait()
    wait_for(lambda: counts(world, "shop", "tick").get("succeeded", 0) >= 2, timeout=60, what="both runs recorded")
    wait_for(
        lambda: all(not j["metadata"].get("deletionTimestamp") for j in jobs(world)),
        timeout=60,
        what="the deleted Jobs let go and gone",
    )
    assert "missed" not in counts(world, "shop", "tick")


def test_a_backlog_made_while_the_ledger_is_down_is_counted_in_one_status_write(
    world: Namespaced, operator: OperatorProcess, keying_operator: OperatorProcess, cluster: ClusterUnderTest
) -> None:
    """Ten manual runs started and finished while the ledger is down (the key webhook up: each keyed and held,
    the history limit's deletions wait for the ledger): more than a task's status remembers (6 Jobs), all
    counted by the first status write after the restart, and every Job let go."""
    world.deployment()
    world.appschedule("shop", [task("tick", "0 * * * *")])
    wait_for(lambda: task_status(world, "shop", "tick").get("trackingSince"), timeout=30, what="tracking")
    operator.kill()
    try:
        for _ in range(10):
            ran = plugin(cluster, "run", "shop", "tick", "-n", world.namespace)
            assert ran.returncode == 0 and "key tick@" in ran.stdout, ran.stdout + ran.stderr

        def finished() -> bool:
            conditions = [j["status"].get("conditions") or [] for j in jobs(world)]
            return sum(1 for c in conditions if any(one["type"] == "Complete" for one in c)) == 10

        wait_for(finished, timeout=60, what="10 manual runs finished while the ledger is down")
        newest = max(datetime.fromisoformat(j["metadata"]["creationTimestamp"]) for j in jobs(world))
        wait_for(  # a Job is counted past the mark once older than the slack (one created before it may yet appear)
            lambda: datetime.now(UTC) > newest + SETTLE_SLACK, timeout=30, what="the runs older than the slack"
        )
        assert all(LEDGER_FINALIZER in j["metadata"].get("finalizers", []) for j in jobs(world))
        before = world.get("shop")["metadata"]["resourceVersion"]
    finally:
        operator.start_and_wait()
    wait_for(lambda: counts(world, "shop", "tick").get("manual") == 10, timeout=30, what="10 manual runs counted")
    wait_for(lambda: len(jobs(world)) <= 3, timeout=30, what="the runs past the history limit let go and gone")
    manual = []  # in every version of the AppSchedule written since the restart: never some of the runs only
    versions = watch.Watch().stream(
        world.custom.list_namespaced_custom_object, naming.GROUP, naming.VERSION, world.namespace, naming.PLURAL,
        resource_version=before, timeout_seconds=3,
    )  # fmt: skip
    for event in versions:
        tasks = (event["object"].get("status") or {}).get("tasks") or []
        manual += [(t.get("counts") or {}).get("manual", 0) for t in tasks if t.get("name") == "tick"]
    assert manual and set(manual) <= {0, 10}, manual


@pytest.fixture
def validating_operator(
    cluster: ClusterUnderTest, crd: str, tmp_path: Path, api: client.ApiClient
) -> Iterator[OperatorProcess]:
    yield from webhook_only_operator(cluster, api, tmp_path / "validating.log", "validation", 20293)


def _configured(admission: client.AdmissionregistrationV1Api, name: str, *, mutating: bool = False) -> bool:
    read = (
        admission.read_mutating_webhook_configuration if mutating else admission.read_validating_webhook_configuration
    )
    try:
        return bool(read(name).webhooks)
    except client.ApiException:
        return False


def test_an_invalid_appschedule_is_refused_at_apply_naming_task_and_field(
    validating_operator: OperatorProcess, kubectl: Kubectl, namespace: str
) -> None:
    manifest = {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppSchedule",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {
            "deploymentRef": {"name": "web"},
            "tasks": [
                {"name": "good", "schedule": "0 3 * * *", "command": ["x"]},
                {"name": "typo", "schedule": "0 3 * * * 2026", "command": ["x"]},
            ],
        },
    }
    refused = subprocess.run(
        [kubectl.binary, f"--kubeconfig={kubectl.kubeconfig}", "apply", "-f", "-"],
        input=yaml.safe_dump(manifest),
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0
    assert "task 'typo' (spec.tasks[1].schedule)" in refused.stderr
    manifest["spec"]["tasks"].pop()  # type: ignore[index]
    kubectl("apply", "-f", "-", input=yaml.safe_dump(manifest))


def test_a_controller_outage_across_three_fires_gives_misses_a_late_run_or_caught_up_runs(
    world: Namespaced, cluster: ClusterUnderTest, operator: OperatorProcess, prometheus_server: Prometheus
) -> None:
    """kube-controller-manager down across three fire times: a task whose startingDeadlineSeconds is
    shorter than the outage misses all three; one whose deadline is longer misses the first two and runs the
    third late (the controller only ever starts the most recent missed time); one with a catchUpWindow gets
    all three run, each with its own fire's key, the missed ones started by the operator oldest first under
    Forbid (0 missed).

    A real Prometheus scrapes the operator all along with the chart's rules: AppScheduleMissedRun fires
    for the tasks that missed, and no alert for the one that caught up; every dashboard panel's query
    returns data of the shape the panel draws; after an operator restart the counters start again at 0 and
    the alert neither ends early nor counts the misses twice; the scrape passes `promtool check metrics`."""
    local = cluster.need_local()
    began = time.time()
    wait_for(prometheus_server.targets_up, timeout=30, what="Prometheus scraping the operator")
    world.deployment()
    boundary = wait_for_boundary(margin=15)
    world.appschedule(
        "shop",
        [
            task("short", "* * * * *", startingDeadlineSeconds=10),
            task("long", "* * * * *", startingDeadlineSeconds=300, missedRunGraceSeconds=10),
            task("caught", "* * * * *", catchUpWindow="10m"),
        ],
    )
    wait_for(lambda: len(world.cronjobs()) == 3, timeout=30, what="3 CronJobs")
    wait_for(lambda: task_status(world, "shop", "caught").get("trackingSince"), timeout=30, what="tracking")
    local.stop("kube-controller-manager")
    try:
        time.sleep(max(0.0, boundary + 120 + 20 - time.time()))  # the outage itself: three fires go by
    finally:
        local.start("kube-controller-manager")
    # the fires after the outage run as usual (the test may take longer than a minute): what is checked is
    # how the three fires of the outage ended, and counts that later fires cannot change
    fires = [f"{datetime.fromtimestamp(round(boundary + 60 * i), UTC):%Y-%m-%dT%H:%M:%SZ}" for i in range(3)]

    def ended(name: str) -> list[str | None]:
        states = {r["scheduledTime"]: r.get("state") for r in task_status(world, "shop", name).get("recent") or []}
        return [states.get(f) for f in fires]

    wait_for(lambda: ended("short") == ["Missed"] * 3, timeout=60, what="the 3 fires of short missed")
    assert counts(world, "shop", "short").get("missed", 0) >= 3  # a fire after it can miss its 10 s too
    wait_for(lambda: ended("long") == ["Missed", "Missed", "Succeeded"], timeout=60, what="long: 2 missed, 1 run")
    assert {k: counts(world, "shop", "long").get(k) for k in ("missed", "late")} == {"missed": 2, "late": 1}
    has_events(world, "MissedRun", "RunLate")
    wait_for(lambda: ended("caught") == ["Succeeded"] * 3, timeout=90, what="the 3 fires of caught run")
    assert not counts(world, "shop", "caught").get("missed") and not task_status(world, "shop", "caught").get("catchUp")
    assert counts(world, "shop", "caught").get("caughtUp", 0) >= 2
    expected = {f"caught@{f}" for f in fires}
    made = [j for j in jobs(world) if j["metadata"]["labels"].get(naming.LABEL_TASK) == "caught"]
    keyed = {(j["metadata"].get("annotations") or {}).get(naming.ANNOTATION_IDEMPOTENCY_KEY) for j in made}
    assert expected <= keyed, f"the runs of caught carry {keyed}, not every fire's key {expected}"
    assert not counts(world, "shop", "caught").get("duplicates")
    _alerts_and_dashboard(world, operator, prometheus_server, began)


def _alerts_and_dashboard(world: Namespaced, operator: OperatorProcess, server: Prometheus, began: float) -> None:
    namespace = world.namespace

    def firing(task: str) -> list[dict[str, Any]]:
        return [a for a in server.alerts() if a["labels"].get("namespace") == namespace
                and a["labels"].get("task") == task and a["state"] == "firing"]  # fmt: skip

    wait_for(lambda: {a["labels"]["alertname"] for a in firing("short")} == {"AppScheduleMissedRun"}, timeout=30,
             what="AppScheduleMissedRun firing for short, from Prometheus' alerts API")  # fmt: skip
    wait_for(lambda: "AppScheduleMissedRun" in {a["labels"]["alertname"] for a in firing("long")}, timeout=30,
             what="AppScheduleMissedRun firing for long")  # fmt: skip
    (alert,) = firing("short")
    assert float(alert["value"]) >= 1 and alert["labels"]["appschedule"] == "shop", alert  # increase(): estimated
    missed = f'appschedule_missed_runs_total{{namespace="{namespace}", task="short"}}'
    wait_for(lambda: [float(r["value"][1]) for r in server.query(missed)["result"]]
             == [float(counts(world, "shop", "short")["missed"])], timeout=15,
             what="Prometheus reading the misses of short the ledger counted")  # fmt: skip
    assert not [a for a in server.alerts() if a["labels"].get("namespace") == namespace
                and a["labels"].get("task") == "caught"], "an alert for the task that caught up"  # fmt: skip

    # every panel of the dashboard, its variables as Grafana would fill them for this AppSchedule; a series
    # that appeared a moment ago (a run that just ended) needs a few scrapes before a rate over it has points
    variables = {"namespace": namespace, "appschedule": "shop", "__interval": "1m", "__rate_interval": "1m"}
    for title, kind, expr in prometheus.dashboard_queries(variables):

        def answered(kind: str = kind, expr: str = expr) -> bool:
            if kind == "table":  # a value per task
                found = server.query(expr)
                return found["resultType"] == "vector" and bool(found["result"])
            found = server.query_range(expr, began, time.time(), 5)  # a time series per task
            values = [float(v) for series in found["result"] for _, v in series["values"]]
            return found["resultType"] == "matrix" and any(v == v for v in values)  # some point is a number

        wait_for(answered, timeout=30, what=f"data for the dashboard panel {title!r}: {expr}")

    # the scrape as Prometheus' own linter reads it: names, types, units, HELP
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10) as answer:
        scrape = answer.read()
    linted = subprocess.run([prometheus.PROMTOOL, "check", "metrics"], input=scrape, capture_output=True, timeout=60)
    assert linted.returncode == 0 and not linted.stdout.strip(), linted.stdout + linted.stderr

    # an operator restart: its counters start again at 0 (a reset), the alert stays until the window passes
    before = float(server.query(f"increase({missed}[5m])")["result"][0]["value"][1])
    counted = counts(world, "shop", "short")["missed"]
    operator.stop()
    operator.start_and_wait()

    def restarted() -> bool:
        now = server.query(missed)["result"]
        return (
            bool(now) and float(now[0]["value"][1]) == 0 and bool(server.query(f"resets({missed}[5m]) >= 1")["result"])
        )

    wait_for(restarted, timeout=60, what="the missed counter of short at 0 again after the restart, a reset")
    after = float(server.query(f"increase({missed}[5m])")["result"][0]["value"][1])
    new = counts(world, "shop", "short")["missed"] - counted  # fires short missed meanwhile (its deadline is 10 s)
    assert after <= before + new + 0.5, f"the restart counted the misses again: increase {before} -> {after}"
    assert [a["labels"]["alertname"] for a in firing("short")] == ["AppScheduleMissedRun"]
    assert not [a for a in server.alerts() if a["labels"]["alertname"] == "AppScheduleOperatorDown"
                and a["state"] == "firing"]  # fmt: skip


def test_release_jobs_lets_go_of_every_held_job(world: Namespaced, cluster: ClusterUnderTest) -> None:
    """What uninstalling runs: no Job stays behind the ledger's finalizer once the operator is gone."""
    labels = {"appschedule.dev/task": "orphan", "appschedule.dev/appschedule": "gone"}
    pod = {"restartPolicy": "Never", "containers": [{"name": "x", "image": "x", "command": ["x"]}]}
    body = {
        "metadata": {"name": "held", "labels": labels, "finalizers": [LEDGER_FINALIZER]},
        "spec": {"template": {"spec": pod}},
    }
    world.batch.create_namespaced_job(world.namespace, body)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    command = [sys.executable, "-m", "appschedule", "release-jobs", "-n", world.namespace]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    job = world.batch.read_namespaced_job("held", world.namespace)
    assert LEDGER_FINALIZER not in (job.metadata.finalizers or [])
