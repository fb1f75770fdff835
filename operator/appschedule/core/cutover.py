"""The cut-over from an existing CronJob to a task's own, at a fire boundary (DESIGN "Moving in").

A task with ``cutOverFrom: <CronJob>`` takes over the fires of a CronJob that ran it before. Every fire is run
by exactly one side: the old CronJob runs each fire up to the cut, the task's CronJob every fire after it, and
both sides' Jobs carry the task's labels, so each run has the task's key and the ledger counts both sides as
one task. Pure: ``step(...)`` reads the two CronJobs and ``now`` and says what to do; the state lives in the
cluster (the task's CronJob, its creation time, the old CronJob's ``suspend`` and ``lastScheduleTime``), so an
operator restart at any point goes on from where it was.

The old CronJob takes part only once someone who may edit it has labelled it for this AppSchedule
(``app.kubernetes.io/managed-by=appschedule-operator``, ``appschedule.dev/appschedule=<name>``; ``kubectl
appschedule import cronjob --cut-over`` does it, with the task's labels and variables on its job template): an
AppSchedule's author cannot make the operator stop a CronJob nobody handed over. Until then the task waits
(``Waiting``) and its CronJob is not made, so the old one keeps running every fire.

The cut is the task's CronJob's creation, ``c``. The CronJob controller starts only fires after a CronJob's
creation, so the task's CronJob runs every fire after ``c``; the old one must run every fire up to ``c``:

1. ``Holding``: the next fire is less than ``GUARD`` away: the task's CronJob is not made yet (a creation landing
   after that fire would leave it to nobody), it is made after the fire.
2. ``Handing``: the task's CronJob exists; the old one runs until its ``lastScheduleTime`` reaches the last fire
   at or before ``c`` (the old one's own schedule), then it is suspended. A controller that never starts that
   fire (an outage, a deadline, Forbid) does not hold the old one for ever: at the first fire after ``c`` it is
   suspended anyway, and a fire both ran then carries one key on both sides (a claim absorbs it; the ledger
   counts it a duplicate).
3. ``Done``: the old CronJob is suspended (by the cut or before it) or gone.

The order (the task's CronJob first, the old one suspended after its last fire) means a stalled operator can
cause a fire run on both sides with one key, never a fire run by neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from . import naming
from .keys import parse_time, rfc3339
from .schedule import Schedule, ScheduleError, next_fire, parse, previous_fire
from .view import CronJobView

GUARD = timedelta(seconds=10)  # no cut this close before a fire: the task's CronJob could be created after it
ANNOTATION_CUT = f"{naming.GROUP}/cut-over-at"  # on the old CronJob: when the task's CronJob took over

State = Literal["Waiting", "Holding", "Handing", "Done"]


@dataclass(frozen=True)
class Step:
    state: State
    make: bool  # the task's CronJob may be made (or is there already)
    suspend: bool  # suspend the old CronJob now
    message: str
    at: datetime | None = None  # the cut: the task's CronJob's creation
    wake_at: datetime | None = None  # when time alone changes this step


def labels_for(appschedule: str) -> dict[str, str]:
    """What marks a CronJob as handed over to ``appschedule`` (its own labels, not its job template's)."""
    return {naming.MANAGED_BY: naming.MANAGER, naming.LABEL_APPSCHEDULE: appschedule}


def handed_over(cronjob: CronJobView, appschedule: str, source: str) -> bool:
    """The CronJob ``source`` as this AppSchedule sees it: labelled for it, and not one of any AppSchedule's own."""
    return cronjob.name == source and cronjob.appschedule == appschedule and not cronjob.controller and not cronjob.task


def _schedule_of(cronjob: CronJobView, fallback: Schedule) -> Schedule:
    """The old CronJob's own schedule (its last fire is by its clock); ours when it does not parse here."""
    try:
        return parse(str(cronjob.spec.get("schedule")), str(cronjob.spec.get("timeZone") or "UTC"))
    except ScheduleError:
        return fallback


def step(
    *, task: str, source: str, schedule: Schedule, old: CronJobView | None, ours: CronJobView | None, now: datetime
) -> Step:
    """Where the cut-over of ``task`` from CronJob ``source`` stands, and what to do now."""
    suspended = old is not None and old.spec.get("suspend") is True
    if ours is not None:
        at = parse_time(ours.created)
        if old is None:
            return Step(
                "Done", True, False, f"CronJob {source} is gone or no longer labelled; task {task} runs here", at
            )
        if suspended:
            return Step("Done", True, False, f"CronJob {source} is suspended; task {task} runs here", at)
        if at is None:  # no creation time to cut at (never from the API server): the fire after now is the bound
            return Step("Handing", True, True, f"CronJob {source} suspended: task {task} runs here", None)
        theirs = _schedule_of(old, schedule)
        last = previous_fire(theirs, at)
        ran = parse_time(old.last_schedule_time)
        after = next_fire(schedule, at)
        if last is None or (ran is not None and ran >= last) or (after is not None and now >= after):
            done = f"its last fire {rfc3339(last)}" if last else "no fire before the cut"
            return Step("Handing", True, True, f"CronJob {source} suspended after {done}; task {task} runs here", at)
        return Step(
            "Handing",
            True,
            False,
            f"CronJob {source} runs its last fire, {rfc3339(last)}, then is suspended; task {task} runs from "
            f"{rfc3339(after) if after else 'its next fire'}",
            at,
            after,
        )
    if old is None:
        return Step(
            "Waiting",
            False,
            False,
            f"CronJob {source} is not labelled {naming.MANAGED_BY}={naming.MANAGER} and "
            f"{naming.LABEL_APPSCHEDULE}=<this AppSchedule> (or does not exist): it keeps running and task "
            f"{task} waits; `kubectl appschedule import cronjob {source} --cut-over` labels it, or remove cutOverFrom",
        )
    if suspended:
        return Step("Done", True, False, f"CronJob {source} is suspended; task {task} runs here")
    upcoming = next_fire(schedule, now)
    if upcoming is not None and upcoming - now < GUARD:
        return Step(
            "Holding",
            False,
            False,
            f"CronJob {source} runs the fire at {rfc3339(upcoming)}; task {task}'s CronJob is made after it",
            wake_at=upcoming + timedelta(seconds=1),
        )
    return Step("Handing", True, False, f"task {task}'s CronJob is made; CronJob {source} runs its fires until then")
