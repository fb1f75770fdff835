"""Where the operator leans on kopf beyond its documented API, a test fails when kopf changes under it.

Two places are left. kopf's WebhookServer builds its aiohttp Application by the name
``aiohttp.web.Application`` when it starts serving. The admission process (shell/webhook_server.py)
puts its own factory under that name, for the request size an AdmissionReview needs and the readiness
route. Were kopf to build it otherwise, oversized reviews would get 413 and /readyz would not answer.
And for a certificate made for the run (no --webhook-cert-dir), the admission process hands kopf a TLS context
loaded already, through its ``context`` argument, and replaces ``_build_ssl``, which would otherwise make a
self-signed certificate of its own: the files are removed once loaded.
"""

from __future__ import annotations

import inspect

import aiohttp.web
import kopf

from appschedule.shell import webhook_server


def test_kopf_builds_its_webhook_application_by_the_name_we_replace() -> None:
    source = inspect.getsource(kopf.WebhookServer.__call__)
    assert "aiohttp.web.Application()" in source
    assert "aiohttp.web.post(" in source  # and it serves POSTs on it: our GET route cannot collide


def test_our_application_takes_large_reviews_and_answers_readiness() -> None:
    app = webhook_server._webhook_application()
    assert isinstance(app, aiohttp.web.Application)
    assert app._client_max_size == webhook_server.ADMISSION_MAX_BYTES
    routes = {(route.method, route.resource.canonical) for route in app.router.routes() if route.resource}
    assert ("GET", webhook_server.READY_PATH) in routes


def test_kopf_builds_its_tls_context_in_the_method_we_replace() -> None:
    assert "context" in inspect.signature(kopf.WebhookServer).parameters
    source = inspect.getsource(kopf.WebhookServer.__call__)
    assert "self._build_ssl()" in source
    assert "cadata, context" in source  # what it serves with is the context _build_ssl returns
