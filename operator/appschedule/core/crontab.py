"""A crontab read into an AppSchedule's tasks (``appschedule import crontab``, issue 35 item 2): pure.

``read(text, filename, ...)`` takes a crontab as cron (Vixie cron, cronie) reads it and returns the tasks, each
with the file and line it came from, and every line it could not carry over with the reason. Nothing is
silently changed: a line either becomes a task that fires at exactly the times cron would fire it (in the
zone the task states), or it is listed.

What a line may be, as crontab(5) has it:

* blank, or a comment (``#`` first): skipped;
* an environment setting, ``NAME = value`` (the value may be quoted): it applies to the entries after it.
  ``CRON_TZ`` is the zone the following schedules are read in (cronie); ``SHELL`` the shell that runs their
  commands (default ``/bin/sh``); ``MAILTO`` and ``MAILFROM`` have no counterpart (a Job mails nobody) and are
  reported; every other one (``TZ``, ``PATH``, ``HOME``...) goes into the tasks' ``env``, as cron passes it;
* an entry: five fields or an ``@`` nickname, then (a system crontab: ``/etc/crontab``, ``/etc/cron.d``) the
  user, then the command. In the command the first unescaped ``%`` ends it; what follows is its standard
  input, each further ``%`` a newline (``\\%`` is a ``%``), ended by a newline. The task runs ``SHELL -c
  command``, its input, if any, piped from ``printf`` into a subshell that runs the whole command line. The printed
  AppSchedule writes each ``$`` as ``$$`` (``naming.literal_text``): the shell then sees what cron gave it.

What does not carry over, and why:

* ``@reboot``: no schedule; the app's start is the place for it;
* a schedule whose day of month and day of week are both restricted while one starts with ``*`` and has a
  step (``*/2``): cron then fires on days that match *both*, the CronJob controller on days that match
  *either*; no five fields say "both";
* a schedule the CronJob controller would not run (a ``L``, ``W`` or ``#``, a value out of range): its message;
* the user of a system crontab: a Job runs as its image's user (reported with the task, which is kept);
* a fire in the hour a daylight-saving change skips: cron runs it right after the change, a CronJob does
  not; a fire in the hour a fall-back repeats: cron runs it once, a CronJob twice (both runs with one key). Both
  reported with the task, which is kept.

Day of week 7 (Sunday, as cron also reads it) is written as 0, which the CronJob controller needs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from . import naming
from .schedule import DESCRIPTORS, Schedule, ScheduleError, check_time_zone, matches_wall, parse

_ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_NAME_PART = re.compile(r"[^a-z0-9]+")
NOT_CARRIED = {"MAILTO": "a Job mails nobody", "MAILFROM": "a Job mails nobody"}
NAME_MAX = 40  # a task name made from a command: short enough for the CronJob's name beside the AppSchedule's


class CrontabError(ValueError):
    """A crontab cron itself would refuse; the message names the file and line."""


@dataclass(frozen=True)
class Imported:
    """One entry, as a task of the AppSchedule (its dict, as in the spec) and where it came from."""

    task: dict[str, object]
    source: str  # FILE:LINE
    line: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skipped:
    source: str
    line: str
    reason: str


@dataclass
class Crontab:
    tasks: list[Imported] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # about the file (settings with no counterpart)


def _value(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def weekday_seven(field_text: str) -> str:
    """Day of week with 7 (Sunday, as cron, node-cron and Nest's ``cron`` read it) written as 0, which the CronJob
    controller needs. An item naming 7 becomes the days it matches, each 7 as 0 (``1-7/2`` is ``1,3,5,0``; a
    plain range keeps its range, ``5-7`` is ``5-6,0``); an item without 7 is kept as written, and one that is not
    numbers is left for the schedule's parser to judge."""
    kept: list[str] = []
    days: list[int] = []
    for item in field_text.split(","):
        body, slash, step_text = item.partition("/")
        low_text, dash, high_text = body.partition("-")
        bounds = [low_text, high_text] if dash else [low_text]
        if "7" not in bounds or not all(b.isdigit() for b in bounds) or (slash and not step_text.isdigit()):
            kept.append(item)
            continue
        low = int(low_text)
        high = int(high_text) if dash else (7 if slash else low)  # cron's a/n: from a to the last day, by n
        step = int(step_text) if slash else 1
        if step < 1 or high < low:
            kept.append(item)
            continue
        if dash and not slash and low < 6:  # a-7, kept as a range: a-6,0
            kept.append(f"{low}-6")
            days.append(0)
            continue
        days += [d % 7 for d in range(low, high + 1, step)]
    written = [str(d) for d in sorted(set(days), key=days.index) if str(d) not in kept]
    return ",".join(kept + written)


def _both_days(fields: list[str]) -> bool:
    """Whether cron and the CronJob controller read the two day fields differently. Cron fires on days matching
    both when either field starts with ``*``, else on days matching either; the CronJob controller (robfig)
    fires on days matching both only when either is exactly ``*`` (or ``*/1``). They differ when a field is
    ``*/n`` (n > 1) and the other is not ``*``."""
    dom, dow = fields[2], fields[4]
    cron_both = dom.startswith("*") or dow.startswith("*")
    robfig_both = dom in ("*", "*/1") or dow in ("*", "*/1")
    return cron_both and not robfig_both


WRAPPERS = {"cd", "env", "exec", "nice", "ionice", "nohup", "timeout", "flock", "sudo", "time", "bash", "sh", "-c"}


SHELL_OPENERS = {"then", "else", "elif", "if", "do", "while", "until", "!", "{", "("}  # before the command
SHELL_CLOSERS = {"fi", "done", "esac", "}", ")", "[", "[[", "test", "]", "]]", "true", "false", ":"}  # no program


def _program(words: list[str]) -> str | None:
    """The program a simple command runs, past the shell's keywords, wrappers and their options; None if none."""
    while words and words[0] in SHELL_OPENERS:
        words = words[1:]
    if not words or words[0] in SHELL_CLOSERS:
        return None
    skip_next = False
    for word in words:
        if word.startswith("-") or word.isdigit():  # an option of a wrapper, or its value (nice -n 10)
            continue
        if skip_next:
            skip_next = False
            continue
        program = word.rsplit("/", 1)[-1]
        if "=" in word.split("/")[0] or program in WRAPPERS:
            skip_next = program in ("flock", "timeout")  # their first argument is a lock file or a duration
            continue
        return program or None
    return None


def _task_name(command: str, taken: set[str]) -> str:
    """A task name from the program a command runs: its last ``&&``, ``||`` or ``;`` part that runs one (past the
    shell's ``if ... then ... fi``, tests, and wrappers such as ``nice`` or ``flock`` and their options), unique
    among ``taken``."""
    parts = re.split(r"&&|\|\||;", command)
    program = next(
        (p for part in reversed(parts) if (p := _program([w for w in re.split(r"\s+", part.strip()) if w]))), "task"
    )
    base = _NAME_PART.sub("-", program.lower()).strip("-")[:NAME_MAX].strip("-") or "task"
    if not base[0].isalpha():
        base = f"t-{base}"[:NAME_MAX]
    name, n = base, 2
    while name in taken:
        suffix = f"-{n}"
        name = base[: NAME_MAX - len(suffix)].rstrip("-") + suffix
        n += 1
    taken.add(name)
    return name


def _split_command(text: str) -> tuple[str, str | None]:
    """The command and its standard input: the first unescaped % ends the command, later ones are newlines."""
    out, rest = [], None
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] == "%":
            out.append("%")
            i += 2
            continue
        if ch == "%":
            rest = text[i + 1 :]
            break
        out.append(ch)
        i += 1
    if rest is None:
        return "".join(out), None
    stdin = re.sub(r"(?<!\\)%", "\n", rest).replace("\\%", "%")
    return "".join(out), stdin


