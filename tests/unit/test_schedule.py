"""schedule.py against robfig/cron v3 (the CronJob controller's parser): recorded cases, live Go, properties."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from appschedule.core import schedule as S
from appschedule.core.keys import rfc3339 as iso

REPO = Path(__file__).resolve().parents[2]
CASES = json.loads((REPO / "tests/unit/data/robfig_cases.json").read_text())

# Where we are deliberately stricter than robfig (each rejected with a message saying why).
STRICTER = {
    "@every": "fire times depend on the CronJob's creation time: no stable idempotency key",
    "TZ": "the API server itself rejects TZ=/CRON_TZ= in schedules; timeZone is the field",
    "+5 * * * *": "a sign is not part of cron syntax",
    "0,,5 * * * *": "an empty list item is a typo",
}


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def stricter(expression: str) -> bool:
    """Surrounding spaces too: robfig trims them only after a TZ= prefix, and the API server refuses them."""
    return expression != expression.strip() or any(expression.startswith(k) or k in expression for k in STRICTER)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['schedule']!r}@{c['timeZone'] or 'UTC'}" for c in CASES])
def test_recorded_robfig_cases(case: dict[str, object]) -> None:
    expression, zone = str(case["schedule"]), str(case["timeZone"] or "UTC")
    if stricter(expression):
        with pytest.raises(S.ScheduleError):
            S.parse(expression, zone)
        return
    if not case["ok"]:
        with pytest.raises(S.ScheduleError):
            S.parse(expression, zone)
        return
    expected = case["next"]
    assert isinstance(expected, list)
    if not expected and case["count"] and str(case["after"]) < "2090":
        with pytest.raises(S.ScheduleError):  # robfig never fires it: we reject it up front
            S.parse(expression, zone)
        return
    parsed = S.parse(expression, zone)
    got = [iso(f) for f in S.fires_after(parsed, utc(str(case["after"])), int(str(case["count"])))]
    assert got == expected


# DST table, expected values produced by robfig/cron v3.0.1 (hack/cronref) for the same inputs.
DST = [
    # spring forward: a wall-clock time inside the gap does not fire that day
    ("30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z", ["2026-03-07T07:30:00Z", "2026-03-09T06:30:00Z"]),
    ("30 2 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z", ["2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z"]),
    ("30 2 * * *", "Australia/Sydney", "2026-10-02T00:00:00Z", ["2026-10-02T16:30:00Z", "2026-10-04T15:30:00Z"]),
    # fall back: a repeated wall-clock time fires twice
    ("30 1 * * *", "America/New_York", "2026-11-01T00:00:00Z",
     ["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-02T06:30:00Z"]),
    ("30 2 * * *", "Europe/Berlin", "2026-10-25T00:00:00Z",
     ["2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-26T01:30:00Z"]),
    ("30 2 * * *", "Australia/Sydney", "2026-04-04T12:00:00Z",
     ["2026-04-04T15:30:00Z", "2026-04-04T16:30:00Z", "2026-04-05T16:30:00Z"]),
    # Lord Howe's 30-minute shift, with robfig's quirk of skipping 03:00 on the change-over day
    ("0 3 * * *", "Australia/Lord_Howe", "2026-10-02T12:00:00Z",
     ["2026-10-02T16:30:00Z", "2026-10-04T16:00:00Z", "2026-10-05T16:00:00Z"]),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), DST)
def test_daylight_saving_as_the_controller_has_it(expression: str, zone: str, after: str, expected: list[str]) -> None:
    assert [iso(f) for f in S.fires_after(S.parse(expression, zone), utc(after), len(expected))] == expected


def test_fall_back_second_fire_is_identified_as_a_repeat() -> None:
    nightly = S.parse("30 1 * * *", "America/New_York")
    first, second = utc("2026-11-01T05:30:00Z"), utc("2026-11-01T06:30:00Z")
    assert S.repeat_of(nightly, second) == first
    assert S.repeat_of(nightly, first) is None
    hourly = S.parse("0 * * * *", "America/New_York")  # two different hours, not a repeat
    assert S.repeat_of(hourly, utc("2026-11-01T06:00:00Z")) is None


def test_default_time_zone_is_utc() -> None:
    assert S.parse("0 9 * * *").time_zone == "UTC"
    assert S.next_fire(S.parse("0 9 * * *"), utc("2026-03-07T12:00:00Z")) == utc("2026-03-08T09:00:00Z")


def test_round_down_gives_the_scheduled_time_a_manual_run_belongs_to() -> None:
    weekly = S.parse("0 17 * * 5", "Europe/Berlin")
    assert S.round_down(weekly, utc("2026-03-13T16:20:00Z")) == utc("2026-03-13T16:00:00Z")
    assert S.round_down(weekly, utc("2026-03-13T16:00:00Z")) == utc("2026-03-13T16:00:00Z")
    assert S.round_down(weekly, utc("2026-03-13T15:59:59Z")) == utc("2026-03-06T16:00:00Z")
    minutely = S.parse("* * * * *")
    assert S.round_down(minutely, utc("2026-03-13T16:20:42Z")) == utc("2026-03-13T16:20:00Z")
    leap = S.parse("0 0 29 2 *")
    assert S.round_down(leap, utc("2031-06-01T00:00:00Z")) == utc("2028-02-29T00:00:00Z")


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("", ["empty"]),
        ("* * * *", ["5 fields", "found 4"]),
        ("0 * * * * *", ["5 fields", "seconds or year"]),
        ("60 * * * *", ["minute", "60", "maximum 59"]),
        ("0 24 * * *", ["hour", "24"]),
        ("0 0 0 * *", ["day of month", "minimum 1"]),
        ("0 0 * 13 *", ["month", "13"]),
        ("0 0 * * 7", ["day of week", "7", "Sunday is 0"]),
        ("0 0 L * *", ["day of month", "'L'", "L and W"]),
        ("0 0 1W * *", ["day of month", "L and W"]),
        ("0 0 * * 5#3", ["day of week", "#"]),
        ("H * * * *", ["minute", "H (hashed)"]),
        ("*/0 * * * *", ["minute", "positive"]),
        ("10-5 * * * *", ["minute", "begins after it ends"]),
        ("5-10-20 * * * *", ["too many hyphens"]),
        ("*/5/5 * * * *", ["too many slashes"]),
        ("0 0 * JANUARY *", ["month", "JANUARY"]),
        ("@every 5m", ["@every", "idempotency key"]),
        ("@reboot", ["unknown descriptor"]),
        ("@daily ", ["leading or trailing spaces"]),
        ("*/99999999999999999999 * * * *", ["too large"]),
        ("TZ=UTC 0 * * * *", ["timeZone"]),
        ("CRON_TZ=Europe/Berlin 0 * * * *", ["timeZone"]),
        ("0 0 31 2 *", ["never fire"]),
        ("0 0 30,31 2 *", ["never fire"]),
        ("0 0 31 4,6,9,11 *", ["never fire"]),
    ],
)
def test_rejections_say_what_and_where(expression: str, words: list[str]) -> None:
    with pytest.raises(S.ScheduleError) as error:
        S.parse(expression)
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize("zone", ["Mars/Phobos", "europe/berlin", "Local", "", "../etc/passwd"])
def test_bad_time_zones(zone: str) -> None:
    with pytest.raises(S.ScheduleError, match="timeZone"):
        S.parse("0 0 * * *", zone)


def test_accepted_forms() -> None:
    for expression in [
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
        "0 9 * JAN-MAR MON-FRI",
        "0 0 ? * *",
        "5-50/10 * * * *",
        "0 0 29 2 *",
        "0 0 13 * 5",
    ]:
        S.parse(expression, "Europe/Berlin")


def test_day_of_month_or_day_of_week() -> None:
    either = S.parse("0 0 13 * 5")  # the 13th OR a Friday
    fires = [iso(f) for f in S.fires_after(either, utc("2026-03-01T00:00:00Z"), 4)]
    assert fires == ["2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z", "2026-03-20T00:00:00Z", "2026-03-27T00:00:00Z"]


def test_count_of_a_week_of_minutes_is_one_step() -> None:
    minutely = S.parse("* * * * *", "Europe/Berlin")
    start = utc("2026-03-25T00:00:00Z")  # spans the spring-forward day
    assert S.count_fires(minutely, start, start + timedelta(days=7)) == 7 * 24 * 60
    assert S.count_fires(minutely, start, start) == 0
    year = S.count_fires(S.parse("*/5 * * * *"), utc("2026-01-01T00:00:00Z"), utc("2027-01-01T00:00:00Z"))
    assert year == 365 * 24 * 12


ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Asia/Kolkata",
    "Pacific/Chatham",
]
FIELD_CHOICES = [
    ["*", "0", "30", "*/7", "5-50/10", "0,15,45", "59"],
    ["*", "0", "1", "2", "3", "9,10", "*/3", "23", "1-5"],
    ["*", "1", "13", "29", "31", "*/2", "?"],
    ["*", "3", "10", "11", "JAN-MAR", "*/5"],
    ["*", "0", "5", "MON-FRI", "6", "?"],
]


def random_schedule(rng: random.Random) -> tuple[str, str]:
    return " ".join(rng.choice(c) for c in FIELD_CHOICES), rng.choice(ZONES)


def random_time(rng: random.Random) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(0, 2 * 366 * 86400))


def random_schedules(seed: int, count: int = 4) -> Iterator[tuple[S.Schedule, random.Random]]:
    """Valid schedules from the field choices above, with the generator to draw times from."""
    rng = random.Random(seed)
    for _ in range(count):
        expression, zone = random_schedule(rng)
        try:
            yield S.parse(expression, zone), rng
        except S.ScheduleError:
            continue


@pytest.mark.parametrize("seed", range(60))
def test_count_equals_the_chain(seed: int) -> None:
    for parsed, rng in random_schedules(seed):
        start = random_time(rng)
        end = start + timedelta(seconds=rng.randrange(0, 12 * 86400))
        assert S.count_fires(parsed, start, end) == sum(1 for _ in S.fires_between(parsed, start, end))


@pytest.mark.parametrize("seed", range(60))
def test_previous_fire_is_the_fire_before_the_next(seed: int) -> None:
    for parsed, rng in random_schedules(seed):
        at = random_time(rng)
        before = S.previous_fire(parsed, at)
        assert before is not None and before <= at
        after = S.next_fire(parsed, before)
        assert after is not None and after > at  # no fire between the previous one and `at`


# -- live comparison with robfig/cron itself, whenever Go is present


@pytest.fixture(scope="module")
def cronref(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        if os.environ.get("APPSCHEDULE_REQUIRE_GO"):
            pytest.fail("Go is not installed, and APPSCHEDULE_REQUIRE_GO says the robfig comparison must run")
        pytest.skip("Go is not installed: the live robfig comparison needs it")
    binary = tmp_path_factory.mktemp("cronref") / "cronref"
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=REPO / "hack/cronref", check=True)
    return binary


def test_many_generated_schedules_match_robfig(cronref: Path) -> None:
    rng = random.Random(20261202)
    requests = []
    for _ in range(1500):
        expression, zone = random_schedule(rng)
        requests.append({"schedule": expression, "timeZone": zone, "after": iso(random_time(rng)), "count": 25})
    stdin = "".join(json.dumps(r) + "\n" for r in requests)
    answers = subprocess.run([cronref], input=stdin, capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(answers) == len(requests)
    mismatches: list[object] = []
    for request, line in zip(requests, answers, strict=True):
        expression, zone, after = str(request["schedule"]), str(request["timeZone"]), str(request["after"])
        answer = json.loads(line)
        try:
            parsed = S.parse(expression, zone)
        except S.ScheduleError as error:
            if answer["ok"] and answer["next"]:
                mismatches.append((request, f"rejected: {error}"))
            continue
        got = [iso(f) for f in S.fires_after(parsed, utc(after), 25)]
        if not answer["ok"] or got != answer["next"]:
            mismatches.append((request, got, answer))
    assert mismatches == []
