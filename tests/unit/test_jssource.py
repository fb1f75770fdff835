"""appschedule import source on JavaScript and TypeScript (core/jssource.py, tree-sitter's grammars): node-cron and
@nestjs/schedule, each translation checked against the frameworks' own fire times (node-cron 4.6.0's matcher,
@nestjs/schedule 6.0.1's cron 4.3.3, installed from npm in tests/unit/data/js by `make js-fixtures`) over 2026
in zones with daylight saving, where every difference must be one the task's notes say."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from appschedule.cli import main
from appschedule.core import jssource
from appschedule.core.admission import check_appschedule
from appschedule.core.pysource import Scan
from appschedule.core.schedule import fires_between, parse

JS = Path(__file__).parent / "data" / "js"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
YEAR = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


def cmd(task: dict[str, object]) -> list[str]:
    return cast(list[str], task["command"])


def scanned(relative: str) -> Scan:
    path = JS / relative
    return jssource.scan(path.read_text(), str(path), relative.split("/", 1)[1], NOW)


def test_node_cron_schedules_become_tasks_and_the_rest_is_listed() -> None:
    found = scanned("shop-cjs/server.js")
    tasks = {f.task["name"]: f.task for f in found.found}
    assert {n: (t["schedule"], t.get("timeZone")) for n, t in tasks.items()} == {
        "weekly-report": ("0 17 * * 5", "Europe/Berlin"),
        "purge-carts": ("30 2 * * *", "Europe/Berlin"),  # six fields, seconds 0
        "sync-inventory": ("*/15 9-17 * * 1-5", "America/New_York"),  # the imported name, not the alias
    }
    assert cmd(tasks["weekly-report"])[:2] == ["node", "-e"]
    assert 'require("./jobs/report").sendWeeklyReport()' in str(cmd(tasks["weekly-report"])[2])
    assert 'require("./jobs/stock").syncStock()' in str(cmd(tasks["sync-inventory"])[2])
    assert [f.source.rsplit(":", 1)[1] for f in found.found] == ["9", "10", "13"]
    reasons = {u.source.rsplit(":", 1)[1]: u.reason for u in found.unfaithful}
    assert "defined in the file that schedules it" in reasons["14"]
    assert "a seconds field '*/30'" in reasons["15"]
    assert "both day of month and day of week" in reasons["18"]
    assert "process.env.DIGEST_CRON is not a literal" in reasons["19"]


def test_an_es_module_runs_its_import_as_a_module() -> None:
    found = scanned("shop-esm/index.mjs")
    assert [f.task["name"] for f in found.found] == ["nightly", "hourly-sync", "nightly"]  # the CLI makes it nightly-2
    tasks = {f.task["name"]: f.task for f in reversed(found.found)}
    assert cmd(tasks["hourly-sync"]) == [
        "node",
        "--input-type=module",
        "-e",
        'import { hourly as run } from "./tasks/hourly.mjs"; await run();',
    ]
    assert cmd(tasks["nightly"])[-1] == 'import run from "./tasks/nightly.mjs"; await run();'


def test_nest_decorators_become_tasks_and_intervals_are_listed() -> None:
    found = scanned("shop-nest/src/report/report.service.ts")
    tasks = {f.task["name"]: f.task for f in found.found}
    assert {n: (t["schedule"], t.get("timeZone")) for n, t in tasks.items()} == {
        "daily-report": ("0 17 * * *", "Europe/Berlin"),  # CronExpression.EVERY_DAY_AT_5PM
        "purge-sessions": ("30 2 * * 1-5", "Europe/Berlin"),
    }
    script = str(cmd(tasks["daily-report"])[2])
    assert "createApplicationContext(AppModule" in script and "app.get(ReportService).sendDailyReport()" in script
    assert 'require("./dist/report/report.service.js")' in script
    reasons = sorted(u.reason.split(":")[0] for u in found.unfaithful)
    assert reasons == ["'*/30 * * * * *'", "@Interval", "@Timeout", "EVERY is not a literal", "utcOffset"]


def test_a_file_the_grammar_cannot_parse_is_named_with_its_line() -> None:
    with pytest.raises(SyntaxError, match=r"broken\.js:3: the grammar cannot parse it"):
        jssource.scan("const cron = require('node-cron');\n\ncron.schedule('* * * * *', () => {\n", "broken.js",
                      "broken.js", NOW)  # fmt: skip


def test_the_import_prints_one_valid_appschedule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "source", str(JS / "shop-cjs"), "--deployment", "web", "--name", "shop"]) == 0
    out = capsys.readouterr()
    import yaml

    document = yaml.safe_load(out.out)
    assert check_appschedule(document) is None
    assert [t["name"] for t in document["spec"]["tasks"]] == ["weekly-report", "purge-carts", "sync-inventory"]
    assert "server.js:15 (node-cron)" in out.err


# -- each translation against the framework's own fires


def node() -> str:
    found = shutil.which("node")
    if found is None or not (JS / "node_modules" / "node-cron").is_dir():
        pytest.fail("needs node and tests/unit/data/js/node_modules: make js-fixtures")
    return found


def framework_fires(asks: list[dict[str, Any]]) -> list[set[datetime]]:
    answer = subprocess.run(
        [node(), "fires.mjs"], cwd=JS, input=json.dumps(asks), capture_output=True, text=True, timeout=300, check=True
    )
    return [{datetime.fromtimestamp(t, UTC) for t in fires} for fires in json.loads(answer.stdout)]


# (fixture, task) -> the expression as written in the source, and the framework
WRITTEN = {
    ("shop-cjs/server.js", "weekly-report"): ("0 17 * * 5", "node-cron"),
    ("shop-cjs/server.js", "purge-carts"): ("0 30 2 * * *", "node-cron"),
    ("shop-cjs/server.js", "sync-inventory"): ("*/15 9-17 * * 1-5", "node-cron"),
    ("shop-esm/index.mjs", "nightly"): ("0 2 * * *", "node-cron"),
    ("shop-esm/index.mjs", "hourly-sync"): ("0 * * * *", "node-cron"),
    ("shop-nest/src/report/report.service.ts", "daily-report"): ("0 17 * * *", "nest"),  # EVERY_DAY_AT_5PM
    ("shop-nest/src/report/report.service.ts", "purge-sessions"): ("0 30 2 * * 1-5", "nest"),
}
EXTRA = [  # forms the fixtures do not hold, in zones with daylight saving: every hour, an hour with several fires
    ("*/20 2 * * *", "Europe/Berlin"),
    ("30 2 * * *", "Europe/Berlin"),
    ("0 * * * *", "America/New_York"),
    ("0 0 1 */3 *", "Europe/Berlin"),  # EVERY_QUARTER
    ("0 9 * * mon-fri", "Australia/Sydney"),
]
SEVENS = [  # day of week 7 (Sunday) in ranges and steps, as written for the framework: ours is cron_fields' five
    ("0 0 * * 0-7/2", "Europe/Berlin"),
    ("0 9 * * 5-7", "America/New_York"),
    ("30 1 * * 1-7/3", "Europe/Berlin"),
]


def _transition_days(zone: str) -> set[datetime]:
    """The local dates (as UTC midnights) on which the zone changes its offset in 2026."""
    tz = parse("0 0 * * *", zone).zone
    days = set()
    day = datetime(2026, 1, 1)
    while day.year == 2026:
        start = day.replace(tzinfo=tz)
        if start.utcoffset() != (day + timedelta(days=1)).replace(tzinfo=tz).utcoffset():
            days.add(day.date())
        day += timedelta(days=1)
    return {datetime.combine(d, datetime.min.time()) for d in days}


def test_every_translation_fires_when_its_framework_does_but_where_its_notes_say() -> None:
    cases = []
    for (fixture, name), (written, framework) in WRITTEN.items():
        found = next(f for f in scanned(fixture).found if f.task["name"] == name)
        zone = str(found.task.get("timeZone") or "Europe/Berlin")  # spec.timeZone for a task without its own
        cases.append((str(found.task["schedule"]), zone, written, framework, found.notes))
    for schedule, zone in EXTRA:
        for framework, written in (("node-cron", schedule), ("nest", f"0 {schedule}")):
            notes = tuple(jssource.transition_notes(parse(schedule, zone), jssource.NEST if framework == "nest"
                                                    else jssource.NODE_CRON, NOW))  # fmt: skip
            cases.append((schedule, zone, written, framework, notes))
    for written, zone in SEVENS:
        schedule = jssource.cron_fields(written)
        for framework in ("node-cron", "nest"):
            notes = tuple(jssource.transition_notes(parse(schedule, zone), jssource.NEST if framework == "nest"
                                                    else jssource.NODE_CRON, NOW))  # fmt: skip
            cases.append((schedule, zone, written, framework, notes))
    asks = [{"framework": f, "expression": w, "zone": z, "start": YEAR[0].timestamp() - 1, "end": YEAR[1].timestamp()}
            for _, z, w, f, _ in cases]  # fmt: skip
    theirs = framework_fires(asks)
    for (schedule, zone, written, framework, notes), framework_times in zip(cases, theirs, strict=True):
        ours = set(fires_between(parse(schedule, zone), YEAR[0] - timedelta(seconds=1), YEAR[1]))
        assert ours, (schedule, zone)
        tz = parse(schedule, zone).zone
        changes = _transition_days(zone)
        local_day = {t: datetime.combine(t.astimezone(tz).date(), datetime.min.time()) for t in ours | framework_times}
        # on every other day: the same instants
        assert {t for t in ours if local_day[t] not in changes} == {
            t for t in framework_times if local_day[t] not in changes
        }, (written, zone, framework)
        extra = {t for t in ours - framework_times}  # the CronJob's: a repeated wall-clock time, said in the notes
        lost = {t for t in framework_times - ours}  # the framework's: a skipped hour run after the change (Nest)
        if extra:
            assert any("runs twice as a CronJob" in n for n in notes), (written, zone, framework, sorted(extra))
            walls = {t.astimezone(tz).replace(tzinfo=None) for t in ours}
            assert all(t.astimezone(tz).replace(tzinfo=None) in walls for t in extra)
            assert all(sum(1 for o in ours if o.astimezone(tz).replace(tzinfo=None)
                           == t.astimezone(tz).replace(tzinfo=None)) == 2 for t in extra)  # fmt: skip
        if lost:
            assert framework == "nest" and any("spring-forward" in n for n in notes), (written, zone, sorted(lost))


ENUM = "@nestjs/schedule/dist/enums/cron-expression.enum"  # the package's index needs @nestjs/common, not installed


def test_the_cron_expression_enum_is_the_packages() -> None:
    answer = subprocess.run(
        [node(), "-e", f"process.stdout.write(JSON.stringify(require('{ENUM}').CronExpression))"],
        cwd=JS, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(answer.stdout) == jssource.CRON_EXPRESSION
