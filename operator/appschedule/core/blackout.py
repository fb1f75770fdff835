"""Blackouts (DESIGN "Calendars"): spans of a task's wall clock in which no run of it starts.

A blackout is whole days (``dates``), a range of days (``from``/``to``, both included) or a weekly window
(``weekly``: days of the week, ``from``/``to`` as ``HH:MM``; ``to`` at or before ``from`` runs into the next
day, ``24:00`` is the day's end), read in the task's zone. ``spec.blackouts`` hold for every task, a task's own
``blackouts`` add to them. A fire inside one is blacked out: its run does not start (the operator suspends the
task's CronJob for the span and the key webhook refuses a Job the CronJob controller makes for such a fire), it
is counted ``blackedOut`` (never missed), and it is not caught up nor backfilled.

Wall-clock spans become UTC spans as the zone says, each wall-clock time blacked out each time it comes: on the
spring-forward day a window of the hour that does not exist is empty, on the fall-back night a window in the
repeated hour holds both of its times (02:40 to 02:50 in Berlin: two spans of ten minutes; the whole hour: one of
2 hours of UTC). Every
function here costs O(windows x days looked at), never O(fires): a year of an every-minute task's holidays
is counted with the schedule's own fire count per span (schedule.count_fires), and the next fire outside the
blackouts jumps from span to span.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import TypeAdapter, ValidationError

from . import naming
from .models import Blackout
from .schedule import Schedule, count_fires, next_fire

# on a task's CronJob's job template (so on each of its Jobs): the task's blackouts, as the spec states them, for
# the ledger and the key webhook; and, while the CronJob is suspended for one, which and until when
ANNOTATION = f"{naming.GROUP}/blackouts"
ANNOTATION_NOW = f"{naming.GROUP}/blacked-out"
_LIST = TypeAdapter(list[Blackout])
DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
HORIZON = timedelta(days=2 * 366)  # a schedule with no fire outside its blackouts in this long has no next fire
ONE = timedelta(seconds=1)  # fires are whole minutes: (t - 1s, e - 1s] holds exactly the fires in [t, e)


@dataclass(frozen=True)
class Window:
    """One blackout as the spec states it (models.Blackout), in minutes of the day for a weekly window."""

    name: str
    reason: str = ""
    dates: frozenset[date] = frozenset()
    first: date | None = None
    last: date | None = None
    days: frozenset[int] = frozenset()  # 0 = Monday
    start: int = 0  # minutes after midnight
    end: int = 0  # minutes after midnight, 1440 the day's end; at or before start: on the next day

    def said(self) -> str:
        return f"{self.name} ({self.reason})" if self.reason else self.name


Span = tuple[datetime, datetime, Window]  # [start, end) in UTC
Interval = tuple[datetime, datetime]


def minutes(text: str) -> int:
    hours, mins = text.split(":")
    return int(hours) * 60 + int(mins)


def of(blackouts: Iterable[Any]) -> tuple[Window, ...]:
    """The windows of ``models.Blackout`` objects (or their dicts, as the spec holds them)."""
    found = []
    for raw in blackouts:
        item = raw if isinstance(raw, dict) else raw.model_dump(by_alias=True, exclude_none=True)
        weekly = item.get("weekly") or {}
        found.append(
            Window(
                name=str(item.get("name") or ""),
                reason=str(item.get("reason") or ""),
                dates=frozenset(date.fromisoformat(d) for d in item.get("dates") or ()),
                first=date.fromisoformat(item["from"]) if item.get("from") else None,
                last=date.fromisoformat(item["to"]) if item.get("to") else None,
                days=frozenset(DAYS.index(d) for d in weekly.get("days") or ()),
                start=minutes(weekly["from"]) if weekly else 0,
                end=minutes(weekly["to"]) if weekly else 0,
            )
        )
    return tuple(found)


def _at(day: date, minute: int, zone: ZoneInfo) -> datetime:
    """A wall-clock minute of a day in UTC (a minute the spring-forward skips reads as the offset before it)."""
    return _wall(day, minute).replace(tzinfo=zone).astimezone(UTC)


def _wall(day: date, minute: int) -> datetime:
    """A minute of a day's wall clock, naive (``minute`` may run past the day: the next day's)."""
    hour, rest = divmod(minute % 1440, 60)
    return datetime.combine(day + timedelta(days=minute // 1440), time(hour, rest))


def _offset(moment: datetime, zone: ZoneInfo) -> timedelta:
    offset = moment.astimezone(zone).utcoffset()
    return offset if offset is not None else timedelta(0)


def _between(day: date, start: int, end: int, zone: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """The UTC spans whose wall-clock time in ``zone`` is from minute ``start`` of ``day`` to minute ``end`` (each
    time it comes): one span on most days; on a fall-back night a window in the repeated hour comes twice (a window
    of 02:40 to 02:50 in Berlin is two spans of ten minutes, a window of the whole hour one of two hours); on a
    spring-forward day the minutes the clock skips are in no span. For each offset the zone has at those wall times,
    the span those wall times mean at that offset, kept where the zone has that offset (a weekly window: at most a
    day, so at most one change of offset)."""
    low, high = _wall(day, start), _wall(day, end)
    offsets = {
        offset
        for wall in (low, high)
        for fold in (0, 1)
        if (offset := wall.replace(tzinfo=zone, fold=fold).utcoffset()) is not None
    }
    pieces = sorted(
        piece
        for offset in offsets
        for piece in _where((low - offset).replace(tzinfo=UTC), (high - offset).replace(tzinfo=UTC), offset, zone)
    )
    found: list[tuple[datetime, datetime]] = []
    for first, last in pieces:  # touching pieces as one (the hour the clock skips, closed over)
        if found and first <= found[-1][1]:
            found[-1] = (found[-1][0], max(found[-1][1], last))
        else:
            found.append((first, last))
    return found


def _where(first: datetime, last: datetime, offset: timedelta, zone: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """The part of [first, last) where ``zone`` is at ``offset`` (a span of a day or so holds at most one change of
    offset: found to the second by halving). A zone whose offset changed and changed back within a day would be
    read as unchanged: in the tz database of 1900 to 2037 no two changes of a zone are under four days apart."""
    if last <= first:
        return []
    at_first, at_last = _offset(first, zone) == offset, _offset(last - ONE, zone) == offset
    if at_first and at_last:
        return [(first, last)]
    if not at_first and not at_last:
        return []
    low, high = first, last - ONE  # the offset changes after low and at or before high
    while high - low > ONE:
        middle = low + (high - low) / 2
        middle = middle.replace(microsecond=0)
        if (_offset(middle, zone) == offset) == at_first:
            low = middle
        else:
            high = middle
    return [(first, high)] if at_first else [(high, last)]


def spans(windows: Sequence[Window], zone: ZoneInfo, low: datetime, high: datetime) -> list[Span]:
    """Every window's UTC spans that overlap [low, high), by start, whole (a range of days is one span, however
    far it reaches past them); empty ones (a skipped hour) left out. The spans of the days around [low, high)
    are kept per days asked (every plan asks again for today)."""
    if not windows or high <= low:
        return []
    first_day = low.astimezone(zone).date() - timedelta(days=1)
    last_day = high.astimezone(zone).date() + timedelta(days=1)
    return [s for s in _day_spans(tuple(windows), zone, first_day, last_day) if s[1] > low and s[0] < high]


@functools.lru_cache(maxsize=4096)
def _day_spans(windows: tuple[Window, ...], zone: ZoneInfo, first_day: date, last_day: date) -> tuple[Span, ...]:
    found: list[Span] = []

    def add(start: datetime, end: datetime, window: Window) -> None:
        if start < end:
            found.append((start, end, window))

    def add_between(day: date, start: int, end: int, window: Window) -> None:
        for first, last in _between(day, start, end, zone):
            add(first, last, window)

    for window in windows:
        for day in sorted(d for d in window.dates if first_day <= d <= last_day):  # from midnight to midnight
            add(_at(day, 0, zone), _at(day, 1440, zone), window)
        first, last = window.first, window.last
        if first is not None and last is not None and first <= last_day and last >= first_day:  # whole: one span
            add(_at(first, 0, zone), _at(last, 1440, zone), window)
        if window.days:
            length = (window.end - window.start) % 1440 or 1440
            day = first_day
            while day <= last_day:
                if day.weekday() in window.days:
                    add_between(day, window.start, window.start + length, window)
                day += timedelta(days=1)
    return tuple(sorted(found, key=lambda s: (s[0], s[1])))


def merged(found: Sequence[Span]) -> list[Span]:
    """Overlapping or touching spans as one, with the first window's name."""
    out: list[Span] = []
    for start, end, window in sorted(found, key=lambda s: (s[0], s[1])):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end), out[-1][2])
        else:
            out.append((start, end, window))
    return out


