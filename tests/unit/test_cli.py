"""The appschedule command: render, next, crd; bad input gets one line and a non-zero exit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from appschedule import cli
from appschedule.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
APPSCHEDULE = str(EXAMPLES / "appschedule.yaml")
DEPLOYMENT = str(EXAMPLES / "deployment.yaml")


def test_render_prints_cronjobs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "-f", APPSCHEDULE, "--deployment", DEPLOYMENT]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["metadata"]["name"] for d in documents] == [
        "shop-weekly-report",
        "shop-nightly-cleanup",
        "shop-sync-inventory",
    ]


def test_next_prints_utc_then_local(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["next", "-f", APPSCHEDULE, "-n", "2", "--after", "2026-03-27T12:00:00Z"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "weekly-report (0 17 * * 5, Europe/Berlin):"
    assert out[1].split() == ["2026-03-27T16:00:00Z", "2026-03-27T17:00:00+01:00", "Europe/Berlin"]
    assert out[2].split() == ["2026-04-03T15:00:00Z", "2026-04-03T17:00:00+02:00", "Europe/Berlin"]


def test_crd_prints_the_crd(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crd"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["kind"] == "CustomResourceDefinition"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["render", "-f", "/nonexistent.yaml", "--deployment", DEPLOYMENT], "No such file"),
        (["next", "-f", APPSCHEDULE, "--after", "yesterday"], "not an RFC 3339 time"),
        (["next", "-f", APPSCHEDULE, "--after", "2026-03-07T12:00:00"], "time zone"),
        (["next", "-f", APPSCHEDULE, "-n", "0"], "positive"),
        (["render", "-f", DEPLOYMENT, "--deployment", DEPLOYMENT], "expected exactly one AppSchedule"),
        (["run", "--namespace", "shop", "--namespace", "team-*"], "a namespace's name, not 'team-*'"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_invalid_yaml_and_invalid_task(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed")
    assert main(["next", "-f", str(broken)]) == 1
    assert "not valid YAML" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    data = yaml.safe_load(Path(APPSCHEDULE).read_text())
    data["spec"]["tasks"][0]["schedule"] = "0 17 * * 7"
    bad.write_text(yaml.safe_dump(data))
    assert main(["render", "-f", str(bad), "--deployment", DEPLOYMENT]) == 1
    captured = capsys.readouterr()
    assert "task 'weekly-report' (spec.tasks[0].schedule)" in captured.err
    assert "shop-sync-inventory" in captured.out  # the other tasks still render


def test_a_user_without_passwd_entry_is_named_after_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_entry() -> str:
        raise KeyError("getpwuid(): uid not found: 65532")

    monkeypatch.delenv("POD_ID", raising=False)
    monkeypatch.setattr("getpass.getuser", no_entry)
    monkeypatch.setattr("socket.gethostname", lambda: "operator-7f9c-abcde")
    cli.name_without_passwd_entry()
    assert os.environ["POD_ID"] == "operator-7f9c-abcde"
    monkeypatch.setenv("POD_ID", "given")  # the chart's (the pod's name) wins
    cli.name_without_passwd_entry()
    assert os.environ["POD_ID"] == "given"


def test_a_user_with_a_name_keeps_kopfs_default_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_ID", raising=False)
    monkeypatch.setattr("getpass.getuser", lambda: "alice")
    cli.name_without_passwd_entry()
    assert "POD_ID" not in os.environ


def test_next_skips_the_tasks_blackouts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Good Friday 2026 (3 April) blacked out for every task: the weekly report's next fires are 27 March and
    10 April, across the spring-forward of 29 March."""
    body = yaml.safe_load(Path(APPSCHEDULE).read_text())
    body["spec"]["blackouts"] = [{"name": "good-friday", "dates": ["2026-04-03"]}]
    path = tmp_path / "appschedule.yaml"
    path.write_text(yaml.safe_dump(body))
    assert main(["next", "-f", str(path), "-n", "2", "--after", "2026-03-27T12:00:00Z"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "weekly-report (0 17 * * 5, Europe/Berlin):"
    assert [line.split()[0] for line in out[1:3]] == ["2026-03-27T16:00:00Z", "2026-04-10T15:00:00Z"]
