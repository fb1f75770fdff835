"""appschedule import source on a Rails app's recurring jobs (core/rbsource.py): Solid Queue's recurring.yml and
sidekiq-cron's schedule file. Each schedule, a cron line or an English phrase, is checked against Fugit itself
(Debian's ruby-fugit 1.5.2, `make ruby-tools`): the same fires over 2026 in Europe/Berlin and America/New_York,
their daylight-saving days included."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from appschedule.cli import main
from appschedule.core import rbsource
from appschedule.core.admission import check_appschedule
from appschedule.core.pysource import Scan
from appschedule.core.schedule import fires_between, parse

RAILS = Path(__file__).parent / "data" / "rails"
YEAR = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


def scanned(name: str) -> Scan:
    path = RAILS / "config" / name
    return rbsource.scan(path.read_text(), str(path))


def test_solid_queue_recurring_tasks_become_tasks() -> None:
    found = scanned("recurring.yml")
    tasks = {f.task["name"]: f.task for f in found.found}
    assert {n: (t["schedule"], t.get("timeZone")) for n, t in tasks.items()} == {
        "periodic-cleanup": ("0 * * * *", None),  # production's, not development's every minute
        "periodic-command": ("0 5 * * *", None),
        "weekly-digest": ("0 9 * * 1", "Europe/Berlin"),
        "invoices": ("30 2 * * *", "Europe/Berlin"),
    }
    assert tasks["periodic-cleanup"]["command"] == [
        "bin/rails",
        "runner",
        'CleanSoftDeletedRecordsJob.perform_now(*JSON.parse("[1000, {\\"batch_size\\": 500}]"))',
    ]
    assert tasks["periodic-command"]["command"] == ["bin/rails", "runner", "SoftDeletedRecord.due.delete_all"]
    assert [f.source.rsplit(":", 1)[1] for f in found.found] == ["3", "8", "12", "15"]
    reasons = {u.source.rsplit(":", 1)[1]: u.reason for u in found.unfaithful}
    assert "only the first time of several" in reasons["18"]
    assert "seconds" in reasons["21"]


def test_sidekiq_cron_jobs_become_tasks() -> None:
    found = scanned("schedule.yml")
    tasks = {f.task["name"]: f.task for f in found.found}
    assert tasks["second-job"]["command"] == [
        "bin/rails",
        "runner",
        'HardWorker.new.perform(*JSON.parse("[{\\"hard\\": \\"stuff\\"}]"))',  # a hash is one argument
    ]
    assert tasks["natural"] == {
        "name": "natural",
        "schedule": "30 8 * * 1,2,3,4,5",
        "command": ["bin/rails", "runner", "Reports::MorningWorker.perform_now()"],  # active_job: true
        "timeZone": "Europe/Berlin",
    }
    assert tasks["paused"]["suspend"] is True
    last_day, new_york = found.unfaithful
    assert last_day.source.endswith(":24") and "L, W, #" in last_day.reason
    assert (
        new_york.source.endswith(":28") and "does not read a phrase with the zone America/New_York" in new_york.reason
    )


def test_what_is_not_read_is_said() -> None:
    for phrase, why in [
        ("every other tuesday", "not a day this import reads"),
        ("in 5 minutes", "not a phrase this import reads"),
        ("every day at 25:00", "not a time of day"),
        ("every 90 minutes", "does not fit a cron field"),
        ("0 0 * * * Mars/Olympus", "Mars/Olympus"),
        ("every hour at 5pm", "a time with every hour"),
    ]:
        with pytest.raises(rbsource.FugitError, match=why):
            rbsource.fugit_cron(phrase)
    assert rbsource.scan("just: [a, list]\n", "other.yml").found == []


def test_the_import_reads_a_rails_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "source", str(RAILS), "--deployment", "web", "--name", "shop"]) == 0
    out = capsys.readouterr()
    document = yaml.safe_load(out.out)
    assert check_appschedule(document) is None
    assert len(document["spec"]["tasks"]) == 8
    assert "recurring.yml:18 (Solid Queue)" in out.err and "schedule.yml:24 (sidekiq-cron)" in out.err


PHRASES = [
    "every minute", "every 5 minutes", "every 10 min", "every 7 minutes", "every hour", "every 2 hours",
    "every 5 hours", "every day", "every 2 days", "every week", "every month", "every day at 5pm",
    "at 5am every day", "every day at noon", "every day at midnight", "every day at 2:30am", "every weekday at 8:30",
    "every monday at 9am", "every tuesday and friday at 18:15", "every sunday at 12am",
    "30 2 * * *", "*/20 2 * * *", "0 0 6 * * *", "0 12 1 * 1", "0 9 * * mon-fri", "0 0 1 */3 *",
]  # fmt: skip
# around the transitions only: Fugit takes about a millisecond a fire
DENSE = ("every minute", "every 5 minutes", "every 10 min", "every 7 minutes", "every hour", "every 2 hours",
         "every 5 hours", "*/20 2 * * *")  # fmt: skip
WINDOWS = {  # the days around each zone's transitions in 2026
    "Europe/Berlin": [(datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 31, tzinfo=UTC)),
                      (datetime(2026, 10, 24, tzinfo=UTC), datetime(2026, 10, 27, tzinfo=UTC))],
    "America/New_York": [(datetime(2026, 3, 7, tzinfo=UTC), datetime(2026, 3, 10, tzinfo=UTC)),
                         (datetime(2026, 10, 31, tzinfo=UTC), datetime(2026, 11, 3, tzinfo=UTC))],
}  # fmt: skip
# what the import lists though Fugit 1.5.2 reads it: 12am (Fugit reads noon); a phrase with a zone it cannot read
REFUSED = {("every sunday at 12am", z) for z in ("Europe/Berlin", "America/New_York")} | {
    (p, "America/New_York") for p in PHRASES if not p[0].isdigit() and p[0] != "*"
}


def test_every_schedule_fires_when_fugit_does() -> None:
    """A schedule the import translates fires exactly when Fugit's does; one Fugit reads as no schedule (a phrase
    with America/New_York in 1.5.2) is listed, never translated."""
    ruby = shutil.which("ruby")
    if ruby is None:
        pytest.fail("needs Ruby and Fugit: make ruby-tools")
    asks: list[dict[str, Any]] = []
    cases = []
    for phrase in PHRASES:
        for zone in ("Europe/Berlin", "America/New_York"):
            for start, end in WINDOWS[zone] if phrase in DENSE else [YEAR]:
                cases.append((phrase, zone, start, end))
                asks.append({"schedule": f"{phrase} {zone}", "start": int(start.timestamp()) - 1,
                             "end": int(end.timestamp())})  # fmt: skip
    answer = subprocess.run(
        [ruby, "fires.rb"], cwd=RAILS, input=json.dumps(asks), capture_output=True, text=True, timeout=300, check=True
    )
    refused = set()
    for (phrase, zone, start, end), theirs in zip(cases, json.loads(answer.stdout), strict=True):
        try:
            schedule, given = rbsource.fugit_cron(f"{phrase} {zone}")
        except rbsource.FugitError:
            refused.add((phrase, zone))
            continue
        assert given == zone and theirs["cron"] is not None, (phrase, zone, "translated, but Fugit reads no schedule")
        fugit = {datetime.fromtimestamp(t, UTC) for t in theirs["fires"]}
        mine = set(fires_between(parse(schedule, zone), start - timedelta(seconds=1), end))
        assert mine, phrase
        assert mine == fugit, (phrase, zone, schedule, theirs["cron"], sorted(mine ^ fugit)[:4])
    assert refused == REFUSED
