"""`kubectl appschedule ui`: the page's data (plugin.page, pure) and the local server's rules (shell/pageserver.py,
real HTTP on 127.0.0.1). The page in a real browser against the real API server: tests/integration/test_page.py."""

from __future__ import annotations

import http.client
import json
import re
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from appschedule.core import naming
from appschedule.plugin import MARKS, metric_stretches, page
from appschedule.shell.pageserver import COOKIE, TOKEN_HEADER, PageServer, page_html

NOW = datetime(2026, 10, 25, 3, 0, tzinfo=UTC)  # Berlin fell back at 01:00Z: 02:00-03:00 local ran twice


def appschedule(recent: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": "shop"},
        "spec": {"deploymentRef": {"name": "web"}, "tasks": [{"name": "nightly"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "RunsHealthy", "status": "False"}],
            "tasks": [
                {
                    "name": "nightly",
                    "schedule": "0,30 2 * * *",  # an hour with several fires, repeated at the fall-back
                    "timeZone": "Europe/Berlin",
                    "counts": {"runs": 3, "missed": 1, "duplicates": 1, "absorbed": 1},
                    "recent": recent,
                }
            ],
        },
    }


RECENT: list[dict[str, Any]] = [
    {"scheduledTime": "2026-10-25T00:00:00Z", "state": "Succeeded", "job": "shop-nightly-29870640", "key": "k0"},
    {"scheduledTime": "2026-10-25T00:30:00Z", "state": "Missed"},
    {"scheduledTime": "2026-10-25T01:00:00Z", "state": "Failed", "job": "shop-nightly-29870700", "failure": "exit 3"},
    {"scheduledTime": "2026-10-25T01:30:00Z", "state": "Succeeded", "job": "j3", "duplicates": 1, "absorbed": 1},
]


def job(name: str, scheduled: str, *, kind: str | None = None, ended: str | None = None, task: str = "nightly") -> Any:
    annotations = {
        naming.ANNOTATION_SCHEDULED_TIME: scheduled,
        naming.ANNOTATION_IDEMPOTENCY_KEY: f"{task}@{scheduled}",
    }
    if kind:
        annotations[naming.ANNOTATION_RUN_KIND] = kind
    conditions = [{"type": ended, "status": "True", "reason": "BackoffLimitExceeded", "message": "1 failed"}]
    return {
        "metadata": {
            "name": name, "namespace": "shop", "annotations": annotations,
            "labels": {naming.LABEL_APPSCHEDULE: "shop", naming.LABEL_TASK: task},
        },
        "status": {"conditions": conditions if ended else []},
    }  # fmt: skip


def test_a_timeline_is_the_status_then_the_jobs_it_no_longer_holds_each_with_its_source() -> None:
    jobs = [
        job("shop-nightly-29870640", "2026-10-25T00:00:00Z", ended="Complete"),  # the status holds it: once
        job("shop-nightly-29870580", "2026-10-24T23:00:00Z", ended="Complete"),  # older than the status' runs
        job("shop-nightly-x1", "2026-10-25T02:40:07Z", kind="manual"),  # a manual run, still active
        job("shop-nightly-x2", "2026-10-25T01:00:00Z", kind="rerun", ended="Failed"),  # a rerun of the failed fire
        job("other", "2026-10-25T01:00:00Z", task="weekly"),  # another task's
        {"metadata": {"name": "odd", "labels": {naming.LABEL_TASK: "nightly"}}, "status": "what"},  # no time: left out
    ]
    found = page([appschedule(RECENT)], jobs, [], NOW, allowed={"shop": {"run": True}})
    (shop,) = found["appschedules"]
    (nightly,) = shop["tasks"]
    line = [(f["scheduledTime"], f["mark"], f["source"], f.get("kind")) for f in nightly["timeline"]]
    assert line == [
        ("2026-10-24T23:00:00Z", ".", "jobs", None),
        ("2026-10-25T00:00:00Z", ".", "status", None),
        ("2026-10-25T00:30:00Z", "M", "status", None),
        ("2026-10-25T01:00:00Z", "F", "status", None),
        ("2026-10-25T01:00:00Z", "F", "jobs", "rerun"),
        ("2026-10-25T01:30:00Z", "d", "status", None),
        ("2026-10-25T02:40:07Z", "A", "jobs", "manual"),
    ]
    rerun = nightly["timeline"][4]
    assert rerun["failure"] == "BackoffLimitExceeded: 1 failed" and rerun["key"] == "nightly@2026-10-25T01:00:00Z"
    assert shop["may"] == {"run": True, "backfill": False} and found["marks"] == MARKS
    # the next fires in the zone and in UTC: 02:00 and 02:30 of the 26th, in winter time
    assert [(n["local"], n["utc"]) for n in nightly["next"]][:2] == [
        ("2026-10-26 02:00 CET", "2026-10-26T01:00:00Z"),
        ("2026-10-26 02:30 CET", "2026-10-26T01:30:00Z"),
    ]


