"""Cron schedules evaluated exactly as the Kubernetes CronJob controller evaluates them.

The controller parses ``spec.schedule`` with robfig/cron v3 ``ParseStandard`` (with ``TZ=<timeZone>``
prefixed when ``spec.timeZone`` is set) and chains ``Schedule.Next`` from the last fire. This module:

* validates the grammar robfig accepts (five fields, names, ``?``, ranges, steps, descriptors) and
  rejects, with a message naming the field and the token, everything croniter or other crons accept
  beyond it: a seconds or year field, ``L W # H``, 7 as Sunday, ``TZ=``/``CRON_TZ=`` prefixes;
* rejects ``@every``: its fire times depend on when the CronJob was created, so no run could be given
  a stable idempotency key (use ``*/5 * * * *``);
* expands the fields with croniter, then computes fire times with robfig's ``SpecSchedule.Next`` under
  Go's time rules (``time.Date`` normalisation in a zone), its hour, minute and second loops jumping to
  where robfig's one-step-at-a-time loops stop. That port is what makes daylight-saving behaviour match:
  a wall-clock time inside a spring-forward gap does not fire, a wall-clock time repeated at fall-back
  fires twice, and the odd days of 30-minute and midnight transitions (Australia/Lord_Howe, Chile, Cuba)
  come out as the controller has them. ``hack/cronref`` runs robfig itself and the unit tests compare;
* counts fires and finds the previous one arithmetically, UTC offset by UTC offset, replaying robfig's
  chain only across the transitions where it deviates from the wall clock: every function costs
  O(fields + days + transitions) whatever the zone and the day, never O(seconds or fires);
* rejects schedules that can never fire (``0 0 31 2 *``), as robfig's ``Next`` gives up after 5 years;
* resolves Jenkins' hashed forms (``H``, ``H(a-b)``, ``H/n``, ``H(a-b)/n``) before any of that, with
  ``resolve_hashed(expression, seed)``: a plain five-field schedule chosen by a stable hash of the seed
  (namespace, AppSchedule and task), so tasks written alike spread over the hour instead of all firing at
  :00, and the same task always gets the same schedule. ``parse`` itself never sees an H.

Everything here is pure: times are arguments, never read from a clock. Times are timezone-aware
``datetime`` values at whole seconds; results are in UTC.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import hashlib
import heapq
import itertools
import operator
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

__all__ = [
    "Schedule",
    "ScheduleError",
    "count_fires",
    "earliest",
    "fires_after",
    "fires_between",
    "matches_wall",
    "merge",
    "next_fire",
    "parse",
    "parse_union",
    "previous_fire",
    "repeat_of",
    "repeats_between",
    "resolve_hashed",
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


def earliest(current: datetime | None, candidate: datetime) -> datetime:
    """The earlier of two moments, ``current`` being optional (a wake-up time not yet set)."""
    return candidate if current is None or candidate < current else current


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
    # a task's several schedules (``A | B``): the CronJob expressions that carry it, each a plain Schedule, merged
    # where one expression is exact (``merge``). Empty for a plain schedule; one part when the union merged into it
    parts: tuple[Schedule, ...] = ()

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

    @property
    def union(self) -> bool:
        """Whether several CronJob expressions carry it: every time function then works on their union."""
        return len(self.parts) > 1

    @property
    def cronjob_expressions(self) -> tuple[str, ...]:
        """The expressions of the CronJobs that run it: one for a plain schedule, one per part of a union."""
        return tuple(p.expression for p in self.parts) if self.parts else (self.expression,)


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


_HASHED = re.compile(r"H(?:\((?P<low>\d{1,2})-(?P<high>\d{1,2})\))?(?:/(?P<step>\d{1,2}))?")
# H in the day-of-month field picks from 1-28, as Jenkins does: a day every month has, so whether a schedule
# can fire never depends on the names it was hashed from
_HASH_RANGE = {2: (1, 28)}


def hashed_seed(namespace: str, appschedule: str, task: str) -> str:
    """What a task's H forms are hashed from: stable while the task exists, different for every task."""
    return f"{namespace}/{appschedule}/{task}"


