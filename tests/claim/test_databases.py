"""The claim's conformance suite (libs/conformance/claim.json) on real PostgreSQL and MariaDB servers."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import psycopg
import pymysql
import pytest
import sqlalchemy
from sqlalchemy.pool import NullPool

from appschedule_claim import ClaimError, take

from . import servers
from .conformance import SUITE, play, run_of

_databases = itertools.count()


def _database(server: servers.Server) -> str:
    """A database of its own on ``server`` (each scenario starts from an empty table): its name."""
    name = f"claims_{next(_databases)}"
    if server.name == "postgresql":
        with psycopg.connect(f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return name
    admin = pymysql.connect(host="127.0.0.1", port=server.port, user="root")
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    admin.close()
    return name


def _connector(server: servers.Server) -> Callable[[], Any]:
    """DB-API connections (psycopg 3, PyMySQL) to a database of its own."""
    name = _database(server)
    if server.name == "postgresql":
        return lambda: psycopg.connect(f"host=127.0.0.1 port={server.port} user=postgres dbname={name}")
    return lambda: pymysql.connect(host="127.0.0.1", port=server.port, user="root", database=name)


def _engines(server: servers.Server) -> Callable[[], Any]:
    """SQLAlchemy Engines (on the same drivers) of a database of its own; no pool kept between claims."""
    name = _database(server)
    driver = "postgresql+psycopg://postgres" if server.name == "postgresql" else "mysql+pymysql://root"
    return lambda: sqlalchemy.create_engine(f"{driver}@127.0.0.1:{server.port}/{name}", poolclass=NullPool)


@pytest.mark.parametrize("scenario", SUITE["scenarios"], ids=[s["name"] for s in SUITE["scenarios"]])
def test_scenario(scenario: dict[str, Any], server: servers.Server) -> None:
    play(scenario, _connector(server))


@pytest.mark.parametrize("scenario", SUITE["scenarios"], ids=[s["name"] for s in SUITE["scenarios"]])
def test_scenario_through_sqlalchemy(scenario: dict[str, Any], server: servers.Server) -> None:
    play(scenario, _engines(server))


def test_a_table_of_another_shape_is_a_clear_error(server: servers.Server) -> None:
    (case,) = [c for c in SUITE["errors"] if "table" in c]
    connection = _connector(server)()
    with connection.cursor() as cursor:
        cursor.execute(case["table"])
    connection.commit()
    with pytest.raises(ClaimError, match=case["says"]):
        take(connection, run_of("job-a", 60))
    connection.close()
