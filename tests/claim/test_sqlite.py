"""The claim's conformance suite (libs/conformance/claim.json) on SQLite, and its errors: no server needed, so
it runs with the unit tests' speed (PostgreSQL and MariaDB: see README, "The app's half")."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
import sqlalchemy.orm
from sqlalchemy.pool import NullPool

from appschedule import cli
from appschedule_claim import ClaimError, claim, create_table, run_from_env, take
from appschedule_claim.__main__ import main

from .conformance import SUITE, play, run_of


@pytest.mark.parametrize("scenario", SUITE["scenarios"], ids=[s["name"] for s in SUITE["scenarios"]])
def test_scenario(scenario: dict[str, Any], tmp_path: Path) -> None:
    if "server_only" in scenario:
        pytest.skip(scenario["server_only"])
    path = tmp_path / "app.db"
    play(scenario, lambda: sqlite3.connect(path, timeout=60, check_same_thread=False))


@pytest.mark.parametrize("scenario", SUITE["scenarios"], ids=[s["name"] for s in SUITE["scenarios"]])
def test_scenario_through_sqlalchemy(scenario: dict[str, Any], tmp_path: Path) -> None:
    if "server_only" in scenario:
        pytest.skip(scenario["server_only"])
    url = f"sqlite:///{tmp_path / 'app.db'}"
    play(scenario, lambda: sqlalchemy.create_engine(url, poolclass=NullPool, connect_args={"timeout": 60}))


def test_an_sqlalchemy_connection_claims_on_its_own_driver_connection(tmp_path: Path) -> None:
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.connect() as connection:
        with claim(connection, run_of("job-a", 3600), create=True, report=False) as first:
            assert first.won
        with claim(connection, run_of("job-b", 3600), report=False) as second:
            assert not second.won
        rows = connection.exec_driver_sql("SELECT claimed_by, finished_at IS NOT NULL FROM appschedule_claims")
        assert [tuple(row) for row in rows] == [("job-a", 1)]
    with pytest.raises(ClaimError, match="not one the claim takes"):
        take(sqlalchemy.orm.Session(engine), run_of("job-c", 60))
    engine.dispose()


@pytest.mark.parametrize("case", SUITE["errors"], ids=[c["name"] for c in SUITE["errors"]])
def test_error(case: dict[str, Any], tmp_path: Path) -> None:
    if "env" in case:
        if "key" in case:
            assert run_from_env(case["env"]).key == case["key"]
            return
        with pytest.raises(ClaimError, match=case["says"]):
            run_from_env(case["env"])
        return
    connection = sqlite3.connect(tmp_path / "app.db")
    connection.execute(case["table"])
    with pytest.raises(ClaimError, match=case["says"]):
        take(connection, run_of("job-a", 60))


def test_the_context_manager_finishes_a_run_that_ended_well_and_releases_one_that_raised(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "app.db")

    def failing() -> None:
        with claim(connection, run_of("job-a", 3600), create=True, report=False) as first:
            assert first.won
            raise RuntimeError("the report failed")

    with pytest.raises(RuntimeError, match="the report failed"):
        failing()
    with claim(connection, run_of("job-b", 3600), report=False) as again:  # released: a re-run claims it
        assert again.outcome == "won"
    with claim(connection, run_of("job-c", 3600), report=False) as late:  # finished: done for good
        assert not late.won


def _operator_cli(argv: list[str]) -> int:
    return cli.main(["claim", *argv])  # `appschedule claim ...`: the operator's command, the library's form


@pytest.mark.parametrize("main", [main, _operator_cli], ids=["appschedule-claim", "appschedule claim"])
def test_the_command_line_runs_the_command_only_for_the_winner(
    main: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    database = f"sqlite:///{tmp_path / 'app.db'}"
    marker = tmp_path / "ran"
    monkeypatch.setenv("APPSCHEDULE_TASK", SUITE["task"])
    monkeypatch.setenv("APPSCHEDULE_SCHEDULED_TIME", SUITE["scheduled_time"])
    (tmp_path / "termination-log").touch()  # Kubernetes mounts it in every container
    monkeypatch.setenv("APPSCHEDULE_TERMINATION_LOG", str(tmp_path / "termination-log"))
    monkeypatch.setenv("APPSCHEDULE_JOB_NAME", "job-a")
    assert main(["--database", database, "--create", "--", "sh", "-c", f"echo a >> {marker}"]) == 0
    monkeypatch.setenv("APPSCHEDULE_JOB_NAME", "job-b")  # a duplicate Job of the same fire
    assert main(["--database", database, "--", "sh", "-c", f"echo b >> {marker}"]) == 0
    assert marker.read_text() == "a\n"  # the work was done once
    assert "claimed by another run: nothing to do" in capsys.readouterr().err
    key = f"{SUITE['task']}@{SUITE['scheduled_time']}"
    said = (tmp_path / "termination-log").read_text().splitlines()
    assert said == [f"appschedule.dev/claim: won {key}", f"appschedule.dev/claim: lost {key}"]


def test_the_command_line_fails_clearly_without_a_database_or_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("APPSCHEDULE_CLAIM_DATABASE", raising=False)
    monkeypatch.setenv("APPSCHEDULE_TASK", SUITE["task"])
    monkeypatch.setenv("APPSCHEDULE_SCHEDULED_TIME", SUITE["scheduled_time"])
    assert main(["--", "true"]) == 2
    assert "no database" in capsys.readouterr().err
    monkeypatch.delenv("APPSCHEDULE_TASK")
    assert main(["--database", f"sqlite:///{tmp_path / 'app.db'}", "--", "true"]) == 2
    assert "APPSCHEDULE_TASK is not set" in capsys.readouterr().err
    monkeypatch.setenv("APPSCHEDULE_TASK", SUITE["task"])
    assert main(["--database", "sqlite:////no/such/directory/app.db", "--", "true"]) == 2  # unreachable
    assert "cannot claim" in capsys.readouterr().err


def test_create_table_is_idempotent(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "app.db")
    create_table(connection)
    create_table(connection)
    assert take(connection, run_of("job-a", 60)).won


def test_the_outcome_goes_to_the_termination_message_only_inside_a_pod(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tmp_path / "termination-log"
    monkeypatch.setenv("APPSCHEDULE_TERMINATION_LOG", str(absent))
    with claim(sqlite3.connect(tmp_path / "app.db"), run_of("job-a", 60), create=True) as first:
        assert first.won
    assert not absent.exists()  # outside a pod: nothing created