def resolve_hashed(expression: str, seed: str) -> str:
    """``expression`` with every H form replaced by plain values chosen by a hash of ``seed`` (and the field):

    ``H`` one value of the field's range (day of month: 1-28); ``H(a-b)`` one value in a-b; ``H/n`` every n
    from an offset below n (``H/15`` in minutes: e.g. ``7-59/15``); ``H(a-b)/n`` the same within a-b. H may
    be an item of a list (``H,30``). An expression without H is returned unchanged, character for
    character. A malformed H form raises ScheduleError naming the field and the form; the result is
    checked by ``parse`` as any schedule is."""
    if "H" not in expression:  # every plan renders every task: the common case costs one scan
        return expression
    if "|" in expression:  # several schedules (``A | B``): each resolved alike
        return UNION_SEPARATOR.join(resolve_hashed(p.strip(), seed) for p in expression.split("|"))
    parts = re.split(r"(\s+)", expression)  # fields and the spaces between them, kept as they are
    fields = parts[0::2]
    if expression.startswith("@") or "TZ" in expression or len(fields) != 5 or "" in fields:
        return expression  # parse explains whatever is wrong with it
    if not any(item.startswith("H") for text in fields for item in text.split(",")):
        return expression  # THU, or an H parse refuses: untouched
    resolved = ""
    for attempt in range(HASH_ATTEMPTS):
        salted = seed if attempt == 0 else f"{seed}\x00retry{attempt}"
        for index, text in enumerate(fields):
            items = [_resolve_item(i, index, salted) if i.startswith("H") else i for i in text.split(",")]
            parts[2 * index] = ",".join(items)
        resolved = "".join(parts)
        if _fires_ever(resolved):
            return resolved
    return resolved  # no choice tried can fire: parse says so, whatever the names


HASH_ATTEMPTS = 64  # choices tried for an H form whose first choice can never fire (0 0 31 H *: February)


def _fires_ever(expression: str) -> bool:
    """Whether a resolved schedule can fire (or is wrong for another reason, which parse reports): an H choice
    that makes a schedule that never fires is not taken, so whether a schedule with H is valid never depends on
    the names it is hashed from."""
    try:
        parse(expression)
    except ScheduleError as error:
        return "can never fire" not in str(error)
    return True


def _resolve_item(item: str, index: int, seed: str) -> str:
    name, low, high, _ = _FIELDS[index]
    low, high = _HASH_RANGE.get(index, (low, high))
    where = f"{name} field: {item!r}"
    match = _HASHED.fullmatch(item)
    if match is None:
        raise ScheduleError(f"{where} is not an H form; use H, H(a-b), H/n or H(a-b)/n (e.g. H(0-29), H/15)")
    if match["low"] is not None:
        first, last = int(match["low"]), int(match["high"])
        if first < low or last > high:
            raise ScheduleError(f"{where}: the range of H must lie within {low}-{high}")
        if first > last:
            raise ScheduleError(f"{where}: the range of H begins after it ends (H({last}-{first})?)")
    else:
        first, last = low, high
    digest = hashlib.sha256(f"{seed}\x00{index}".encode()).digest()
    value = int.from_bytes(digest[:8], "big")
    if match["step"] is None:
        return str(first + value % (last - first + 1))
    step = int(match["step"])
    if step == 0 or step > last - first + 1:
        raise ScheduleError(f"{where}: the step must be 1 to {last - first + 1}, the size of the range")
    start = first + value % step
    return f"{start}-{last}/{step}"


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
        return "; H (hashed) is resolved before the schedule is read: use H, H(a-b), H/n or H(a-b)/n"
    return ""


@lru_cache(maxsize=4096)  # a Schedule is frozen: every plan parses every task's schedule again (39 % of the
# operator's samples in bench-cluster's fires scenario, py-spy, before this cache)
def parse(expression: str, time_zone: str = "UTC") -> Schedule:
    """Parse a CronJob schedule in a time zone; raise ScheduleError saying what is wrong and where.

    ``A | B | ...`` (UNION_SEPARATOR) is a task's several schedules: see ``parse_union``."""
    if "|" in expression:
        return parse_union(expression.split("|"), time_zone)
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
# A zone as a table of transitions
#
# Offsets are read from a per-year table of the zone's transitions (instant, offset before, offset after),
# found once per zone and year by probing every 6 hours and bisecting to the second. Two transitions less
# than 6 hours apart would be missed: no zone in the tz database has them after 1900.

_PROBE = 6 * 3600
_MIN_UNIX = -62135596800 + 2 * 86400  # 0001-01-03: leaves room for any offset
_MAX_UNIX = 253402300799 - 2 * 86400  # 9999-12-29


def _raw_offset(zone: ZoneInfo, instant: int) -> int:
    offset = datetime.fromtimestamp(instant, zone).utcoffset()
    return int(offset.total_seconds()) if offset else 0


@lru_cache(maxsize=4096)
def _year_transitions(zone: ZoneInfo, year: int) -> tuple[tuple[int, int, int], ...]:
    """(instant, offset before, offset after) of every transition in a UTC calendar year, in order."""
    start = calendar.timegm((year, 1, 1, 0, 0, 0))
    end = calendar.timegm((year + 1, 1, 1, 0, 0, 0))
    found = []
    low, low_offset = start, _raw_offset(zone, start)
    while low < end:
        high = min(low + _PROBE, end)
        high_offset = _raw_offset(zone, high)
        if high_offset != low_offset:
            a, b = low, high  # offset(a) == low_offset, offset(b) != low_offset
            while b - a > 1:
                middle = (a + b) // 2
                if _raw_offset(zone, middle) == low_offset:
                    a = middle
                else:
                    b = middle
            found.append((b, low_offset, high_offset))
        low, low_offset = high, high_offset
    return tuple(found)


