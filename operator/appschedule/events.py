"""Which Events a reconcile posts: one per outcome, when the outcome changes, with a bounded message.

An AppSchedule of 100 tasks with one bad ``spec.timeZone`` gets one ``InvalidSpec`` Warning that says
so for all 100 (``status.summarize``), not 100 Events; the same outcome seen again posts nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .models import Condition
from .render import SpecError
from .status import REASONS, summarize


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


def for_change(old_ready: Mapping[str, Any], ready: Condition, errors: Sequence[SpecError]) -> list[Event]:
    """Events for a change of the Ready condition: a Warning per reason whose errors are new, and a
    Normal ``Reconciled`` when it turns True again."""
    if (old_ready.get("status"), old_ready.get("message")) == (ready.status, ready.message):
        return []
    old_message = str(old_ready.get("message") or "")
    events = []
    for reason in REASONS:
        mine = [e for e in errors if e.reason == reason]
        new = [e for e in mine if str(e) not in old_message]
        if new:
            events.append(Event("Warning", reason, summarize(mine)))
    if ready.status == "True" and old_ready.get("status") == "False":
        events.append(Event("Normal", "Reconciled", ready.message))
    return events
