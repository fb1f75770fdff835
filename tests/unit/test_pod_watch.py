"""The pods' own watch (shell/podwatch.py): its stream read into events whatever the reads' sizes, a listing
that replaces what the store held of its scope, and decisions held until both kopf's and its listing are in."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import socket
from datetime import UTC, datetime

import urllib3
from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client

from appschedule.core.keys import rfc3339
from appschedule.core.view import PodView
from appschedule.shell.controller import Controller, Options
from appschedule.shell.podwatch import Listing, PodWatch, _batches
from appschedule.shell.store import Store

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
    assert store.replace_pods("shop", [dataclasses.replace(kept, resource_version="2")]) == {("shop", "shop")}
    assert [p.name for p in store.pods_of("shop", ended.name)] == ["a"]
    assert ("elsewhere", "c") in store.pods
    assert store.replace_pods(None, []) == set()  # finished pods going wake nothing
    assert store.pods == {}


def test_decisions_wait_for_the_pods_listing_as_for_kopfs() -> None:
    controller = Controller(cluster=None, options=Options())  # type: ignore[arg-type]  # no request is made
    controller.initial_listing_done()
    assert not controller.listed.is_set()
    controller.listing_done("pods")
    assert controller.listed.is_set()


def test_a_first_listing_that_fails_ends_the_wait_for_it_incomplete() -> None:
    """No API server to answer (a closed port, a real client): the first failure hands the loop an incomplete
    listing at once, so decisions wait for no listing that may never come; the watch goes on trying."""
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{_closed_port()}"
    configuration.retries = 0
    got: list[Listing] = []

    async def watch() -> None:
        loop = asyncio.get_running_loop()
        pods = PodWatch(client.ApiClient(configuration), ["shop"], loop, got.append, lambda _: None)
        pods.start()
        try:
            for _ in range(100):
                if got:
                    return
                await asyncio.sleep(0.05)
        finally:
            pods.stop()

    asyncio.run(watch())
    assert [(g.namespace, g.pods, g.complete) for g in got] == [("shop", [], False)]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