def _year_of(instant: int) -> int:
    return datetime.fromtimestamp(min(max(instant, _MIN_UNIX), _MAX_UNIX), UTC).year


def _transitions(zone: ZoneInfo | None, start: int, end: int) -> list[tuple[int, int, int]]:
    """The zone's transitions at instants in [start, end)."""
    if zone is None:
        return []
    result: list[tuple[int, int, int]] = []
    for year in range(_year_of(start), _year_of(end) + 1):
        result.extend(t for t in _year_transitions(zone, year) if start <= t[0] < end)
    return result


def _offset(zone: ZoneInfo | None, instant: int) -> int:
    """UTC offset in seconds in effect at a unix instant."""
    if zone is None:
        return 0
    instant = min(max(instant, _MIN_UNIX), _MAX_UNIX)
    table = _year_transitions(zone, _year_of(instant))
    index = bisect.bisect_right(table, (instant, 1 << 62, 0))
    if index:
        return table[index - 1][2]
    if table:
        return table[0][1]
    return _raw_offset(zone, instant)


def _segment_end(zone: ZoneInfo | None, instant: int) -> int:
    """The first transition strictly after ``instant`` (within two years; else a far instant)."""
    if zone is None:
        return _MAX_UNIX
    for year in range(_year_of(instant), _year_of(instant) + 3):
        for transition in _year_transitions(zone, year):
            if transition[0] > instant:
                return transition[0]
    return instant + 2 * 366 * 86400


# ---------------------------------------------------------------------------------------------------
# Go time rules on unix seconds


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


