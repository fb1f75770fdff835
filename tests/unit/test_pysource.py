"""In-app schedules found in Python source (core/pysource.py, `appschedule import source`). APScheduler's
translations are checked against APScheduler's own CronTrigger (a dev dependency) over a year in Europe/Berlin,
both daylight-saving changes inside it. Celery's are checked against Celery's own crontab (a dev dependency): the
wall-clock times its parsed fields match over 2026 against the task's fires in Europe/Berlin, and against
croniter reading the same fields (Celery's crontab fields being cron's, day of week 0 = Sunday)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import yaml
from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]
from croniter import croniter

from appschedule.core import models
from appschedule.core.pysource import apscheduler_cron, celery_cron, scan
from appschedule.core.schedule import fires_between, next_fire, parse

ZONE = "Europe/Berlin"
START = datetime(2026, 1, 1, tzinfo=ZoneInfo(ZONE)) - timedelta(seconds=1)
END = datetime(2027, 1, 1, tzinfo=ZoneInfo(ZONE))

APP = """\
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped]

sched = BackgroundScheduler(timezone="Europe/Berlin")


@sched.scheduled_job("cron", day_of_week="mon-fri", hour=9, minute=30, timezone="Europe/Berlin")
def send_digest():
    pass


def cleanup(days=7):
    pass


sched.add_job(cleanup, "cron", hour=3, args=[30], id="nightly-cleanup")
sched.add_job(cleanup, CronTrigger.from_crontab("0 4 * * 0", timezone="UTC"))
sched.add_job(cleanup, "interval", minutes=5)
sched.add_job(cleanup, "cron", second=30)
sched.add_job(cleanup, "cron", hour=HOUR)
sched.add_job(cleanup, "cron", day=1, day_of_week="mon")
"""

CELERY = """\
from celery import Celery
from celery.schedules import crontab