def covering(windows: Sequence[Window], zone: ZoneInfo, moment: datetime) -> Span | None:
    """The blackout ``moment`` is in, with the end of every blackout that follows on from it; None if none."""
    if not windows:
        return None
    look = moment + timedelta(days=1)
    joined = merged(spans(windows, zone, moment, look + ONE))
    while joined and joined[-1][1] >= look and look - moment < HORIZON:  # runs on past what was looked at
        look = joined[-1][1] + timedelta(days=1)
        joined = merged(spans(windows, zone, moment, look + ONE))
    return next((s for s in joined if s[0] <= moment < s[1]), None)


def blacked_out(windows: Sequence[Window], zone: ZoneInfo, fire: datetime) -> Window | None:
    """The window a fire is in, or None."""
    return next((w for s, e, w in spans(windows, zone, fire, fire + ONE) if s <= fire < e), None)


CHUNK = timedelta(days=32)  # the spans next_allowed works through at once
_KNOWN: dict[tuple[Schedule, tuple[Window, ...]], list[tuple[datetime, datetime | None]]] = {}
KNOWN_MAX = 4096  # (schedule, blackouts) pairs whose last answers are kept
KNOWN_EACH = 4  # answers kept per pair: a plan asks from the ledger's mark, from now, from the pending fire