def test_a_namespace_never_reviewed_may_do_nothing_and_events_are_the_appschedules_newest_first() -> None:
    events: list[dict[str, Any]] = [
        {"involvedObject": {"kind": "AppSchedule", "namespace": "shop", "name": "shop"}, "type": "Warning",
         "reason": "MissedRun", "message": "nightly missed", "lastTimestamp": "2026-10-25T00:31:00Z", "count": 2},
        {"involvedObject": {"kind": "AppSchedule", "namespace": "shop", "name": "shop"}, "type": "Normal",
         "reason": "Reconciled", "message": "x" * 1000, "lastTimestamp": "2026-10-25T02:00:00Z"},
        {"involvedObject": {"kind": "Pod", "namespace": "shop", "name": "shop"}, "reason": "Pulled"},
        {"involvedObject": "garbage"},
    ]  # fmt: skip
    (shop,) = page([appschedule([])], [], events, NOW)["appschedules"]
    assert shop["may"] == {"run": False, "backfill": False}
    assert [(e["reason"], e["count"]) for e in shop["events"]] == [("Reconciled", 1), ("MissedRun", 2)]
    assert len(shop["events"][0]["message"]) == 300


def test_odd_objects_make_a_page_not_an_error() -> None:
    odd = [
        {"metadata": "x", "spec": [], "status": {"tasks": [{"name": "t", "recent": "no"}, 7]}},
        {},
        appschedule([{"scheduledTime": "2026-10-25T00:00:00Z", "state": "Succeeded", "job": ["a", "list"]}]),
    ]
    odd[2]["status"]["tasks"][0]["counts"] = {"runs": "x", "missed": [1]}
    found = page(odd, [{"metadata": None}, {}], [{}], NOW)
    json.dumps(found)  # what the server sends
    assert len(found["appschedules"]) == 3


# ---------------------------------------------------------------------------------------------------
# The local server


@pytest.fixture
def served() -> Any:
    asked: list[dict[str, Any]] = []

    def act(body: dict[str, Any]) -> dict[str, Any]:
        if body.get("task") == "missing":
            raise ValueError('task "missing" has no CronJob')
        if body.get("task") == "broken":
            raise RuntimeError("the plugin failed")
        asked.append(body)
        return {"message": "created"}

    reads = []

    def snapshot() -> dict[str, Any]:
        reads.append(1)
        return {"now": "x", "appschedules": [], "reads": len(reads)}

    def follow(changed: Any, stop: threading.Event) -> None:
        while not stop.wait(0.05):
            if asked and asked[-1].get("bump"):
                asked[-1]["bump"] = False
                changed()

    server = PageServer(snapshot, act, follow, port=0)
    server.start()
    yield server, asked
    server.close()


