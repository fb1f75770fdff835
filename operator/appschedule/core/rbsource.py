"""Recurring jobs of a Rails app, read from their YAML (``appschedule import source``, issue 35 item 2, the Ruby
half): Solid Queue's ``config/recurring.yml`` and sidekiq-cron's schedule file. Pure.

Both read a schedule with Fugit: a cron line (five fields, or six with seconds first; an IANA zone after the
fields) or an English phrase (``every day at 5pm``, ``every 15 minutes``, ``at 5am every day``). ``fugit_cron``
translates the phrases it reads exactly as Fugit's ``to_cron_s`` does (tests/unit/test_rbsource.py asks Fugit
1.5.2, Debian's ruby-fugit, for each one and compares the fires over 2026 in a zone with daylight saving);
every other phrase is listed, never guessed. Fugit reads only the first time of ``at 9:30 and 17:00``: listed.

Each entry becomes a task that runs the job in the Job's own process with ``bin/rails runner``:

* Solid Queue: ``class: MyJob`` with ``args`` runs ``MyJob.perform_now(*args)``; ``command: "Code.here"`` runs
  the code;
* sidekiq-cron (a mapping of jobs, or a list of them each with its ``name``): ``class: HardWorker`` with
  ``args`` runs ``HardWorker.new.perform(*args)`` (a hash of args is one argument, as sidekiq-cron passes it);
  ``active_job: true`` runs ``perform_now``. ``status: disabled`` makes the task suspended.

The args go through JSON (``JSON.parse``), as the YAML gave them: string keys, no symbols.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from .jssource import cron_fields
from .pysource import Found, Scan, Unfaithful, task_name
from .schedule import ScheduleError, check_time_zone, parse

SOLID_QUEUE = "Solid Queue"
SIDEKIQ_CRON = "sidekiq-cron"
_DAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
_UNITS = {"minute": "minute", "minutes": "minute", "min": "minute", "mins": "minute", "hour": "hour",
          "hours": "hour", "day": "day", "days": "day"}  # fmt: skip
_TIME = re.compile(r"^(?:(?P<noon>noon)|(?P<midnight>midnight)|(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>am|pm)?)$")


class FugitError(ValueError):
    pass


def _time(text: str) -> tuple[int, int]:
    match = _TIME.match(text.strip())
    if match is None:
        raise FugitError(f"{text!r} is not a time this import reads")
    if match["noon"]:
        return 12, 0
    if match["midnight"]:
        return 0, 0
    hour, minute = int(match["h"]), int(match["m"] or 0)
    if match["ampm"]:
        if not 1 <= hour <= 12:
            raise FugitError(f"{text!r}: an hour of 1 to 12 before am or pm")
        if hour == 12 and match["ampm"] == "am":
            raise FugitError(f"{text!r}: Fugit 1.5.2 reads 12am as noon: write midnight, noon or a cron line")
        hour = hour % 12 + (12 if match["ampm"] == "pm" else 0)
    if hour > 23 or minute > 59:
        raise FugitError(f"{text!r} is not a time of day")
    return hour, minute


def _days(text: str) -> str:
    """``monday and friday``, ``weekday``, ``monday, wednesday`` as a day-of-week field."""
    if text in ("weekday", "weekdays"):
        return "1,2,3,4,5"
    found = []
    for word in re.split(r"\s*(?:,|\band\b)\s*", text):
        word = word.strip().rstrip("s")
        if word not in _DAYS:
            raise FugitError(f"{word!r} is not a day this import reads")
        found.append(str(_DAYS.index(word)))
    return ",".join(found)


def _zone_name(word: str) -> bool:
    """Whether ``word`` (no slash) is a zone (``UTC``, ``GMT``, ``EST5EDT``), not a cron field (``MON``, ``5``)."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+\-]*", word) or word.lower()[:3] in _CRON_NAMES:
        return False
    try:
        check_time_zone(word)
    except ScheduleError:
        return False
    return True


_CRON_NAMES = {"sun", "mon", "tue", "wed", "thu", "fri", "sat", "jan", "feb", "mar", "apr", "may", "jun", "jul",
               "aug", "sep", "oct", "nov", "dec"}  # fmt: skip


