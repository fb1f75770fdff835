"""H in schedules (core/schedule.py resolve_hashed, render, `appschedule next`): Jenkins' hashed forms
resolved to a plain schedule from a stable hash of namespace, AppSchedule and task."""

from __future__ import annotations

import copy
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from appschedule.cli import main
from appschedule.core import schedule
from appschedule.core.render import render, valid_tasks
from appschedule.core.schedule import ScheduleError, hashed_seed, parse, resolve_hashed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEED = hashed_seed("shop", "app", "report")


def test_the_resolution_is_pinned_so_it_never_changes_across_versions() -> None:
    # a changed hash would move every user's H schedule on upgrade: this pins the algorithm
    assert resolve_hashed("H H * * *", SEED) == "40 14 * * *"
    assert resolve_hashed("H/15 * * * *", SEED) == "10-59/15 * * * *"
    assert resolve_hashed("H(0-29) H(9-17) * * 1-5", SEED) == "10 17 * * 1-5"
    assert resolve_hashed("H H H * *", SEED) == "40 14 10 * *"


def test_without_h_the_expression_is_returned_unchanged() -> None:
    for expression in ("0 17 * * 5", "*/5 * * * *", "0 9 * * THU", "@hourly", "0 0 1 JAN,MAR *", "H"):
        assert resolve_hashed(expression, SEED) == expression


@pytest.mark.parametrize(
    ("form", "index", "low", "high"),
    [("H", 0, 0, 59), ("H", 1, 0, 23), ("H", 2, 1, 28), ("H", 3, 1, 12), ("H", 4, 0, 6), ("H(5-9)", 0, 5, 9),
     ("H(1-1)", 1, 1, 1)],
)  # fmt: skip
def test_every_form_resolves_within_its_range_and_parses(form: str, index: int, low: int, high: int) -> None:
    seen = set()
    for n in range(200):
        fields = ["*"] * 5
        fields[index] = form
        resolved = resolve_hashed(" ".join(fields), hashed_seed("ns", "app", f"task-{n}"))
        value = int(resolved.split()[index])
        assert low <= value <= high
        parse(resolved, "Europe/Berlin")
        seen.add(value)
    assert len(seen) >= min(high - low + 1, 50)  # 200 tasks reach every value of a small range, most of 60


def test_steps_start_below_the_step_and_run_to_the_end_of_the_range() -> None:
    for n in range(100):
        seed = hashed_seed("ns", "app", f"t{n}")
        start, rest = resolve_hashed("H/15 * * * *", seed).split()[0].split("-")
        assert 0 <= int(start) < 15 and rest == "59/15"
        start, rest = resolve_hashed("H(10-40)/7 * * * *", seed).split()[0].split("-")
        assert 10 <= int(start) < 17 and rest == "40/7"


def test_tasks_written_alike_spread_over_the_hour() -> None:
    minutes = Counter(resolve_hashed("H * * * *", hashed_seed("shop", "app", f"task-{n}")).split()[0]
                      for n in range(600))  # fmt: skip
    assert len(minutes) == 60
    assert max(minutes.values()) <= 25  # 10 expected per minute; nothing near all at :00


def test_the_fields_hash_apart_and_the_names_all_count() -> None:
    assert len({resolve_hashed("H H * * *", hashed_seed("ns", "app", f"t{n}")) for n in range(50)}) > 45
    base = resolve_hashed("H H * * *", hashed_seed("ns", "app", "report"))
    others = [hashed_seed("ns2", "app", "report"), hashed_seed("ns", "app2", "report"), hashed_seed("ns", "app", "r2")]
    assert all(resolve_hashed("H H * * *", seed) != base for seed in others)


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("H(50-10) * * * *", "minute field: 'H(50-10)': the range of H begins after it ends (H(10-50)?)"),
        ("* H(0-24) * * *", "hour field: 'H(0-24)': the range of H must lie within 0-23"),
        ("H/0 * * * *", "'H/0': the step must be 1 to 60"),
        ("* H(1-5)/6 * * *", "'H(1-5)/6': the step must be 1 to 5"),
        ("Hx * * * *", "minute field: 'Hx' is not an H form; use H, H(a-b), H/n or H(a-b)/n"),
        ("H(1-5 * * * *", "is not an H form"),
        ("* * * * H(1-7)", "day of week field: 'H(1-7)': the range of H must lie within 0-6"),
    ],
)
def test_a_bad_h_form_is_explained(expression: str, said: str) -> None:
    with pytest.raises(ScheduleError) as error:
        resolve_hashed(expression, SEED)
    assert said in str(error.value)


def _example() -> tuple[dict[str, Any], dict[str, Any]]:
    appschedule = yaml.safe_load((EXAMPLES / "appschedule.yaml").read_text())
    deployment = yaml.safe_load((EXAMPLES / "deployment.yaml").read_text())
    return appschedule, deployment


