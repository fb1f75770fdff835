"""The operator, really running, against the real API server and controllers (DESIGN.md, issue 4)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from appschedule.core import naming
from tests.kit.wait import wait_for

from .conftest import Kubectl, OperatorProcess

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GROUP, VERSION, PLURAL = naming.GROUP, naming.VERSION, naming.PLURAL
WEEKLY = "0 17 * * 5"  # far from any test's minute: status does not move while a test runs


class Namespaced:
    """Raw JSON reads and writes of the objects a test cares about, in one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(api)
        self.batch = client.BatchV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)

    def deployment(self, name: str = "web", image: str = "registry.example.com/shop/web:1.4.2") -> dict[str, Any]:
        body: dict[str, Any] = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
        body["metadata"].update(name=name, namespace=self.namespace)
        body["spec"]["replicas"] = 0  # only the pod template matters here
        body["spec"]["template"]["spec"]["containers"][0]["image"] = image
        self.apps.create_namespaced_deployment(self.namespace, body)
        return body

    def appschedule(self, name: str, tasks: list[dict[str, Any]], deployment: str = "web") -> dict[str, Any]:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AppSchedule",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"deploymentRef": {"name": deployment}, "tasks": tasks},
        }
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, body
        )
        return created

    def get(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)
        return got

    def patch(self, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name, patch)

    def cronjobs(self) -> dict[str, dict[str, Any]]:
        raw = self.batch.list_namespaced_cron_job(self.namespace, _preload_content=False)
        return {c["metadata"]["name"]: c for c in json.loads(raw.data)["items"]}

    def condition(self, name: str, kind: str = "Ready") -> dict[str, Any]:
        conditions = (self.get(name).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == kind), {})

    def events(self, name: str) -> list[dict[str, Any]]:
        raw = self.core.list_namespaced_event(
            self.namespace, field_selector=f"involvedObject.name={name}", _preload_content=False
        )
        return list(json.loads(raw.data)["items"])


def task(name: str, schedule: str = WEEKLY, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "command": ["node", f"tasks/{name}.js"], **extra}