def _step(zone: ZoneInfo | None, t: int, size: int, unit: int, modulo: int, stop: int) -> int:
    """Where robfig's loop ``t += size until field(t) in stop`` ends, in O(transitions crossed).

    ``field(t)`` is the wall-clock ``(t + offset) // unit % modulo``; ``stop`` is a bitmask over its values.
    Within one offset the loop is arithmetic; at a transition it continues from the first step past it.
    """
    while True:
        offset = _offset(zone, t)
        end = _segment_end(zone, t)
        value = (t + offset) // unit % modulo
        steps = next((k for k in range(1, modulo + 1) if stop >> ((value + k * size // unit) % modulo) & 1), modulo)
        if t + steps * size < end:
            return t + steps * size
        t += -(-(end - t) // size) * size  # the first step at or past the transition
        if stop >> ((t + _offset(zone, t)) // unit % modulo) & 1:
            return t


def _next(schedule: Schedule, zone: ZoneInfo | None, t: int) -> int | None:
    """robfig/cron v3.0.1 SpecSchedule.Next (the seconds field is always 0).

    The month and day loops are literal; the hour, minute and second loops, which robfig runs one step at a
    time, jump to where that stepping stops (``_step``), so the cost does not grow with the seconds skipped.
    """
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
        if not schedule.hours >> _wall(zone, t)[3] & 1:
            if not added:
                added = True
                year, month, day, hour, *_ = _wall(zone, t)
                t = _go_date(zone, year, month, day, hour, 0, 0)
            t = _step(zone, t, 3600, 3600, 24, schedule.hours | 1)
            if _wall(zone, t)[3] == 0:
                continue
        if not schedule.minutes >> _wall(zone, t)[4] & 1:
            if not added:
                added = True
                t -= t % 60
            t = _step(zone, t, 60, 60, 60, schedule.minutes | 1)
            if _wall(zone, t)[4] == 0:
                continue
        if _wall(zone, t)[5] != 0:
            added = True
            t = _step(zone, t, 1, 1, 60, 1)
            continue
        return t


def _wall_day_matches(schedule: Schedule, zone: ZoneInfo | None, t: int) -> bool:
    year, month, day, *_ = _wall(zone, t)
    return _day_matches(schedule, date(year, month, day))


# ---------------------------------------------------------------------------------------------------
# Fires as arithmetic
#
# An instant is a *match* when its wall-clock time matches every field at second 0: robfig's Next from the
# second before returns it at once. Within one UTC offset the matches are wall-clock arithmetic (a day's
# (hour, minute) pairs); across a transition the wall clock jumps, so a time in a spring-forward gap has no
# match and a time repeated at fall-back has two. The chain of Next calls the controller makes hits every
# match, except in robfig's quirks around a transition (Lord Howe's 30-minute shift, a change at midnight)
# where its walk steps over one: ``_window`` replays the chain across each transition to find those, so
# the cost is O(fields + days + transitions), never O(seconds or fires).


def _wall_matches(schedule: Schedule, wall: int) -> bool:
    """Whether wall-clock seconds (local time counted as if UTC) match the schedule at second 0."""
    if wall % 60:
        return False
    day, rest = divmod(wall, 86400)
    return bool(
        schedule.hours >> rest // 3600 & 1
        and schedule.minutes >> rest // 60 % 60 & 1
        and _day_matches(schedule, date.fromordinal(day + _EPOCH_ORDINAL))
    )


def matches_wall(schedule: Schedule, wall: datetime) -> bool:
    """Whether the schedule's fields match a wall-clock minute (naive, in the schedule's zone), whether or not
    that minute exists there (a DST gap): what cron, reading the fields alone, would call due."""
    if schedule.union:
        return any(matches_wall(p, wall) for p in schedule.parts)
    return bool(
        schedule.hours >> wall.hour & 1 and schedule.minutes >> wall.minute & 1 and _day_matches(schedule, wall.date())
    )


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MIN_WALL_DAY = 1 - _EPOCH_ORDINAL + 1
_MAX_WALL_DAY = date(9999, 12, 30).toordinal() - _EPOCH_ORDINAL


def _wall_count(schedule: Schedule, low: int, high: int) -> int:
    """Matches in wall-clock seconds (low, high]: per day, the (hour, minute) pairs in range."""
    if high <= low:
        return 0
    hours, minutes = schedule.hour_list, schedule.minute_list
    total = 0
    day, last = low // 86400, high // 86400
    while day <= last:
        if _day_matches(schedule, date.fromordinal(day + _EPOCH_ORDINAL)):
            base = day * 86400
            if low < base and base + 86400 <= high:
                total += len(hours) * len(minutes)
            else:
                for hour in hours:
                    start = base + hour * 3600
                    if high < start:
                        break
                    first = bisect.bisect_right(minutes, (low - start) // 60) if low >= start else 0
                    total += max(0, bisect.bisect_right(minutes, (high - start) // 60) - first)
        day += 1
    return total


def _wall_last(schedule: Schedule, high: int, low: int) -> int | None:
    """The last match in wall-clock seconds (low, high], days scanned backwards."""
    hours, minutes = schedule.hour_list, schedule.minute_list
    day = high // 86400
    while day * 86400 + 86400 > low and day >= _MIN_WALL_DAY:
        if _day_matches(schedule, date.fromordinal(day + _EPOCH_ORDINAL)):
            base = day * 86400
            for hour in reversed(hours):
                start = base + hour * 3600
                if start <= high:
                    index = bisect.bisect_right(minutes, (high - start) // 60)
                    if index and start + minutes[index - 1] * 60 > low:
                        return start + minutes[index - 1] * 60
        day -= 1
    return None


def _wall_first(schedule: Schedule, low: int, high: int) -> int | None:
    """The first match in wall-clock seconds (low, high], days scanned forwards."""
    hours, minutes = schedule.hour_list, schedule.minute_list
    day = low // 86400
    while day * 86400 <= high and day <= _MAX_WALL_DAY:
        if _day_matches(schedule, date.fromordinal(day + _EPOCH_ORDINAL)):
            base = day * 86400
            for hour in hours:
                start = base + hour * 3600
                if start + 3599 > low:
                    index = bisect.bisect_right(minutes, (low - start) // 60) if low >= start else 0
                    if index < len(minutes) and start + minutes[index] * 60 <= high:
                        return start + minutes[index] * 60
        day += 1
    return None


def _segments(zone: ZoneInfo | None, low: int, high: int) -> list[tuple[int, int, int]]:
    """(start, end, offset): the stretches of one UTC offset covering instants [low, high)."""
    pieces = []
    start = low
    for instant, _, _ in _transitions(zone, low + 1, high):
        pieces.append((start, instant, _offset(zone, start)))
        start = instant
    pieces.append((start, high, _offset(zone, start)))
    return pieces


def _match_count(schedule: Schedule, zone: ZoneInfo | None, low: int, high: int) -> int:
    """Matching instants in (low, high]."""
    if high <= low:
        return 0
    return sum(
        _wall_count(schedule, max(a - 1, low) + offset, min(b - 1, high) + offset)
        for a, b, offset in _segments(zone, low, high + 1)
    )


_LOOKBACK = 9 * 366 * 86400  # February 29 can be 8 years away


def _match_last(schedule: Schedule, zone: ZoneInfo | None, at: int, floor: int) -> int | None:
    """The last matching instant in (floor, at]: stretch by stretch backwards."""
    end = at + 1
    while end > floor:
        start = max(floor, end - 366 * 86400)
        for a, b, offset in reversed(_segments(zone, start, end)):
            found = _wall_last(schedule, b - 1 + offset, max(a - 1, floor) + offset)
            if found is not None:
                return found - offset
        end = start
    return None


def _match_first(schedule: Schedule, zone: ZoneInfo | None, after: int, ceiling: int) -> int | None:
    """The first matching instant in (after, ceiling]."""
    start = after
    while start < ceiling:
        end = min(ceiling, start + 366 * 86400)
        for a, b, offset in _segments(zone, start, end + 1):
            found = _wall_first(schedule, max(a - 1, after) + offset, b - 1 + offset)
            if found is not None:
                return found - offset
        start = end
    return None


def _matches_between(schedule: Schedule, zone: ZoneInfo | None, low: int, high: int) -> list[int]:
    """Every match in (low, high], in order; only called over one window (a few hours, or a few fires)."""
    found = []
    current = low
    while (match := _match_first(schedule, zone, current, high)) is not None:
        found.append(match)
        current = match
    return found


@dataclass(frozen=True)
class _Window:
    """The controller's chain replayed across one transition, from the match ``start`` at least ``margin``
    before it to ``end``, the first fire more than ``margin`` after it: ``skipped`` are the matches in
    between that the chain steps over, ``extra`` the fires it makes that are not matches (its hour loop
    stepping over a midnight that a gap removed lands on a day the schedule does not name)."""

    start: int
    end: int
    skipped: frozenset[int]
    extra: frozenset[int]


@lru_cache(maxsize=8192)
def _window(schedule: Schedule, transition: int, margin: int) -> _Window:
    zone = _zone_or_none(schedule)
    found = _match_last(schedule, zone, transition - margin, transition - _LOOKBACK)
    start = transition - margin if found is None else found
    chain = set()
    current = start
    while (following := _next(schedule, zone, current)) is not None:
        chain.add(following)
        current = following
        if following > transition + margin:
            break
    matches = set(_matches_between(schedule, zone, start, current))
    return _Window(start, current, frozenset(matches - chain), frozenset(chain - matches))


def _quirky(zone: ZoneInfo, instant: int, before: int, after: int) -> bool:
    """Whether robfig's walk can step over a match, or fire off one, at this transition: a shift by part of
    an hour (Lord Howe), or wall-clock times next to midnight (Chile, Cuba, Lebanon), where its day loop
    lands in the gap or the repeated hour and its hour loop can step over midnight. A whole-hour change
    away from midnight (Europe, North America, Australia's mainland) never does: the property tests
    (tests/unit/test_schedule_dst.py) check both kinds against the chain."""
    if (after - before) % 3600:
        return True
    return any((instant + offset) // 3600 % 24 in (23, 0, 1) for offset in (before, after))


def _quirks(schedule: Schedule, zone: ZoneInfo | None, low: int, high: int) -> tuple[set[int], set[int]]:
    """The matches in (low, high] the chain steps over, and its fires there that are not matches, from the
    windows of quirky transitions up to a year before ``low`` (a sparse schedule's window can end that late)."""
    skipped: set[int] = set()
    extra: set[int] = set()
    if zone is None:
        return skipped, extra
    for instant, before, after in _transitions(zone, low - 366 * 86400, high + 2 * 86400):
        if _quirky(zone, instant, before, after):
            window = _window(schedule, instant, abs(after - before) + 3600)
            if window.end > low and window.start < high:
                skipped.update(m for m in window.skipped if low < m <= high)
                extra.update(m for m in window.extra if low < m <= high)
    return skipped, extra


def _on_chain(schedule: Schedule, zone: ZoneInfo | None, instant: int) -> bool:
    """Whether the controller's chain, run from long before, fires at ``instant``."""
    skipped, extra = _quirks(schedule, zone, instant - 1, instant)
    if instant in extra:
        return True
    return instant not in skipped and _wall_matches(schedule, instant + _offset(zone, instant))


def _fire_last(schedule: Schedule, zone: ZoneInfo | None, at: int) -> int | None:
    """The controller's last fire at or before ``at``: the last match its chain does not step over, or
    a fire it makes off the matches, whichever is later."""
    floor = at - _LOOKBACK
    current = at
    while (found := _match_last(schedule, zone, current, floor)) is not None:
        if _on_chain(schedule, zone, found):
            break
        current = found - 1
    _, extra = _quirks(schedule, zone, found if found is not None else floor, at)
    return max(extra, default=found)


def _fire_count(schedule: Schedule, zone: ZoneInfo | None, low: int, high: int) -> int:
    """Fires of the controller's chain in (low, high]: the matches, less those it steps over, plus those
    it makes off the matches."""
    skipped, extra = _quirks(schedule, zone, low, high)
    return _match_count(schedule, zone, low, high) - len(skipped) + len(extra)


# ---------------------------------------------------------------------------------------------------
# Public time functions


EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9990, 1, 1, tzinfo=UTC)  # robfig looks 5 years ahead; a zone's year table one more


def in_range(moment: datetime) -> bool:
    """Whether a time is one the functions here accept: from 1970 to 9990 (see ``EARLIEST``, ``LATEST``).

    Times read from the cluster (a Job's name or annotations) are checked with this before they are used."""
    return moment.tzinfo is not None and EARLIEST <= moment <= LATEST


def _unix(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("naive datetime: pass a timezone-aware time")
    if not EARLIEST <= moment <= LATEST:
        raise ValueError(f"time {moment.isoformat()} is outside {EARLIEST.year}-{LATEST.year}")
    return calendar.timegm(moment.utctimetuple())


def _utc(unix: int) -> datetime:
    return datetime.fromtimestamp(unix, UTC)


def next_fire(schedule: Schedule, after: datetime) -> datetime | None:
    """The first fire strictly after ``after``, as the controller computes it; None past robfig's limit."""
    if schedule.union:
        return min((f for p in schedule.parts if (f := next_fire(p, after)) is not None), default=None)
    result = _next(schedule, _zone_or_none(schedule), _unix(after))
    return None if result is None else _utc(result)


def fires_after(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fires after ``after``, each chained from the previous one as the controller does."""
    if schedule.union:
        return list(itertools.islice(_union_fires(schedule, after, None), count))
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
    """The fires in (start, end], lazily, chained as the controller does (one step per fire: for counting
    use ``count_fires``)."""
    if schedule.union:
        return _union_fires(schedule, start, end)
    return _iter_fires(schedule, _unix(start), until=_unix(end))


def previous_fire(schedule: Schedule, at: datetime) -> datetime | None:
    """The last fire at or before ``at`` (None if none in 9 years), at a cost bounded by the days scanned
    back to it and the transitions among them, not by the fires."""
    if schedule.union:
        return max((f for p in schedule.parts if (f := previous_fire(p, at)) is not None), default=None)
    found = _fire_last(schedule, _zone_or_none(schedule), _unix(at))
    return None if found is None else _utc(found)


@lru_cache(maxsize=8192)  # asked of every Job's stated time on every plan (keys.scheduled_time)
def is_fire(schedule: Schedule, moment: datetime) -> bool:
    """Whether ``moment`` is a fire of ``schedule`` (a repeat at a fall-back included)."""
    if schedule.union:
        return any(is_fire(p, moment) for p in schedule.parts)
    return in_range(moment) and previous_fire(schedule, moment) == moment


def round_down(schedule: Schedule, at: datetime) -> datetime | None:
    """``at`` rounded down to the schedule: the scheduled time a manual run at ``at`` belongs to."""
    return previous_fire(schedule, at)


def repeat_of(schedule: Schedule, fire: datetime) -> datetime | None:
    """For a fire that repeats an earlier fire's wall-clock time at a fall-back, the first one; else None.

    Only schedules with fixed hours repeat a run this way (``30 1 * * *`` fires at 01:30 twice on the
    fall-back night); an every-hour schedule's two 01:00 runs are two different hours. An hour with several
    fires (``0,30 2 * * *``, ``*/20 2 * * *``) repeats each of them: every fire of the repeated hour is
    matched with the fire of the same wall-clock time before the transition, not only with the fire just
    before it. The walk back is bounded by the fall-back's gap (at most 3 hours) and by REPEAT_WALK fires.
    """
    if schedule.union:  # a repeat when every part that fires then repeats it (an every-hour part's 01:00 is new)
        firing = [p for p in schedule.parts if is_fire(p, fire)]
        repeats = [repeat_of(p, fire) for p in firing]
        return min(r for r in repeats if r is not None) if firing and None not in repeats else None
    if not schedule.fixed_hours or schedule.time_zone == "UTC":
        return None
    zone = schedule.zone
    instant = _unix(fire)
    if not any(after < before for _, before, after in _transitions(zone, instant - 3 * 3600, instant + 1)):
        return None  # no fall-back in the 3 hours before: nothing repeats (the common case costs one lookup)
    wall = _wall(zone, instant)[:5]
    earlier = _previous_in_range(schedule, fire - timedelta(seconds=1))
    walked = 0
    while earlier is not None and fire - earlier <= timedelta(hours=3) and walked < REPEAT_WALK:
        if _wall(zone, _unix(earlier))[:5] == wall:
            return earlier
        earlier = _previous_in_range(schedule, earlier - timedelta(seconds=1))
        walked += 1
    return None


REPEAT_WALK = 200  # fires looked back for a repeated wall-clock time: 3 hours of a schedule firing every minute


def _previous_in_range(schedule: Schedule, at: datetime) -> datetime | None:
    return previous_fire(schedule, at) if in_range(at) else None


def count_fires(schedule: Schedule, start: datetime, end: datetime) -> int:
    """How many fires the chain from ``start`` has in (start, end], without one step per fire.

    Fires are counted arithmetically offset by offset (see "Fires as arithmetic"); only where ``start``
    is next to one of robfig's quirks does the chain from it differ, and it is walked until it meets them.
    """
    if schedule.union:
        return _union_count(schedule, _unix(start), _unix(end))
    zone = _zone_or_none(schedule)
    low, high = _unix(start), _unix(end)
    if high <= low:
        return 0
    total = 0
    fire = _next(schedule, zone, low)
    while fire is not None and fire <= high and not _on_chain(schedule, zone, fire):
        total += 1
        fire = _next(schedule, zone, fire)
    if fire is None or fire > high:
        return total
    return total + 1 + _fire_count(schedule, zone, fire, high)


def repeats_between(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """The fires in (start, end] that repeat an earlier fire's wall-clock time (``repeat_of``): only the
    hour after each fall-back transition is looked at."""
    if schedule.union:
        return sorted({r for p in schedule.parts for r in repeats_between(p, start, end) if repeat_of(schedule, r)})
    if not schedule.fixed_hours or schedule.time_zone == "UTC":
        return []
    zone = _zone_or_none(schedule)
    low, high = _unix(start), _unix(end)
    found: list[datetime] = []
    for instant, before, after in _transitions(zone, low - 86400, high + 86400):
        if after >= before:
            continue
        first, last = max(low, instant - 1), min(high, instant + before - after)
        skipped, extra = _quirks(schedule, zone, first, last)
        for fire in sorted((set(_matches_between(schedule, zone, first, last)) - skipped) | extra):
            if repeat_of(schedule, _utc(fire)) is not None:
                found.append(_utc(fire))
    return found


# ---------------------------------------------------------------------------------------------------
# Several schedules for one task
#
# A task may have several schedules; a minute several of them match is one fire with one key (DESIGN "Calendars").
# The union is kept as its parts, each a plain schedule its own CronJob runs (merged first where one expression is
# exact), and its fires are the union of the parts' chains: next and previous are the nearest of the parts', a
# repeat is one when every part firing then repeats it, and counting stays arithmetic: per day, the union of the
# parts' (hour, minute) products that day, then the few instants next to robfig's quirks (or next to ``start``,
# where a part's chain from it differs) decided one by one. O(parts x (days + transitions)), never O(fires).

UNION_SEPARATOR = " | "
UNION_MAX = 4  # schedules of one task: the schema's bound
_MINUTES = (1 << 60) - 1


def parse_union(expressions: Sequence[str], time_zone: str = "UTC") -> Schedule:
    """A task's several schedules as one: ``expression`` is them joined by `` | `` (what the status says and the
    ledger tracks), ``parts`` the expressions its CronJobs run (``merge``); ScheduleError names the one at fault."""
    texts = [e.strip() for e in expressions]
    if len(texts) > UNION_MAX:
        raise ScheduleError(f"at most {UNION_MAX} schedules for one task, found {len(texts)}")
    parts = []
    for index, text in enumerate(texts):
        try:
            parts.append(parse(text, time_zone))
        except ScheduleError as error:
            raise ScheduleError(f"schedules[{index}]: {error}") from None
    merged = merge(parts)
    if len(merged) == 1:
        masks = _masks(merged[0])
    else:
        masks = tuple(functools.reduce(operator.or_, field) for field in zip(*(_masks(p) for p in parts), strict=True))
    return Schedule(UNION_SEPARATOR.join(texts), time_zone, *masks, parts=tuple(merged))


def _masks(schedule: Schedule) -> tuple[int, int, int, int, int]:
    return schedule.minutes, schedule.hours, schedule.days_of_month, schedule.months, schedule.days_of_week


def merge(parts: Sequence[Schedule]) -> list[Schedule]:
    """The fewest expressions whose CronJobs fire exactly when ``parts`` do: two that differ in one field become one
    with that field's values joined (``0 9 * * 1-5`` and ``0 17 * * 1-5`` are ``0 9,17 * * 1-5``), a copy is
    dropped. A day field joins only where cron's rule (day of month OR day of week when both are restricted, AND
    when either is ``*``) keeps the join exact. The order is kept: the first part matching a minute runs it.

    In a zone where robfig's walk has quirks (``_quirky``: Lord Howe's half hour, changes at midnight) a joined
    expression's chain can step where the two chains do not, so only copies are dropped there."""
    found = list(dict.fromkeys(parts))
    joined = bool(found) and not _quirky_zone(found[0].time_zone)
    while joined:
        joined = False
        for i, j in itertools.combinations(range(len(found)), 2):
            both = _joined(found[i], found[j])
            if both is not None:
                found[i] = both
                del found[j]
                joined = True
                break
    return found


@lru_cache(maxsize=64)
def _quirky_zone(time_zone: str) -> bool:
    """Whether the zone has a transition where robfig's walk can deviate from the wall clock, 2000 to 2100."""
    if time_zone == "UTC":
        return False
    zone = _zone(time_zone)
    return any(
        _quirky(zone, *transition)
        for year in range(2000, 2101)
        for transition in _transitions(
            zone, calendar.timegm((year, 1, 1, 0, 0, 0)), calendar.timegm((year, 12, 31, 0, 0, 0))
        )
    )


def _joined(a: Schedule, b: Schedule) -> Schedule | None:
    ours, theirs = _compared(a), _compared(b)
    differ = [i for i in range(5) if ours[i] != theirs[i]]
    if not differ:
        return a
    if len(differ) > 1:
        return None
    field = differ[0]
    if field in (2, 4):
        other = 4 if field == 2 else 2
        either_star = (ours[field] | theirs[field]) & _STAR
        if not ours[other] & _STAR and either_star:  # "*" there means the other field alone: no join is exact
            return None
    masks = list(ours)
    masks[field] = ours[field] | theirs[field]
    text = " ".join(_field_text(mask, i) for i, mask in enumerate(masks))
    both = parse(text, a.time_zone)
    if a.fixed_hours and b.fixed_hours and not both.fixed_hours:
        return None  # every hour joined: a fall-back's second run would get a key of its own (repeat_of)
    return both


def _compared(schedule: Schedule) -> tuple[int, ...]:
    """The masks as they decide: robfig's star bit counts in the day fields only."""
    return tuple(mask if i in (2, 4) else mask & ~_STAR for i, mask in enumerate(_masks(schedule)))


def _field_text(mask: int, index: int) -> str:
    _, low, high, _ = _FIELDS[index]
    values = [v for v in range(low, high + 1) if mask >> v & 1]
    if mask & _STAR or (index not in (2, 4) and len(values) == high - low + 1):
        return "*"
    runs: list[list[int]] = []
    for value in values:
        if runs and runs[-1][1] == value - 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _union_fires(schedule: Schedule, after: datetime, until: datetime | None) -> Iterator[datetime]:
    high = None if until is None else _unix(until)
    streams = [_iter_fires(p, _unix(after), until=high) for p in schedule.parts]
    last = None
    for fire in heapq.merge(*streams):
        if fire != last:
            yield fire
            last = fire


def _hour_minutes(parts: Sequence[Schedule], hour: int) -> int:
    mask = 0
    for part in parts:
        if part.hours >> hour & 1:
            mask |= part.minutes
    return mask & _MINUTES


def _union_wall_count(parts: Sequence[Schedule], low: int, high: int) -> int:
    """Wall-clock minutes in (low, high] that some part matches: per day, the union of the products of the parts
    whose day it is, an hour's minutes as one bitmask."""
    if high <= low:
        return 0
    total = 0
    whole: dict[tuple[Schedule, ...], int] = {}
    day, last = low // 86400, high // 86400
    while day <= last:
        today = date.fromordinal(day + _EPOCH_ORDINAL)
        matching = tuple(p for p in parts if _day_matches(p, today))
        base = day * 86400
        if not matching:
            pass
        elif low < base and base + 86400 <= high:
            if matching not in whole:
                whole[matching] = sum(_hour_minutes(matching, h).bit_count() for h in range(24))
            total += whole[matching]
        else:
            for hour in range(24):
                start = base + hour * 3600
                if high < start:
                    break
                first = (low - start) // 60 + 1 if low >= start else 0
                final = min(59, (high - start) // 60)
                if first <= final:
                    total += (_hour_minutes(matching, hour) & ((1 << (final + 1)) - (1 << first))).bit_count()
        day += 1
    return total


def _union_count(schedule: Schedule, low: int, high: int) -> int:
    """Fires in (low, high] of the parts' chains from ``low``, an instant several fire counted once: the union of
    the matches, corrected at the instants where a chain differs from the matches (see the section's comment)."""
    if high <= low:
        return 0
    zone = _zone_or_none(schedule)
    parts = schedule.parts
    total = sum(
        _union_wall_count(parts, max(a - 1, low) + offset, min(b - 1, high) + offset)
        for a, b, offset in _segments(zone, low, high + 1)
    )
    chains = []
    special: set[int] = set()
    for part in parts:
        skipped, extra = _quirks(part, zone, low, high)
        walked = set()
        fire = _next(part, zone, low)
        while fire is not None and fire <= high and not _on_chain(part, zone, fire):
            walked.add(fire)
            fire = _next(part, zone, fire)
        first = high + 1 if fire is None else fire
        special |= walked | skipped | extra | set(_matches_between(part, zone, low, min(first - 1, high)))
        chains.append((part, walked, first, skipped, extra))
    for moment in special:
        if not low < moment <= high:
            continue
        wall = moment + _offset(zone, moment)
        matched = any(_wall_matches(p, wall) for p in parts)
        fired = any(
            moment in walked
            or (moment >= first and (moment in extra or (moment not in skipped and _wall_matches(p, wall))))
            for p, walked, first, skipped, extra in chains
        )
        total += int(fired) - int(matched)
    return total
