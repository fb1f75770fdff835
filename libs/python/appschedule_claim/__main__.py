"""``appschedule-claim -- CMD ARGS...`` (also ``python -m appschedule_claim``, ``appschedule claim``): claim this
container's run, run CMD only when the claim is won, mark the fire done when CMD succeeds and release the claim
when it fails. A lost claim (a duplicate of a fire another run claimed) exits 0 without running CMD.

The database: ``--database URL`` or ``APPSCHEDULE_CLAIM_DATABASE``: ``sqlite:///path/to.db``,
``postgresql://user:password@host/db`` (psycopg 3 or psycopg2), ``mysql://user:password@host:3306/db``
(PyMySQL): the driver the image already has."""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any
from urllib.parse import unquote, urlparse

from . import ClaimError, create_table, finish, release, report_outcome, run_from_env, take


def connect(url: str) -> Any:
    """A DB-API connection for a database URL, with the driver that is installed."""
    parsed = urlparse(url)
    scheme = parsed.scheme.split("+")[0]
    if scheme == "sqlite":
        import sqlite3

        path = url.split(":///", 1)[1] if ":///" in url else ""
        if not path:
            raise ClaimError(f"{url!r}: a SQLite URL is sqlite:///path/to.db")
        return sqlite3.connect(path, timeout=30)
    if scheme in ("postgresql", "postgres"):
        try:
            import psycopg

            return psycopg.connect(url.replace(parsed.scheme + "://", "postgresql://", 1))
        except ImportError:
            pass
        try:
            import psycopg2

            return psycopg2.connect(url.replace(parsed.scheme + "://", "postgresql://", 1))
        except ImportError:
            raise ClaimError("a PostgreSQL URL needs psycopg (3) or psycopg2 installed") from None
    if scheme in ("mysql", "mariadb"):
        try:
            import pymysql
        except ImportError:
            raise ClaimError("a MySQL/MariaDB URL needs PyMySQL installed") from None
        return pymysql.connect(host=parsed.hostname or "localhost", port=parsed.port or 3306,
                               user=unquote(parsed.username or ""), password=unquote(parsed.password or ""),
                               database=parsed.path.lstrip("/"), autocommit=False)  # fmt: skip
    raise ClaimError(f"{url!r}: the database URL's scheme is one of sqlite, postgresql, mysql")


def main(argv: list[str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(prog="appschedule-claim", description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("APPSCHEDULE_CLAIM_DATABASE"))
    parser.add_argument("--create", action="store_true", help="create the table when it is not there")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...: what the run does")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command: appschedule-claim [--database URL] -- CMD ARGS...")
    try:
        if not args.database:
            raise ClaimError("no database: --database URL or APPSCHEDULE_CLAIM_DATABASE")
        run = run_from_env()
        connection = connect(args.database)
        if args.create:
            create_table(connection)
        claimed = take(connection, run)
    except ClaimError as error:
        print(f"appschedule-claim: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # the driver's own: an unreachable database, refused credentials
        print(f"appschedule-claim: cannot claim {os.environ.get('APPSCHEDULE_IDEMPOTENCY_KEY', '')}: {error}",
              file=sys.stderr)  # fmt: skip
        return 2
    report_outcome(claimed)
    if not claimed.won:
        print(f"appschedule-claim: {run.key} is claimed by another run: nothing to do", file=sys.stderr)
        return 0
    try:
        code = subprocess.call(command)
    except OSError as error:
        print(f"appschedule-claim: cannot run {command[0]}: {error}", file=sys.stderr)
        code = 127
    try:
        (finish if code == 0 else release)(connection, run)
    except ClaimError as error:
        print(f"appschedule-claim: {error}", file=sys.stderr)
        return code or 2
    return code


if __name__ == "__main__":
    sys.exit(main())
