"""Claim a scheduled run once, in the app's own database (DESIGN "The app's half: the claim").

Every run the operator starts carries its task and scheduled time (``APPSCHEDULE_TASK``,
``APPSCHEDULE_SCHEDULED_TIME``, ``APPSCHEDULE_IDEMPOTENCY_KEY``). Two Jobs for one fire (a manual re-run, a
second controller, the repeat of a wall time at a daylight-saving fall-back) carry the same ones. The claim
turns the second into a no-op::

    import sqlite3, appschedule_claim

    with appschedule_claim.claim(connection) as run:
        if run.won:
            send_the_report()

One row per (task, scheduled time) in ``appschedule_claims``: whoever inserts it first wins; the others
lose and do nothing. A run that ends well marks the row finished, and a finished fire stays done. A run that
raises releases its row, so the Job's next attempt (or a re-run) can claim it. A row left unfinished by a
run that died (killed, OOM) is taken over by the next attempt of the same Job at once, and by any other run
once it is older than the task's ``activeDeadlineSeconds`` (the run was stopped by then): exactly one of
several racing takes it. Every time is the database's (``CURRENT_TIMESTAMP``): the app host's clock decides
nothing.

Connections: DB-API 2.0 (sqlite3, psycopg 3, psycopg2, PyMySQL, mysqlclient), recognised by their module, and
SQLAlchemy's: an ``Engine`` (the claim borrows a connection of its pool and gives it back) or a ``Connection``
(the claim runs on its driver's connection and commits there: pass the Engine unless that is what you want).
The outcome is written to the container's termination message (``/dev/termination-log``), where the
operator reads it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = ["TABLE", "Claim", "ClaimError", "Run", "claim", "create_table", "driver_connection", "run_from_env"]

TABLE = "appschedule_claims"
DEFAULT_DEADLINE = 3600  # the operator's default activeDeadlineSeconds
TERMINATION_LOG = "/dev/termination-log"
_SUFFIX = re.compile(r"^.+-(\d{8,10})$")  # <cronjob>-<minutes since the epoch>: the CronJob controller's name


class ClaimError(Exception):
    """The run cannot be claimed (no key, no database, a table of another shape): never a silent run."""


@dataclass(frozen=True)
class Run:
    """The run to claim: its task, its scheduled time (RFC 3339, UTC), who claims it, how long a claim holds."""

    task: str
    scheduled_time: str
    owner: str
    deadline: int = DEFAULT_DEADLINE

    @property
    def key(self) -> str:
        return f"{self.task}@{self.scheduled_time}"


def run_from_env(env: Mapping[str, str] | None = None) -> Run:
    """The run of this container, from the variables the operator sets. When the key webhook was down
    (no APPSCHEDULE_SCHEDULED_TIME), the time is read from the Job's name as ``appschedule key`` does for a
    Job the CronJob controller made; a Job made by hand then has no time to claim (ClaimError)."""
    env = os.environ if env is None else env
    task = env.get("APPSCHEDULE_TASK", "")
    if not task:
        raise ClaimError("APPSCHEDULE_TASK is not set: is this a run the operator started?")
    stated = env.get("APPSCHEDULE_SCHEDULED_TIME") or _from_name(env.get("APPSCHEDULE_JOB_NAME", ""))
    if not stated:
        raise ClaimError(
            "APPSCHEDULE_SCHEDULED_TIME is not set and the Job's name does not state a fire "
            "(the key webhook was down for a Job made by hand): nothing to claim"
        )
    moment = _parse(stated)
    key = env.get("APPSCHEDULE_IDEMPOTENCY_KEY")
    if key and key != f"{task}@{moment}":
        raise ClaimError(f"APPSCHEDULE_IDEMPOTENCY_KEY {key!r} is not {task}@{moment}: the variables disagree")
    owner = env.get("APPSCHEDULE_JOB_NAME") or env.get("HOSTNAME") or "unknown"
    deadline = env.get("APPSCHEDULE_ACTIVE_DEADLINE_SECONDS", "")
    return Run(task, moment, owner[:253], int(deadline) if deadline.isdigit() else DEFAULT_DEADLINE)


def _from_name(name: str) -> str:
    found = _SUFFIX.match(name)
    if not found:
        return ""
    return datetime.fromtimestamp(int(found.group(1)) * 60, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str) -> str:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ClaimError(f"the scheduled time {text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise ClaimError(f"the scheduled time {text!r} has no time zone")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the databases: what differs is the placeholder, "insert unless there", and "now plus N seconds"


@dataclass(frozen=True)
class Dialect:
    name: str
    placeholder: str
    insert: str  # INSERT ... that does nothing when the row is there
    suffix: str  # after the VALUES (...)
    later: str  # an SQL expression: the database's now plus {seconds} (a bound parameter) seconds
    timestamp: str  # the column type of a time


POSTGRES = Dialect("postgresql", "%s", "INSERT INTO", " ON CONFLICT DO NOTHING",
                   "CURRENT_TIMESTAMP + {p} * INTERVAL '1 second'", "TIMESTAMPTZ")  # fmt: skip
MYSQL = Dialect("mysql", "%s", "INSERT IGNORE INTO", "", "TIMESTAMPADD(SECOND, {p}, CURRENT_TIMESTAMP(6))",
                "DATETIME(6)")  # fmt: skip
SQLITE = Dialect("sqlite", "?", "INSERT OR IGNORE INTO", "", "strftime('%Y-%m-%d %H:%M:%f', 'now', {p} || ' seconds')",
                 "TEXT")  # fmt: skip
_NOW = {"postgresql": "CURRENT_TIMESTAMP", "mysql": "CURRENT_TIMESTAMP(6)",
        "sqlite": "strftime('%Y-%m-%d %H:%M:%f', 'now')"}  # fmt: skip


@contextlib.contextmanager
def driver_connection(connection: Any) -> Iterator[Any]:
    """The DB-API connection the claim's statements run on: ``connection`` itself, or SQLAlchemy's driver
    connection (of an Engine: borrowed from its pool for the block, then given back; of a Connection: its own)."""
    if not type(connection).__module__.startswith("sqlalchemy"):
        yield connection
        return
    if hasattr(connection, "raw_connection"):  # an Engine
        pooled = connection.raw_connection()
        try:
            yield _unwrapped(pooled)
        finally:
            pooled.close()
        return
    if type(connection).__name__ != "Connection":  # a Session, a Result...
        raise ClaimError(f"a {type(connection).__name__} of SQLAlchemy is not one the claim takes (an Engine or "
                         "a Connection)")  # fmt: skip
    yield _unwrapped(connection.connection)  # the pool's proxy of the Connection's driver connection


def _unwrapped(pooled: Any) -> Any:
    """The driver's connection in SQLAlchemy's pool proxy (``dbapi_connection`` from 1.4.24, ``connection`` before)."""
    return getattr(pooled, "dbapi_connection", None) or pooled.connection


def dialect_of(connection: Any) -> Dialect:
    """The dialect of a DB-API connection, by the module of its class."""
    module = type(connection).__module__.split(".")[0]
    if module in ("sqlite3", "_sqlite3"):
        return SQLITE
    if module in ("psycopg", "psycopg2"):
        return POSTGRES
    if module in ("pymysql", "MySQLdb", "mysql", "mariadb"):
        return MYSQL
    raise ClaimError(f"a connection of {type(connection).__module__}.{type(connection).__name__} is not one "
                     "the claim knows (sqlite3, psycopg, psycopg2, pymysql, MySQLdb)")  # fmt: skip


def create_table(connection: Any) -> None:
    """Create ``appschedule_claims`` unless it is there (its shape is checked at every claim)."""
    with driver_connection(connection) as driver:
        _create_table(driver)


def _create_table(connection: Any) -> None:
    """CREATE TABLE IF NOT EXISTS, once more when a racing run created it first: PostgreSQL checks "IF NOT
    EXISTS" before it waits for the other creation, whose commit then fails this one on its catalogue's unique
    index ("already exists", "duplicate key"); once that run has committed, the table is there."""
    for attempt in range(3):
        try:
            _create_table_once(connection)
            return
        except ClaimError as error:
            if attempt == 2 or not _created_by_a_racer(error):
                raise


def _created_by_a_racer(error: Exception) -> bool:
    text = str(error).lower()
    return "already exists" in text or "duplicate key" in text


def _create_table_once(connection: Any) -> None:
    d = dialect_of(connection)
    _execute(connection, f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        task VARCHAR(63) NOT NULL,
        scheduled_for VARCHAR(32) NOT NULL,
        claimed_by VARCHAR(253) NOT NULL,
        claimed_at {d.timestamp} NOT NULL,
        expires_at {d.timestamp} NOT NULL,
        finished_at {d.timestamp} NULL,
        takeovers INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (task, scheduled_for))""", ())  # fmt: skip
    connection.commit()