def skipped_hours(schedule: Schedule, now: datetime) -> list[datetime]:
    """The wall-clock minutes the schedule names that its zone skips (a spring-forward gap) within a year from
    ``now``, at most 3: cron runs such a fire right after the change, the CronJob controller does not."""
    zone = schedule.zone
    found: list[datetime] = []
    day = now.astimezone(zone).date()
    for _ in range(367):
        noon = datetime(day.year, day.month, day.day, 12, tzinfo=zone)
        following = day + timedelta(days=1)
        if noon.utcoffset() != datetime(following.year, following.month, following.day, 12, tzinfo=zone).utcoffset():
            for hour in range(24):
                for minute in range(60):
                    wall = datetime(following.year, following.month, following.day, hour, minute)
                    exists = wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall
                    if not exists and matches_wall(schedule, wall):
                        found.append(wall)
                        if len(found) >= 3:
                            return found
            for hour in range(24):  # a change just after midnight belongs to the day before
                for minute in range(60):
                    wall = datetime(day.year, day.month, day.day, hour, minute)
                    exists = wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall
                    if not exists and matches_wall(schedule, wall) and wall not in found:
                        found.append(wall)
        day = following
    return found[:3]


def repeated_hours(schedule: Schedule, now: datetime) -> list[datetime]:
    """The wall-clock minutes the schedule names that its zone repeats (a fall-back) within a year from ``now``, at
    most 3."""
    zone = schedule.zone
    found: list[datetime] = []
    day = now.astimezone(zone).date()
    for _ in range(367):
        start = datetime(day.year, day.month, day.day, tzinfo=zone)
        if start.utcoffset() != (start + timedelta(days=1)).utcoffset():
            for minute in range(24 * 60):
                wall = datetime(day.year, day.month, day.day) + timedelta(minutes=minute)
                first, second = wall.replace(tzinfo=zone, fold=0), wall.replace(tzinfo=zone, fold=1)
                repeated = first.utcoffset() != second.utcoffset() and first.astimezone(UTC) < second.astimezone(UTC)
                if repeated and matches_wall(schedule, wall):
                    found.append(wall)
                    if len(found) >= 3:
                        return found
        day += timedelta(days=1)
    return found