def next_allowed(schedule: Schedule, windows: Sequence[Window], after: datetime) -> datetime | None:
    """The first fire after ``after`` outside every blackout; None if none within HORIZON (without blackouts:
    the next fire, however far). The spans are worked through a month at a time, one fire step per span a fire
    falls in: a schedule whose every fire is dark (03:00 daily, with nights dark) costs 2 years of spans once.
    The last answer per schedule and blackouts is kept: every later ``after`` before it has the same answer
    (each plan asks again with a later ``now``)."""
    fire = next_fire(schedule, after)
    if not windows or fire is None:
        return fire
    key = (schedule, tuple(windows))
    answers = _KNOWN.get(key) or []
    for asked, answer in answers:
        if asked <= after and (
            (answer is not None and after < answer) or (answer is None and after - asked < timedelta(days=1))
        ):
            return answer
    found = _search(schedule, windows, after, fire)
    if len(_KNOWN) >= KNOWN_MAX:
        _KNOWN.clear()
    _KNOWN[key] = [(after, found), *answers][:KNOWN_EACH]
    return found


def _search(schedule: Schedule, windows: Sequence[Window], after: datetime, fire: datetime | None) -> datetime | None:
    low = after
    while fire is not None and fire - after < HORIZON:
        high = max(fire, low) + CHUNK
        dark = merged(spans(windows, schedule.zone, low, high + ONE))
        index = 0
        while fire is not None and fire < high:
            while index < len(dark) and dark[index][1] <= fire:
                index += 1
            if index == len(dark) or fire < dark[index][0]:
                return fire if fire - after < HORIZON else None
            fire = next_fire(schedule, dark[index][1] - ONE)  # the first fire at or after the span's end
        low = max(high, fire) if fire is not None else high  # a span that ran past the month: on from its end
    return None


def count(schedule: Schedule, windows: Sequence[Window], low: datetime, high: datetime) -> int:
    """How many fires in (low, high] are blacked out (a fall-back's repeated fire counts as the schedule counts
    it), at a cost of one fire count per span."""
    total = 0
    for start, end, _ in merged(spans(windows, schedule.zone, low + ONE, high + ONE)):
        lo, hi = max(start - ONE, low), min(end - ONE, high)
        if hi > lo:
            total += count_fires(schedule, lo, hi)
    return total


def fire_spans(schedule: Schedule, windows: Sequence[Window], low: datetime, high: datetime) -> list[Interval]:
    """The merged blackouts that hold fires in (low, high], each as (start - 1s, end - 1s]: the ledger's form of
    a span (``ledger._within``: a fire t is in (a, b] when a < t <= b)."""
    return [(s - ONE, e - ONE) for s, e, _ in merged(spans(windows, schedule.zone, low + ONE, high + ONE))]


def subtract(intervals: Sequence[Interval], holes: Sequence[Interval]) -> list[Interval]:
    """(a, b] spans without the (c, d] ones: what a blackout leaves of the spans a suspension or Forbid explains."""
    out = list(intervals)
    for c, d in holes:
        out = [piece for a, b in out for piece in ((a, min(b, c)), (max(a, d), b)) if piece[1] > piece[0]]
    return out


def encode(blackouts: Sequence[Blackout]) -> str:
    """The annotation's value: the blackouts as the spec states them, compact."""
    return _LIST.dump_json(list(blackouts), by_alias=True, exclude_none=True).decode()


def decode(annotations: Any) -> tuple[Window, ...] | None:
    """The windows an object's annotations carry: () for none, None when the value is not valid blackouts
    (any Job's author may write it: never trusted, never raised)."""
    text = annotations.get(ANNOTATION) if isinstance(annotations, Mapping) else None
    if not text:
        return ()
    if not isinstance(text, str) or len(text) > 256 * 1024:
        return None
    return _decoded(text)


@functools.lru_cache(maxsize=1024)
def _decoded(text: str) -> tuple[Window, ...] | None:
    """The windows of an annotation's value, read once per value (every plan reads every CronJob's)."""
    try:
        return of(_LIST.validate_json(text))
    except (ValidationError, ValueError):
        return None


def _template_annotations(spec: Any) -> dict[str, Any]:
    """A CronJob spec's job template annotations (empty when any level is not a map)."""
    template = spec.get("jobTemplate") if isinstance(spec, Mapping) else None
    metadata = template.get("metadata") if isinstance(template, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return dict(annotations) if isinstance(annotations, Mapping) else {}


def of_template(spec: Any) -> tuple[Window, ...]:
    """The windows a CronJob's spec carries on its job template (none when unreadable)."""
    return decode(_template_annotations(spec)) or ()


def marked(spec: Any) -> str | None:
    """What a CronJob's spec says of the blackout it is suspended for ("<name> (<reason>) until <time>"), if any."""
    said = _template_annotations(spec).get(ANNOTATION_NOW)
    return said if isinstance(said, str) and said else None