def request(server: PageServer, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, bytes, Any]:
    """A request as the page makes it (its cookie, its Host) unless ``headers`` say otherwise."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    headers.setdefault("Host", f"127.0.0.1:{server.port}")
    headers.setdefault("Cookie", f"{COOKIE}={server.token}")
    connection.request(method, path, body=body or None, headers=headers)
    answer = connection.getresponse()
    return answer.status, answer.read(), answer.headers


def test_the_page_is_small_self_contained_and_runs_only_its_own_script(served: Any) -> None:
    server, _ = served
    status, body, headers = request(server, "GET", "/")
    assert status == 200 and len(body) < 200_000
    text = body.decode()
    assert server.token in text and "__APPSCHEDULE" not in text
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", text), "an asset from elsewhere"
    nonce = re.search(r"<script nonce=\"([^\"]+)\">", text)
    assert nonce and f"script-src 'nonce-{nonce.group(1)}'" in headers["Content-Security-Policy"]
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert request(server, "GET", "/")[1] != body  # a nonce a response


def test_a_request_for_another_host_is_refused_dns_rebinding(served: Any) -> None:
    server, _ = served
    assert request(server, "GET", "/api/state", Host=f"evil.example:{server.port}")[0] == 403
    assert request(server, "GET", "/api/state", Host=f"localhost:{server.port}")[0] == 200


def test_an_action_needs_the_pages_token_in_a_header_and_json(served: Any) -> None:
    server, asked = served
    body = json.dumps({"action": "run", "namespace": "shop", "name": "shop", "task": "nightly"}).encode()
    json_type = {"Content-Type": "application/json"}
    assert request(server, "POST", "/api/act", body, **json_type)[0] == 403  # no token
    assert request(server, "POST", "/api/act", body, **json_type, **{TOKEN_HEADER: "guess"})[0] == 403
    form = {"Content-Type": "application/x-www-form-urlencoded", TOKEN_HEADER: server.token}
    assert request(server, "POST", "/api/act", body, **form)[0] == 415
    assert asked == []
    status, said, _ = request(server, "POST", "/api/act", body, **json_type, **{TOKEN_HEADER: server.token})
    assert status == 200 and json.loads(said) == {"message": "created"} and len(asked) == 1
    refused = json.dumps({"action": "run", "task": "missing"}).encode()
    status, said, _ = request(server, "POST", "/api/act", refused, **json_type, **{TOKEN_HEADER: server.token})
    assert status == 400 and "missing" in json.loads(said)["error"]


def test_the_state_is_read_again_only_after_a_change_and_the_stream_says_so(served: Any) -> None:
    server, asked = served
    first = json.loads(request(server, "GET", "/api/state")[1])
    assert json.loads(request(server, "GET", "/api/state")[1]) == first  # nothing changed: not read again
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request(
        "GET", "/api/changes", headers={"Host": f"127.0.0.1:{server.port}", "Cookie": f"{COOKIE}={server.token}"}
    )
    stream = connection.getresponse()
    assert stream.headers["Content-Type"] == "text/event-stream"
    assert stream.readline() == b"event: change\n"
    version = int(stream.readline().split(b":")[1])
    stream.readline()
    asked.append({"bump": True})  # the watch sees something
    assert stream.readline() == b"event: change\n"
    assert int(stream.readline().split(b":")[1]) > version
    connection.close()
    assert json.loads(request(server, "GET", "/api/state")[1])["reads"] == first["reads"] + 1


def test_page_html_fills_token_and_nonce() -> None:
    text = page_html("tok", "non").decode()
    assert 'const TOKEN = "tok"' in text and 'nonce="non"' in text


def test_prometheus_answers_become_hourly_stretches_each_said_as_such() -> None:
    def series(task: str, values: list[Any], **labels: str) -> dict[str, Any]:
        return {"metric": {"namespace": "shop", "appschedule": "shop", "task": task, **labels}, "values": values}

    fall_back = datetime(2026, 10, 25, 1, 0, tzinfo=UTC).timestamp()  # Berlin's repeated hour ends here, in UTC
    answers = {
        "runs": {"status": "success", "data": {"resultType": "matrix", "result": [
            series("nightly", [(fall_back, "2.0000001"), (fall_back + 3600, "0")], result="started"),
            series("nightly", [(fall_back, "1.9"), (fall_back + 3600, "NaN")], result="succeeded"),
            series("nightly", [("garbage", "1"), [fall_back], {"t": 1}, (fall_back, "+Inf"), (1e300, "1")],
                   result="failed"),
        ]}},
        "missed": {"data": {"result": [series("nightly", [(fall_back + 3600, "1")])]}},
        "duplicates": {"data": {"result": "odd"}},
    }  # fmt: skip
    stretches = metric_stretches(answers)
    assert stretches == {
        ("shop", "shop", "nightly"): [
            {"end": "2026-10-25T01:00:00Z", "counts": {"started": 2, "succeeded": 2}, "source": "metrics"},
            {"end": "2026-10-25T02:00:00Z", "counts": {"missed": 1}, "source": "metrics"},
        ]
    }
    found = page([appschedule(RECENT)], [], [], NOW, metrics=stretches, metrics_said="Prometheus at http://p")
    (nightly,) = found["appschedules"][0]["tasks"]
    assert [h["end"] for h in nightly["hourly"]] == ["2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"]
    assert found["sources"]["metrics"] == "Prometheus at http://p"
    assert "not asked" in page([], [], [], NOW)["sources"]["metrics"]


def test_only_the_address_printed_opens_the_page_and_every_read_needs_its_cookie(served: Any) -> None:
    """Another user of the machine can reach 127.0.0.1 but has not the token: they read nothing, do nothing."""
    server, _ = served
    assert request(server, "GET", "/", Cookie="")[0] == 403
    assert request(server, "GET", "/?token=guess", Cookie="")[0] == 403
    assert request(server, "GET", "/api/state", Cookie="")[0] == 403
    assert request(server, "GET", "/api/changes", Cookie=f"{COOKIE}=guess")[0] == 403
    status, _, headers = request(server, "GET", server.url.removeprefix(server.base[:-1]), Cookie="")
    assert status == 200
    cookie = headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}={server.token};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    body = json.dumps({"action": "run", "namespace": "shop", "name": "shop", "task": "nightly"}).encode()
    headers_only = {"Content-Type": "application/json", TOKEN_HEADER: server.token, "Cookie": ""}
    assert request(server, "POST", "/api/act", body, **headers_only)[0] == 403  # the header alone is not enough


def test_bad_requests_get_an_answer_and_a_closed_connection(served: Any) -> None:
    server, asked = served
    json_type = {"Content-Type": "application/json", TOKEN_HEADER: server.token}
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.putrequest("POST", "/api/act", skip_host=True)
    for name, value in {"Host": f"127.0.0.1:{server.port}", "Cookie": f"{COOKIE}={server.token}",
                        "Content-Length": "twelve", **json_type}.items():  # fmt: skip
        connection.putheader(name, value)
    connection.endheaders()
    answer = connection.getresponse()
    assert answer.status == 400 and answer.getheader("Connection") == "close"
    deep = b"[" * 4000
    assert request(server, "POST", "/api/act", deep, **json_type)[0] == 400
    broken = json.dumps({"action": "run", "task": "broken"}).encode()
    status, said, _ = request(server, "POST", "/api/act", broken, **json_type)
    assert status == 500 and "the plugin failed" in json.loads(said)["error"]
    assert asked == []