@dataclass
class Claim:
    """What a claim came to: ``won`` (this run does the work), ``outcome`` one of won, taken-over, lost."""

    run: Run
    outcome: str

    @property
    def won(self) -> bool:
        return self.outcome in ("won", "taken-over")


def take(connection: Any, run: Run) -> Claim:
    """Claim ``run``: insert its row, else take over a row its own Job left or one past its deadline, else
    lose. Each statement commits on its own, so racing claims serialize on the row."""
    with driver_connection(connection) as driver:
        return _take(driver, run)


def _take(connection: Any, run: Run) -> Claim:
    d = dialect_of(connection)
    p = d.placeholder
    now, later = _NOW[d.name], d.later.format(p=p)
    inserted = _execute(
        connection,
        f"{d.insert} {TABLE} (task, scheduled_for, claimed_by, claimed_at, expires_at, takeovers) "
        f"VALUES ({p}, {p}, {p}, {now}, {later}, 0){d.suffix}",
        (run.task, run.scheduled_time, run.owner, run.deadline),
    )
    connection.commit()
    if inserted == 1:
        return Claim(run, "won")
    taken = _execute(
        connection,
        f"UPDATE {TABLE} SET claimed_by = {p}, claimed_at = {now}, expires_at = {later}, "
        f"takeovers = takeovers + 1 WHERE task = {p} AND scheduled_for = {p} AND finished_at IS NULL "
        f"AND (expires_at < {now} OR claimed_by = {p})",
        (run.owner, run.deadline, run.task, run.scheduled_time, run.owner),
    )
    connection.commit()
    return Claim(run, "taken-over" if taken == 1 else "lost")