def image_of(cronjob: dict[str, Any]) -> str:
    return str(cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"])


def until(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    return wait_for(check, timeout=timeout, what=what)


@pytest.fixture
def world(api: client.ApiClient, namespace: str, operator: OperatorProcess) -> Namespaced:
    return Namespaced(api, namespace)


def test_create_applies_cronjobs_and_reports_status(world: Namespaced, kubectl: Kubectl) -> None:
    world.deployment()
    world.appschedule("shop", [task("report"), task("cleanup", "30 3 * * *"), task("sync", "0 */6 * * *")])
    until(lambda: set(world.cronjobs()) == {"shop-report", "shop-cleanup", "shop-sync"}, "three CronJobs")
    until(lambda: world.condition("shop").get("status") == "True", "Ready=True")
    status = world.get("shop")["status"]
    assert status["observedGeneration"] == world.get("shop")["metadata"]["generation"]
    assert status["deployment"] == {"name": "web", "image": "registry.example.com/shop/web:1.4.2"}
    assert status["taskCount"] == 3
    assert [t["cronJob"] for t in status["tasks"]] == ["shop-report", "shop-cleanup", "shop-sync"]
    assert all(t["nextRunTime"].endswith("Z") for t in status["tasks"])
    assert status["nextRunTime"] == min(t["nextRunTime"] for t in status["tasks"])
    cronjob = world.cronjobs()["shop-report"]
    assert cronjob["metadata"]["ownerReferences"][0]["uid"] == world.get("shop")["metadata"]["uid"]
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    row = kubectl("get", "appschedules", "-n", world.namespace, "--no-headers").stdout.split()
    assert row[:4] == ["shop", "web", "3", "True"]
    assert status["nextRunTime"] in row


def test_changes_converge_removed_tasks_go_and_deletion_collects(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("shop", [task("report"), task("cleanup")])
    until(lambda: set(world.cronjobs()) == {"shop-report", "shop-cleanup"}, "two CronJobs")
    world.patch("shop", {"spec": {"tasks": [task("report", "0 18 * * 5")]}})
    until(lambda: set(world.cronjobs()) == {"shop-report"}, "the removed task's CronJob to go")
    until(lambda: world.cronjobs()["shop-report"]["spec"]["schedule"] == "0 18 * * 5", "the new schedule")
    world.custom.delete_namespaced_custom_object(GROUP, VERSION, world.namespace, PLURAL, "shop")
    until(lambda: world.cronjobs() == {}, "garbage collection of the CronJobs", timeout=60)


def test_hand_edits_and_deletions_are_put_back(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("shop", [task("report")])
    until(lambda: "shop-report" in world.cronjobs(), "the CronJob")
    world.batch.patch_namespaced_cron_job(
        "shop-report", world.namespace, {"spec": {"schedule": "* * * * *", "suspend": True}}
    )
    until(lambda: world.cronjobs()["shop-report"]["spec"]["schedule"] == WEEKLY, "the hand edit to be undone")
    assert world.cronjobs()["shop-report"]["spec"]["suspend"] is False
    uid = world.cronjobs()["shop-report"]["metadata"]["uid"]
    world.batch.delete_namespaced_cron_job("shop-report", world.namespace)
    until(
        lambda: world.cronjobs().get("shop-report", {}).get("metadata", {}).get("uid") not in (None, uid),
        "the CronJob to be recreated",
    )


def test_rollout_reaches_the_cronjobs_within_seconds(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("shop", [task("report"), task("sync", "*/30 * * * *")])
    until(lambda: len(world.cronjobs()) == 2, "the CronJobs")
    world.apps.patch_namespaced_deployment(
        "web",
        world.namespace,
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "app",
                                "image": "registry.example.com/shop/web:2.0",
                                "env": [{"name": "FEATURE", "value": "on"}],
                            }
                        ]
                    }
                }
            }
        },
    )
    until(
        lambda: {image_of(c) for c in world.cronjobs().values()} == {"registry.example.com/shop/web:2.0"},
        "the new image on every CronJob",
        timeout=10,
    )
    env = world.cronjobs()["shop-report"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "FEATURE", "value": "on"} in env
    until(
        lambda: world.get("shop")["status"]["deployment"]["image"] == "registry.example.com/shop/web:2.0",
        "the status image",
    )


