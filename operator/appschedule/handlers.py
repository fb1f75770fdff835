"""kopf wiring: the watch streams feed the in-memory view; its changes queue AppSchedules for the workers.

Why a queue rather than kopf's change handlers: an AppSchedule is reconciled for many reasons (its
spec, its Deployment's rollout, a CronJob edited or deleted by hand, a sibling that frees a task, the
periodic resync) and must end in the same state whatever woke it. So the watches only keep the view
(state.py) current, and a change the view says matters queues the AppSchedules it concerns.

The view is fed by kopf *index* handlers: kopf calls them for every event of every watched object
and holds every other resource handler until every index has its initial listing. The ``on.event``
handlers therefore run only once all three listings are in, which is what makes the first decision
(who owns a task, which CronJob to delete) safe at start-up; the first of them starts the work. The
index handlers return None, so kopf's own indexes stay empty: the view is the one copy. A DELETED
event reaches no index handler, so the ``on.event`` handlers remove objects from the view.

The CronJob watch is filtered by our label on the API server (``settings.watching.label_selectors``;
a ``labels=`` filter on a handler would be applied in the client, after every CronJob of the cluster
was sent and decoded). Deployments cannot be filtered that way (AppSchedules name them), so every
Deployment event is decoded, and one that changes nothing a rendering reads costs nothing more.

Jobs of our tasks are watched the same way (filtered by the ``appschedule.dev/task`` label on the API
server) for the run ledger. The admission webhooks (webhooks.py) are kopf's, served over TLS with a
certificate from files or made at start (certs.py); kopf keeps the webhook configurations, with their
caBundle, in place. Prometheus metrics are served on their own port (metrics.py).

kopf stores nothing on the objects (no finalizer, no annotations: only event and index handlers),
so the operator can be killed at any point and converges when started again. The one finalizer is
the ledger's own, on Jobs, set at admission and removed once the Job is recorded.

Every handler is ``async``: kopf runs plain functions in threads, and the view is touched from the
event loop only.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp.web
import kopf

from . import certs, metrics, naming, webhooks
from .api import Cluster, api_client
from .controller import Controller, Options
from .state import project_appschedule, project_cronjob, project_deployment, project_job

log = logging.getLogger("appschedule")
OPTIONS = Options()
CRONJOB_SELECTOR = f"{naming.MANAGED_BY}={naming.MANAGER}"


def _controller(memo: kopf.Memo) -> Controller:
    controller: Controller = memo["controller"]
    return controller


class _PeeringLog(logging.Handler):
    """Follows kopf's peering decisions, which it announces only in its log: while another replica
    with a higher priority is active this one is paused, and our workers must be too."""

    def __init__(self, controller: Controller) -> None:
        super().__init__(logging.INFO)
        self.controller = controller

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Pausing operations in favour of"):
            self.controller.running.clear()
            log.info("paused: another replica is active")
        elif message.startswith("Resuming operations after the pause"):
            self.controller.running.set()
            log.info("resumed: this replica is active")


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # the planning thread (controller.py) holds the GIL while it plans; hand it to the loop every 1 ms, not 5,
    # so an admission request or a liveness probe waits about that long for it (bench-cluster's admission)
    sys.setswitchinterval(0.001)
    settings.persistence.finalizer = f"{naming.GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=naming.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=naming.GROUP, key="last-handled-configuration"
    )
    # without both timeouts a watch can go silent forever (kopf issues #585, #1120)
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.watching.label_selectors["batch", "v1", "cronjobs"] = CRONJOB_SELECTOR
    settings.watching.label_selectors["batch", "v1", "jobs"] = naming.LABEL_TASK
    settings.posting.level = logging.WARNING
    settings.scanning.disabled = not OPTIONS.scanning
    if OPTIONS.webhook_port:
        settings.admission.server = _webhook_server(OPTIONS)
        settings.admission.managed = OPTIONS.webhook_config_name or None  # None: installed by the chart
    if OPTIONS.metrics_port:
        metrics.serve(OPTIONS.metrics_port)
    controller = Controller(Cluster(api_client()), OPTIONS)
    memo["controller"] = controller
    await controller.start()
    peering = _PeeringLog(controller)
    logging.getLogger("kopf").addHandler(peering)
    memo["peering_log"] = peering


class _ServiceWebhookServer(kopf.WebhookServer):
    """In a cluster the API server reaches the webhooks through a Service, not a URL."""

    def __init__(self, service: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.service_namespace, self.service_name = service.split("/", 1)

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        async for config in super().__call__(fn):
            yield {"service": {"namespace": self.service_namespace, "name": self.service_name, "port": 443},
                   "caBundle": config.get("caBundle")}  # fmt: skip


class _AdmissionApplication(aiohttp.web.Application):
    """kopf's webhook server makes a plain ``aiohttp.web.Application``, which refuses a request over 1 MiB
    with 413; the API server then fails open (failurePolicy Ignore) and an oversized AppSchedule would be
    admitted unchecked. Admission reviews of objects up to the API server's own limit are read instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("client_max_size", ADMISSION_MAX_BYTES)
        super().__init__(*args, **kwargs)


ADMISSION_MAX_BYTES = 8 * 1024 * 1024  # an AdmissionReview holds the object (and the old one on UPDATE)


