"""Fire-time arithmetic against plain enumeration, on the days around every daylight-saving transition.

The reference is robfig's ``SpecSchedule.Next`` ported literally, one second, minute and hour at a time
(``reference_next``: the code schedule.py had before its loops learned to jump), chained from far before.
Every function of schedule.py must agree with it for random schedules in zones with transitions of every
kind: whole hours away from midnight (Berlin, New York, Sydney), at midnight (Santiago, Havana), by 30
minutes (Lord Howe), at a 45-minute offset (Chatham).
"""

from __future__ import annotations

import functools
import random
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from appschedule.core import schedule as S
from appschedule.core.schedule import _day_matches, _go_date, _wall

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Pacific/Chatham",
    "Asia/Beirut",
    "UTC",
]
FIELDS = [
    ["*", "0", "30", "*/7", "5-50/10", "0,15,45", "59", "10"],
    ["*", "0", "1", "2", "3", "23", "0,1", "1-3", "*/2", "22"],
    ["*", "1", "13", "*/2", "25-31"],
    ["*", "3", "10", "*/3", "4,9"],
    ["*", "0", "6", "MON-FRI", "SUN"],
]


def reference_next(schedule: S.Schedule, zone: ZoneInfo | None, t: int) -> int | None:
    """robfig/cron v3.0.1 SpecSchedule.Next, literally: every loop steps one unit at a time."""
    t += 1
    added = False
    year_limit = _wall(zone, t)[0] + 5
    while True:  # WRAP
        year, month, day, hour, minute, second, _ = _wall(zone, t)
        if year > year_limit:
            return None
        wrapped = False
        while not schedule.months >> _wall(zone, t)[1] & 1:
            year, month, day, hour, minute, second, _ = _wall(zone, t)
            if not added:
                added = True
                t = _go_date(zone, year, month, 1, 0, 0, 0)
                year, month, day, hour, minute, second, _ = _wall(zone, t)
            t = _go_date(zone, year, month + 1, day, hour, minute, second)
            if _wall(zone, t)[1] == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(schedule, date(*_wall(zone, t)[:3])):
            year, month, day, hour, minute, second, _ = _wall(zone, t)
            if not added:
                added = True
                t = _go_date(zone, year, month, day, 0, 0, 0)
                year, month, day, hour, minute, second, _ = _wall(zone, t)
            t = _go_date(zone, year, month, day + 1, hour, minute, second)
            hour = _wall(zone, t)[3]
            if hour != 0:
                t += (24 - hour) * 3600 if hour > 12 else -hour * 3600
            if _wall(zone, t)[2] == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not schedule.hours >> _wall(zone, t)[3] & 1:
            if not added:
                added = True
                year, month, day, hour, *_ = _wall(zone, t)
                t = _go_date(zone, year, month, day, hour, 0, 0)
            t += 3600
            if _wall(zone, t)[3] == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not schedule.minutes >> _wall(zone, t)[4] & 1:
            if not added:
                added = True
                t -= t % 60
            t += 60
            if _wall(zone, t)[4] == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while _wall(zone, t)[5] != 0:
            added = True
            t += 1
            if _wall(zone, t)[5] == 0:
                wrapped = True
                break
        if wrapped:
            continue
        return t


def unix(moment: datetime) -> int:
    return int(moment.timestamp())


@functools.cache
def transitions(zone: str) -> list[datetime]:
    """The zone's transitions in 2026 and 2027, found hour by hour with zoneinfo (not schedule.py's table)."""
    if zone == "UTC":
        return [datetime(2026, 3, 29, 1, tzinfo=UTC)]
    info = ZoneInfo(zone)
    found = []
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    while moment < datetime(2028, 1, 1, tzinfo=UTC):
        following = moment + timedelta(minutes=30)
        if moment.astimezone(info).utcoffset() != following.astimezone(info).utcoffset():
            found.append(following)
        moment = following
    return found


def cases(seed: int, count: int) -> list[tuple[S.Schedule, datetime]]:
    """Random valid schedules, each with a time within two days of one of its zone's transitions."""
    rng = random.Random(seed)
    result: list[tuple[S.Schedule, datetime]] = []
    while len(result) < count:
        zone = rng.choice(ZONES)
        try:
            parsed = S.parse(" ".join(rng.choice(f) for f in FIELDS), zone)
        except S.ScheduleError:
            continue
        near = rng.choice(transitions(zone))
        result.append((parsed, near + timedelta(seconds=rng.randrange(-2 * 86400, 2 * 86400))))
    return result


def chain(parsed: S.Schedule, start: int, end: int) -> list[int]:
    zone = None if parsed.time_zone == "UTC" else ZoneInfo(parsed.time_zone)
    fires, current = [], start
    while (fire := reference_next(parsed, zone, current)) is not None and fire <= end:
        fires.append(fire)
        current = fire
    return fires


@pytest.mark.parametrize("seed", range(12))
def test_next_fire_is_robfigs_next(seed: int) -> None:
    for parsed, at in cases(seed, 25):
        zone = None if parsed.time_zone == "UTC" else ZoneInfo(parsed.time_zone)
        expected = reference_next(parsed, zone, unix(at))
        got = S.next_fire(parsed, at)
        assert (None if got is None else unix(got)) == expected, (parsed.expression, parsed.time_zone, at)


@pytest.mark.parametrize("seed", range(12))
def test_count_is_the_chain_from_start(seed: int) -> None:
    rng = random.Random(seed)
    for parsed, at in cases(100 + seed, 12):
        end = at + timedelta(seconds=rng.randrange(0, 3 * 86400))
        expected = len(chain(parsed, unix(at), unix(end)))
        assert S.count_fires(parsed, at, end) == expected, (parsed.expression, parsed.time_zone, at, end)


@pytest.mark.parametrize("seed", range(12))
def test_previous_fire_is_the_chains_last(seed: int) -> None:
    """The fires of the chain the controller runs from long before, as it does from its last schedule time."""
    for parsed, at in cases(200 + seed, 12):
        fires = chain(parsed, unix(at - timedelta(days=3)), unix(at)) or chain(
            parsed, unix(at - timedelta(days=45)), unix(at)
        )
        if not fires:  # a sparse schedule: its last fire is further back
            continue
        got = S.previous_fire(parsed, at)
        assert got is not None and unix(got) == fires[-1], (parsed.expression, parsed.time_zone, at)


@pytest.mark.parametrize("seed", range(6))
def test_repeats_are_the_chains_repeated_wall_times(seed: int) -> None:
    for parsed, at in cases(300 + seed, 15):
        start, end = at - timedelta(days=1), at + timedelta(days=1)
        zone = ZoneInfo(parsed.time_zone)
        fires = chain(parsed, unix(start - timedelta(days=3)), unix(end))
        # a fire repeats when any earlier fire of the last 3 hours had its wall-clock time (an hour with several
        # fires repeats each of them, not only the fire just before)
        expected = [
            f
            for index, f in enumerate(fires)
            if unix(start) < f
            and parsed.fixed_hours
            and any(
                f - previous <= 3 * 3600 and _wall(zone, previous)[:5] == _wall(zone, f)[:5]
                for previous in fires[max(0, index - 200) : index]
            )
        ]
        assert [unix(f) for f in S.repeats_between(parsed, start, end)] == expected, (parsed.expression, at)
