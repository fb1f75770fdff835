"""The idempotency key of a run: ``<task>@<scheduled time, RFC 3339 UTC>``. One pure function, used by
the admission webhook, the ledger and ``appschedule key`` inside a container, so the three always agree.

A Job's *scheduled time* (DESIGN "The environment of every run"), in order of trust:

1. our ``appschedule.dev/scheduled-time`` annotation (the webhook set it at admission);
2. the CronJob controller's ``batch.kubernetes.io/cronjob-scheduled-timestamp`` annotation;
3. the Job name's suffix, ``<cronjob>-<minutes since the epoch>``, as the CronJob controller names Jobs;
4. otherwise (a Job made by hand, ``kubectl create job --from=cronjob/...``) its creation time rounded
   down to the schedule: a manual re-run of the 17:00 report carries the 17:00 key.

At a daylight-saving fall-back a fixed-hour schedule fires twice for one wall-clock time (two UTC
instants); the second fire takes the first one's time, so both Jobs carry one key.

Everything here reads what anyone who may create Jobs can write: nothing raises. A time that is not RFC
3339, or outside the years schedule.py computes in (1970 to 9990), is ignored and said in
``Scheduled.problem``; the ledger then reports that Job instead of filing it.

The scheduled time is the cluster's to state, never a Job author's (DESIGN "The ledger"): a time stated in
an annotation or a name is *refused* when it is later than the Job's creation (more than ``AHEAD`` of it:
the controller creates a fire's Job after its time) or, for any run but a manual one, not a fire of the
task's schedule. A refused time is never the Job's: ``Scheduled.refused`` holds it, ``problem`` says why,
and the time falls back to the creation time rounded down to the schedule (what the key webhook keys the
run's containers with). The ledger reports such a Job once and lets it go; it never holds a record.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from . import naming
from .schedule import EARLIEST, LATEST, Schedule, in_range, is_fire, repeat_of, round_down

Source = Literal["annotation", "controller", "name", "created"]  # where a Job's scheduled time was read


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 time (``Z`` or an offset) in the years schedule.py computes in, None otherwise."""
    if not isinstance(text, str) or not text or len(text) > 64:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            return None
        moment = moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    return moment if in_range(moment) else None


def given_time(flag: str, text: str) -> datetime:
    """A time a user gave on a command line (``flag``), RFC 3339 with an offset; ValueError saying what is wrong."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{flag} {text!r}: not an RFC 3339 time like 2026-03-07T12:00:00Z") from None
    if moment.tzinfo is None:
        raise ValueError(f"{flag} {text!r}: give a time zone offset or Z")
    try:
        inside = in_range(moment.astimezone(UTC))
    except (OverflowError, ValueError):  # 0001-01-01T00:00:00+01:00 has no UTC time
        inside = False
    if not inside:
        raise ValueError(f"{flag} {text!r}: give a time between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC)")
    return moment


def key_of(task: str, scheduled: datetime) -> str:
    return f"{task}@{rfc3339(scheduled)}"


_SUFFIX = re.compile(r"^(?P<cronjob>.+)-(?P<minutes>\d{8,10})$")


def time_from_name(job: str, cronjob: str | None = None) -> datetime | None:
    """The scheduled time in a Job name the CronJob controller made: ``<cronjob>-<minutes since epoch>``.
    When ``cronjob`` is given, only a name of exactly that CronJob counts."""
    match = _SUFFIX.match(job)
    if match is None or (cronjob is not None and match["cronjob"] != cronjob):
        return None
    seconds = int(match["minutes"]) * 60
    if not EARLIEST.timestamp() <= seconds <= LATEST.timestamp():
        return None
    return datetime.fromtimestamp(seconds, UTC)


# how far a stated time may be after the Job's creation: the controller manager's clock (the stated time) and the
# API server's (the creation) are two hosts' clocks; a claim within it holds a record at most that long
AHEAD = timedelta(minutes=5)


@dataclass(frozen=True)
class Scheduled:
    time: datetime
    source: Source
    problem: str | None = None  # what was ignored: an annotation or a name that is not a time in range
    refused: datetime | None = None  # a stated time that is in the future or not a fire (``problem`` says which)

    def key(self, task: str) -> str:
        return key_of(task, self.time)


def scheduled_time(
    *,
    annotations: Mapping[str, str],
    job_name: str,
    cronjob: str | None,
    created: datetime,
    schedule: Schedule | None,
) -> Scheduled:
    """The scheduled time a Job belongs to (see the module docstring), DST repeat folded in.

    ``schedule`` may be None (a schedule that no longer parses): the time is then taken as given, and a
    hand-made Job's is its creation time to the minute."""
    problems = []
    for name in (naming.ANNOTATION_SCHEDULED_TIME, naming.CRONJOB_SCHEDULED_TIMESTAMP):
        given = annotations.get(name)
        if given and parse_time(given) is None:
            problems.append(f"annotation {name}={str(given)[:64]!r} is not an RFC 3339 time between 1970 and 9990")
    if cronjob and job_name.startswith(f"{cronjob}-") and _SUFFIX.match(job_name) and not time_from_name(job_name):
        problems.append(f"name {job_name!r} ends in minutes past the year 9990")
    problem = "; ".join(problems) or None
    found: Scheduled | None = None
    ours = parse_time(annotations.get(naming.ANNOTATION_SCHEDULED_TIME))
    controller = parse_time(annotations.get(naming.CRONJOB_SCHEDULED_TIMESTAMP))
    named = time_from_name(job_name, cronjob) if cronjob else None
    if ours is not None:
        found = Scheduled(ours, "annotation", problem)
    elif controller is not None:
        found = Scheduled(controller, "controller", problem)
    elif named is not None:
        found = Scheduled(named, "name", problem)
    if found is not None:
        refusal = _refusal(found, created, schedule, annotations.get(naming.ANNOTATION_RUN_KIND) == "manual")
        if refusal is not None:
            why = "; ".join(p for p in (problem, refusal) if p)
            return dataclasses.replace(_from_creation(created, schedule), problem=why, refused=found.time)
    if found is None:
        return dataclasses.replace(_from_creation(created, schedule), problem=problem)
    if schedule is not None:
        first = repeat_of(schedule, found.time)
        if first is not None:
            return Scheduled(first, found.source, problem)
    return found


