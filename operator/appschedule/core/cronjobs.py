"""Which CronJobs to apply and which to delete: desired manifests against the CronJobs that exist.

A CronJob is applied only when it differs from what we want, judged on what we own:

* its ``appschedule.dev/rendered-hash`` annotation names the rendering it came from: any change of
  what we render (the spec, the Deployment) changes the hash, so a field we stopped rendering is
  removed by the next apply;
* every field we render must still hold our value (a hand edit of one of them is put back: the apply
  is forced, so the field is ours again), where what the API server normalises counts as the same.

Lists the API server merges by key (containers and env by name, volumeMounts by mountPath, ...) are
compared by key: an item someone else added (``kubectl set env cronjob/x EXTRA=1``) is theirs, not a
difference, so it never causes an apply that could not remove it (which would loop forever). Atomic
lists (command, args, tolerations) must be equal.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from . import naming
from .models import quantity
from .render import Manifest, schedule_text
from .schedule import UNION_SEPARATOR, ScheduleError, parse

HASH_ANNOTATION = f"{naming.GROUP}/rendered-hash"

# list field -> the key its items are merged by (server-side apply's listMapKeys in the core types)
LIST_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "ownerReferences": "uid",
}


def rendered_hash(manifest: Manifest) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]


def with_hash(manifest: Manifest) -> Manifest:
    """``manifest`` stamped with the hash of its rendering: a copy of its metadata; the rest is shared with it (a
    manifest is never changed in place once rendered: plans reuse renderings, reconcile._Rendering)."""
    metadata = manifest["metadata"]
    annotations = {**(metadata.get("annotations") or {}), HASH_ANNOTATION: rendered_hash(manifest)}
    return {**manifest, "metadata": {**metadata, "annotations": annotations}}


def holds(want: Any, have: Any, *, quantities: bool = False, key: str | None = None) -> bool:
    """Whether every field of ``want`` has the same value in ``have`` (which may have more: defaults,
    and items of keyed lists that others added).

    What the API server normalises counts as the same: an empty list, map or string is an absent one,
    and under resources' limits and requests a quantity equals its canonical form (1 == "1", "0.5" == "500m")."""
    if want in ([], {}, "") and have is None:
        return True
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(
            holds(v, have.get(k), quantities=quantities or k in ("limits", "requests"), key=LIST_KEYS.get(k))
            for k, v in want.items()
        )
    if isinstance(want, list):
        if not isinstance(have, list):
            return False
        if key is not None and all(isinstance(item, Mapping) and key in item for item in [*want, *have]):
            theirs = {item[key]: item for item in have}
            return len(theirs) == len(have) and all(holds(item, theirs.get(item[key])) for item in want)
        return len(want) == len(have) and all(map(holds, want, have))
    if quantities and want != have:
        return quantity(want) is not None and quantity(want) == quantity(have)
    return bool(want == have)


def in_sync(desired: Manifest, existing: Mapping[str, Any] | None) -> bool:
    """Whether ``existing`` came from the same rendering as ``desired`` (stamped by ``with_hash``) and
    still holds every field we set."""
    if existing is None:
        return False
    meta = existing.get("metadata") or {}
    if (meta.get("annotations") or {}).get(HASH_ANNOTATION) != desired["metadata"]["annotations"][HASH_ANNOTATION]:
        return False
    return (
        holds(desired["spec"], existing.get("spec"))
        and holds(desired["metadata"].get("labels", {}), meta.get("labels"))
        and holds(desired["metadata"].get("ownerReferences", []), meta.get("ownerReferences"), key="uid")
    )


def to_delete(ours: Sequence[str], keep: set[str]) -> list[str]:
    """Our CronJobs (controlled by this AppSchedule's uid) that no task needs any more."""
    return sorted(n for n in ours if n not in keep)


def parts_of(manifest: Manifest) -> list[Manifest]:
    """The CronJobs of a task's schedules after the first, made from the first's manifest (rendered, suspended or
    not, and stamped): each the same but for its name, its ``schedule`` and the part it is, stamped anew."""
    spec = manifest["spec"]
    union = schedule_text(spec)
    if UNION_SEPARATOR.strip() not in union:
        return []
    try:
        expressions = parse(union, str(spec.get("timeZone") or "UTC")).cronjob_expressions
    except ScheduleError:
        return []
    found = []
    for part, expression in enumerate(expressions[1:], start=1):
        copy: Manifest = json.loads(json.dumps(manifest))
        copy["metadata"]["name"] = naming.part_cronjob_name(str(manifest["metadata"]["name"]), part)
        copy["metadata"].setdefault("annotations", {}).pop(HASH_ANNOTATION, None)
        copy["metadata"]["annotations"][naming.ANNOTATION_PART] = str(part)
        copy["spec"]["schedule"] = expression
        copy["spec"]["jobTemplate"]["metadata"].setdefault("annotations", {})[naming.ANNOTATION_PART] = str(part)
        found.append(with_hash(copy))
    return found
