"""Leader election on a ``coordination.k8s.io`` Lease: the decisions, as client-go's leaderelection takes them.

One replica leads (reconciles and writes); the others keep their watches warm and wait. The shell
(shell/leader.py) reads the Lease, asks ``may_take`` and writes what ``claim`` returns, with the
resourceVersion it read, so two replicas that both see a free Lease cannot both take it: one write fails
with a conflict.

Timing (controller-runtime's defaults): a Lease is held for ``LEASE_SECONDS`` after its holder last
renewed it; the holder renews every ``RETRY_SECONDS`` and gives up, and stops writing, when no renewal
succeeded for ``RENEW_DEADLINE_SECONDS``. The deadline is shorter than the lease: a replica that cannot
renew has stopped writing seconds before another may take over (fencing).

Invariant: expiry is judged by the observer's own clock, from when it *saw* the record last change, never
by comparing the record's timestamps with its clock: clocks of two nodes may disagree by more than the
lease, but each measures a duration correctly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2


@dataclass(frozen=True)
class LeaseRecord:
    """What a Lease's spec says (the fields leader election reads), whatever else it holds."""

    holder: str
    duration: int
    acquired: str | None
    transitions: int

    @classmethod
    def of(cls, spec: Mapping[str, Any] | None) -> LeaseRecord:
        """A record from a Lease's spec as a client wrote it: odd fields read as absent, never raise."""
        spec = spec if isinstance(spec, Mapping) else {}
        holder = spec.get("holderIdentity")
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        acquired = spec.get("acquireTime")
        return cls(
            holder=holder if isinstance(holder, str) else "",
            duration=duration if isinstance(duration, int) and duration > 0 else LEASE_SECONDS,
            acquired=acquired if isinstance(acquired, str) else None,
            transitions=transitions if isinstance(transitions, int) and transitions >= 0 else 0,
        )


def may_take(record: LeaseRecord | None, me: str, unchanged_for: float) -> bool:
    """Whether ``me`` may write the Lease now: it does not exist, it is ours, nobody holds it (released),
    or its record has not changed for its whole duration as this replica observed (``unchanged_for``,
    seconds on this replica's monotonic clock)."""
    if record is None or not record.holder or record.holder == me:
        return True
    return unchanged_for >= record.duration


def micro_time(moment: datetime) -> str:
    """A Lease's MicroTime: RFC 3339 with microseconds, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def claim(record: LeaseRecord | None, me: str, now: datetime) -> dict[str, Any]:
    """The spec that takes (or renews) the Lease for ``me``: a takeover counts a transition and resets
    the acquire time; a renewal keeps them."""
    renewing = record is not None and record.holder == me
    return {
        "holderIdentity": me,
        "leaseDurationSeconds": LEASE_SECONDS,
        "acquireTime": record.acquired if renewing and record and record.acquired else micro_time(now),
        "renewTime": micro_time(now),
        "leaseTransitions": (record.transitions if renewing else record.transitions + 1) if record else 0,
    }


def released(record: LeaseRecord, now: datetime) -> dict[str, Any]:
    """The spec a leader writes when it stops on purpose: nobody holds it, so a standby takes over at its
    next retry instead of waiting for the lease to run out (client-go's ReleaseOnCancel)."""
    return {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "acquireTime": micro_time(now),
        "renewTime": micro_time(now),
        "leaseTransitions": record.transitions,
    }
