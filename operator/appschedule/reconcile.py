"""What one reconcile of an AppSchedule must do, as a pure function of what was read and ``now``.

``plan()`` takes the AppSchedule, its Deployment (or None), the CronJobs carrying its label and the
other AppSchedules of the namespace, and returns the CronJobs to apply, the CronJobs to delete, the
status it should have and the Events to post. The handlers only read, call ``plan`` and write.

Invariants:

* Nothing to do means nothing written: a CronJob is applied only when it differs from what we want
  (its ``appschedule.dev/rendered-hash`` annotation names the rendering it came from, and every field
  we set must still hold our value, so a hand edit is put back); the status is patched only when it
  differs; Events are posted only when the Ready condition changes.
* A task belongs to the oldest AppSchedule of the namespace declaring it (DESIGN "Task ownership");
  the others report ``TaskConflict`` and get no CronJob for it.
* A missing Deployment changes no CronJob: ``Ready=False``/``DeploymentNotFound`` and the CronJobs
  stay as they were, so a Deployment recreated by a deploy tool does not cost a run.
* Only CronJobs owned (by uid) by this AppSchedule are ever deleted.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from . import naming
from .render import Manifest, SpecError, render
from .schedule import ScheduleError, next_fire, parse

HASH_ANNOTATION = f"{naming.GROUP}/rendered-hash"


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class Plan:
    apply: list[Manifest] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    status_changed: bool = False
    events: list[Event] = field(default_factory=list)


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _created(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def task_owners(appschedule: Mapping[str, Any], siblings: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """For each task name declared in the namespace, the AppSchedule that keeps it: the oldest
    (by creationTimestamp, then name), so a newer copy never takes a running task away."""
    owners: dict[str, tuple[tuple[str, str], str]] = {}
    for obj in [*siblings, appschedule]:
        name = str((obj.get("metadata") or {}).get("name"))
        tasks = (obj.get("spec") or {}).get("tasks")
        for task in tasks if isinstance(tasks, list) else []:
            task_name = task.get("name") if isinstance(task, dict) else None
            if not isinstance(task_name, str):
                continue
            key = _created(obj)
            if task_name not in owners or key < owners[task_name][0]:
                owners[task_name] = (key, name)
    return {task: owner for task, (_, owner) in owners.items()}


def rendered_hash(manifest: Manifest) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]


def with_hash(manifest: Manifest) -> Manifest:
    stamped: Manifest = json.loads(json.dumps(manifest))
    stamped["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = rendered_hash(manifest)
    return stamped


_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei))?$")
_SUFFIX = {"m": Decimal("0.001"), "": Decimal(1), "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
           "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10,
           "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50,
           "Ei": Decimal(2) ** 60}  # fmt: skip


def quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource quantity's value ("500m", "1Gi", 2, "1e3"), None when it is not one."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return None
    number, exponent, suffix = match.groups()
    scale = Decimal(10) ** int(exponent[1:]) if exponent else _SUFFIX[suffix or ""]
    return Decimal(number) * scale


def holds(want: Any, have: Any, *, quantities: bool = False) -> bool:
    """Whether every field of ``want`` has the same value in ``have`` (which may have more: defaults).

    What the API server normalises counts as the same: an empty list, map or string is an absent one,
    and under resources' limits and requests a quantity equals its canonical form (1 == "1", "0.5" == "500m")."""
    if want in ([], {}, "") and have is None:
        return True
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(
            holds(v, have.get(k), quantities=quantities or k in ("limits", "requests")) for k, v in want.items()
        )
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(holds, want, have))
    if quantities and want != have:
        return quantity(want) is not None and quantity(want) == quantity(have)
    return bool(want == have)


def in_sync(desired: Manifest, existing: Mapping[str, Any] | None) -> bool:
    """Whether ``existing`` came from the same rendering as ``desired`` (stamped by ``with_hash``) and
    still holds every field we set."""
    if existing is None:
        return False
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    if annotations.get(HASH_ANNOTATION) != desired["metadata"]["annotations"][HASH_ANNOTATION]:
        return False
    meta = existing.get("metadata") or {}
    return (
        holds(desired["spec"], existing.get("spec"))
        and holds(desired["metadata"].get("labels", {}), meta.get("labels"))
        and holds(desired["metadata"].get("ownerReferences", []), meta.get("ownerReferences"))
    )


