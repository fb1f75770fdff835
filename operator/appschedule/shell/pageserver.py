"""The web server of ``kubectl appschedule ui``: one page, its state as JSON, a stream that says when the state
changed, and the page's actions; on 127.0.0.1 only, for the user who started it.

It knows nothing of Kubernetes: the plugin gives it ``snapshot`` (the page's state, read with the user's own
kubeconfig), ``act`` (a run or a rerun, the plugin's own code) and ``follow`` (blocks, calling ``changed`` on
every watch event, until ``stop`` is set). A browser only ever talks to this process.

What a local server owes the machine it runs on:

* it listens on the loopback address only;
* it answers only requests whose ``Host`` is that address and port (a page of another site cannot reach it
  through a name it points at 127.0.0.1: DNS rebinding);
* every request needs the token, which only the user who started it has: the address it printed carries it
  (``?token=``), and the page keeps it in an HttpOnly, SameSite=Strict cookie (another user of the machine, or
  a process that can reach 127.0.0.1, reads nothing and does nothing);
* an action also needs the token in a header no form can set, with a JSON body (a page of another site can
  send a form to 127.0.0.1 but cannot set the header or read the token);
* an error answer closes the connection, so a body it did not read is never taken for the next request;
* the page has no asset from elsewhere and a Content-Security-Policy that allows none.
"""

from __future__ import annotations

import contextlib
import http.cookies
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

TOKEN_HEADER = "X-AppSchedule-Token"
COOKIE = "appschedule_ui"  # the token, set by the page's address (?token=...): every request needs it
HEARTBEAT = 15.0  # seconds between the stream's comments, so a proxy or the browser keeps it open
ACTION_BODY_MAX = 4096
COALESCE = 0.5  # seconds the stream gathers changes before it says so