def fugit_cron(text: str) -> tuple[str, str | None]:
    """A Fugit schedule as five cron fields and its zone (None: the process' zone); FugitError saying why not."""
    words = " ".join(text.strip().split())
    zone: str | None = None
    last = words.rsplit(" ", 1)
    if len(last) == 2 and "/" in last[1]:  # an IANA zone after the schedule, as Fugit reads it
        try:
            check_time_zone(last[1])
        except ScheduleError as error:
            raise FugitError(str(error)) from None
        words, zone = last[0], last[1]
    elif len(last) == 2 and len(last[0].split()) in (5, 6) and _zone_name(last[1]):  # a zone without a slash: UTC
        words, zone = last[0], last[1]
    fields = words.split()
    cron_line = fields and len(fields) in (5, 6) and all(re.fullmatch(r"[0-9*/,\-A-Za-z#?LW]+", f) for f in fields)
    if zone and not cron_line and not re.fullmatch(r"[A-Za-z]+/[A-Za-z]+", zone):
        raise FugitError(f"{text!r}: Fugit 1.5.2 does not read a phrase with the zone {zone}: write a cron line")
    if fields and all(re.fullmatch(r"[0-9*/,\-A-Za-z#?LW]+", f) for f in fields) and len(fields) in (5, 6):
        if not any(ch.isdigit() or ch == "*" for ch in fields[0]):
            raise FugitError(f"{text!r} is neither a cron line nor a phrase this import reads")
        try:
            return cron_fields(words, days_and=False), zone
        except ValueError as error:
            raise FugitError(str(error)) from None
    return _phrase(words.lower()), zone


def _phrase(words: str) -> str:
    if " and " in words.split(" at ", 1)[-1] and " at " in words:
        raise FugitError(f"{words!r}: Fugit reads only the first time of several: give one cron line per time")
    match = re.fullmatch(r"at (?P<time>.+?) every (?P<spec>.+)", words)
    if match:
        spec, at = match["spec"], match["time"]
    else:
        match = re.fullmatch(r"every (?P<spec>.+?)(?: at (?P<time>.+))?", words)
        if match is None:
            raise FugitError(f"{words!r} is not a phrase this import reads: write it as a cron line")
        spec, at = match["spec"], match["time"]
    hour, minute = _time(at) if at else (0, 0)
    counted = re.fullmatch(r"(?:(?P<n>\d+) )?(?P<unit>[a-z]+)", spec)
    if counted and counted["unit"] in _UNITS:
        n, unit = int(counted["n"] or 1), _UNITS[counted["unit"]]
        if at and unit != "day":
            raise FugitError(f"{words!r}: a time with every {unit}")
        limit = {"minute": 59, "hour": 23, "day": 31}[unit]
        if not 1 <= n <= limit:
            raise FugitError(f"{words!r}: every {n} {unit}s does not fit a cron field")
        step = f"*/{n}" if n > 1 else "*"
        if unit == "minute":
            return f"{step} * * * *"
        if unit == "hour":
            return f"0 {step} * * *"
        return f"{minute} {hour} {step} * *" if n > 1 else f"{minute} {hour} * * *"
    if spec in ("week", "month") and not at:
        return "0 0 * * 0" if spec == "week" else "0 0 1 * *"
    if "second" in spec:
        raise FugitError(f"{words!r}: seconds (a CronJob starts on the minute)")
    return f"{minute} {hour} * * {_days(spec)}"


def _runner(code: str) -> list[str]:
    return ["bin/rails", "runner", code]


def _args(value: Any) -> str:
    """Ruby that rebuilds ``value`` (the YAML's) through JSON."""
    return f"*JSON.parse({json.dumps(json.dumps(value))})"


