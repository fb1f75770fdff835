"""appschedule import source on Laravel (core/phpsource.py, tree-sitter's PHP grammar): a console kernel's and
routes/console.php's schedules become tasks; each frequency method writes the fields Laravel's ManagesFrequencies
writes, in the chain's order (checked against Laravel's own trait where Debian's Laravel has the method); what
has no faithful translation is listed with the reason."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

import pytest
import yaml

from appschedule.cli import main
from appschedule.core import phpsource
from appschedule.core.admission import check_appschedule
from appschedule.core.pysource import Scan
from appschedule.core.schedule import Schedule, fires_between, parse

LARAVEL = Path(__file__).parent / "data" / "laravel"


def scanned(relative: str) -> Scan:
    path = LARAVEL / relative
    return phpsource.scan(path.read_text(), str(path))


def test_a_console_kernels_schedule_becomes_tasks() -> None:
    found = scanned("app/Console/Kernel.php")
    table = {
        (f.source.rsplit(":", 1)[1], str(f.task["name"])): (f.task["schedule"], f.task.get("timeZone"))
        for f in found.found
    }
    assert table == {
        ("18", "emails-send"): ("0 13 * * *", "America/New_York"),
        ("19", "report-weekly"): ("0 8 * * 1", None),
        ("20", "heartbeat"): ("*/5 * * * *", None),
        ("21", "weekly-revenue"): ("30 7 * * 1", "Europe/Berlin"),
        ("22", "node"): ("0 1,13 * * *", None),
        ("23", "backup-run"): ("30 2 * * *", "Europe/Berlin"),
        ("24", "cache-prune"): ("15 */2 * * 1-5", None),
        ("25", "invoices-close"): ("0 15 4 * *", None),
        ("26", "stats-quarter"): ("0 0 1 1-12/3 *", None),
        ("27", "telescope-prune"): ("0 0 * * *", None),
    }
    tasks = {f.task["name"]: f.task for f in found.found}
    assert tasks["emails-send"]["command"] == ["php", "artisan", "emails:send", "Taylor", "--force"]
    assert tasks["report-weekly"]["command"] == ["php", "artisan", "report:weekly", "--format=pdf"]
    assert tasks["report-weekly"]["concurrencyPolicy"] == "Forbid"  # withoutOverlapping()
    # the job's class through the file's use, alias included
    assert tasks["weekly-revenue"]["command"] == [
        "php",
        "artisan",
        "tinker",
        "--execute=dispatch_sync(new \\App\\Jobs\\Reports\\WeeklyRevenue);",
    ]
    assert tasks["node"]["command"] == ["sh", "-c", "node /home/forge/script.js"]
    reasons = {u.source.rsplit(":", 1)[1]: u.reason for u in found.unfaithful}
    assert reasons.keys() == {"28", "31", "32", "33", "34", "35"}
    assert "closure" in reasons["28"] and "between()" in reasons["31"] and "everyTenSeconds()" in reasons["32"]
    assert "lastDayOfMonth()" in reasons["33"] and "its class" in reasons["34"] and "not a literal" in reasons["35"]


def test_routes_console_schedules_become_tasks() -> None:
    found = scanned("routes/console.php")
    assert [(f.task["name"], f.task["schedule"]) for f in found.found] == [
        ("sitemap-generate", "0 1-23/2 * * 0"),
        ("reminders-send", "15 9 * * 1,4"),  # Schedule::MONDAY, Schedule::THURSDAY
        ("archive-run", "0 17 1 6 *"),
    ]


# the expression Laravel's ManagesFrequencies writes for each chain (spliceIntoPosition, in the chain's order)
FREQUENCIES = {
    "everyMinute()": "* * * * *",
    "everyTwoMinutes()": "*/2 * * * *",
    "everyThirtyMinutes()": "*/30 * * * *",
    "hourly()": "0 * * * *",
    "hourlyAt(17)": "17 * * * *",
    "hourlyAt([0, 30])": "0,30 * * * *",
    "everyOddHour(5)": "5 1-23/2 * * *",
    "everyEvenHour()": "0 0-22/2 * * *",
    "everySixHours(10)": "10 */6 * * *",
    "daily()": "0 0 * * *",
    "dailyAt('13:00')": "0 13 * * *",
    "dailyAt('9')": "0 9 * * *",
    "at('07:05')": "5 7 * * *",
    "twiceDaily()": "0 1,13 * * *",
    "twiceDailyAt(2, 14, 15)": "15 2,14 * * *",
    "weekly()": "0 0 * * 0",
    "weeklyOn(5)": "0 0 * * 5",
    "weeklyOn([1, 3], '8:30')": "30 8 * * 1,3",
    "monthly()": "0 0 1 * *",
    "monthlyOn()": "0 0 1 * *",
    "twiceMonthly(1, 16, '13:00')": "0 13 1,16 * *",
    "quarterly()": "0 0 1 1-12/3 *",
    "quarterlyOn(4, '14:00')": "0 14 4 1-12/3 *",
    "yearly()": "0 0 1 1 *",
    "yearlyOn(12, 24)": "0 0 24 12 *",
    "weekdays()->hourly()": "0 * * * 1-5",
    "hourly()->weekends()": "0 * * * 6,0",
    "days(0, 3)->at('23:59')": "59 23 * * 0,3",
    "daily()->everyFiveMinutes()": "*/5 0 * * *",  # the order matters: the minute last written wins
    "everyFiveMinutes()->daily()": "0 0 * * *",
    "cron('5 4 * * sun')->hourly()": "0 4 * * sun",
    "sundays()->cron('0 1 * * *')": "0 1 * * *",
}


@pytest.mark.parametrize(("chain", "expression"), FREQUENCIES.items())
def test_each_frequency_writes_what_laravel_writes(chain: str, expression: str) -> None:
    found = phpsource.scan(f"<?php\n$schedule->command('tick')->{chain};\n", "Kernel.php")
    assert [f.task["schedule"] for f in found.found] == [expression], found.unfaithful


LARAVEL_ROOT = Path("/usr/share/php/Illuminate/Console/Scheduling/ManagesFrequencies.php")


def test_each_frequency_is_what_laravels_own_trait_writes() -> None:
    """The table above against Laravel's ManagesFrequencies itself (Debian's php-laravel-framework, 8.83: `make
    php-tools`), for every chain that Laravel has; the chains of later Laravels (everyOddHour, weekends...) stay
    checked against the table, made from their source."""
    php = shutil.which("php")
    if php is None or not LARAVEL_ROOT.exists():
        pytest.fail("needs PHP and Laravel: make php-tools")
    chains = list(FREQUENCIES)
    answer = subprocess.run([php, str(LARAVEL / "frequencies.php")], input=json.dumps(chains), capture_output=True,
                            text=True, timeout=60, check=True)  # fmt: skip
    theirs = dict(zip(chains, json.loads(answer.stdout), strict=True))
    checked = {chain: written for chain, written in theirs.items() if written is not None and chain not in NEWER}
    assert len(checked) >= 25, f"Laravel answered only {sorted(checked)}"
    for chain, written in checked.items():  # the same fires over a year in a zone with daylight saving
        ours, laravels = parse(FREQUENCIES[chain], "Europe/Berlin"), parse(written, "Europe/Berlin")
        assert _fires(ours) == _fires(laravels), (chain, FREQUENCIES[chain], written)


NEWER = {"everySixHours(10)": "8.83's everySixHours takes no offset (Laravel 10 added it): it ignores the 10"}
YEAR = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
CHANGES = [(datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 30, tzinfo=UTC)),  # Berlin's spring-forward
           (datetime(2026, 10, 24, tzinfo=UTC), datetime(2026, 10, 26, tzinfo=UTC))]  # fmt: skip


def _fires(schedule: Schedule) -> list[datetime]:
    """The first 3,000 fires of 2026 (all of a sparse schedule's) and every fire of the days Berlin changes."""
    return [*islice(fires_between(schedule, *YEAR), 3000), *(t for w in CHANGES for t in fires_between(schedule, *w))]


def test_a_file_the_grammar_cannot_parse_is_named_with_its_line() -> None:
    with pytest.raises(SyntaxError, match=r"Kernel\.php:3"):
        phpsource.scan("<?php\n\n$schedule->command('x')->daily(;\n", "Kernel.php")


def test_the_import_reads_a_laravel_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "source", str(LARAVEL), "--deployment", "web", "--name", "shop"]) == 0
    out = capsys.readouterr()
    document = yaml.safe_load(out.out)
    assert check_appschedule(document) is None
    assert len(document["spec"]["tasks"]) == 13
    assert "Kernel.php:28 (Laravel)" in out.err