def test_the_cronjob_and_its_environment_get_the_resolved_schedule_in_a_zone_with_daylight_saving() -> None:
    appschedule, deployment = _example()
    appschedule["spec"]["tasks"][0]["schedule"] = "H 2 * * *"  # weekly-report, in Europe/Berlin: 2:xx local
    result = render(appschedule, deployment)
    assert result.errors == []
    cronjob = result.cronjobs["weekly-report"]
    seed = hashed_seed(appschedule["metadata"]["namespace"], appschedule["metadata"]["name"], "weekly-report")
    resolved = resolve_hashed("H 2 * * *", seed)
    assert cronjob["spec"]["schedule"] == resolved and "H" not in resolved
    assert cronjob["spec"]["timeZone"] == "Europe/Berlin"
    container = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    env = {v["name"]: v.get("value") for v in container["env"]}
    assert env["APPSCHEDULE_SCHEDULE"] == resolved  # `appschedule key` in the container rounds by it
    # the resolved time keeps the controller's daylight-saving rules: 2:xx does not exist on 29 March and
    # comes twice on 25 October
    plain = parse(cronjob["spec"]["schedule"], "Europe/Berlin")
    spring = schedule.fires_after(plain, datetime(2026, 3, 27, 12, tzinfo=UTC), 3)
    assert [f.astimezone(plain.zone).day for f in spring] == [28, 30, 31]
    autumn = schedule.fires_after(plain, datetime(2026, 10, 24, 12, tzinfo=UTC), 3)
    assert [f.astimezone(plain.zone).day for f in autumn] == [25, 25, 26]
    again = render(copy.deepcopy(appschedule), deployment).cronjobs["weekly-report"]
    assert again["spec"]["schedule"] == resolved  # every plan renders the same
    moved = copy.deepcopy(appschedule)
    moved["metadata"]["namespace"] = "other"
    assert render(moved, deployment).cronjobs["weekly-report"]["spec"]["schedule"] == resolve_hashed(
        "H 2 * * *", hashed_seed("other", appschedule["metadata"]["name"], "weekly-report")
    )


def test_a_bad_h_form_is_a_spec_error_of_that_task_and_the_others_render() -> None:
    appschedule, deployment = _example()
    appschedule["spec"]["tasks"][0]["schedule"] = "H(50-10) * * * *"
    result = render(appschedule, deployment)
    (error,) = result.errors
    assert error.field == "spec.tasks[0].schedule" and error.task == "weekly-report"
    assert "'H(50-10)': the range of H begins after it ends" in str(error)
    assert "weekly-report" not in result.cronjobs and len(result.cronjobs) == 2
    assert "weekly-report" not in valid_tasks(appschedule["spec"])


def test_next_prints_the_resolved_schedule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    appschedule, _ = _example()
    appschedule["spec"]["tasks"] = [{"name": "report", "schedule": "H 17 * * 5", "command": ["node", "r.js"]}]
    path = tmp_path / "h.yaml"
    path.write_text(yaml.safe_dump(appschedule))
    assert main(["next", "-f", str(path), "-n", "1", "--after", "2026-03-27T12:00:00Z"]) == 0
    resolved = resolve_hashed("H 17 * * 5", hashed_seed("shop", appschedule["metadata"]["name"], "report"))
    out = capsys.readouterr().out
    assert f"report (H 17 * * 5 = {resolved} in shop, Europe/Berlin):" in out


def test_a_schedule_without_an_h_item_is_untouched_spaces_and_all_and_h_keeps_the_spacing() -> None:
    for expression in ("0  9 * * THU", " 0 9 * * THU", "0 9 * * THU ", "0\t9 * * *"):
        assert resolve_hashed(expression, SEED) == expression
    assert resolve_hashed("H  9 * * THU", SEED) == "40  9 * * THU"


def test_h_in_the_day_of_month_stays_within_days_every_month_has() -> None:
    with pytest.raises(ScheduleError, match="the range of H must lie within 1-28"):
        resolve_hashed("0 0 H(28-31) 2 *", SEED)
    with pytest.raises(ScheduleError, match="the step must be 1 to 28"):
        resolve_hashed("0 0 H/30 2 *", SEED)
    for n in range(100):  # valid for every task, whatever its names hash to
        parse(resolve_hashed("H H H/7 2 *", hashed_seed("ns", "app", f"t{n}")), "Europe/Berlin")


@pytest.mark.parametrize("expression", ["0 0 31 H *", "0 0 30 H(1-3) *", "0 0 31 H/5 *"])
def test_whether_h_is_valid_never_depends_on_the_names(expression: str) -> None:
    """An H choice that can never fire (the month H picks has no 31st) is not taken: the webhook's check (hashed
    with an empty seed) and every task's own resolution agree, for every name."""
    for n in range(40):
        resolved = resolve_hashed(expression, hashed_seed("ns", f"app{n}", "report"))
        assert parse(resolved, "Europe/Berlin").expression == resolved
    appschedule, deployment = _example()
    appschedule["spec"]["tasks"][0]["schedule"] = expression
    assert "weekly-report" in valid_tasks(appschedule["spec"])
    assert render(appschedule, deployment).errors == []


def test_an_h_schedule_that_can_never_fire_is_invalid_for_every_name_and_declares_nothing() -> None:
    """Stored while validation was bypassed, it never claims its task from a younger valid AppSchedule."""
    appschedule, deployment = _example()
    appschedule["spec"]["tasks"][0]["schedule"] = "0 0 30 H(2-2) *"
    assert "weekly-report" not in valid_tasks(appschedule["spec"])
    for n in range(10):
        appschedule["metadata"]["name"] = f"app{n}"
        (error,) = render(appschedule, deployment).errors
        assert error.task == "weekly-report" and "can never fire" in str(error)
