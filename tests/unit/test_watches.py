"""The operator's own watches (shell/watches.py): a stream read into events whatever the reads' sizes, a listing
that replaces what the store held of its kind in its scope, decisions held until every kind's listing is in, and
a first listing that fails ending that wait only for the pods."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import socket
from datetime import UTC, datetime
from typing import Any

import urllib3
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from appschedule.core import naming
from appschedule.core.keys import rfc3339
from appschedule.core.view import PodView, project_appschedule, project_cronjob
from appschedule.shell.controller import WATCHED, Controller, Options
from appschedule.shell.store import Store
from appschedule.shell.watches import KINDS, Gone, Listing, Watch, _batches, _gone

from .test_ledger import job

FIRE = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # 01:30 CET, half an hour before Europe/Berlin springs forward


def _events(count: int) -> list[dict[str, object]]:
    return [{"type": "MODIFIED", "object": {"metadata": {"name": f"p-{i}", "resourceVersion": str(i)},
                                            "note": "ü" * (i % 5)}} for i in range(count)]  # fmt: skip


@given(count=st.integers(0, 30), size=st.integers(1, 200), trailing=st.booleans())
def test_the_stream_gives_every_event_once_in_order_whatever_the_reads(count: int, size: int, trailing: bool) -> None:
    events = _events(count)
    data = b"\n".join(json.dumps(e, ensure_ascii=False).encode() for e in events) + (b"\n" if trailing else b"")
    response = urllib3.HTTPResponse(body=io.BytesIO(data), preload_content=False)
    got = [event for batch in _batches(response, size) for event in batch]
    assert got == events


def _pod(name: str, job_name: str, namespace: str = "shop", version: str = "1") -> PodView:
    return PodView(namespace=namespace, name=name, resource_version=version, job=job_name,
                   created=rfc3339(FIRE), finished=True, claim=None, failure=None)  # fmt: skip


def test_a_listing_replaces_the_pods_of_its_scope_and_wakes_for_one_deleted_meanwhile() -> None:
    """A relisting after the watch expired: an unfinished pod of an ended Job that the listing lacks was deleted
    while the watch was down (its AppSchedule is woken: the ledger may wait for it); pods of another namespace stay
    when the listing is of one namespace, and go when it is of every namespace."""
    store = Store()
    ended = dataclasses.replace(job(FIRE), outcome="Complete")
    store.put_job(ended)
    kept, other = _pod("a", ended.name), _pod("c", "x", namespace="elsewhere")
    gone = dataclasses.replace(_pod("b", ended.name), finished=False)
    for view in (kept, gone, other):
        store.put_pod(view)
    assert store.replace("pods", "shop", [dataclasses.replace(kept, resource_version="2")]) == {("shop", "shop")}
    assert [p.name for p in store.pods_of("shop", ended.name)] == ["a"]
    assert ("elsewhere", "c") in store.pods
    assert store.replace("pods", None, []) == set()  # finished pods going wake nothing
    assert store.pods == {}


def test_decisions_wait_for_every_kinds_first_listing() -> None:
    controller = Controller(cluster=None, options=Options())  # type: ignore[arg-type]  # no request is made
    for kind in WATCHED[:-1]:
        controller.listing_done(kind)
        assert not controller.listed.is_set(), kind
    controller.listing_done(WATCHED[-1])
    assert controller.listed.is_set()


def _cronjob(name: str, task: str) -> dict[str, object]:
    labels = {naming.LABEL_APPSCHEDULE: "shop", naming.LABEL_TASK: task, naming.MANAGED_BY: naming.MANAGER}
    return {"metadata": {"namespace": "shop", "name": name, "resourceVersion": "1", "labels": labels},
            "spec": {"schedule": "30 2 * * *", "timeZone": "Europe/Berlin"}}  # fmt: skip


def test_a_relisting_drops_a_cronjob_deleted_meanwhile_and_wakes_its_appschedule() -> None:
    store = Store()
    kept, gone = (project_cronjob(_cronjob(name, task)) for name, task in (("shop-a", "a"), ("shop-b", "b")))
    for view in (kept, gone):
        store.put_cronjob(view)
    assert store.replace("cronjobs", "shop", [kept]) == {("shop", "shop")}
    assert set(store.cronjobs) == {("shop", "shop-a")}
    assert store.replace("cronjobs", "shop", [kept]) == set()  # the same listing again: nothing changed


def test_a_job_gone_with_the_ledgers_finalizer_and_no_deletion_was_let_go_not_deleted() -> None:
    meta = {"namespace": "shop", "name": "j", "finalizers": [naming.LEDGER_FINALIZER]}
    assert _gone({"metadata": meta}) == Gone("shop", "j", held=True)  # its task label removed
    deleting = meta | {"deletionTimestamp": rfc3339(FIRE)}
    assert _gone({"metadata": deleting}) == Gone("shop", "j", held=False)
    assert _gone({"metadata": {"name": "j"}}) == Gone("", "j")
    assert _gone({"metadata": "odd"}) == Gone("", "")  # anything from the cluster is reported, never raised


def _failed_first_listings(kind: str, seconds: float) -> list[Listing]:
    """A real client against no API server (a closed port): what the watch of ``kind`` hands the loop."""
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{_closed_port()}"
    configuration.retries = 0
    got: list[Listing] = []

    async def watch() -> None:
        loop = asyncio.get_running_loop()
        watch = Watch(KINDS[kind], client.ApiClient(configuration), ["shop"], loop, got.append, lambda _: None)
        watch.start()
        try:
            for _ in range(int(seconds / 0.05)):
                if got:
                    return
                await asyncio.sleep(0.05)
        finally:
            watch.stop()

    asyncio.run(watch())
    return got


def test_a_first_listing_of_pods_that_fails_ends_the_wait_for_it_incomplete() -> None:
    """The first failure hands the loop an incomplete listing at once, so decisions wait for no listing of pods
    that may never come (the runs lose only their pods' detail); the watch goes on trying."""
    got = _failed_first_listings("pods", 5.0)
    assert [(g.kind, g.namespace, g.views, g.complete) for g in got] == [("pods", "shop", [], False)]


def test_a_first_listing_of_jobs_that_fails_holds_decisions() -> None:
    """Without every Job, the ledger would count a run that ended while the operator was down as missing: no
    listing is handed over until one succeeds (the first retry comes after 1 s)."""
    assert _failed_first_listings("jobs", 1.6) == []


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _appschedule(name: str, generation: int, observed: int | None) -> dict[str, object]:
    status = {"observedGeneration": observed} if observed is not None else {}
    return {"metadata": {"namespace": "shop", "name": name, "generation": generation, "resourceVersion": "1"},
            "spec": {"deploymentRef": {"name": "web"}, "tasks": []}, "status": status}  # fmt: skip


def test_after_a_restart_an_appschedule_edited_meanwhile_is_planned_first() -> None:
    """The first listings wake every AppSchedule in the background lane; one whose generation no status has seen
    (edited, or created, while the operator was down) goes to the urgent lane, ahead of thousands of others."""
    controller = Controller(cluster=None, options=Options())  # type: ignore[arg-type]  # no request is made
    views = [project_appschedule(_appschedule(f"a{i}", 2, 2)) for i in range(50)]
    views[37] = project_appschedule(_appschedule("a37", 3, 2))
    views.append(project_appschedule(_appschedule("new", 1, None)))
    controller.take_listing("appschedules", None, views)
    assert set(controller.queue.urgent) == {("shop", "a37"), ("shop", "new")}
    assert len(controller.queue.background) == 49
    for kind in WATCHED:
        controller.listing_done(kind)
    edited = project_appschedule(_appschedule("a1", 3, 2))
    controller.take_listing("appschedules", None, [*views[:1], edited, *views[2:]])  # a relisting: as events
    assert ("shop", "a1") in controller.queue.urgent


def test_a_batch_of_events_wakes_at_once_or_for_the_burst_by_kind() -> None:
    """A CronJob's change wakes its AppSchedule at once; a Job's (here one that left with the ledger's finalizer:
    its task label removed) waits for the rest of its run's burst (workqueue.SOON)."""

    async def take() -> Controller:
        controller = Controller(cluster=None, options=Options())  # type: ignore[arg-type]  # no request is made
        controller.take_changes("cronjobs", [project_cronjob(_cronjob("shop-a", "a"))])
        controller.take_changes("jobs", [Gone("shop", "j", held=True)])
        return controller

    controller = asyncio.run(take())
    assert list(controller.queue.urgent) == [("shop", "shop")]
    assert set(controller.queue.soon) == {("shop", "")}
    assert controller.causes == {("shop", "shop"): {"cronjobs"}, ("shop", ""): {"jobs"}}


def test_a_cronjob_that_fired_wakes_with_its_jobs_burst_and_a_change_of_it_at_once() -> None:
    """The CronJob controller writes lastScheduleTime as it makes a fire's Job: that waits for the Job's burst,
    one reconcile for both; a change of what the CronJob runs (or its labels) wakes its AppSchedule at once. A
    reconcile counts the causes gathered since the last one (health's woken_by)."""
    fired = {**_cronjob("shop-a", "a"), "status": {"lastScheduleTime": rfc3339(FIRE)}}
    edited = {**_cronjob("shop-a", "a"), "spec": {"schedule": "31 2 * * *", "timeZone": "Europe/Berlin"}}

    async def take() -> Controller:
        controller = Controller(cluster=None, options=Options())  # type: ignore[arg-type]  # no request is made
        controller.store.put(project_cronjob(_cronjob("shop-a", "a")))
        controller.take_changes("cronjobs", [project_cronjob(fired)])
        assert not controller.queue.urgent and set(controller.queue.soon) == {("shop", "shop")}
        controller.take_changes("cronjobs", [project_cronjob(edited)])
        assert list(controller.queue.urgent) == [("shop", "shop")]
        controller.listed.set()
        controller.running.set()
        worker = asyncio.create_task(controller._worker(0))
        await asyncio.sleep(0)  # the worker takes the key; then _process (no cluster) fails: as a failed reconcile
        worker.cancel()
        return controller

    controller = asyncio.run(take())
    assert controller.woken_by == {"cronjobs": 1} and not controller.causes


def test_views_from_separate_events_share_their_strings_and_keep_their_values() -> None:
    """Each event is its own json.loads, so each held its own copy of every string; a projection interns them
    (core/view.shared): two CronJobs' views share their field names and repeated values, and equal the body."""
    body: dict[str, Any] = {
        "metadata": {"name": "shop-report", "namespace": "shop", "uid": "u1", "resourceVersion": "7",
                     "labels": {naming.LABEL_APPSCHEDULE: "shop", naming.LABEL_TASK: "report"}},
        "spec": {"schedule": "30 2 * * *", "timeZone": "Europe/Berlin", "successfulJobsHistoryLimit": 3,
                 "jobTemplate": {"spec": {"template": {"spec": {"containers": [
                     {"name": "app", "image": "registry.example.com/shop/web:2026.12.06", "command": ["report"],
                      "resources": {"limits": {"cpu": "500m"}}}]}}}}},
    }  # fmt: skip
    raw = json.dumps(body)
    first, second = project_cronjob(json.loads(raw)), project_cronjob(json.loads(raw))
    assert first.spec == body["spec"] and first.metadata["labels"] == body["metadata"]["labels"]
    image = [
        c["image"] for v in (first, second) for c in v.spec["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    ]
    assert image[0] is image[1]  # one string for both
    keys = [next(k for k in v.spec if k == "timeZone") for v in (first, second)]
    assert keys[0] is keys[1]
    status = {"tasks": [{"name": "report", "lastRun": {"scheduledTime": "2026-10-25T00:30:00Z", "state": "Active"}}]}
    views = [project_appschedule(json.loads(json.dumps({"metadata": {"name": n}, "spec": {}, "status": status})))
             for n in ("a", "b")]  # fmt: skip
    runs = [v.status["tasks"][0]["lastRun"]["scheduledTime"] for v in views]
    assert runs[0] is runs[1] and views[0].status == status
