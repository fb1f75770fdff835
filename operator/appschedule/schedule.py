"""Cron schedules evaluated exactly as the Kubernetes CronJob controller evaluates them.

The controller parses ``spec.schedule`` with robfig/cron v3 ``ParseStandard`` (with ``TZ=<timeZone>``
prefixed when ``spec.timeZone`` is set) and chains ``Schedule.Next`` from the last fire. This module:

* validates the grammar robfig accepts (five fields, names, ``?``, ranges, steps, descriptors) and
  rejects, with a message naming the field and the token, everything croniter or other crons accept
  beyond it: a seconds or year field, ``L W # H``, 7 as Sunday, ``TZ=``/``CRON_TZ=`` prefixes;
* rejects ``@every``: its fire times depend on when the CronJob was created, so no run could be given
  a stable idempotency key (use ``*/5 * * * *``);
* expands the fields with croniter, then computes fire times with a literal port of robfig's
  ``SpecSchedule.Next`` under Go's time rules (``time.Date`` normalisation in a zone). That port is
  what makes daylight-saving behaviour match: a wall-clock time inside a spring-forward gap does not
  fire, a wall-clock time repeated at fall-back fires twice, and the odd days of 30-minute zones
  (Australia/Lord_Howe) come out as the controller has them. ``hack/cronref`` runs robfig itself and
  the unit tests compare the two;
* rejects schedules that can never fire (``0 0 31 2 *``), as robfig's ``Next`` gives up after 5 years.

Everything here is pure: times are arguments, never read from a clock. Times are timezone-aware
``datetime`` values at whole seconds; results are in UTC.
"""

from __future__ import annotations

import bisect
import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

__all__ = [
    "Schedule",
    "ScheduleError",
    "count_fires",
    "fires_after",
    "fires_between",
    "next_fire",
    "parse",
    "previous_fire",
    "repeat_of",
    "repeats_between",
    "round_down",
]

_STAR = 1 << 63  # robfig's starBit: the field was "*" or "?" (with no step above 1)

DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_WEEKDAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_FIELDS = (  # name, low, high, names
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, {m: i for i, m in enumerate(_MONTHS, 1)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(_WEEKDAYS)}),
)

_NUMBER = re.compile(r"\d+")
_MAX_YEARS = 5  # robfig's Next gives up after this many years


class ScheduleError(ValueError):
    """A schedule or time zone the CronJob controller would not run; the message says what and where."""


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: robfig's field bitmasks plus the zone its wall-clock times are read in."""

    expression: str
    time_zone: str
    minutes: int
    hours: int
    days_of_month: int
    months: int
    days_of_week: int

    @property
    def zone(self) -> ZoneInfo:
        return _zone(self.time_zone)

    def _bits(self, mask: int, low: int, high: int) -> list[int]:
        return [v for v in range(low, high + 1) if mask >> v & 1]

    @property
    def minute_list(self) -> list[int]:
        return self._bits(self.minutes, 0, 59)

    @property
    def hour_list(self) -> list[int]:
        return self._bits(self.hours, 0, 23)

    @property
    def fixed_hours(self) -> bool:
        """True unless the schedule fires in every hour (``0 * * * *`` is not fixed, ``0 1 * * *`` is)."""
        return (self.hours & ~_STAR) != (1 << 24) - 1


@lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def check_time_zone(name: str) -> ZoneInfo:
    """The zone for an IANA name, as the controller loads it (case-sensitive, no "Local", no paths)."""
    if not name or name == "Local" or name.startswith(("/", ".")) or ".." in name:
        raise ScheduleError(f"timeZone {name!r} is not an IANA time zone name (e.g. Europe/Berlin, UTC)")
    try:
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"timeZone {name!r} is not a known IANA time zone (e.g. Europe/Berlin, UTC)") from None


