"""Admission (core/admission.py, shell/webhook_server.py), its certificate and `appschedule key`, no cluster."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from appschedule import cli
from appschedule.core import admission, naming, render
from appschedule.core.admission import check_appschedule, mutate_job
from appschedule.shell import certs, webhook_server

NOW = datetime(2026, 9, 11, 17, 3, 20, tzinfo=UTC)
FIRE = datetime(2026, 9, 11, 17, 0, tzinfo=UTC)


def appschedule(**task: Any) -> dict[str, Any]:
    base = {"name": "report", "schedule": "0 17 * * 5", "command": ["report"], **task}
    return {
        "apiVersion": naming.API_VERSION,
        "kind": naming.KIND,
        "metadata": {"name": "shop", "namespace": "shop", "uid": "u1"},
        "spec": {"deploymentRef": {"name": "web"}, "tasks": [base]},
    }


DEPLOYMENT = {
    "metadata": {"name": "web"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "initContainers": [{"name": "migrate", "image": "app:1"}],
                "containers": [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]}],
            },
        },
    },
}


def job_from_cronjob(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A Job as the CronJob controller (or kubectl create job --from) submits it."""
    cronjob = render.render(appschedule(), DEPLOYMENT).cronjobs["report"]
    template = cronjob["spec"]["jobTemplate"]
    pod = dict(template["spec"]["template"]["spec"], initContainers=[{"name": "migrate", "image": "app:1"}])
    return {
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": template["metadata"]["labels"],
            "annotations": annotations or {},
            "ownerReferences": [{"kind": "CronJob", "name": cronjob["metadata"]["name"], "uid": "c"}],
        },
        "spec": {**template["spec"], "template": {**template["spec"]["template"], "spec": pod}},
    }


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v.get("value") for v in container["env"]}


def test_a_scheduled_job_gets_its_key_everywhere_and_the_ledger_finalizer() -> None:
    job = job_from_cronjob("shop-report-29819100", {naming.CRONJOB_SCHEDULED_TIMESTAMP: "2026-09-11T17:00:00Z"})
    patch = mutate_job(job, NOW)
    assert patch["metadata"]["annotations"] == {
        naming.ANNOTATION_SCHEDULED_TIME: "2026-09-11T17:00:00Z",
        naming.ANNOTATION_IDEMPOTENCY_KEY: "report@2026-09-11T17:00:00Z",
    }
    assert patch["metadata"]["finalizers"] == [naming.LEDGER_FINALIZER]
    spec = patch["spec"]["template"]["spec"]
    for container in [*spec["containers"], *spec["initContainers"]]:
        env = env_of(container)
        assert env["APPSCHEDULE_IDEMPOTENCY_KEY"] == "report@2026-09-11T17:00:00Z"
        assert env["APPSCHEDULE_SCHEDULED_TIME"] == "2026-09-11T17:00:00Z"
    assert env_of(spec["containers"][0])["A"] == "1"  # the app's own env is kept


