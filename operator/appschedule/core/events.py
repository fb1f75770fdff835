"""Which Events a reconcile posts: one per outcome, when the outcome changes, with a bounded message.

An AppSchedule of 100 tasks with one bad ``spec.timeZone`` gets one ``InvalidSpec`` Warning that says
so for all 100 (``status.summarize``), not 100 Events; the same outcome seen again posts nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .ledger import EventType, LedgerEvent
from .models import Condition
from .render import SpecError
from .status import MESSAGE_MAX, REASONS, summarize


@dataclass(frozen=True)
class Event:
    type: EventType
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


AGGREGATE = 3  # more tasks than this with one reason in one reconcile: one Event for them all


def for_runs(found: Sequence[LedgerEvent]) -> list[Event]:
    """The ledger's Events of one reconcile: one per task and reason, or one per reason when many tasks
    share it (an outage that made 100 tasks miss a run is one ``MissedRun`` that says so)."""
    by_reason: dict[str, list[LedgerEvent]] = {}
    for event in found:
        by_reason.setdefault(event.reason, []).append(event)
    out: list[Event] = []
    for reason, group in by_reason.items():
        if len(group) <= AGGREGATE:
            out.extend(Event(e.type, e.reason, e.message) for e in group)
            continue
        total = sum(e.count for e in group)
        shown = "; ".join(e.message for e in group[:AGGREGATE])
        message = f"{len(group)} tasks, {total} in all: {shown}; and {len(group) - AGGREGATE} more task(s)"
        out.append(Event(group[0].type, reason, message[:MESSAGE_MAX]))
    return out
