"""The demo's web app (three replicas): it creates its table at start and serves the digests the tasks
wrote, newest first. GET /healthz answers without the database (the readiness probe)."""

import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg2

SCHEMA = """CREATE TABLE IF NOT EXISTS digests (
    id SERIAL PRIMARY KEY,
    task TEXT NOT NULL,
    key TEXT NOT NULL,
    host TEXT NOT NULL,
    written_at TIMESTAMPTZ NOT NULL DEFAULT now())"""


def connect() -> "psycopg2.extensions.connection":
    return psycopg2.connect(os.environ["DATABASE_URL"], connect_timeout=5)


def migrate() -> None:
    """The table, made by the first replica that gets to it (the others wait for the database or the lock)."""
    for _ in range(60):
        try:
            connection = connect()
        except psycopg2.OperationalError as error:
            print(f"waiting for the database: {error}".strip(), flush=True)
            time.sleep(2)
            continue
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(4242)")
                cursor.execute(SCHEMA)
            connection.commit()
            return
        finally:
            connection.close()
    raise SystemExit("the database never answered")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._send(200, {"ok": True})
            return
        connection = connect()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT task, key, host, written_at FROM digests ORDER BY id DESC LIMIT 50")
                rows = [{"task": t, "key": k, "host": h, "at": w.isoformat()} for t, k, h, w in cursor.fetchall()]
        finally:
            connection.close()
        self._send(200, {"digests": rows})

    def _send(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    migrate()
    print("serving on :8080", flush=True)
    ThreadingHTTPServer(("", 8080), Handler).serve_forever()
