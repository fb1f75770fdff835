"""The no_clock contract of .importlinter (hack/lint/contracts.py) finds every way of reading the clock."""

from __future__ import annotations

from hack.lint.contracts import clock_reads


def test_finds_reads_of_the_clock_under_any_name() -> None:
    source = """
import time as t
from datetime import UTC, date, datetime
from datetime import datetime as dt

a = datetime.now(UTC)
b = dt.utcnow()
c = date.today()
d = time.monotonic()
"""
    assert [line for line, _ in clock_reads(source)] == [6, 7, 8, 9]
    assert clock_reads("x = datetime.now()")[0][1] == "datetime.now()"


def test_leaves_time_passed_in_alone() -> None:
    source = """
from datetime import datetime, timedelta

def next_after(now: datetime) -> datetime:
    return now.replace(second=0) + timedelta(minutes=1)

later = next_after(datetime.fromisoformat("2026-03-29T01:30:00+00:00"))
"""
    assert clock_reads(source) == []