def _condition(
    previous: Sequence[Mapping[str, Any]], kind: str, status: str, reason: str, message: str, generation: Any, now: str
) -> dict[str, Any]:
    old = next((c for c in previous if c.get("type") == kind), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == status else None
    condition = {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or now,
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def plan(
    appschedule: Mapping[str, Any],
    deployment: Mapping[str, Any] | None,
    cronjobs: Sequence[Mapping[str, Any]],
    siblings: Sequence[Mapping[str, Any]],
    now: datetime,
    rejected: Mapping[str, str] | None = None,
) -> Plan:
    """Everything one reconcile should do; see the module docstring for the invariants.

    ``rejected`` names tasks whose CronJob could not be written (the API server refused it, or the name
    is taken by a CronJob we do not control): they are reported and keep whatever CronJob they had."""
    rejected = rejected or {}
    meta = appschedule.get("metadata") or {}
    name, uid = str(meta.get("name")), meta.get("uid")
    generation = meta.get("generation")
    old_status: Mapping[str, Any] = appschedule.get("status") or {}
    old_conditions = old_status.get("conditions") or []
    spec = appschedule.get("spec") or {}
    deployment_name = str((spec.get("deploymentRef") or {}).get("name") or "")
    existing = {str(c["metadata"]["name"]): c for c in cronjobs}
    ours = {
        n
        for n, c in existing.items()
        if any(ref.get("uid") == uid for ref in (c.get("metadata") or {}).get("ownerReferences") or [])
    }
    result = Plan()
    errors: list[SpecError] = []
    conflicts: set[str] = set()
    desired: dict[str, Manifest] = {}

    if deployment is None:
        errors.append(
            SpecError(
                "spec.deploymentRef.name",
                f"Deployment {deployment_name!r} not found in namespace {meta.get('namespace')!r}; "
                "the CronJobs are left as they were",
                reason="DeploymentNotFound",
            )
        )
        wanted = (spec.get("deploymentRef") or {}).get("container") or "app"
        placeholder = {"spec": {"template": {"spec": {"containers": [{"name": wanted, "image": "-"}]}}}}
        rendered = render(appschedule, placeholder)  # only for the tasks' own errors
        errors.extend(rendered.errors)
        image = None
    else:
        rendered = render(appschedule, deployment)
        errors.extend(rendered.errors)
        image = rendered.image
        owners = task_owners(appschedule, siblings)
        taken = _sibling_cronjob_names(appschedule, siblings)
        for task, manifest in rendered.cronjobs.items():
            owner = owners.get(task, name)
            cronjob = str(manifest["metadata"]["name"])
            if owner == name and cronjob in taken:
                conflicts.add(task)
                errors.append(SpecError(f"spec.tasks[{_index(spec, task)}].name",
                                        f"its CronJob name {cronjob!r} is also that of AppSchedule {taken[cronjob]}; "
                                        "the older one keeps it", task=task, reason="TaskConflict"))  # fmt: skip
                continue
            if owner == name and task in rejected:
                errors.append(SpecError(f"spec.tasks[{_index(spec, task)}]", rejected[task], task=task))
                continue
            if owner == name:
                desired[task] = with_hash(manifest)
                continue
            conflicts.add(task)
            errors.append(
                SpecError(
                    f"spec.tasks[{_index(spec, task)}].name",
                    f"already declared by AppSchedule {owner!r} in this namespace (the older one keeps it); "
                    "this AppSchedule gets no CronJob for it",
                    task=task,
                    reason="TaskConflict",
                )
            )
        for manifest in desired.values():
            if not in_sync(manifest, existing.get(str(manifest["metadata"]["name"]))):
                result.apply.append(manifest)
        if rendered.spec is not None and not any(e.task is None for e in rendered.errors):
            # a task that is merely invalid now keeps its CronJob: stopping a working task for a typo
            # would cost runs; the error is reported instead
            keep = {str(m["metadata"]["name"]) for m in desired.values()}
            keep |= {naming.cronjob_name(name, e.task) for e in rendered.errors if e.task}
            keep |= {naming.cronjob_name(name, task) for task in rejected}
            result.delete = sorted(n for n in ours if n not in keep)

    # -- status
    now_text = rfc3339(now)
    parsed = rendered.spec
    names = {t.name: naming.cronjob_name(name, t.name) for t in (parsed.tasks if parsed else [])}
    running = {t for t, n in names.items() if t not in conflicts and (t in desired or n in ours)}
    tasks_status = []
    next_runs = []
    for spec_task in parsed.tasks if parsed else []:
        entry: dict[str, Any] = {"name": spec_task.name}
        if spec_task.name in running and parsed:
            entry["cronJob"] = names[spec_task.name]
            settings = spec_task.resolved(parsed)
            try:
                zone = settings["timeZone"]
                upcoming = None if settings["suspend"] else next_fire(parse(spec_task.schedule, zone), now)
            except ScheduleError:
                upcoming = None
            if upcoming is not None:
                entry["nextRunTime"] = rfc3339(upcoming)
                next_runs.append(upcoming)
        tasks_status.append(entry)
    last_runs = sorted(
        str(c.get("status", {}).get("lastScheduleTime"))
        for n, c in existing.items()
        if n in ours and (c.get("status") or {}).get("lastScheduleTime")
    )

    if errors:
        reasons = {e.reason for e in errors}
        reason = next(r for r in ("DeploymentNotFound", "InvalidSpec", "TaskConflict") if r in reasons)
        message = "; ".join(str(e) for e in errors)
        ready = _condition(old_conditions, "Ready", "False", reason, message, generation, now_text)
    else:
        ready = _condition(
            old_conditions,
            "Ready",
            "True",
            "Reconciled",
            f"{len(desired)} CronJob(s) match the spec and Deployment {deployment_name!r}",
            generation,
            now_text,
        )
    conditions = [ready, *[c for c in old_conditions if c.get("type") != "Ready"]]

    status: dict[str, Any] = dict(old_status)
    status.update(
        {
            "observedGeneration": generation,
            "conditions": conditions,
            "taskCount": len(spec.get("tasks") or []),
            "tasks": _merge_tasks(old_status.get("tasks") or [], tasks_status),
        }
    )
    if image:  # while the Deployment is missing, the status keeps naming what the CronJobs still run
        status["deployment"] = {"name": deployment_name, "image": image}
    if next_runs:
        status["nextRunTime"] = rfc3339(min(next_runs))
    else:
        status.pop("nextRunTime", None)
    if last_runs:
        status["lastRunTime"] = last_runs[-1]
    else:
        status.pop("lastRunTime", None)
    result.status = status
    result.status_changed = _comparable(status) != _comparable(old_status)

    old_ready: Mapping[str, Any] = next((c for c in old_conditions if c.get("type") == "Ready"), {})
    if (old_ready.get("status"), old_ready.get("message")) != (ready["status"], ready["message"]):
        old_message = str(old_ready.get("message") or "")
        for error in errors:
            if str(error) not in old_message:
                result.events.append(Event("Warning", error.reason, str(error)))
        if ready["status"] == "True" and old_ready.get("status") == "False":
            result.events.append(Event("Normal", "Reconciled", ready["message"]))
    return result


def _index(spec: Mapping[str, Any], task: str) -> int:
    return next(i for i, t in enumerate(spec.get("tasks") or []) if isinstance(t, dict) and t.get("name") == task)


def _sibling_cronjob_names(appschedule: Mapping[str, Any], siblings: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """CronJob names that older siblings' tasks use, with whose they are ("'x' (task 'y')")."""
    mine = _created(appschedule)
    taken = {}
    for sibling in siblings:
        if _created(sibling) > mine:
            continue
        sibling_name = str((sibling.get("metadata") or {}).get("name"))
        tasks = (sibling.get("spec") or {}).get("tasks")
        for task in tasks if isinstance(tasks, list) else []:
            if isinstance(task, dict) and isinstance(task.get("name"), str):
                taken[naming.cronjob_name(sibling_name, task["name"])] = f"{sibling_name!r} (task {task['name']!r})"
    return taken


def _merge_tasks(old: Sequence[Mapping[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-task status: the fields this reconcile owns replace the old ones; others (the ledger's) stay."""
    previous = {t.get("name"): t for t in old}
    merged = []
    for entry in new:
        kept = {k: v for k, v in (previous.get(entry["name"]) or {}).items() if k not in ("cronJob", "nextRunTime")}
        merged.append({**kept, **entry})
    return merged


def _comparable(status: Mapping[str, Any]) -> str:
    return json.dumps(status, sort_keys=True, default=str)