def _entries(document: Any) -> tuple[str, dict[str, Any]] | None:
    """Which format a YAML document is and its entries, or None when it is neither. sidekiq-cron also reads a
    list of jobs, each with its ``name``: as the mapping form, keyed by those names."""
    if isinstance(document, list) and document and all(isinstance(v, dict) and "cron" in v for v in document):
        return SIDEKIQ_CRON, {str(v.get("name") or f"job-{i + 1}"): v for i, v in enumerate(document)}
    if not isinstance(document, dict):
        return None
    if any(isinstance(v, dict) and "cron" in v for v in document.values()):
        return SIDEKIQ_CRON, document
    if any(isinstance(v, dict) and "schedule" in v for v in document.values()):
        return SOLID_QUEUE, document
    for environment in ("production", *document):  # recurring.yml by environment: production's, else the first
        entries = document.get(environment)
        if isinstance(entries, dict) and any(isinstance(v, dict) and "schedule" in v for v in entries.values()):
            return SOLID_QUEUE, entries
    return None


def mentions(text: str) -> bool:
    return ("cron:" in text and "class:" in text) or "schedule:" in text


def _lines(text: str) -> dict[str, int]:
    """The line of each entry's key (a top-level or environment-level mapping key), or of a listed job's ``name``."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"^\s*-?\s*name:\s*['\"]?([^'\"#]+?)['\"]?\s*(#.*)?$", line)
        if match:
            found.setdefault(match[1], number)
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r"^\s{0,4}([A-Za-z0-9_.\-]+):\s*(#.*)?$", line)
        if match:
            found.setdefault(match[1], number)
    return found


def scan(text: str, filename: str) -> Scan:
    """The recurring jobs of one YAML file (nothing when it is neither format). A file YAML cannot read raises
    yaml.YAMLError, which names the line. Fugit fires as the CronJob controller does on the days a zone changes
    (a repeated hour's fire twice, a skipped hour's never; the test measures it), so no note is needed."""
    found = Scan()
    read = _entries(yaml.safe_load(text))
    if read is None:
        return found
    framework, entries = read
    lines = _lines(text)
    for key, entry in entries.items():
        where = f"{filename}:{lines.get(str(key), 1)}"
        if not isinstance(entry, dict):
            continue
        code = f"{key}: {json.dumps(entry, default=str)[:100]}"
        try:
            task, notes = _task(framework, str(key), entry)
        except (FugitError, ScheduleError) as error:
            found.unfaithful.append(Unfaithful(where, code, framework, str(error)))
            continue
        found.found.append(Found(task, where, code, framework, tuple(notes)))
    return found


def _task(framework: str, key: str, entry: dict[str, Any]) -> tuple[dict[str, object], list[str]]:
    raw = entry.get("cron" if framework == SIDEKIQ_CRON else "schedule")
    if not isinstance(raw, str):
        raise FugitError(f"no schedule ({'cron' if framework == SIDEKIQ_CRON else 'schedule'}: a string)")
    schedule, zone = fugit_cron(raw)
    parse(schedule, zone or "UTC")  # what the CronJob controller refuses is listed
    notes = []
    job = entry.get("class")
    args = entry.get("args")
    if framework == SOLID_QUEUE and isinstance(entry.get("command"), str):
        command = _runner(entry["command"])
    elif isinstance(job, str) and re.fullmatch(r"[A-Z][A-Za-z0-9_]*(::[A-Z][A-Za-z0-9_]*)*", job):
        if framework == SIDEKIQ_CRON and not entry.get("active_job"):
            arguments = "" if args is None else _args(args if isinstance(args, list) else [args])
            command = _runner(f"{job}.new.perform({arguments})")
        else:
            arguments = "" if args is None else _args(args if isinstance(args, list) else [args])
            command = _runner(f"{job}.perform_now({arguments})")
    else:
        raise FugitError("no class (a Ruby constant) or command to run")
    if args is not None:
        notes.append("args through JSON: string keys, as the YAML gave them")
    task: dict[str, object] = {"name": task_name(key.replace("_", "-")), "schedule": schedule, "command": command}
    if zone:
        task["timeZone"] = zone
    else:
        notes.append("Fugit used the process' zone (TZ, else the host's); the task's is spec.timeZone")
    if entry.get("status") == "disabled":
        task["suspend"] = True
    for ignored in ("queue", "queue_name", "priority", "description", "date_as_argument", "symbolize_args"):
        if ignored in entry:
            notes.append(f"{ignored}: not carried (the run is a Job of its own, not a queued job)")
    return task, notes