app = Celery("proj")
app.conf.beat_schedule = {
    "weekly-report": {"task": "proj.tasks.report", "schedule": crontab(hour=7, minute=30, day_of_week=1)},
    "every-30s": {"task": "proj.tasks.ping", "schedule": 30.0},
    "first-monday": {"task": "proj.tasks.bill", "schedule": crontab(0, 0, day_of_week="mon", day_of_month="1-7")},
    "refresh": {"task": "proj.tasks.refresh", "schedule": crontab(minute="*/15"), "args": (16, 16)},
}
"""


def test_apscheduler_jobs_become_tasks_and_the_rest_is_listed() -> None:
    found = scan(APP, "proj/jobs.py", "proj.jobs")
    tasks = {f.task["name"]: f for f in found.found}
    assert list(tasks) == ["send-digest", "nightly-cleanup", "cleanup"]
    digest = tasks["send-digest"]
    assert digest.task == {
        "name": "send-digest",
        "schedule": "30 9 * * 1,2,3,4,5",
        "command": ["python", "-c", "from proj.jobs import send_digest; send_digest()"],
        "timeZone": ZONE,
    }
    assert digest.source == "proj/jobs.py:7" and digest.code.startswith('sched.scheduled_job("cron"')
    assert tasks["nightly-cleanup"].task["command"] == ["python", "-c", "from proj.jobs import cleanup; cleanup(30)"]
    assert tasks["nightly-cleanup"].task["schedule"] == "0 3 * * *"  # minute below the hour given: its minimum
    assert any("timezone" in n for n in tasks["nightly-cleanup"].notes)
    # from_crontab's 0 is Monday to APScheduler 3: the task fires when APScheduler fired it, and says so
    assert tasks["cleanup"].task["schedule"] == "0 4 * * 1" and "Monday" in tasks["cleanup"].notes[0]
    reasons = {u.source: u.reason for u in found.unfaithful}
    assert set(reasons) == {"proj/jobs.py:18", "proj/jobs.py:19", "proj/jobs.py:20", "proj/jobs.py:21"}
    assert "interval" in reasons["proj/jobs.py:18"] and "second" in reasons["proj/jobs.py:19"]
    assert "HOUR is not a literal" in reasons["proj/jobs.py:20"] and "both" in reasons["proj/jobs.py:21"]
    for item in found.found:
        models.Task.model_validate(item.task)


def test_celery_beat_entries_become_tasks_and_the_rest_is_listed() -> None:
    found = scan(CELERY, "proj/celery.py", "proj.celery")
    tasks = {f.task["name"]: f.task for f in found.found}
    assert tasks == {
        "weekly-report": {"name": "weekly-report", "schedule": "30 7 * * 1",
                          "command": ["python", "-c", "from proj.tasks import report; report()"]},
        "refresh": {"name": "refresh", "schedule": "*/15 * * * *",
                    "command": ["python", "-c", "from proj.tasks import refresh; refresh(16, 16)"]},
    }  # fmt: skip
    reasons = {u.source: u.reason for u in found.unfaithful}
    assert set(reasons) == {"proj/celery.py:7", "proj/celery.py:8"}
    assert "an interval" in reasons["proj/celery.py:7"] and "both restricted" in reasons["proj/celery.py:8"]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"month": "3,10", "day": "last"}, "last, xth"),
        ({"year": 2027, "hour": 1}, "a year field"),
        ({"second": "*/10"}, "second"),
        ({}, "no field"),
    ],
)
def test_apscheduler_forms_with_no_counterpart_are_refused(fields: dict[str, object], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        apscheduler_cron(fields)


def _ours(schedule: str, zone: str = ZONE) -> set[datetime]:
    parsed, fires, at = parse(schedule, zone), set(), START.astimezone(UTC)
    while (at := next_fire(parsed, at)) is not None and at < END:  # type: ignore[assignment]
        fires.add(at)
    return fires


@pytest.mark.parametrize(
    "fields",
    [
        {"hour": 3},
        {"day_of_week": "mon-fri", "hour": 9, "minute": 30},
        {"day_of_week": 0, "hour": 2, "minute": 30},  # 0 is Monday to APScheduler
        {"day_of_week": "sat,sun", "hour": "1-3", "minute": 15},  # the skipped and the repeated hour
        {"month": 6},
        {"day": 1, "hour": "2"},
        {"hour": "*/6"},
        {"day_of_week": "5-6", "hour": 12},
    ],
)
def test_apscheduler_translations_fire_when_apscheduler_does(fields: dict[str, object]) -> None:
    schedule, _ = apscheduler_cron(dict(fields))
    trigger = CronTrigger(timezone=ZoneInfo(ZONE), **fields)
    theirs: set[datetime] = set()
    at = trigger.get_next_fire_time(None, START)
    while at is not None and at < END:
        theirs.add(at.astimezone(UTC))
        following = trigger.get_next_fire_time(at, at + timedelta(seconds=1))
        if following is not None and following.astimezone(UTC) <= at.astimezone(UTC):  # APScheduler 3 repeats an
            following = trigger.get_next_fire_time(at, at + timedelta(minutes=61))  # autumn time: past it once
        at = following
    assert _ours(schedule) == theirs, f"{fields} -> {schedule}: {sorted(_ours(schedule) ^ theirs)[:4]}"


@pytest.mark.parametrize(
    "fields",
    [
        {"hour": 7, "minute": 30, "day_of_week": 1},
        {"minute": "*/15"},
        {"minute": 0, "hour": "*/3", "day_of_week": "sat,sun"},
        {"minute": 0, "hour": 0, "day_of_month": "2-30/2"},
        {"minute": 30, "hour": 2, "month_of_year": "3"},  # the skipped hour of Berlin's spring, one day of it
    ],
)
def test_celery_translations_fire_when_its_cron_fields_do(fields: dict[str, object]) -> None:
    schedule = celery_cron(fields)
    names = ["minute", "hour", "day_of_month", "month_of_year", "day_of_week"]
    cron = croniter(" ".join(str(fields.get(n, "*")) for n in names), START)
    theirs: set[datetime] = set()
    while (fire := cron.get_next(datetime)) < END:
        theirs.add(fire.astimezone(UTC))
    ours = _ours(schedule)
    after_gap = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # croniter, as cron, runs the skipped 02:30 at 03:00
    assert ours <= theirs and theirs - ours <= {after_gap}, f"{fields} -> {schedule}: {sorted(ours ^ theirs)[:4]}"
    if fields.get("hour") == 2:
        assert theirs - ours == {after_gap}  # the one difference: a CronJob skips it


@pytest.mark.parametrize(
    "fields",
    [
        {"hour": 7, "minute": 30, "day_of_week": 1},
        {"minute": "*/15", "hour": "2"},  # every quarter of the hour Berlin skips in spring and repeats in autumn
        {"minute": 0, "hour": [1, 13], "day_of_week": "sunday"},  # a list, a full day name
        {"minute": {5, 35}, "hour": "9-17", "day_of_week": "mon-fri"},  # a set, a range of names
        {"minute": 0, "hour": 0, "day_of_month": "1,15", "month_of_year": "*/3"},
        {"minute": "0", "hour": "*/5", "day_of_week": "sat,sun"},
    ],
)
def test_celery_translations_match_what_celerys_own_crontab_reads(fields: dict[str, object]) -> None:
    from celery.schedules import crontab as celery_crontab  # type: ignore[import-untyped]

    theirs = celery_crontab(**fields)
    walls: set[datetime] = set()
    day = datetime(2026, 1, 1)
    while day.year == 2026:
        if (
            day.month in theirs.month_of_year
            and day.day in theirs.day_of_month
            and day.isoweekday() % 7 in theirs.day_of_week
        ):
            walls |= {day.replace(hour=h, minute=m) for h in theirs.hour for m in theirs.minute}
        day += timedelta(days=1)
    schedule = celery_cron(fields)
    berlin = ZoneInfo("Europe/Berlin")
    fires = fires_between(parse(schedule, "Europe/Berlin"), START, END - timedelta(seconds=1))
    ours = {t.astimezone(berlin).replace(tzinfo=None) for t in fires}
    absent = {w for w in walls - ours if w.replace(tzinfo=berlin).astimezone(UTC).astimezone(berlin).replace(
        tzinfo=None) != w}  # fmt: skip
    assert ours <= walls and walls - ours == absent, f"{fields} -> {schedule}: {sorted(walls ^ ours)[:4]}"
    written = ", ".join(f"{k}={v!r}" for k, v in fields.items())
    found = scan(CELERY_ONE.format(fields=written), "proj/celery.py", "proj.celery").found
    assert [f.task["schedule"] for f in found] == [schedule]
    if fields.get("hour") == "2":
        assert absent and any("spring-forward" in n for n in found[0].notes)


def test_celery_beat_on_the_days_berlin_changes_its_clocks_is_what_the_note_says() -> None:
    """Celery's own is_due, asked each minute as beat asks it, against the task's CronJob fires: Celery runs the
    spring's skipped 02:30 at 03:30, and the autumn's repeated 02:30 once; the note says both."""
    from celery import Celery  # type: ignore[import-untyped]
    from celery.schedules import crontab as celery_crontab

    app = Celery("shop")
    app.conf.timezone = "Europe/Berlin"
    berlin = ZoneInfo("Europe/Berlin")
    ours = parse(celery_cron({"minute": 30, "hour": 2}), "Europe/Berlin")
    (note,) = scan(CELERY_ONE.format(fields="minute=30, hour=2"), "proj/celery.py", "proj.celery").found[0].notes
    assert "02:30 at 03:30" in note and "repeats once" in note
    for start, celerys, cronjobs in (
        (datetime(2026, 3, 28, 12, tzinfo=UTC), ["2026-03-29 03:30 CEST"], []),
        (datetime(2026, 10, 24, 12, tzinfo=UTC), ["2026-10-25 02:30 CEST"], ["2026-10-25 02:30 CEST",
                                                                              "2026-10-25 02:30 CET"]),
    ):  # fmt: skip
        clock = {"now": start}
        schedule = celery_crontab(minute=30, hour=2, app=app, nowfun=lambda clock=clock: clock["now"])
        last, runs = start, []
        for minute in range(24 * 60):
            clock["now"] = start + timedelta(minutes=minute)
            if schedule.is_due(last)[0]:
                last = clock["now"]
                runs.append(last.astimezone(berlin).strftime("%Y-%m-%d %H:%M %Z"))
        fires = [t.astimezone(berlin).strftime("%Y-%m-%d %H:%M %Z") for t in fires_between(ours, start,
                 start + timedelta(days=1) - timedelta(seconds=1))]  # fmt: skip
        assert (runs, fires) == (celerys, cronjobs)


CELERY_ONE = (
    "from celery.schedules import crontab\n"
    "app.conf.beat_schedule = {{'one': {{'task': 'proj.tasks.one', 'schedule': crontab({fields})}}}}\n"
)


def test_the_command_reads_a_tree_and_says_what_it_could_not(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "jobs.py").write_text(APP)
    (tmp_path / "proj" / "celery.py").write_text(CELERY)
    (tmp_path / "proj" / "old.py").write_text("print 'python 2'\n")
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "jobs.js").write_text(
        "const cron = require('node-cron');\ncron.schedule('*/5 * * * *', () => {});\n"
    )
    (tmp_path / "web" / "later.js").write_text(
        "const schedule = require('node-schedule');\nschedule.scheduleJob('0 1 * * *', f);\n"
    )
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / ".venv" / "lib" / "x.py").write_text(APP)  # never read: not the app's code
    command = [sys.executable, "-m", "appschedule", "import", "source", str(tmp_path), "--deployment", "web"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    document = yaml.safe_load(done.stdout)
    names = [t["name"] for t in document["spec"]["tasks"]]
    assert names == ["weekly-report", "refresh", "send-digest", "nightly-cleanup", "cleanup"]
    assert f"# send-digest: {tmp_path}/proj/jobs.py:7 (APScheduler): remove" in done.stdout
    assert f"{tmp_path}/proj/old.py:1: Python cannot parse it" in done.stderr
    assert f"{tmp_path}/web/jobs.js:2 (node-cron)" in done.stderr and "code of its own" in done.stderr
    assert f"{tmp_path}/web/later.js:1 (node-schedule)" in done.stderr
    models.AppScheduleSpec.model_validate(document["spec"])


def test_forms_real_code_uses_entries_by_subscript_func_by_keyword_and_a_path_python_cannot_import() -> None:
    """Found in published packages (tests/unit/test_corpus.py): a beat entry set by subscript (superdesk-planning),
    add_job's function as func= (nonebot plugins), and a directory whose name is no Python identifier."""
    text = (
        "from celery.schedules import crontab\n"
        "app.config['CELERY_BEAT_SCHEDULE']['planning:expiry'] = {'task': 'planning.flag_expired',"
        " 'schedule': crontab(minute='0')}\n"
        "app.conf.beat_schedule['tick'] = {'task': 'proj.tick', 'schedule': 30.0}\n"
        "scheduler.add_job(func=send, trigger='cron', hour=7, minute=5)\n"
    )
    found = scan(text, "server/planning/__init__.py", "planning")
    assert [(f.task["name"], f.task["schedule"]) for f in found.found] == [
        ("planning-expiry", "0 * * * *"),
        ("send", "5 7 * * *"),
    ]
    assert [u.source for u in found.unfaithful] == ["server/planning/__init__.py:3"]  # the interval, listed
    bad = scan("scheduler.add_job(send, 'cron', hour=0)\n", "nonebot-plugin-x/__init__.py", "nonebot-plugin-x")
    (listed,) = bad.unfaithful
    assert not bad.found and "nonebot-plugin-x.send is not importable" in listed.reason
