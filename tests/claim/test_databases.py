"""The claim's conformance suite (libs/conformance/claim.json) on real PostgreSQL and MariaDB servers."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import psycopg
import pymysql
import pytest

from appschedule_claim import ClaimError, take

from . import servers
from .conformance import SUITE, play, run_of

_databases = itertools.count()


def _connector(server: servers.Server) -> Callable[[], Any]:
    """Connections to a database of its own on ``server`` (each scenario starts from an empty table)."""
    name = f"claims_{next(_databases)}"
    if server.name == "postgresql":
        with psycopg.connect(f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return lambda: psycopg.connect(f"host=127.0.0.1 port={server.port} user=postgres dbname={name}")
    admin = pymysql.connect(host="127.0.0.1", port=server.port, user="root")
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    admin.close()
    return lambda: pymysql.connect(host="127.0.0.1", port=server.port, user="root", database=name)


@pytest.mark.parametrize("scenario", SUITE["scenarios"], ids=[s["name"] for s in SUITE["scenarios"]])
def test_scenario(scenario: dict[str, Any], server: servers.Server) -> None:
    play(scenario, _connector(server))


def test_a_table_of_another_shape_is_a_clear_error(server: servers.Server) -> None:
    (case,) = [c for c in SUITE["errors"] if "table" in c]
    connection = _connector(server)()
    with connection.cursor() as cursor:
        cursor.execute(case["table"])
    connection.commit()
    with pytest.raises(ClaimError, match=case["says"]):
        take(connection, run_of("job-a", 60))
    connection.close()
