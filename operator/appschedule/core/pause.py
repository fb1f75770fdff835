"""A task paused after repeated failures (``suspendAfterFailures: N``, issue 36 item 2): pure.

A task whose last N finished runs all failed is paused: its CronJob is suspended (its fires are then skipped,
not missed: the ledger's suspension spans), RunsHealthy says why with the last failure, and a ``TaskPaused``
Warning is posted once. A success resets the count. ``kubectl appschedule resume NAME TASK`` writes the time
into the AppSchedule's ``appschedule.dev/resumed`` annotation (a JSON map, task to time): failures of fires up
to that time no longer count, so the task runs again until N more fail.

The count reads the task's ``recent`` runs (the status' last 10, newest first; N is at most 10, the schema's
bound): a run still active, a miss and an entry that does not parse are passed over; a manual run and a re-run
are in the record of their fire, so they count as runs of that fire. Nothing new is stored in the status.

The annotation is anyone's who may edit the AppSchedule: a value that is not a JSON map of times is ignored
(reported by ``resumes``), never raised.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .keys import parse_time
from .view import ANNOTATION_RESUMED as ANNOTATION_RESUMED


@dataclass(frozen=True)
class Pause:
    task: str
    failures: int  # the consecutive failed runs counted (the threshold)
    last: str  # the last failed run's key
    why: str  # its failure, when the ledger knows it

    def message(self) -> str:
        why = f" ({self.why})" if self.why else ""
        return (
            f"task {self.task!r} paused after {self.failures} failed runs in a row, the last {self.last}{why}: "
            f"kubectl appschedule resume <appschedule> {self.task} runs it again"
        )


def resumes(raw: str) -> tuple[dict[str, datetime], str | None]:
    """The resume time of each task from the AppSchedule's annotation, and what was wrong with it (or None)."""
    if not raw:
        return {}, None
    try:
        value = json.loads(str(raw))
    except ValueError:
        return {}, f"annotation {ANNOTATION_RESUMED} is not JSON"
    if not isinstance(value, dict):
        return {}, f"annotation {ANNOTATION_RESUMED} is not a map of task to time"
    found = {str(task): moment for task, text in value.items() if (moment := parse_time(text)) is not None}
    wrong = None if len(found) == len(value) else f"annotation {ANNOTATION_RESUMED}: a time that is not RFC 3339"
    return found, wrong


def paused(task: str, threshold: int | None, recent: Sequence[Any], resumed: datetime | None) -> Pause | None:
    """Whether the task is paused now (see the module docstring)."""
    if not threshold or threshold < 1:
        return None
    failed: list[Mapping[str, Any]] = []
    for entry in recent:
        if not isinstance(entry, Mapping):
            continue
        state, moment = entry.get("state"), parse_time(entry.get("scheduledTime"))
        if state not in ("Succeeded", "Failed") or moment is None:
            continue  # active, missed, unknown: not a finished run
        if resumed is not None and moment <= resumed:
            break  # counted before the resume: the count starts again after it
        if state == "Succeeded":
            break
        failed.append(entry)
        if len(failed) >= threshold:
            last = failed[0]
            return Pause(task, threshold, str(last.get("key") or ""), str(last.get("failure") or ""))
    return None
