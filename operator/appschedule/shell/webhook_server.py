"""The admission process: both webhooks and the liveness endpoint, answered by a process of their own.

Why a process: the webhooks are pure (core/admission.py) and keep no state, and they must answer within the API
server's timeout whatever the controller is doing. In the operator's interpreter they waited for the GIL
behind planning and behind kopf's handling of every watch event: bench-cluster's admission scenario measured
a p99 of 300 ms for the key webhook while 1,000 AppSchedules were planned cold (BENCHMARKS.md). Here they
share nothing with the controller but the code: the process is forked at start, before kopf or any thread
exists, so it holds the imported modules copy-on-write and costs a few MiB of its own.

* Webhooks: kopf's ``WebhookServer`` (TLS, the files re-read when they are renewed) with our own dispatch:
  ``/key-jobs`` keys a Job (``admission.mutate_job``), ``/check-appschedules`` validates an AppSchedule and
  asks its SubjectAccessReview in a thread of a small pool, with a client of this process. When the
  operator keeps its own webhook configurations (``--webhook-config-name``, not in the chart), this process
  writes them once it listens, and again when the certificate changes.
* Liveness: the controller's event loop writes a heartbeat every second (``Heartbeat``: a time on the
  machine's monotonic clock, which both processes read alike, and the controller's health); the probe is
  answered from it at once, and fails when the heartbeat is older than ``SILENT_SECONDS`` (the loop is
  wedged) or a worker is stuck (``Controller.health``).
* Lifetimes: this process ends with its parent (the kernel's parent-death signal, and a check every second);
  the operator stops, exit status 1, when this process is gone (handlers.py), so the pod restarts rather
  than run without its admission.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import json
import logging
import multiprocessing
import os
import shutil
import signal
import ssl
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import SynchronizedString
from pathlib import Path
from typing import Any

import aiohttp.web

from ..core import admission, naming
from . import certs

log = logging.getLogger("appschedule.admission")

SILENT_SECONDS = 60.0  # a heartbeat this old: the controller's loop has not run for a minute, liveness fails
HEARTBEAT_BYTES = 64 * 1024
SLOW_SECONDS = 0.25  # an admission (or its SubjectAccessReview) slower than this is logged
ADMISSION_MAX_BYTES = 8 * 1024 * 1024  # an AdmissionReview holds the object (and the old one on UPDATE)
# A SubjectAccessReview's answer, its wait for one of the REVIEW_THREADS included, is awaited this long at most:
# past it the request is refused ("try again"), never left to the API server's timeout (8 s at least, the
# chart's schema), which would admit it unreviewed under failurePolicy Ignore. A burst queues here, bounded.
REVIEW_DEADLINE = 5.0
REVIEW_THREADS = 4


@dataclass(frozen=True)
class Serving:
    """What the admission process serves: the webhooks in ``kinds`` on ``port`` and/or liveness at ``liveness``."""

    kinds: frozenset[str]
    port: int | None
    addr: str
    files: certs.TLSFiles | None
    client: Mapping[str, Any]  # the clientConfig the API server calls (without the path), caBundle included
    config_name: str | None  # keep Mutating/ValidatingWebhookConfigurations of this name; None: someone else does
    liveness: tuple[str, int, str] | None  # host, port, path
    # a directory of certificate files made for this run alone (no --webhook-cert-dir): removed once the server
    # has read them, so no private key outlives the process, however it ends
    scratch: Path | None = None


class Heartbeat:
    """The controller's sign of life, shared with the admission process: written every second by the event
    loop, read by the liveness probe."""

    def __init__(self) -> None:
        self._buffer: SynchronizedString = multiprocessing.get_context("fork").Array("c", HEARTBEAT_BYTES)  # type: ignore[assignment]

    def beat(self, health: Mapping[str, Any] | None, stuck: str | None) -> None:
        data = json.dumps({"beat": time.monotonic(), "stuck": stuck, "workers": health}).encode()
        if len(data) >= HEARTBEAT_BYTES:  # a cluster with very many namespaces: the per-namespace counts go
            data = json.dumps({"beat": time.monotonic(), "stuck": stuck, "workers": None}).encode()
        with self._buffer.get_lock():
            self._buffer.value = data

    def read(self) -> dict[str, Any]:
        with self._buffer.get_lock():
            data = self._buffer.value
        found: dict[str, Any] = json.loads(data) if data else {}
        return found


def liveness(state: Mapping[str, Any], now: float) -> tuple[int, dict[str, Any]]:
    """The probe's answer from the last heartbeat: 200 with the controller's health, or 500 saying why not."""
    if not state:
        return 503, {"error": "the controller has not started yet"}
    silent = now - float(state.get("beat") or 0.0)
    if silent > SILENT_SECONDS:
        return 500, {"error": f"the controller's event loop has not run for {silent:.0f}s"}
    if state.get("stuck"):
        return 500, {"error": str(state["stuck"])}
    return 200, {"workers": state.get("workers") or {}}


def client_config(files: certs.TLSFiles | None, port: int, host: str, service: str | None) -> dict[str, Any]:
    """The clientConfig the API server calls: a Service (port 443) in a cluster, else https://host:port."""
    config: dict[str, Any]
    if service:
        namespace, name = service.split("/", 1)
        config = {"service": {"namespace": namespace, "name": name, "port": 443}}
    else:
        config = {"url": f"https://{host}:{port}"}
    if files is not None:
        config["caBundle"] = base64.b64encode((files.ca or files.cert).read_bytes()).decode("ascii")
    return config