def _from_creation(created: datetime, schedule: Schedule | None) -> Scheduled:
    """A hand-made Job's time: its creation rounded down to the schedule (to the minute without one)."""
    created = created if in_range(created) else EARLIEST
    rounded = round_down(schedule, created) if schedule is not None else None
    return Scheduled(rounded or created.replace(second=0, microsecond=0), "created")


def _refusal(found: Scheduled, created: datetime, schedule: Schedule | None, manual: bool) -> str | None:
    """Why a stated time is not the Job's (see the module docstring), or None."""
    where = "name" if found.source == "name" else "annotation"
    if in_range(created) and found.time > created + AHEAD:
        return f"its {where} claims {rfc3339(found.time)}, after the Job was created ({rfc3339(created)})"
    if schedule is not None and not manual and not is_fire(schedule, found.time):
        return f"its {where} claims {rfc3339(found.time)}, which is not a fire of {schedule.expression!r}"
    return None


def container_env(scheduled: datetime, task: str) -> list[dict[str, str]]:
    """The per-run variables the webhook sets in every container."""
    return [
        {"name": "APPSCHEDULE_SCHEDULED_TIME", "value": rfc3339(scheduled)},
        {"name": "APPSCHEDULE_IDEMPOTENCY_KEY", "value": key_of(task, scheduled)},
    ]


def with_env(container: Mapping[str, object], added: list[dict[str, str]]) -> dict[str, object]:
    """A container with ``added`` set: a variable of the same name is replaced, in place."""
    names = {v["name"] for v in added}
    env = container.get("env")
    kept = [
        v for v in (env if isinstance(env, list) else []) if not (isinstance(v, Mapping) and v.get("name") in names)
    ]
    return {**container, "env": [*kept, *added]}


def from_environment(env: Mapping[str, str], now: datetime) -> Scheduled:
    """What ``appschedule key`` derives inside a run's container when the webhook did not run: from
    ``APPSCHEDULE_JOB_NAME`` (the controller's ``<cronjob>-<minutes>``) and the schedule; a hand-made
    Job's time is the container's clock rounded down to the schedule (its creation, within seconds).

    Raises ValueError naming the variable that is missing or wrong."""
    from .schedule import ScheduleError, parse

    given = env.get("APPSCHEDULE_SCHEDULED_TIME")
    if given:
        moment = parse_time(given)
        if moment is None:
            raise ValueError(f"APPSCHEDULE_SCHEDULED_TIME={given!r} is not an RFC 3339 time")
        return Scheduled(moment, "annotation")
    missing = [n for n in ("APPSCHEDULE_NAME", "APPSCHEDULE_TASK", "APPSCHEDULE_SCHEDULE") if not env.get(n)]
    if missing:
        raise ValueError(f"{', '.join(missing)} not set: run inside a task's container, or pass them")
    try:
        schedule = parse(env["APPSCHEDULE_SCHEDULE"], env.get("APPSCHEDULE_TIME_ZONE") or "UTC")
    except ScheduleError as error:
        raise ValueError(f"APPSCHEDULE_SCHEDULE/APPSCHEDULE_TIME_ZONE: {error}") from None
    cronjob = naming.cronjob_name(env["APPSCHEDULE_NAME"], env["APPSCHEDULE_TASK"])
    return scheduled_time(
        annotations={}, job_name=env.get("APPSCHEDULE_JOB_NAME") or "", cronjob=cronjob, created=now, schedule=schedule
    )