def _webhook_server(options: Options) -> kopf.WebhookServer:
    aiohttp.web.Application = _AdmissionApplication  # type: ignore[misc]  # kopf builds it by this name
    if options.webhook_cert_dir:
        files = certs.from_dir(Path(options.webhook_cert_dir))
    else:
        hosts = [options.webhook_host]
        if options.webhook_service:
            namespace, name = options.webhook_service.split("/", 1)
            hosts = [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local", f"{name}.{namespace}"]
        files = certs.generate(Path(tempfile.mkdtemp(prefix="appschedule-webhook-")), hosts)
    common: dict[str, Any] = {"addr": options.webhook_addr, "port": options.webhook_port, "certfile": str(files.cert),
                              "pkeyfile": str(files.key), "cafile": str(files.ca) if files.ca else None}  # fmt: skip
    if options.webhook_service:
        return _ServiceWebhookServer(options.webhook_service, **common)
    return kopf.WebhookServer(host=options.webhook_host, **common)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    logging.getLogger("kopf").removeHandler(memo["peering_log"])
    await _controller(memo).stop()


@kopf.on.probe(id="workers")
async def workers(memo: kopf.Memo, **_: Any) -> dict[str, Any]:
    return _controller(memo).health()


# -- the view, fed by the watch streams


@kopf.index(naming.GROUP, naming.VERSION, naming.PLURAL)
async def appschedule_view(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    controller.wake(controller.state.put_appschedule(project_appschedule(body)))


@kopf.index("apps", "v1", "deployments")
async def deployment_view(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    controller.wake(controller.state.put_deployment(project_deployment(body)))


@kopf.index("batch", "v1", "cronjobs")
async def cronjob_view(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    controller.wake(controller.state.put_cronjob(project_cronjob(body)))


@kopf.index("batch", "v1", "jobs")
async def job_view(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    controller = _controller(memo)
    controller.wake(controller.state.put_job(project_job(body)))


# -- deletions, and the start of the work once every listing is in


def _deleted(event: Mapping[str, Any], memo: kopf.Memo) -> Controller | None:
    controller = _controller(memo)
    controller.initial_listing_done()
    return controller if event.get("type") == "DELETED" else None


@kopf.on.event(naming.GROUP, naming.VERSION, naming.PLURAL)
async def appschedule_event(
    event: Mapping[str, Any], namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    controller = _deleted(event, memo)
    if controller and namespace:
        controller.wake(controller.state.drop_appschedule(namespace, name))


@kopf.on.event("apps", "v1", "deployments")
async def deployment_event(
    event: Mapping[str, Any], namespace: str | None, name: str, memo: kopf.Memo, **_: Any
) -> None:
    controller = _deleted(event, memo)
    if controller and namespace:
        controller.wake(controller.state.drop_deployment(namespace, name))


@kopf.on.event("batch", "v1", "cronjobs")
async def cronjob_event(event: Mapping[str, Any], namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    controller = _deleted(event, memo)
    if controller and namespace:
        controller.wake(controller.state.drop_cronjob(namespace, name))


@kopf.on.event("batch", "v1", "jobs")
async def job_event(event: Mapping[str, Any], namespace: str | None, name: str, memo: kopf.Memo, **_: Any) -> None:
    controller = _deleted(event, memo)
    if controller and namespace:
        controller.wake(controller.state.drop_job(namespace, name))


# -- admission (webhooks.py): failurePolicy Ignore, so an operator outage never blocks a run or a user


async def key_jobs(body: kopf.Body, patch: kopf.Patch, **_: Any) -> None:
    try:
        found = webhooks.mutate_job(body, datetime.now(UTC))
    except Exception:  # an error would deny the Job (failurePolicy covers only calls that fail): admit it
        log.exception("could not key Job %s; admitted without its key", body.get("metadata", {}).get("name"))
        return
    if found:
        patch.update(found)


async def check_appschedules(body: kopf.Body, userinfo: kopf.UserInfo, memo: Any, **kwargs: Any) -> None:
    message = webhooks.check_appschedule(body)
    if message:
        raise kopf.AdmissionError(message, code=422)
    if not webhooks.spec_changed(kwargs.get("operation"), kwargs.get("old"), kwargs.get("new")):
        return
    namespace = str(body.get("metadata", {}).get("namespace") or "")
    review = webhooks.job_access_review(userinfo, namespace)
    try:
        loop = asyncio.get_running_loop()
        status = await loop.run_in_executor(_REVIEWS, _controller(memo).cluster.review_access, review)
    except Exception as error:  # fail closed: the check is what stands between this user and running Jobs
        log.warning("SubjectAccessReview for %s failed: %s", userinfo.get("username"), error)
        message = f"could not check that {userinfo.get('username')} may create Jobs in namespace {namespace}"
        raise kopf.AdmissionError(f"{message}; try again ({type(error).__name__})", code=503) from None
    refusal = webhooks.access_refusal(userinfo, namespace, status)
    if refusal:
        raise kopf.AdmissionError(refusal, code=403)


# SubjectAccessReviews get threads of their own: a review never queues behind the controller's API calls, which
# share the default executor; each is bounded by api.REVIEW_TIMEOUT, well within the webhook's timeoutSeconds
_REVIEWS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="review")

WEBHOOKS = ("keys", "validation")


def register_webhooks(kinds: set[str]) -> None:
    """Serve the admission webhooks named (keys: on Jobs; validation: on AppSchedules). Both are
    failurePolicy Ignore and persistent (they stay configured while the operator restarts)."""
    if "keys" in kinds:
        kopf.on.mutate("batch", "v1", "jobs", id="key-jobs", operations=["CREATE"], persistent=True,
                       ignore_failures=True, labels={naming.LABEL_TASK: kopf.PRESENT})(key_jobs)  # fmt: skip
    if "validation" in kinds:
        kopf.on.validate(naming.GROUP, naming.VERSION, naming.PLURAL, id="check-appschedules",
                         operations=["CREATE", "UPDATE"], persistent=True, ignore_failures=True,
                         subresource=None)(check_appschedules)  # fmt: skip
