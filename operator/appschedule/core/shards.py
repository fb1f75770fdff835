"""Shards: which replica leads which AppSchedules (DESIGN "Availability", ``--shards``), the decisions.

With ``--shards S`` the AppSchedules are split into S shards by their name: ``shard_of`` hashes
``namespace/name``, so an AppSchedule stays in its shard for its whole life, and its CronJobs, Jobs and
Events are written only by the replica that holds that shard. Each shard is a Lease of its own, taken,
renewed and fenced exactly as the single Lease is (lease.py): the Lease is the mutex, and a replica writes
for a shard only while its last renewal of that Lease is recent.

Who *should* hold a shard is decided by every replica alike, from the members it sees: each replica
renews a member Lease of its own every retry, and a member is alive while its Lease changes, as this
replica observes it (``alive``: durations on its own clock, never two nodes' clocks compared). ``assign``
maps the shards onto the live members:

* deterministic: the same members give the same map on every replica, whatever order they were seen in;
* balanced: no member gets more than ``ceil(S / M)`` shards, so three replicas of three shards hold one each;
* stable: a shard stays with the member that holds its Lease while that member has room; any other goes to
  the member that ranks highest for it (rendezvous hashing) among those with room. A member that joins takes
  only what the others must give up, and one that leaves moves only its own shards.

Replicas may briefly disagree on the members (one has seen a join the other has not): that costs a retry,
never a shard held twice, because a shard's Lease is taken with its resourceVersion and fenced.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping

from .lease import LeaseRecord

SHARDS_MAX = 64  # shards a deployment may ask for: each is a Lease renewed every retry
MEMBER_FORGET_FACTOR = 10  # a member Lease unchanged for this many durations is deleted (a replica long gone)


def _rank(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def shard_of(namespace: str, name: str, count: int) -> int:
    """The shard of the AppSchedule ``namespace/name`` among ``count``: fixed by its name."""
    return _rank(f"{namespace}/{name}") % count if count > 1 else 0


def assign(count: int, members: Iterable[str], holders: Mapping[int, str] | None = None) -> dict[int, str]:
    """Each of ``count`` shards to one of ``members`` (none when there are none), at most ``ceil(count / M)``
    each. A shard stays with its holder (``holders``: who holds each shard's Lease now) while the holder is a
    member with room, a member over its room keeping the shards it ranks highest; every other shard goes, in
    order, to the member that ranks highest for it among those with room (rendezvous hashing). So a member
    that joins takes only the shards the others must give up, and one that leaves moves only its own."""
    ranked = sorted(set(members))
    if not ranked:
        return {}
    room = math.ceil(count / len(ranked))
    owners: dict[int, str] = {}
    load = dict.fromkeys(ranked, 0)
    kept: dict[str, list[int]] = {}
    for shard, holder in (holders or {}).items():
        if holder in load and 0 <= shard < count:
            kept.setdefault(holder, []).append(shard)
    for holder, shards in kept.items():
        for shard in sorted(shards, key=lambda s: _rank(f"{holder}/{s}"), reverse=True)[:room]:
            owners[shard] = holder
            load[holder] += 1
    for shard in range(count):
        if shard in owners:
            continue
        for member in sorted(ranked, key=lambda m: (_rank(f"{m}/{shard}"), m), reverse=True):
            if load[member] < room:
                owners[shard] = member
                load[member] += 1
                break
    return owners


def alive(record: LeaseRecord, me: str, unchanged_for: float) -> bool:
    """Whether the member a member Lease names is alive: it is this replica, or it has a holder (a replica
    that stops on purpose clears it) and this replica saw the Lease change within its duration."""
    if not record.holder:
        return False
    return record.holder == me or unchanged_for < record.duration


def forgotten(record: LeaseRecord, me: str, unchanged_for: float) -> bool:
    """Whether a member Lease is of a replica long gone (its pod deleted, its name never used again): deleted,
    so the Leases of replicas come and gone do not pile up."""
    return record.holder != me and unchanged_for >= record.duration * MEMBER_FORGET_FACTOR


def shard_lease(name: str, shard: int) -> str:
    """The Lease of one shard, beside the single Lease's name (``--leader-election-name``)."""
    return f"{name}-shard-{shard}"


def member_lease(name: str, identity: str) -> str:
    """The member Lease of one replica: its identity may hold characters a name may not, so a hash of it."""
    return f"{name}-member-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