def test_a_hand_made_job_takes_its_creation_time_rounded_down_to_the_schedule() -> None:
    patch = mutate_job(job_from_cronjob("rerun-by-hand"), datetime(2026, 9, 15, 9, 0, tzinfo=UTC))  # Tuesday
    assert patch["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY] == "report@2026-09-11T17:00:00Z"


def test_a_job_without_our_label_is_left_alone() -> None:
    assert mutate_job({"metadata": {"name": "other", "labels": {"app": "x"}}, "spec": {}}, NOW) == {}


def test_a_malformed_job_still_gets_a_key_from_its_name() -> None:
    body = {
        "metadata": {
            "name": "shop-report-29819100",
            "labels": {naming.LABEL_TASK: "report", naming.LABEL_APPSCHEDULE: "shop"},
        },
        "spec": "not a mapping",
    }
    patch = mutate_job(body, NOW)
    assert patch["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY] == "report@2026-09-11T17:00:00Z"


def test_validation_refuses_with_the_conditions_message() -> None:
    assert check_appschedule(appschedule()) is None
    message = check_appschedule(appschedule(schedule="0 17 * * 5 2026"))
    assert message is not None and "task 'report' (spec.tasks[0].schedule)" in message
    zone = check_appschedule(appschedule(timeZone="Mars/Olympus"))
    assert zone is not None and "spec.tasks[0].timeZone" in zone


def test_generated_certificate_serves_tls_for_its_hosts(tmp_path: Path) -> None:
    files = certs.generate(tmp_path, ["127.0.0.1", "webhook.ns.svc"])
    assert files.ca is not None
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(files.cert, files.key)  # the key matches the certificate
    client = ssl.create_default_context(cafile=str(files.ca))
    assert client.verify_mode == ssl.CERT_REQUIRED
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0
    assert certs.from_dir(tmp_path) == files
    with pytest.raises(FileNotFoundError, match=r"tls\.key"):
        certs.from_dir(tmp_path / "missing")


def test_key_command_prints_the_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cronjob = naming.cronjob_name("shop", "report")
    for name, value in {
        "APPSCHEDULE_NAME": "shop",
        "APPSCHEDULE_TASK": "report",
        "APPSCHEDULE_SCHEDULE": "* * * * *",
        "APPSCHEDULE_JOB_NAME": f"{cronjob}-29819100",
    }.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["key"]) == 0
    assert capsys.readouterr().out.strip() == "report@2026-09-11T17:00:00Z"
    monkeypatch.setenv("APPSCHEDULE_SCHEDULED_TIME", "2026-09-11T17:05:00Z")
    assert cli.main(["key", "--time"]) == 0
    assert capsys.readouterr().out.strip() == "2026-09-11T17:05:00Z"
    monkeypatch.delenv("APPSCHEDULE_SCHEDULED_TIME")
    monkeypatch.delenv("APPSCHEDULE_TASK")
    assert cli.main(["key"]) == 1
    assert "APPSCHEDULE_TASK" in capsys.readouterr().err


def test_the_author_of_a_spec_must_be_allowed_to_create_jobs() -> None:
    user = {"username": "alice", "uid": "u1", "groups": ["dev", "system:authenticated"], "extra": {"scope": ("a",)}}
    review = admission.job_access_review(user, "shop")
    assert review["spec"] == {
        "user": "alice",
        "uid": "u1",
        "groups": ["dev", "system:authenticated"],
        "extra": {"scope": ["a"]},
        "resourceAttributes": {"namespace": "shop", "verb": "create", "group": "batch", "resource": "jobs"},
    }
    assert admission.access_refusal(user, "shop", {"allowed": True}) is None
    assert admission.access_refusal(user, "shop", {"allowed": True, "denied": True}) is not None
    refusal = admission.access_refusal(user, "shop", {"allowed": False, "reason": "no RBAC rule"})
    assert refusal and refusal.startswith("alice may not create Jobs in namespace shop (no RBAC rule)")


def test_only_a_spec_change_needs_the_review() -> None:
    old = {"metadata": {"labels": {}}, "spec": {"tasks": [1]}}
    relabelled = {"metadata": {"labels": {"team": "a"}}, "spec": {"tasks": [1]}}
    assert admission.spec_changed("CREATE", None, old)
    assert not admission.spec_changed("UPDATE", old, relabelled)
    assert admission.spec_changed("UPDATE", old, {"spec": {"tasks": [2]}})
    assert not admission.spec_changed("DELETE", old, None)


def answered(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    response: dict[str, Any] = answer["response"]
    return response


def test_the_key_webhook_answers_with_a_json_patch_that_keys_the_job() -> None:
    job = job_from_cronjob("shop-report-29819100", {naming.CRONJOB_SCHEDULED_TIMESTAMP: "2026-09-11T17:00:00Z"})
    del job["metadata"]["annotations"]  # a Job with no annotations at all: the patch must create the map
    response = answered(
        webhook_server.key_job({"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u1", "object": job}}, NOW)
    )
    assert response["uid"] == "u1" and response["allowed"] is True and response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    keyed = jsonpatch.apply_patch(job, ops)
    assert keyed["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY] == "report@2026-09-11T17:00:00Z"
    assert keyed["metadata"]["finalizers"] == [naming.LEDGER_FINALIZER]
    pod = keyed["spec"]["template"]["spec"]
    for container in [*pod["containers"], *pod["initContainers"]]:
        assert env_of(container)["APPSCHEDULE_IDEMPOTENCY_KEY"] == "report@2026-09-11T17:00:00Z"
    assert keyed == webhooks_merge(job, admission.mutate_job(job, NOW))


def webhooks_merge(obj: dict[str, Any], merge: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 written out again, independently of admission.json_patch's."""
    out = dict(obj)
    for key, value in merge.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            inner = out.get(key)
            out[key] = webhooks_merge(inner if isinstance(inner, dict) else {}, value)
        else:
            out[key] = value
    return out


def test_a_job_the_key_webhook_cannot_read_is_admitted_unkeyed() -> None:
    for review in ({}, {"request": None}, {"request": {"uid": "u", "object": "a string"}}):
        response = answered(webhook_server.key_job(review, NOW))
        assert response["allowed"] is True and "patch" not in response


def test_validation_answers_refusals_with_code_and_message() -> None:
    async def never(_: Any) -> dict[str, Any]:
        raise AssertionError("an invalid spec is refused before any SubjectAccessReview")

    async def allowed(_: Any) -> dict[str, Any]:
        return {"allowed": True}

    async def denied(_: Any) -> dict[str, Any]:
        return {"allowed": False, "reason": "no RBAC"}

    async def failing(_: Any) -> dict[str, Any]:
        raise TimeoutError

    def review(body: dict[str, Any], operation: str = "CREATE", old: Any = None) -> dict[str, Any]:
        return {
            "request": {
                "uid": "v",
                "operation": operation,
                "object": body,
                "oldObject": old,
                "userInfo": {"username": "alice"},
            }
        }

    bad = appschedule(schedule="61 * * * *")
    response = answered(asyncio.run(webhook_server.check_appschedule(review(bad), never)))
    assert response["allowed"] is False and response["status"]["code"] == 422
    assert "task 'report'" in response["status"]["message"]
    good = appschedule()
    assert answered(asyncio.run(webhook_server.check_appschedule(review(good), allowed)))["allowed"] is True
    response = answered(asyncio.run(webhook_server.check_appschedule(review(good), denied)))
    assert (
        response["status"]["code"] == 403
        and "alice may not create Jobs in namespace shop (no RBAC)" in (response["status"]["message"])
    )
    response = answered(asyncio.run(webhook_server.check_appschedule(review(good), failing)))
    assert response["status"]["code"] == 503 and "try again (TimeoutError)" in response["status"]["message"]
    relabelled = {**good, "metadata": {**good["metadata"], "labels": {"x": "y"}}}
    assert answered(asyncio.run(webhook_server.check_appschedule(review(relabelled, "UPDATE", good), never)))["allowed"]


def test_a_burst_of_reviews_is_answered_within_the_deadline_and_the_late_ones_never_run() -> None:
    """A slow API server (each SubjectAccessReview 0.2 s) and 40 requests at once on the admission process's
    pool: every request is answered within its deadline, the ones still queued at the deadline refused with
    503 and dropped from the queue: no review is sent after its request's deadline, none left to the API
    server's timeout."""
    pool = ThreadPoolExecutor(max_workers=webhook_server.REVIEW_THREADS)
    started: dict[int, float] = {}
    sent: dict[int, float] = {}
    deadline = 1.0

    def slow_review(n: int, body: dict[str, Any]) -> dict[str, Any]:
        sent[n] = time.monotonic()
        time.sleep(0.2)
        return {"allowed": True}

    async def burst() -> list[tuple[float, dict[str, Any]]]:
        loop = asyncio.get_running_loop()

        async def one(n: int) -> tuple[float, dict[str, Any]]:
            started[n] = time.monotonic()
            review = {"request": {"uid": f"r{n}", "operation": "CREATE", "object": appschedule(),
                                  "userInfo": {"username": "alice"}}}  # fmt: skip
            answer = await webhook_server.check_appschedule(
                review, lambda r: loop.run_in_executor(pool, slow_review, n, r), deadline=deadline
            )
            return time.monotonic() - started[n], answered(answer)

        return await asyncio.gather(*(one(n) for n in range(40)))

    try:
        results = asyncio.run(burst())
    finally:
        pool.shutdown(wait=True)
    allowed = [r for _, r in results if r["allowed"]]
    refused = [r for _, r in results if not r["allowed"]]
    assert max(seconds for seconds, _ in results) < deadline + 1.0  # the deadline, and a loaded machine's lag
    assert allowed and refused and len(allowed) <= 24  # 4 threads, 0.2 s each, for 1 s
    assert all(r["status"]["code"] == 503 and "try again (TimeoutError)" in r["status"]["message"] for r in refused)
    late = {n: round(at - started[n], 2) for n, at in sent.items() if at > started[n] + deadline + 0.25}
    assert not late, f"reviews sent after their request's deadline: {late}"
    assert len(sent) < 40  # the ones still queued at their deadline were never sent


def test_the_configurations_call_each_webhook_at_its_path() -> None:
    url = admission.configurations("t.appschedule.dev", {"keys", "validation"}, {"url": "https://h:1", "caBundle": "Q"})
    mutating, validating = url
    assert mutating["kind"] == "MutatingWebhookConfiguration" and validating["kind"] == "ValidatingWebhookConfiguration"
    (key,) = mutating["webhooks"]
    assert key["name"] == "key-jobs.t.appschedule.dev" and key["failurePolicy"] == "Ignore"
    assert key["clientConfig"] == {"url": "https://h:1/key-jobs", "caBundle": "Q"}
    assert key["objectSelector"]["matchExpressions"] == [{"key": naming.LABEL_TASK, "operator": "Exists"}]
    assert validating["webhooks"][0]["clientConfig"]["url"] == "https://h:1/check-appschedules"
    service = {"service": {"namespace": "ops", "name": "op", "port": 443}}
    (only,) = admission.configurations("t", {"validation"}, service)
    assert only["webhooks"][0]["clientConfig"]["service"] == {
        "namespace": "ops",
        "name": "op",
        "port": 443,
        "path": "/check-appschedules",
    }
    assert service["service"] == {"namespace": "ops", "name": "op", "port": 443}  # not changed in place


def test_the_chart_and_the_operator_configure_the_same_webhooks() -> None:
    chart = (Path(__file__).parents[2] / "charts" / "appschedule-operator" / "templates" / "webhook.yaml").read_text()
    for body in admission.configurations("appschedule.dev", {"keys", "validation"}, {"url": "https://h:1"}):
        (hook,) = body["webhooks"]
        assert f"- name: {hook['name']}" in chart and f"path: /{hook['name'].split('.')[0]}" in chart


def test_liveness_says_when_the_loop_is_silent_or_a_worker_stuck() -> None:
    assert webhook_server.liveness({}, 100.0)[0] == 503
    assert webhook_server.liveness({"beat": 90.0, "workers": {"queued": 0}}, 100.0) == (200, {"workers": {"queued": 0}})
    code, body = webhook_server.liveness({"beat": 30.0}, 100.0)
    assert code == 500 and body["error"] == "the controller's event loop has not run for 70s"
    assert webhook_server.liveness({"beat": 99.0, "stuck": "a worker has been stuck for 130s"}, 100.0)[0] == 500


def test_the_heartbeat_is_read_as_written() -> None:
    heartbeat = webhook_server.Heartbeat()
    heartbeat.beat({"queued": 3, "requests": {f"ns-{i}": i for i in range(10)}}, None)
    state = heartbeat.read()
    assert state["workers"]["queued"] == 3 and state["stuck"] is None
    heartbeat.beat({"requests": {f"namespace-{i}": i for i in range(10_000)}}, None)  # past the buffer
    assert heartbeat.read()["workers"] is None and heartbeat.read()["beat"] > 0


_leaf = st.one_of(st.none(), st.integers(), st.text(max_size=3))
_tree = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c/d", "e~f"]), inner, max_size=3)
    ),
    max_leaves=12,
)
_objects = st.dictionaries(st.sampled_from(["a", "b", "c/d", "e~f"]), _tree, max_size=4)


@given(_objects, _objects)
@settings(max_examples=400, deadline=None)
def test_the_json_patch_applies_the_merge_whatever_the_object(obj: dict[str, Any], merge: dict[str, Any]) -> None:
    """Built from the merge alone (no diff of the object), it does exactly what RFC 7386 says."""
    assert jsonpatch.apply_patch(obj, admission.json_patch(obj, merge)) == webhooks_merge(obj, merge)


def test_the_key_webhooks_patch_grows_with_what_it_adds_not_with_the_job() -> None:
    """A 3.7 MiB Job (long args in each of three containers): the patch is each container's env and the
    annotations, a few hundred bytes, whatever the rest of the Job holds."""
    job = job_from_cronjob("shop-report-29819100", {naming.CRONJOB_SCHEDULED_TIMESTAMP: "2026-09-11T17:00:00Z"})
    pod = job["spec"]["template"]["spec"]

    class Untouched(list[str]):  # the Job's own content: never copied, never walked into
        def __deepcopy__(self, memo: Any) -> Any:
            raise AssertionError("the patch copied what the webhook does not change")

    big = Untouched(["x" * 1024] * 1200)
    pod["containers"] = [{**pod["containers"][0], "name": f"c{i}", "args": big} for i in range(3)]
    assert len(json.dumps(job)) > 3_600_000
    ops = admission.json_patch(job, admission.mutate_job(job, NOW))
    assert len(json.dumps(ops)) < 8_000, [op["path"] for op in ops]
    assert {op["path"] for op in ops} >= {f"/spec/template/spec/containers/{i}/env" for i in range(3)}
    assert jsonpatch.apply_patch(job, ops, in_place=True) == webhooks_merge(job, admission.mutate_job(job, NOW))
