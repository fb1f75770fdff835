"""status.build reads the old status's task entries only for the tasks the ledger did not step (the others' entries
are the ledger's), and an old status written by hand can hold anything there."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from appschedule.core import status
from appschedule.core.models import TaskStatus

NOW = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)


def built(old_tasks: list[Any], ledgers: dict[str, TaskStatus]) -> dict[str, Any]:
    ready = status.ready_condition([], 2, "web", {}, 1, "2026-10-25T01:30:00Z")
    return status.build(
        old={"tasks": old_tasks},
        generation=1,
        ready=ready,
        task_names=["beat", "sweep"],
        running={},
        last_runs=[],
        image=None,
        task_count=2,
        now=NOW,
        ledgers=ledgers,
    )


def test_a_task_the_ledger_stepped_is_its_entry_and_the_others_keep_theirs() -> None:
    kept = {"name": "sweep", "lastSuccessfulTime": "2026-10-25T01:00:00Z"}
    stepped = TaskStatus(name="beat", last_successful_time="2026-10-25T01:29:00Z")
    old = [{"name": "beat", "lastSuccessfulTime": "2026-10-24T00:00:00Z"}, kept]
    tasks = {t["name"]: t for t in built(old, {"beat": stepped})["tasks"]}
    assert tasks["beat"]["lastSuccessfulTime"] == "2026-10-25T01:29:00Z"
    assert tasks["sweep"]["lastSuccessfulTime"] == "2026-10-25T01:00:00Z"


def test_task_entries_written_by_hand_are_left_out_whatever_they_hold() -> None:
    old = [["beat"], {"name": ["beat"]}, {"name": {"a": 1}}, {"name": 7}, "sweep", None, {"name": "sweep", "x": 1}]
    stepped = TaskStatus(name="beat", last_successful_time="2026-10-25T01:29:00Z")
    tasks = {t["name"]: t for t in built(old, {"beat": stepped})["tasks"]}
    assert tasks["beat"]["lastSuccessfulTime"] == "2026-10-25T01:29:00Z"
    assert tasks["sweep"] == {"name": "sweep"}  # its entry did not parse (an unknown field): a new one