def _parse_field(text: str, index: int) -> tuple[str, int]:
    """Check one field against robfig's grammar; return it normalised for croniter and its star bit."""
    name, low, high, names = _FIELDS[index]
    where = f"{name} field {text!r}"
    star = 0
    parts = []
    for item in text.split(","):
        if item == "":
            raise ScheduleError(f"{where}: empty list item")
        range_part, _, step_part = item.partition("/")
        if "/" in step_part:
            raise ScheduleError(f"{where}: too many slashes in {item!r}")
        step = 1
        if step_part or item.endswith("/"):
            if not _NUMBER.fullmatch(step_part):
                raise ScheduleError(f"{where}: step {step_part!r} in {item!r} is not a number")
            if len(step_part) > 9:
                raise ScheduleError(f"{where}: step {step_part!r} in {item!r} is too large")
            step = int(step_part)
            if step == 0:
                raise ScheduleError(f"{where}: step of {item!r} must be positive")
        if range_part in ("*", "?"):
            if step == 1:
                star = _STAR
            begin, end = low, high
        else:
            bounds = range_part.split("-")
            if len(bounds) > 2:
                raise ScheduleError(f"{where}: too many hyphens in {item!r}")
            values = []
            for bound in bounds:
                if names and bound.lower() in names:
                    values.append(names[bound.lower()])
                elif _NUMBER.fullmatch(bound):
                    values.append(int(bound))
                else:
                    raise ScheduleError(f"{where}: {bound!r} is not {_expected(index)}{_hint(bound, index)}")
            begin = values[0]
            end = values[-1] if len(values) == 2 else (high if step_part else begin)
            if begin < low:
                raise ScheduleError(f"{where}: {begin} is below the minimum {low}")
            if end > high:
                hint = " (Sunday is 0)" if index == 4 and end == 7 else ""
                raise ScheduleError(f"{where}: {end} is above the maximum {high}{hint}")
            if begin > end:
                raise ScheduleError(f"{where}: range {item!r} begins after it ends")
        # croniter expands "0-0/1" as "*": hand it only the forms it reads correctly
        parts.append(str(begin) if begin == end else f"{begin}-{end}" if step == 1 else f"{begin}-{end}/{step}")
    return ",".join(parts), star


def _expected(index: int) -> str:
    _, low, high, names = _FIELDS[index]
    return f"a number {low}-{high}" + (" or a name like " + ("JAN" if index == 3 else "MON") if names else "")


def _hint(token: str, index: int) -> str:
    upper = token.upper()
    if upper == "L" or upper.endswith("L") or ("W" in upper and index == 2):
        return "; L and W (last day, weekday) are not supported by Kubernetes CronJobs"
    if "#" in token:
        return "; # (nth weekday) is not supported by Kubernetes CronJobs"
    if upper.startswith("H"):
        return "; H (hashed) is not supported by Kubernetes CronJobs"
    return ""


def parse(expression: str, time_zone: str = "UTC") -> Schedule:
    """Parse a CronJob schedule in a time zone; raise ScheduleError saying what is wrong and where."""
    check_time_zone(time_zone)
    text = expression.strip()
    if "TZ" in expression:
        raise ScheduleError(f"schedule {expression!r}: a TZ= or CRON_TZ= prefix is not allowed; set timeZone instead")
    if not text:
        raise ScheduleError("schedule is empty")
    if text != expression:
        raise ScheduleError(f"schedule {expression!r} has leading or trailing spaces")
    if not expression.isascii():
        raise ScheduleError(f"schedule {expression!r}: only ASCII letters, digits and * , - / are allowed")
    if text.startswith("@"):
        if text.startswith("@every"):
            raise ScheduleError(
                f"schedule {expression!r}: @every is not supported: its fire times depend on when the CronJob "
                "was created, so runs could not get a stable idempotency key; use e.g. */5 * * * *"
            )
        if text not in DESCRIPTORS:
            raise ScheduleError(
                f"schedule {expression!r}: unknown descriptor; use one of {', '.join(DESCRIPTORS)} or five fields"
            )
        text = DESCRIPTORS[text]
    fields = text.split()
    if len(fields) != 5:
        extra = ""
        if len(fields) == 6:
            extra = " (a seconds or year field is not supported)"
        raise ScheduleError(
            f"schedule {expression!r}: expected exactly 5 fields (minute hour day-of-month month day-of-week), "
            f"found {len(fields)}{extra}"
        )
    normalised, stars = zip(*(_parse_field(field, i) for i, field in enumerate(fields)), strict=True)
    expanded, _ = croniter.expand(" ".join(normalised))
    masks = []
    for i, values in enumerate(expanded):
        _, low, high, _ = _FIELDS[i]
        numbers = range(low, high + 1) if values == ["*"] else [int(v) for v in values]
        if i == 4:  # croniter folds 7 into 0 and may return 7; robfig's range is 0-6
            numbers = [v % 7 for v in numbers]
        mask = 0
        for value in numbers:
            mask |= 1 << value
        masks.append(mask | stars[i])
    schedule = Schedule(expression, time_zone, *masks)
    if not _can_fire(schedule):
        raise ScheduleError(f"schedule {expression!r} can never fire: no month has that day (e.g. 31 February)")
    return schedule


_DAYS_IN_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February 29 exists in leap years


def _can_fire(schedule: Schedule) -> bool:
    """Whether any day ever matches (every weekday falls on every date of a month in some year)."""
    months = [m for m in range(1, 13) if schedule.months >> m & 1]
    some_date = any(schedule.days_of_month >> d & 1 for m in months for d in range(1, _DAYS_IN_MONTH[m] + 1))
    some_weekday = bool(months) and bool(schedule.days_of_week & ~_STAR)
    if schedule.days_of_month & _STAR:
        return some_weekday
    if schedule.days_of_week & _STAR:
        return some_date
    return some_date or some_weekday