def transition_notes(schedule: Schedule, framework: str, now: datetime, *, runs_skipped: bool) -> list[str]:
    """How the task's fires differ from ``framework``'s on the days its zone changes: the CronJob controller skips
    a wall-clock time the spring-forward gap skips (``runs_skipped``: the framework runs it just after the change),
    and fires a repeated one twice (both runs carry one key unless every hour fires) where the framework fires
    once."""
    notes = []
    gaps = skipped_hours(schedule, now)
    if gaps and runs_skipped:
        notes.append(f"{framework} runs a fire of the hour a spring-forward skips just after the change; a "
                     f"CronJob skips it ({gaps[0]:%Y-%m-%d %H:%M} {schedule.time_zone})")  # fmt: skip
    repeats = repeated_hours(schedule, now)
    if repeats:
        notes.append(f"a fire in the hour a fall-back repeats runs twice as a CronJob, once in {framework} "
                     f"({repeats[0]:%Y-%m-%d %H:%M} {schedule.time_zone})")  # fmt: skip
    return notes


def read(text: str, filename: str, now: datetime, *, system: bool = False, time_zone: str = "UTC") -> Crontab:
    """The tasks a crontab means. ``system``: the ``/etc/crontab`` form (a user field after the schedule);
    ``time_zone``: the zone the host's cron read schedules in, for the entries before any ``CRON_TZ``; ``now``:
    from when the zone's daylight-saving changes are looked at (a year of them)."""
    try:
        check_time_zone(time_zone)
    except ScheduleError as error:
        raise CrontabError(f"--time-zone: {error}") from None
    result = Crontab()
    env: dict[str, str] = {}
    shell, zone = "/bin/sh", time_zone
    taken: set[str] = set()
    reported: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        where = f"{filename}:{number}"
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        setting = _ENV.match(line)
        if setting and not line.startswith("@"):
            name, value = setting.group(1), _value(setting.group(2))
            if name == "CRON_TZ":
                try:
                    check_time_zone(value)
                except ScheduleError as error:
                    raise CrontabError(f"{where}: CRON_TZ={value}: {error}") from None
                zone = value
            elif name == "SHELL":
                shell = value or "/bin/sh"
            elif name in NOT_CARRIED:
                if name not in reported:
                    result.notes.append(f"{where}: {name} is not carried over ({NOT_CARRIED[name]})")
                    reported.add(name)
            else:
                env[name] = value
                if name == "TZ" and name not in reported:
                    result.notes.append(f"{where}: TZ={value} is passed to the commands' environment, as cron passes "
                                        "it; cron reads the schedules in CRON_TZ or the host's zone, and so do the "
                                        "tasks (CRON_TZ, else --time-zone)")  # fmt: skip
                    reported.add(name)
            continue
        if line.startswith("@"):
            parts = line.split(None, 1)
            nickname, rest = parts[0], parts[1] if len(parts) > 1 else ""
            if nickname == "@reboot":
                result.skipped.append(Skipped(where, raw, "@reboot has no schedule: run it when the app starts"))
                continue
            if nickname not in DESCRIPTORS:
                raise CrontabError(f"{where}: {nickname!r} is not a schedule cron knows (@hourly, @daily, ...)")
            fields, schedule = DESCRIPTORS[nickname].split(), nickname
        else:
            parts = line.split(None, 5)
            if len(parts) < 6:
                raise CrontabError(f"{where}: an entry needs five schedule fields and a command: {line!r}")
            fields = parts[:5]
            rest = parts[5]
            if any("H" in f for f in fields):  # this project's hashed forms: cron refuses them
                raise CrontabError(f"{where}: 'H' is not cron's: {line!r}")
            fields[4] = weekday_seven(fields[4])
            schedule = " ".join(fields)
        notes: list[str] = []
        if system:
            words = rest.split(None, 1)  # the user, then the command: spaces or tabs between (Debian's /etc/crontab)
            user, rest = (words[0], words[1].strip()) if len(words) == 2 else (rest.strip(), "")
            if not rest:
                raise CrontabError(f"{where}: a system crontab entry needs a user and a command: {line!r}")
            notes.append(f"ran as user {user!r}: the Job runs as its image's user")
        if not rest.strip():
            raise CrontabError(f"{where}: an entry needs a command: {line!r}")
        if _both_days(fields):
            result.skipped.append(Skipped(where, raw, "cron fires on days matching both the day of month and the "
                                          "day of week here (one starts with '*/'), a CronJob on days matching "
                                          "either: no five fields say both"))  # fmt: skip
            continue
        try:
            parsed = parse(schedule, zone)
        except ScheduleError as error:
            result.skipped.append(Skipped(where, raw, f"the CronJob controller would not run it: {error}"))
            continue
        command, stdin = _split_command(rest.strip())
        gaps = skipped_hours(parsed, now)
        if gaps:
            when = ", ".join(f"{g:%Y-%m-%d %H:%M}" for g in gaps)
            notes.append(f"cron runs what falls in the hour the clocks skip in {zone} ({when}) right after the "
                         "change; a CronJob skips it")  # fmt: skip
        # cron runs a job of fixed hours once in a repeated hour; one whose minute or hour starts with * (a
        # "wildcard" job) in both passes, as a CronJob does
        repeats = [] if fields[0].startswith("*") or fields[1].startswith("*") else repeated_hours(parsed, now)
        if repeats:
            notes.append(f"cron runs what falls in the hour the clocks repeat in {zone} ({repeats[0]:%Y-%m-%d %H:%M})"
                         " once; a CronJob runs it twice, both runs with one key")  # fmt: skip
        command = command.rstrip()
        if stdin is not None and not stdin.endswith("\n"):
            stdin += "\n"  # cron ends the input with a newline
        # cron gives the input to the shell that runs the whole command line (``a && b``: both may read it)
        script = command if stdin is None else f"printf %s {shlex.quote(stdin)} | (\n{command}\n)"
        task: dict[str, object] = {
            "name": _task_name(command, taken),
            "schedule": schedule,
            "timeZone": zone,
            "command": [shell, "-c", script],
        }
        if env:
            task["env"] = [{"name": k, "value": v} for k, v in env.items()]
        if len(str(task["name"])) > naming.TASK_NAME_MAX:  # cannot happen with NAME_MAX; the API's bound, stated
            raise CrontabError(f"{where}: task name too long")
        result.tasks.append(Imported(task, where, raw, tuple(notes)))
    return result


def comments(crontab: Crontab) -> list[str]:
    """Where each task came from and what was not carried over, as lines for the top of the YAML."""
    lines = [f"{t.task['name']}: {t.source}: {t.line.strip()}" + "".join(f" ({n})" for n in t.notes)
             for t in crontab.tasks]  # fmt: skip
    lines += [f"not carried over: {s.source}: {s.line.strip()}: {s.reason}" for s in crontab.skipped]
    lines += [f"not carried over: {n}" for n in crontab.notes]
    return lines