def finish(connection: Any, run: Run) -> None:
    """The run did its work: the fire is done for good."""
    with driver_connection(connection) as driver:
        _finish(driver, run)


def _finish(connection: Any, run: Run) -> None:
    d = dialect_of(connection)
    p = d.placeholder
    _execute(connection, f"UPDATE {TABLE} SET finished_at = {_NOW[d.name]} "
             f"WHERE task = {p} AND scheduled_for = {p} AND claimed_by = {p} AND finished_at IS NULL",
             (run.task, run.scheduled_time, run.owner))  # fmt: skip
    connection.commit()


def release(connection: Any, run: Run) -> None:
    """The run failed: its row goes, so the Job's next attempt or a re-run claims the fire again."""
    with driver_connection(connection) as driver:
        _release(driver, run)


def _release(connection: Any, run: Run) -> None:
    p = dialect_of(connection).placeholder
    _execute(connection, f"DELETE FROM {TABLE} WHERE task = {p} AND scheduled_for = {p} AND claimed_by = {p} "
             "AND finished_at IS NULL", (run.task, run.scheduled_time, run.owner))  # fmt: skip
    connection.commit()


@contextlib.contextmanager
def claim(connection: Any, run: Run | None = None, *, create: bool = False, report: bool = True) -> Iterator[Claim]:
    """Claim the run (this container's, from the environment, unless given); the block does the work when
    ``won``. Leaving the block marks the run finished; an exception releases the claim and goes on. ``create``:
    create the table first. ``report``: write the outcome to the termination message."""
    run = run or run_from_env()
    with driver_connection(connection) as driver:
        if create:
            _create_table(driver)
        claimed = _take(driver, run)
    if report:
        report_outcome(claimed)
    try:
        yield claimed
    except BaseException:
        if claimed.won:
            with contextlib.suppress(Exception), driver_connection(connection) as driver:
                driver.rollback()
                _release(driver, run)
        raise
    if claimed.won:
        finish(connection, run)


def report_outcome(claimed: Claim, path: str | None = None) -> None:
    """``appschedule.dev/claim: <outcome> <key>`` in the container's termination message, which Kubernetes
    mounts (a file that is not there is not created: outside a pod there is nothing to tell)."""
    path = path or os.environ.get("APPSCHEDULE_TERMINATION_LOG", TERMINATION_LOG)
    if not os.path.isfile(path):
        return
    with contextlib.suppress(OSError), open(path, "a") as log:
        log.write(f"appschedule.dev/claim: {claimed.outcome} {claimed.run.key}\n")


def _execute(connection: Any, sql: str, params: tuple[Any, ...]) -> int:
    cursor = connection.cursor()
    try:
        cursor.execute(sql, params)
        return int(cursor.rowcount)
    except Exception as error:
        with contextlib.suppress(Exception):
            connection.rollback()
        if TABLE in sql and _missing_or_other_shape(error):
            raise ClaimError(f"{TABLE} is missing or of another shape ({error}); create it with create_table() "
                             "or claim(..., create=True)") from error  # fmt: skip
        raise ClaimError(f"the claim's statement failed: {error}") from error
    finally:
        with contextlib.suppress(Exception):
            cursor.close()


def _missing_or_other_shape(error: Exception) -> bool:
    text = str(error).lower()
    return any(w in text for w in ("no such table", "does not exist", "doesn't exist", "no such column",
                                   "unknown column", "has no column", "undefined"))  # fmt: skip