def test_missing_deployment_keeps_cronjobs_and_says_so(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("shop", [task("report")])
    until(lambda: world.condition("shop").get("status") == "True", "Ready=True")
    before = world.cronjobs()["shop-report"]["metadata"]["resourceVersion"]
    world.apps.delete_namespaced_deployment("web", world.namespace)
    ready = until(
        lambda: world.condition("shop").get("reason") == "DeploymentNotFound" and world.condition("shop"),
        "DeploymentNotFound",
    )
    assert ready["status"] == "False"
    assert "'web' not found" in ready["message"]
    assert world.cronjobs()["shop-report"]["metadata"]["resourceVersion"] == before  # left as it was
    until(lambda: any(e["reason"] == "DeploymentNotFound" for e in world.events("shop")), "the Event")
    world.deployment(image="registry.example.com/shop/web:1.4.3")
    until(lambda: world.condition("shop").get("status") == "True", "Ready=True again")
    assert image_of(world.cronjobs()["shop-report"]) == "registry.example.com/shop/web:1.4.3"


def test_invalid_task_is_named_and_the_others_reconcile(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("shop", [task("report"), task("broken", "0 17 * * 7"), task("sync", "0 * * * *")])
    until(lambda: set(world.cronjobs()) == {"shop-report", "shop-sync"}, "the two valid CronJobs")
    ready = until(
        lambda: world.condition("shop").get("reason") == "InvalidSpec" and world.condition("shop"), "InvalidSpec"
    )
    assert ready["status"] == "False"
    assert "task 'broken' (spec.tasks[1].schedule)" in ready["message"]
    event = until(lambda: next((e for e in world.events("shop") if e["reason"] == "InvalidSpec"), None), "the Event")
    assert event["type"] == "Warning"
    assert "task 'broken' (spec.tasks[1].schedule)" in event["message"]
    assert "above the maximum 6" in event["message"]
    # fixing it converges to Ready with three CronJobs
    world.patch("shop", {"spec": {"tasks": [task("report"), task("broken", "0 17 * * 0"), task("sync", "0 * * * *")]}})
    until(lambda: len(world.cronjobs()) == 3 and world.condition("shop").get("status") == "True", "the fix")


def test_task_conflict_the_older_appschedule_keeps_the_task(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("blue", [task("report"), task("blue-only")])
    until(lambda: set(world.cronjobs()) == {"blue-report", "blue-blue-only"}, "blue's CronJobs")
    world.appschedule("green", [task("report"), task("green-only")])
    until(lambda: world.condition("green").get("reason") == "TaskConflict", "green's TaskConflict")
    assert "'report'" in world.condition("green")["message"] and "'blue'" in world.condition("green")["message"]
    assert set(world.cronjobs()) == {"blue-report", "blue-blue-only", "green-green-only"}
    assert world.condition("blue")["status"] == "True"
    until(lambda: any(e["reason"] == "TaskConflict" for e in world.events("green")), "the TaskConflict Event")
    world.custom.delete_namespaced_custom_object(GROUP, VERSION, world.namespace, PLURAL, "blue")
    until(lambda: set(world.cronjobs()) == {"green-report", "green-green-only"}, "green to take the task over", 60)
    until(lambda: world.condition("green").get("status") == "True", "green Ready")


def test_resync_of_an_unchanged_appschedule_writes_nothing(world: Namespaced, operator: OperatorProcess) -> None:
    world.deployment()
    world.appschedule("shop", [task("report"), task("cleanup", "30 3 * * *")])
    until(lambda: world.condition("shop").get("status") == "True" and len(world.cronjobs()) == 2, "convergence")
    until(
        lambda: [r["writes"] for r in operator.reconciles(world.namespace, "shop")][-1:] == [0],
        "a reconcile with nothing to do",
    )
    versions = {"shop": world.get("shop")["metadata"]["resourceVersion"]}
    versions.update({n: c["metadata"]["resourceVersion"] for n, c in world.cronjobs().items()})
    seen = len(operator.reconciles(world.namespace, "shop"))
    until(lambda: len(operator.reconciles(world.namespace, "shop")) >= seen + 3, "three resyncs", timeout=30)
    assert [r["writes"] for r in operator.reconciles(world.namespace, "shop")[seen:]] == [0] * (
        len(operator.reconciles(world.namespace, "shop")) - seen
    )
    after = {"shop": world.get("shop")["metadata"]["resourceVersion"]}
    after.update({n: c["metadata"]["resourceVersion"] for n, c in world.cronjobs().items()})
    assert after == versions


def many_tasks(i: int, tasks: int) -> list[dict[str, Any]]:
    """Task names are unique within a namespace, so each AppSchedule's carry its number."""
    return [task(f"t{i:02d}-{j}", f"{j} {i % 24} * * *") for j in range(tasks)]


def expected_names(count: int, tasks: int) -> set[str]:
    return {f"app-{i:02d}-t{i:02d}-{j}" for i in range(count) for j in range(tasks)}


def create_many(world: Namespaced, count: int, tasks: int) -> None:
    for i in range(count):
        world.appschedule(f"app-{i:02d}", many_tasks(i, tasks))


def all_ready(world: Namespaced, count: int) -> bool:
    raw = world.custom.list_namespaced_custom_object(GROUP, VERSION, world.namespace, PLURAL)
    ready = [
        a
        for a in raw["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in (a.get("status") or {}).get("conditions") or [])
    ]
    return len(ready) == count


def test_twenty_appschedules_created_at_once_converge(world: Namespaced) -> None:
    world.deployment()
    create_many(world, 20, 3)
    until(lambda: set(world.cronjobs()) == expected_names(20, 3), "60 CronJobs", timeout=90)
    until(lambda: all_ready(world, 20), "20 Ready AppSchedules", timeout=60)


def test_sigkill_mid_reconcile_converges_without_duplicates_or_orphans(
    world: Namespaced, operator: OperatorProcess
) -> None:
    world.deployment()
    operator.kill()  # SIGKILL: no cleanup of any kind
    try:
        create_many(world, 20, 5)
        operator.start_and_wait()
        wait_for(lambda: world.cronjobs(), timeout=30, what="the first CronJobs", interval=0.02)
        operator.kill()  # in the middle of reconciling the 20
        partial = set(world.cronjobs())
        assert partial < expected_names(20, 5), "the operator finished before it was killed: kill it sooner"
        # while it is down, make one CronJob stale and one orphan-looking (a removed task)
        world.patch("app-00", {"spec": {"tasks": many_tasks(0, 4)}})
    finally:
        operator.start_and_wait()
    expected = expected_names(20, 5) - {"app-00-t00-4"}
    until(lambda: set(world.cronjobs()) == expected, "exactly the expected 99 CronJobs", timeout=120)
    until(lambda: all_ready(world, 20), "20 Ready AppSchedules", timeout=60)
    uids = {
        a["metadata"]["name"]: a["metadata"]["uid"]
        for a in world.custom.list_namespaced_custom_object(GROUP, VERSION, world.namespace, PLURAL)["items"]
    }
    for name, cronjob in world.cronjobs().items():
        (owner,) = cronjob["metadata"]["ownerReferences"]
        assert owner["uid"] == uids[name[:6]]
        assert cronjob["spec"]["schedule"] == f"{name[-1]} {int(name[4:6]) % 24} * * *"


def test_h_resolves_to_what_next_prints_and_stays_through_a_restart(
    world: Namespaced, operator: OperatorProcess, tmp_path: Path
) -> None:
    """H in schedules: each CronJob runs the plain schedule `appschedule next` prints for its task, the
    status says the same, and an operator started again resolves it alike (the CronJob is not rewritten)."""
    world.deployment()
    created = world.appschedule("spread", [task("report", "H H(1-5) * * *"), task("sync", "H/15 * * * *")])
    cronjobs = until(lambda: found if len(found := world.cronjobs()) == 2 else None, "the two CronJobs")
    path = tmp_path / "spread.yaml"
    path.write_text(json.dumps(created))  # JSON is YAML
    printed = subprocess.run(
        [sys.executable, "-m", "appschedule", "next", "-f", str(path), "-n", "1"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    plain = {name: cronjobs[f"spread-{name}"]["spec"]["schedule"] for name in ("report", "sync")}
    for schedule in plain.values():
        assert "H" not in schedule and f"= {schedule} in {world.namespace}," in printed, printed

    def shown() -> dict[str, str]:
        return {t["name"]: t.get("schedule") for t in (world.get("spread").get("status") or {}).get("tasks") or []}

    until(lambda: shown() == plain, "the status to show the resolved schedules")

    def written() -> dict[str, object]:
        # what the operator writes: not the resourceVersion, which the CronJob controller's status bumps
        # whenever `sync` (every 15 minutes) happens to fire during the test
        return {
            name: (c["metadata"].get("generation"), c["metadata"].get("labels"), c["metadata"].get("annotations"),
                   c["spec"], [m for m in c["metadata"].get("managedFields") or [] if m.get("subresource") != "status"])
            for name, c in world.cronjobs().items()
        }  # fmt: skip

    versions = written()
    operator.kill()
    operator.start_and_wait()
    before = len(operator.reconciles(world.namespace, "spread"))
    world.patch("spread", {"metadata": {"labels": {"touched": "yes"}}})
    until(lambda: len(operator.reconciles(world.namespace, "spread")) > before, "a reconcile after the restart")
    assert written() == versions
    assert shown() == plain


def test_the_webhook_certificate_made_for_a_run_leaves_no_file(operator: OperatorProcess) -> None:
    """Without --webhook-cert-dir the operator makes a certificate and its private key in a directory of its
    TMPDIR; once the admission process has read them, they are removed (a run killed later leaves nothing)."""
    tmp = operator.tmp
    assert tmp is not None
    until(lambda: "admission webhooks listening" in operator.text(), "the webhooks to listen")
    until(lambda: not list(tmp.glob("appschedule-webhook-*")), "the certificate's directory to go")


def test_liveness_endpoint_answers(operator: OperatorProcess) -> None:
    with urllib.request.urlopen(operator.liveness, timeout=10) as response:
        assert response.status == 200


def test_a_bad_object_never_stops_the_operator(world: Namespaced, operator: OperatorProcess) -> None:
    world.deployment()
    # objects the API server accepts but nothing else would; then a good one must still converge
    world.appschedule("nodeploy", [task("a")], deployment="missing")
    world.appschedule("nocontainer", [task("b")])
    world.patch("nocontainer", {"spec": {"deploymentRef": {"name": "web", "container": "nope"}}})
    world.appschedule("nozone", [task("c")])
    world.patch("nozone", {"spec": {"timeZone": "Mars/Phobos"}})
    world.appschedule("good", [task("d")])
    until(lambda: "good-d" in world.cronjobs(), "the good AppSchedule to converge")
    until(lambda: world.condition("nocontainer").get("reason") == "InvalidSpec", "InvalidSpec on nocontainer")
    assert "container 'nope' not found" in world.condition("nocontainer")["message"]
    until(lambda: world.condition("nozone").get("reason") == "InvalidSpec", "InvalidSpec on nozone")
    assert "task 'c' (spec.timeZone)" in world.condition("nozone")["message"]
    until(lambda: world.condition("nodeploy").get("reason") == "DeploymentNotFound", "DeploymentNotFound")
    assert operator.process is not None and operator.process.poll() is None


def test_a_cronjob_the_api_server_refuses_is_named_and_the_others_apply(world: Namespaced) -> None:
    world.deployment()
    greedy = task("greedy", resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})  # requests > limits
    world.appschedule("shop", [greedy, task("fine")])
    until(lambda: set(world.cronjobs()) == {"shop-fine"}, "the acceptable CronJob")
    ready = until(
        lambda: world.condition("shop").get("reason") == "InvalidSpec" and world.condition("shop"), "InvalidSpec"
    )
    assert "task 'greedy' (spec.tasks[0]): the API server refused CronJob 'shop-greedy'" in ready["message"]
    assert "must be less than or equal to cpu limit" in ready["message"]


def test_a_cronjob_that_is_not_ours_is_never_taken_over(world: Namespaced) -> None:
    world.deployment()
    world.batch.create_namespaced_cron_job(
        world.namespace,
        {
            "metadata": {"name": "shop-report"},
            "spec": {
                "schedule": "0 0 * * *",
                "jobTemplate": {
                    "spec": {
                        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "x", "image": "x"}]}}
                    }
                },
            },
        },
    )
    world.appschedule("shop", [task("report"), task("other")])
    until(lambda: "shop-other" in world.cronjobs(), "the other task's CronJob")
    until(lambda: "is not this AppSchedule's" in world.condition("shop").get("message", ""), "the refusal")
    mine = world.cronjobs()["shop-report"]
    assert mine["spec"]["schedule"] == "0 0 * * *"
    assert "ownerReferences" not in mine["metadata"]


def probe(operator: OperatorProcess) -> dict[str, Any]:
    with urllib.request.urlopen(operator.liveness, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())["workers"]
        return result


def test_idle_operator_reads_only_from_its_watches(world: Namespaced, operator: OperatorProcess) -> None:
    """Several resync periods with nothing changing: reconciles happen, from memory, with no request."""
    world.deployment()
    world.appschedule("shop", [task("report"), task("cleanup", "30 3 * * *")])
    until(lambda: world.condition("shop").get("status") == "True" and len(world.cronjobs()) == 2, "convergence")
    until(
        lambda: [r["writes"] for r in operator.reconciles(world.namespace, "shop")][-1:] == [0],
        "a reconcile with nothing to do",
    )
    converged = time.time()  # kopf caches probe results for 10 s: take only probes computed after this
    before = until(lambda: (found := probe(operator))["time"] > converged and found, "a fresh probe", timeout=30)
    seen = len(operator.reconciles(world.namespace, "shop"))
    until(lambda: len(operator.reconciles(world.namespace, "shop")) >= seen + 4, "four resyncs", timeout=40)
    after = until(lambda: (found := probe(operator))["time"] > before["time"] and found, "a fresh probe", timeout=30)
    # reconciles read nothing and wrote nothing (counted per namespace: other tests' namespaces may be busy)
    assert after["requests"].get(world.namespace) == before["requests"].get(world.namespace)


def test_owned_job_fields_are_put_back_and_foreign_additions_cause_no_write_loop(
    world: Namespaced, operator: OperatorProcess, kubectl: Kubectl
) -> None:
    world.deployment()
    world.appschedule("shop", [task("report")])
    until(lambda: "shop-report" in world.cronjobs(), "the CronJob")
    job_spec = world.cronjobs()["shop-report"]["spec"]["jobTemplate"]["spec"]
    assert (job_spec["parallelism"], job_spec["completions"]) == (1, 1)
    world.batch.patch_namespaced_cron_job(
        "shop-report", world.namespace, {"spec": {"jobTemplate": {"spec": {"parallelism": 5}}}}
    )
    until(
        lambda: world.cronjobs()["shop-report"]["spec"]["jobTemplate"]["spec"]["parallelism"] == 1,
        "parallelism put back to 1",
    )
    kubectl("set", "env", "-n", world.namespace, "cronjob/shop-report", "EXTRA=1")
    seen = len(operator.reconciles(world.namespace, "shop"))
    until(lambda: len(operator.reconciles(world.namespace, "shop")) >= seen + 4, "four reconciles", timeout=40)
    assert all(r["writes"] == 0 for r in operator.reconciles(world.namespace, "shop")[seen + 1 :])


def test_task_with_empty_resources_inherits_the_containers(world: Namespaced) -> None:
    world.deployment()
    world.appschedule("shop", [task("report", resources={})])
    until(lambda: "shop-report" in world.cronjobs(), "the CronJob")
    run = world.cronjobs()["shop-report"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert run["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}}


def test_a_calendar_s_blackouts_reach_the_cronjobs_of_the_appschedules_naming_it(world: Namespaced) -> None:
    """An AppScheduleCalendar named by an AppSchedule: its blackouts on the task's CronJob, an edit of it there at
    once, and its deletion said in Ready while the task keeps its CronJob (a bad one refused at apply:
    test_bad_input.py)."""
    world.deployment()
    plural = naming.CALENDAR_PLURAL

    def calendar(blackouts: list[dict[str, Any]], name: str = "holidays") -> dict[str, Any]:
        metadata = {"name": name, "namespace": world.namespace}
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": naming.CALENDAR_KIND, "metadata": metadata,
                "spec": {"blackouts": blackouts}}  # fmt: skip

    reformation = {"name": "reformation-day", "dates": ["2026-10-31"], "reason": "public holiday"}
    world.custom.create_namespaced_custom_object(GROUP, VERSION, world.namespace, plural, calendar([reformation]))
    created = world.appschedule("shop", [task("report", timeZone="Europe/Berlin")])
    world.patch("shop", {"spec": {"calendars": ["holidays"]}})

    def carried() -> list[str]:
        cronjob = world.cronjobs().get("shop-report") or {}
        annotations = ((cronjob.get("spec") or {}).get("jobTemplate", {}).get("metadata") or {}).get("annotations")
        return [b["name"] for b in json.loads((annotations or {}).get("appschedule.dev/blackouts") or "[]")]

    until(lambda: carried() == ["reformation-day"], "the calendar's blackout on the CronJob")
    assert created["metadata"]["name"] == "shop"
    christmas = {"name": "christmas", "from": "2026-12-24", "to": "2026-12-26"}
    edit = {"spec": {"blackouts": [reformation, christmas]}}
    world.custom.patch_namespaced_custom_object(GROUP, VERSION, world.namespace, plural, "holidays", edit)
    until(lambda: carried() == ["reformation-day", "christmas"], "the calendar's edit on the CronJob")
    world.custom.delete_namespaced_custom_object(GROUP, VERSION, world.namespace, plural, "holidays")
    until(lambda: world.condition("shop").get("reason") == "CalendarNotFound", "Ready: CalendarNotFound")
    assert "AppScheduleCalendar 'holidays' not found" in world.condition("shop")["message"]
    until(lambda: carried() == [], "the task's CronJob without the calendar's blackouts")