# ---------------------------------------------------------------------------------------------------
# Go time rules on unix seconds


def _offset(zone: ZoneInfo | None, instant: int) -> int:
    """UTC offset in seconds in effect at a unix instant."""
    if zone is None:
        return 0
    offset = datetime.fromtimestamp(instant, zone).utcoffset()
    return int(offset.total_seconds()) if offset else 0


def _wall(zone: ZoneInfo | None, instant: int) -> tuple[int, int, int, int, int, int, int]:
    """Wall-clock (year, month, day, hour, minute, second, weekday with Sunday=0) at an instant."""
    local = datetime.fromtimestamp(instant + _offset(zone, instant), UTC)
    return local.year, local.month, local.day, local.hour, local.minute, local.second, (local.weekday() + 1) % 7


def _go_date(zone: ZoneInfo | None, year: int, month: int, day: int, hour: int, minute: int, second: int) -> int:
    """Go's time.Date: overflowing fields normalise; a gap time moves by the offset before it."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    unix = calendar.timegm((year, month, 1, 0, 0, 0)) + (day - 1) * 86400 + hour * 3600 + minute * 60 + second
    return unix - _offset(zone, unix - _offset(zone, unix))


def _zone_or_none(schedule: Schedule) -> ZoneInfo | None:
    return None if schedule.time_zone == "UTC" else schedule.zone


def _day_matches(schedule: Schedule, day: date) -> bool:
    if not schedule.months >> day.month & 1:
        return False
    dom = bool(schedule.days_of_month >> day.day & 1)
    dow = bool(schedule.days_of_week >> ((day.weekday() + 1) % 7) & 1)
    if schedule.days_of_month & _STAR or schedule.days_of_week & _STAR:
        return dom and dow
    return dom or dow


def _next(schedule: Schedule, zone: ZoneInfo | None, t: int) -> int | None:
    """robfig/cron v3.0.1 SpecSchedule.Next, literally (the seconds field is always 0)."""
    t += 1
    added = False
    year_limit = _wall(zone, t)[0] + _MAX_YEARS
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
        while not _wall_day_matches(schedule, zone, t):
            year, month, day, hour, minute, second, _ = _wall(zone, t)
            if not added:
                added = True
                t = _go_date(zone, year, month, day, 0, 0, 0)
                year, month, day, hour, minute, second, _ = _wall(zone, t)
            t = _go_date(zone, year, month, day + 1, hour, minute, second)
            hour = _wall(zone, t)[3]
            if hour != 0:  # robfig's fix-up after a DST change at midnight
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


def _wall_day_matches(schedule: Schedule, zone: ZoneInfo | None, t: int) -> bool:
    year, month, day, *_ = _wall(zone, t)
    return _day_matches(schedule, date(year, month, day))


# ---------------------------------------------------------------------------------------------------
# Public time functions


def _unix(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("naive datetime: pass a timezone-aware time")
    return calendar.timegm(moment.utctimetuple())


def _utc(unix: int) -> datetime:
    return datetime.fromtimestamp(unix, UTC)


def next_fire(schedule: Schedule, after: datetime) -> datetime | None:
    """The first fire strictly after ``after``, as the controller computes it; None past robfig's limit."""
    result = _next(schedule, _zone_or_none(schedule), _unix(after))
    return None if result is None else _utc(result)


