"""The claim's conformance suite (libs/conformance/claim.json), run by the Python library against a database:
one function per kind of step, the scenarios and their expected outcomes are the data's."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from appschedule_claim import TABLE, Run, create_table, driver_connection, finish, release, take
from tests.kit.wait import wait_for

SUITE = json.loads((Path(__file__).resolve().parents[2] / "libs" / "conformance" / "claim.json").read_text())
Connect = Callable[[], Any]  # a new connection to the database under test (or an SQLAlchemy Engine of it)


def close(connection: Any) -> None:
    """A DB-API connection closed, an SQLAlchemy Engine's pool disposed of."""
    if hasattr(connection, "dispose"):
        connection.dispose()
    else:
        connection.close()


def run_of(owner: str, deadline: int) -> Run:
    return Run(SUITE["task"], SUITE["scheduled_time"], owner, deadline)


@contextmanager
def skewed(seconds: float) -> Iterator[None]:
    """The app host's clock moved by ``seconds``: every clock Python reads from it."""
    real = time.time
    with mock.patch("time.time", side_effect=lambda: real() + seconds):
        yield


def expired(connect: Connect) -> bool:
    """Whether the database's own clock is past the claim's deadline (a wait on the database, not the host)."""
    connection = connect()
    try:
        with driver_connection(connection) as driver:
            cursor = driver.cursor()
            cursor.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE expires_at < {_now(driver)}")
            found = bool(cursor.fetchone()[0])
            driver.commit()  # a pooled connection goes back with no transaction open
            return found
    finally:
        close(connection)


def _now(connection: Any) -> str:
    from appschedule_claim import _NOW, dialect_of

    return _NOW[dialect_of(connection).name]


def race(connect: Connect, count: int, deadline: int, create: bool = False) -> Counter[str]:
    """``count`` owners claim at once, each on a connection of its own, released together (each creating the
    table first with ``create``)."""
    outcomes: Counter[str] = Counter()
    errors: list[BaseException] = []
    start = threading.Barrier(count)
    lock = threading.Lock()

    def claimer(index: int) -> None:
        connection = connect()
        try:
            start.wait()
            if create:
                create_table(connection)
            outcome = take(connection, run_of(f"racer-{index}", deadline)).outcome
            with lock:
                outcomes[outcome] += 1
        except BaseException as error:  # a racer's failure fails the scenario
            errors.append(error)
        finally:
            close(connection)

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return outcomes


def play(scenario: dict[str, Any], connect: Connect) -> None:
    """One scenario, step by step, against a database whose table is empty."""
    deadline = int(scenario["deadline"])
    connection = connect()
    if not scenario.get("fresh"):
        create_table(connection)
    shift = 0.0
    try:
        for step in scenario["steps"]:
            with skewed(shift):
                if "claim" in step:
                    got = take(connection, run_of(step["claim"], deadline)).outcome
                    assert got == step["expect"], f"{scenario['name']}: {step} gave {got}"
                elif "finish" in step:
                    finish(connection, run_of(step["finish"], deadline))
                elif "fail" in step:
                    release(connection, run_of(step["fail"], deadline))
                elif "expire" in step:
                    wait_for(lambda: expired(connect), timeout=deadline + 30, interval=0.1,
                             what="the database's clock past the deadline")  # fmt: skip
                elif "skew" in step:
                    shift += float(step["skew"])
                elif "race" in step:
                    got_counts = dict(race(connect, int(step["race"]), deadline, bool(step.get("create"))))
                    assert got_counts == step["expect"], f"{scenario['name']}: {got_counts}"
                else:
                    raise AssertionError(f"{scenario['name']}: a step of no known kind: {step}")
    finally:
        close(connection)