def csp(nonce: str) -> str:
    """Nothing from elsewhere; only the page's own script (its nonce) runs; requests to this server only."""
    return (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; connect-src 'self'; "
        "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def page_html(token: str, nonce: str) -> bytes:
    """The page, with this server's token and this response's script nonce in it."""
    text = resources.files("appschedule.shell").joinpath("page.html").read_text(encoding="utf-8")
    return text.replace("__APPSCHEDULE_TOKEN__", token).replace("__APPSCHEDULE_NONCE__", nonce).encode()


class Changes:
    """A counter of changes that the watch bumps and the streams wait on."""

    def __init__(self) -> None:
        self.version = 0
        self._cond = threading.Condition()

    def bump(self) -> None:
        with self._cond:
            self.version += 1
            self._cond.notify_all()

    def wait_past(self, seen: int, timeout: float) -> int:
        with self._cond:
            self._cond.wait_for(lambda: self.version != seen, timeout=timeout)
            return self.version


class PageServer:
    """Serves the page until ``close``; ``port`` 0 picks a free one (``self.port`` says which)."""

    def __init__(
        self,
        snapshot: Callable[[], dict[str, Any]],
        act: Callable[[dict[str, Any]], dict[str, Any]],
        follow: Callable[[Callable[[], None], threading.Event], None] | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        self.snapshot, self.act, self.follow = snapshot, act, follow
        self.token = secrets.token_urlsafe(24)
        self.changes = Changes()
        self.stop = threading.Event()
        self._cache: tuple[int, bytes] | None = None
        self._lock = threading.Lock()
        outer = self

        class Handler(_Handler):
            server_of = outer

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.host, self.port = host, int(self.httpd.server_address[1])
        self._threads: list[threading.Thread] = []

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def url(self) -> str:
        """The address to open: it carries the token, which the page then keeps in a cookie."""
        return f"{self.base}?token={self.token}"

    def state(self) -> bytes:
        """The page's state as JSON, read again only after a change (or when it was never read)."""
        with self._lock:
            version = self.changes.version
            if self._cache is None or self._cache[0] != version:
                self._cache = (version, json.dumps(self.snapshot()).encode())
            return self._cache[1]

    def start(self) -> None:
        serve = threading.Thread(target=self.httpd.serve_forever, name="page-http", daemon=True)
        serve.start()
        self._threads.append(serve)
        if self.follow is not None:
            follow = self.follow
            watch = threading.Thread(
                target=lambda: follow(self.changes.bump, self.stop), name="page-watch", daemon=True
            )
            watch.start()
            self._threads.append(watch)

    def close(self) -> None:
        self.stop.set()
        self.changes.bump()  # wakes the streams, which then see stop
        self.httpd.shutdown()
        self.httpd.server_close()


class _Handler(BaseHTTPRequestHandler):
    server_of: PageServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return  # the terminal says what the plugin says, not every request

    def _host_ok(self) -> bool:
        server = self.server_of
        wanted = {f"{server.host}:{server.port}", f"localhost:{server.port}"}
        if self.headers.get("Host") in wanted:
            return True
        self._send(HTTPStatus.FORBIDDEN, b"this server answers on its own address only\n", "text/plain")
        return False

    def _send(self, status: HTTPStatus, body: bytes, kind: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _token_ok(self, given: str | None) -> bool:
        return given is not None and secrets.compare_digest(given.encode(), self.server_of.token.encode())

    def _cookie_ok(self) -> bool:
        jar = http.cookies.SimpleCookie()
        with contextlib.suppress(http.cookies.CookieError):
            jar.load(self.headers.get("Cookie") or "")
        return COOKIE in jar and self._token_ok(jar[COOKIE].value)

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        """An error answer, and the connection closed: a body left unread must not be read as the next request."""
        self.close_connection = True
        self._send(status, json.dumps({"error": message}).encode(), "application/json", {"Connection": "close"})

    def do_GET(self) -> None:
        if not self._host_ok():
            return
        path, _, query = self.path.partition("?")
        server = self.server_of
        if path == "/":
            given = urllib.parse.parse_qs(query).get("token", [None])[0]
            if not (self._token_ok(given) or self._cookie_ok()):
                self._refuse(HTTPStatus.FORBIDDEN, "open the address kubectl appschedule ui printed (it has the token)")
                return
            nonce = secrets.token_urlsafe(16)
            cookie = f"{COOKIE}={server.token}; HttpOnly; SameSite=Strict; Path=/"
            self._send(
                HTTPStatus.OK, page_html(server.token, nonce), "text/html",
                {"Content-Security-Policy": csp(nonce), "X-Frame-Options": "DENY", "Set-Cookie": cookie},
            )  # fmt: skip
        elif not self._cookie_ok():
            self._refuse(HTTPStatus.FORBIDDEN, "no token: open the address kubectl appschedule ui printed")
        elif path == "/api/state":
            try:
                body = server.state()
            except Exception as error:  # the page says what went wrong and keeps its last state
                self._refuse(HTTPStatus.BAD_GATEWAY, f"{type(error).__name__}: {error}")
                return
            self._send(HTTPStatus.OK, body, "application/json")
        elif path == "/api/changes":
            self._stream()
        else:
            self._refuse(HTTPStatus.NOT_FOUND, "not found")

    def _stream(self) -> None:
        """Server-sent events: ``change`` with the new version whenever the watch saw something."""
        server = self.server_of
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        seen = server.changes.version
        with contextlib.suppress(OSError):
            self.wfile.write(f"event: change\ndata: {seen}\n\n".encode())
            self.wfile.flush()
            while not server.stop.is_set():
                started = time.monotonic()
                now_seen = server.changes.wait_past(seen, HEARTBEAT)
                if server.stop.is_set():
                    return
                if now_seen != seen:
                    server.stop.wait(COALESCE)  # a busy namespace's events, one read of the page for each second
                    seen = server.changes.version
                    self.wfile.write(f"event: change\ndata: {seen}\n\n".encode())
                elif time.monotonic() - started >= HEARTBEAT - 0.5:
                    self.wfile.write(b": still here\n\n")
                self.wfile.flush()

    def do_POST(self) -> None:
        if not self._host_ok():
            return
        server = self.server_of
        if self.path != "/api/act":
            self._refuse(HTTPStatus.NOT_FOUND, "not found")
            return
        if not (self._token_ok(self.headers.get(TOKEN_HEADER)) and self._cookie_ok()):
            self._refuse(HTTPStatus.FORBIDDEN, "no token, or not this page's")
            return
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            self._refuse(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "JSON only")
            return
        length_text = self.headers.get("Content-Length") or ""
        length = int(length_text) if length_text.isascii() and length_text.isdigit() else 0
        if not 0 < length <= ACTION_BODY_MAX:
            self._refuse(HTTPStatus.BAD_REQUEST, f"a body of 1 to {ACTION_BODY_MAX} bytes")
            return
        try:
            asked = json.loads(self.rfile.read(length))
            if not isinstance(asked, dict):
                raise ValueError("an object is expected")
            done = server.act(asked)
        except (ValueError, LookupError, TypeError, RecursionError) as error:
            self._refuse(HTTPStatus.BAD_REQUEST, str(error))
            return
        except Exception as error:  # the plugin's own failure: said, never a dropped connection
            self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(error).__name__}: {error}")
            return
        server.changes.bump()
        self._send(HTTPStatus.OK, json.dumps(done).encode(), "application/json")