def fires_after(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fires after ``after``, each chained from the previous one as the controller does."""
    return list(_iter_fires(schedule, _unix(after), count))


def _iter_fires(
    schedule: Schedule, after: int, limit: int | None = None, until: int | None = None
) -> Iterator[datetime]:
    zone = _zone_or_none(schedule)
    current = after
    produced = 0
    while limit is None or produced < limit:
        fire = _next(schedule, zone, current)
        if fire is None or (until is not None and fire > until):
            return
        current = fire
        produced += 1
        yield _utc(fire)


def fires_between(schedule: Schedule, start: datetime, end: datetime) -> Iterator[datetime]:
    """The fires in (start, end], lazily, chained as the controller does."""
    return _iter_fires(schedule, _unix(start), until=_unix(end))


def _day_bounds(zone: ZoneInfo | None, day: date) -> tuple[int, int, bool]:
    """The instants a local day starts and ends at, and whether its UTC offset holds all day."""
    following = day + timedelta(days=1)
    start = _go_date(zone, day.year, day.month, day.day, 0, 0, 0)
    end = _go_date(zone, following.year, following.month, following.day, 0, 0, 0)
    regular = end - start == 86400 and _offset(zone, start) == _offset(zone, end - 1) == _offset(zone, end)
    return start, end, regular


_LOOKBACK_DAYS = 9 * 366  # February 29 can be 8 years away


def previous_fire(schedule: Schedule, at: datetime) -> datetime | None:
    """The last fire at or before ``at``: found day by day backwards, at a cost bounded by the days scanned.

    On a regular day the last matching (hour, minute) is computed; a daylight-saving day is replayed
    through robfig's Next from its start.
    """
    zone = _zone_or_none(schedule)
    end = _unix(at)
    hours, minutes = schedule.hour_list, schedule.minute_list
    day = date(*_wall(zone, end)[:3])
    for _ in range(_LOOKBACK_DAYS):
        if _day_matches(schedule, day):
            day_start, _, regular = _day_bounds(zone, day)
            if regular:
                for hour in reversed(hours):
                    base = day_start + hour * 3600
                    if base <= end:
                        index = bisect.bisect_right(minutes, (end - base) // 60)
                        if index:
                            return _utc(base + minutes[index - 1] * 60)
            else:
                last = None
                for fire in _iter_fires(schedule, day_start - 1, until=end):
                    last = fire
                if last is not None:
                    return last
        day -= timedelta(days=1)
    return None


def round_down(schedule: Schedule, at: datetime) -> datetime | None:
    """``at`` rounded down to the schedule: the scheduled time a manual run at ``at`` belongs to."""
    return previous_fire(schedule, at)


def repeat_of(schedule: Schedule, fire: datetime) -> datetime | None:
    """For the second fire of a wall-clock time repeated at fall-back, the first one; else None.

    Only schedules with fixed hours repeat a run this way (``30 1 * * *`` fires at 01:30 twice on the
    fall-back night); an every-hour schedule's two 01:00 runs are two different hours.
    """
    if not schedule.fixed_hours or schedule.time_zone == "UTC":
        return None
    zone = schedule.zone
    earlier = previous_fire(schedule, fire - timedelta(seconds=1))
    if earlier is None or fire - earlier > timedelta(hours=3):
        return None
    if _wall(zone, _unix(earlier))[:5] == _wall(zone, _unix(fire))[:5]:
        return earlier
    return None


def count_fires(schedule: Schedule, start: datetime, end: datetime) -> int:
    """How many fires fall in (start, end], at a cost bounded by the days in the window, not the fires.

    A day whose UTC offset does not change fires exactly at its matching (hour, minute) pairs, which are
    counted arithmetically. A day with a daylight-saving change (a few a year) is replayed through
    robfig's Next from the fire before it, so gaps, repeats and robfig's quirks count as they happen.
    """
    zone = _zone_or_none(schedule)
    lo, hi = _unix(start), _unix(end)
    if hi <= lo:
        return 0
    minutes = schedule.minute_list
    hours = schedule.hour_list
    total = 0
    day = date(*_wall(zone, lo)[:3])
    last_day = date(*_wall(zone, hi)[:3])
    while day <= last_day:
        day_start, day_end, regular = _day_bounds(zone, day)
        if regular:
            if _day_matches(schedule, day):
                if lo < day_start and day_end <= hi:
                    total += len(hours) * len(minutes)
                else:
                    for hour in hours:
                        base = day_start + hour * 3600
                        first = bisect.bisect_right(minutes, (lo - base) // 60) if lo >= base else 0
                        if hi >= base:
                            last = bisect.bisect_right(minutes, (hi - base) // 60)
                            total += max(0, last - first)
        else:
            begin = max(lo, day_start - 1)
            chain_from = begin
            before = previous_fire(schedule, _utc(begin))
            if before is not None:
                chain_from = _unix(before)
            stop = min(hi, day_end - 1)
            total += sum(1 for fire in _iter_fires(schedule, chain_from, until=stop) if _unix(fire) > begin)
        day += timedelta(days=1)
    return total


def repeats_between(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """The fires in (start, end] that repeat an earlier fire's wall-clock time (``repeat_of``): only
    daylight-saving days are looked at, so the cost is bounded by the days in the window."""
    if not schedule.fixed_hours or schedule.time_zone == "UTC":
        return []
    zone = _zone_or_none(schedule)
    lo, hi = _unix(start), _unix(end)
    found: list[datetime] = []
    day = date(*_wall(zone, lo)[:3])
    last_day = date(*_wall(zone, hi)[:3])
    while day <= last_day:
        day_start, day_end, regular = _day_bounds(zone, day)
        if not regular:
            for fire in _iter_fires(schedule, max(lo, day_start - 1), until=min(hi, day_end - 1)):
                if repeat_of(schedule, fire) is not None:
                    found.append(fire)
        day += timedelta(days=1)
    return found