def start(serving: Serving, heartbeat: Heartbeat) -> BaseProcess:
    """Fork the admission process; call before any thread exists (before kopf starts)."""
    process = multiprocessing.get_context("fork").Process(
        target=_main, args=(serving, heartbeat, os.getpid()), name="appschedule-admission", daemon=True
    )
    process.start()
    return process


# -- inside the admission process


def _main(serving: Serving, heartbeat: Heartbeat, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the operator stops us
    with contextlib.suppress(OSError, AttributeError):  # Linux: SIGTERM when the operator dies, even by SIGKILL
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        return
    asyncio.run(_serve(serving, heartbeat, parent))


async def _serve(serving: Serving, heartbeat: Heartbeat, parent: int) -> None:
    tasks = []
    if serving.port and serving.files:
        tasks.append(asyncio.create_task(_webhooks(serving)))
    runner = await _liveness(serving.liveness, heartbeat) if serving.liveness else None
    try:
        while os.getppid() == parent and not any(t.done() for t in tasks):
            await asyncio.sleep(1)
        for task in tasks:
            if task.done() and task.exception():
                log.error("the webhook server stopped: %r", task.exception())
    finally:
        for task in tasks:
            task.cancel()
        if runner:
            await runner.cleanup()
        if serving.scratch is not None:  # ended before the server read them
            shutil.rmtree(serving.scratch, ignore_errors=True)


_APPLICATION = aiohttp.web.Application
READY_PATH = "/readyz"


async def _ready(_: aiohttp.web.Request) -> aiohttp.web.Response:
    return aiohttp.web.json_response({"ready": True})


def _webhook_application(*args: Any, **kwargs: Any) -> aiohttp.web.Application:
    """The Application kopf's WebhookServer builds: requests up to ADMISSION_MAX_BYTES, and GET /readyz."""
    app = _APPLICATION(*args, **{**kwargs, "client_max_size": ADMISSION_MAX_BYTES})
    app.add_routes([aiohttp.web.get(READY_PATH, _ready)])
    return app


async def _webhooks(serving: Serving) -> None:

    from .api import REVIEW_TIMEOUT, Cluster, api_client

    assert serving.files is not None
    # kopf's server makes a plain aiohttp Application, which refuses a request over 1 MiB with 413 (the API
    # server would then fail open under Ignore, or refuse under Fail), and serves POSTs only. It builds it by
    # this name, and this process has no other aiohttp application that it could change: ours gets the size,
    # and GET /readyz, the readiness probe's (the server answers, over TLS, with its certificate).
    # tests/unit/test_kopf_coupling.py fails when kopf stops building it so.
    aiohttp.web.Application = _webhook_application  # type: ignore[misc,assignment]
    reviews = ThreadPoolExecutor(max_workers=REVIEW_THREADS, thread_name_prefix="review")
    loop = asyncio.get_running_loop()
    # the client is made before the first request (reading the kubeconfig or the ServiceAccount and building
    # its TLS context takes a while), so no review waits for it; the key webhook alone does not wait for it to
    # start serving (a Job created meanwhile would be admitted unkeyed): it reads with it only the Jobs of a task
    # with several schedules under Forbid, or the CronJob a task under Forbid takes over from, and such a review
    # waits for it instead
    made = (
        loop.run_in_executor(reviews, lambda: Cluster(api_client())) if serving.kinds & {"validation", "keys"} else None
    )
    cluster = await made if made is not None and "validation" in serving.kinds else None

    def review_access(review: dict[str, Any]) -> dict[str, Any]:
        assert cluster is not None
        started = time.monotonic()
        try:
            return cluster.review_access(review)
        finally:
            if time.monotonic() - started > SLOW_SECONDS:
                log.warning("a SubjectAccessReview took %.0f ms", (time.monotonic() - started) * 1000)

    async def task_jobs(review: dict[str, Any]) -> list[dict[str, Any]]:
        """The task's Jobs, for a Job whose fire Forbid may hold back behind another of its CronJobs' runs; none
        (admitted as it comes) when they cannot be read in time."""
        found = job_of(review)
        check = admission.forbid_check(*found) if found is not None and made is not None else None
        if check is None or made is None:
            return []
        try:
            reader = await asyncio.wait_for(asyncio.shield(made), 4)
            return await asyncio.wait_for(
                loop.run_in_executor(reviews, lambda: reader.list_jobs(*check, timeout=REVIEW_TIMEOUT)), 4
            )
        except Exception as error:
            log.warning("could not read the Jobs of task %s of %s/%s: %s", check[2], check[0], check[1], error)
            return []

    async def old_cronjob(review: dict[str, Any]) -> dict[str, Any] | None:
        """The CronJob a task takes over from, for a Job whose fire Forbid may hold back behind that CronJob's run;
        None (admitted as it comes) when it cannot be read in time."""
        found = job_of(review)
        check = admission.cut_over_check(*found) if found is not None and made is not None else None
        if check is None or made is None:
            return None
        try:
            reader = await asyncio.wait_for(asyncio.shield(made), 4)
            return await asyncio.wait_for(
                loop.run_in_executor(reviews, lambda: reader.read_cronjob(*check, timeout=REVIEW_TIMEOUT)), 4
            )
        except Exception as error:
            log.warning("could not read CronJob %s/%s: %s", check[0], check[1], error)
            return None

    async def answer(review: dict[str, Any], *, webhook: str | None, **_: Any) -> dict[str, Any]:
        started = time.monotonic()
        try:
            if webhook == admission.KEY_JOBS and "keys" in serving.kinds:
                return key_job(review, datetime.now(UTC), await task_jobs(review), await old_cronjob(review))
            if webhook == admission.CHECK_APPSCHEDULES and "validation" in serving.kinds:
                return await check_appschedule(review, lambda r: loop.run_in_executor(reviews, review_access, r))
            raise aiohttp.web.HTTPNotFound(reason=f"no webhook {webhook!r} here")
        finally:
            if time.monotonic() - started > SLOW_SECONDS:
                log.warning("admission by %s took %.0f ms", webhook, (time.monotonic() - started) * 1000)

    server = _server(serving)
    async for _config in server(answer):  # our dispatch, not kopf's registry
        log.info("admission webhooks listening on %s:%s", serving.addr, serving.port)
        if serving.config_name:
            await asyncio.get_running_loop().run_in_executor(reviews, _configure, serving)


def _server(serving: Serving) -> Any:
    """kopf's server: on the files given (--webhook-cert-dir), which it re-reads when they change; or on a TLS
    context loaded now from the files made for this run, which are removed at once (no private key is left on
    disk however the process ends, and nothing renews them)."""
    import kopf

    class Loaded(kopf.WebhookServer):
        """On a TLS context loaded already: with no files kopf would make a self-signed certificate of its own
        (``_build_ssl``), and it has none to watch. The caBundle it would compute is not used: the webhook
        configurations carry ``Serving.client``'s."""

        def _build_ssl(self) -> tuple[bytes | None, ssl.SSLContext | None]:
            return None, self.context

    assert serving.files is not None
    if serving.scratch is None:
        return kopf.WebhookServer(
            addr=serving.addr or None,
            port=serving.port,
            certfile=str(serving.files.cert),
            pkeyfile=str(serving.files.key),
            host="localhost",
        )
    context = ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(str(serving.files.cert), str(serving.files.key))
    finally:
        shutil.rmtree(serving.scratch, ignore_errors=True)
    return Loaded(addr=serving.addr or None, port=serving.port, context=context, host="localhost")


def _configure(serving: Serving) -> None:
    """Create or replace our webhook configurations, trying for a minute (the API server may be starting)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from .api import api_client

    api = client.AdmissionregistrationV1Api(api_client())
    assert serving.config_name is not None
    for body in admission.configurations(serving.config_name, serving.kinds, serving.client):
        mutating = body["kind"] == "MutatingWebhookConfiguration"
        create = api.create_mutating_webhook_configuration if mutating else api.create_validating_webhook_configuration
        read = api.read_mutating_webhook_configuration if mutating else api.read_validating_webhook_configuration
        replace = (
            api.replace_mutating_webhook_configuration if mutating else api.replace_validating_webhook_configuration
        )
        for attempt in range(30):
            try:
                try:
                    create(body)
                except ApiException as error:
                    if error.status != 409:
                        raise
                    body["metadata"]["resourceVersion"] = read(serving.config_name).metadata.resource_version
                    replace(serving.config_name, body)
                break
            except Exception as error:
                log.warning("could not write %s %s (attempt %d): %s", body["kind"], serving.config_name, attempt, error)
                time.sleep(2)


def job_of(review: Mapping[str, Any]) -> tuple[Mapping[str, Any], str] | None:
    """The Job a key review is about, and its namespace."""
    request = review.get("request")
    job = request.get("object") if isinstance(request, Mapping) else None
    if not isinstance(job, Mapping) or not isinstance(request, Mapping):
        return None
    return job, str(request.get("namespace") or "")


def key_job(
    review: Mapping[str, Any],
    now: datetime,
    others: Sequence[Mapping[str, Any]] = (),
    old: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The key webhook's answer: the Job keyed; admitted unkeyed, never refused, if anything goes wrong (the
    ledger then reports KeyNotInjected). Refused only for a fire inside one of its task's blackouts. ``others``:
    the task's Jobs, read when admission.forbid_check asks for them; ``old``: the CronJob the task takes over
    from, read when admission.cut_over_check asks for it."""
    found = job_of(review)
    if found is None:
        return admission.respond(review)
    job, _ = found
    try:
        refusal = admission.blackout_refusal(job)
        if refusal is not None:
            return admission.respond(review, refusal=refusal)
        return admission.respond(review, patch=admission.json_patch(job, admission.mutate_job(job, now, others, old)))
    except Exception:
        name = job.get("metadata", {}).get("name") if isinstance(job.get("metadata"), Mapping) else None
        log.exception("could not key Job %s; admitted without its key", name)
        return admission.respond(review)


async def check_appschedule(
    review: Mapping[str, Any], review_access: Any, deadline: float = REVIEW_DEADLINE
) -> dict[str, Any]:
    """The validating webhook's answer: the spec's own errors first (cheap), then, when the spec is set or
    changed, whether its author may create Jobs in the namespace (a SubjectAccessReview, failing closed: an
    error, or no answer within ``deadline`` seconds, refuses the request with 503)."""
    request = review.get("request")
    request = request if isinstance(request, Mapping) else {}
    body = request.get("object")
    body = body if isinstance(body, Mapping) else {}
    if body.get("kind") == naming.CALENDAR_KIND:  # a calendar runs nothing: its rules only, no access review
        refusal = admission.check_calendar(body)
        return admission.respond(review, refusal=refusal, code=422) if refusal else admission.respond(review)
    message = admission.check_appschedule(body, datetime.now(UTC))
    if message:
        return admission.respond(review, refusal=message, code=422)
    if not admission.spec_changed(request.get("operation"), request.get("oldObject"), body):
        return admission.respond(review)
    userinfo = request.get("userInfo")
    userinfo = userinfo if isinstance(userinfo, Mapping) else {}
    metadata = body.get("metadata")
    namespace = (metadata.get("namespace") if isinstance(metadata, Mapping) else None) or request.get("namespace")
    namespace = str(namespace or "")
    try:
        # cancelled at the deadline: a review still waiting for a thread is dropped from the queue
        status = await asyncio.wait_for(review_access(admission.job_access_review(userinfo, namespace)), deadline)
    except Exception as error:  # fail closed: the check is what stands between this user and running Jobs
        reason = f"no answer within {deadline:g}s" if isinstance(error, TimeoutError) else str(error)
        log.warning("SubjectAccessReview for %s failed: %s", userinfo.get("username"), reason)
        message = f"could not check that {userinfo.get('username')} may create Jobs in namespace {namespace}"
        return admission.respond(review, refusal=f"{message}; try again ({type(error).__name__})", code=503)
    refusal = admission.access_refusal(userinfo, namespace, status)
    return admission.respond(review, refusal=refusal) if refusal else admission.respond(review)


async def _liveness(where: tuple[str, int, str], heartbeat: Heartbeat) -> aiohttp.web.AppRunner:
    host, port, path = where

    async def probe(_: aiohttp.web.Request) -> aiohttp.web.Response:
        code, body = liveness(heartbeat.read(), time.monotonic())
        return aiohttp.web.json_response(body, status=code)

    app = aiohttp.web.Application()
    app.add_routes([aiohttp.web.get(path, probe)])
    runner = aiohttp.web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await aiohttp.web.TCPSite(runner, host or None, port, reuse_address=True).start()
    return runner
