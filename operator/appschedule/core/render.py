"""(AppSchedule, Deployment) -> CronJob manifests. Pure and deterministic: the same input gives the same bytes.

What a task's CronJob takes from the Deployment (DESIGN.md): from the chosen container its image,
imagePullPolicy, env, envFrom, volumeMounts (and only the pod volumes they use), resources (unless the
task sets its own), securityContext and workingDir; from the pod its serviceAccountName,
imagePullSecrets, securityContext, nodeSelector and tolerations; from the pod template's metadata its
annotations (so injected secrets, e.g. Vault's agent, reach the task) and its labels except those in the
Deployment's selector (a Service selecting the app must not select its runs), then the task's own
``podAnnotations`` and ``podLabels``. Never probes, ports, lifecycle hooks, sidecars or init containers.

The Job fields we render are ours and are put back when edited by hand: among them ``parallelism: 1``
and ``completions: 1`` (a run is one pod: five pods would be five executions of one key),
``backoffLimit`` and ``activeDeadlineSeconds``. Fields we do not render (``ttlSecondsAfterFinished``,
``podFailurePolicy``, an extra env variable added by hand) belong to whoever set them.

Errors are values, not exceptions: a bad task yields a ``SpecError`` for that task while the others
render; an error that concerns every task (no such container) yields no CronJob at all.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from . import blackout, naming
from .models import (
    SCHEDULE_MAX,
    SPEC_BYTES_MAX,
    SPEC_FIELDS_BYTES_MAX,
    SPEC_MAP_LISTS,
    UNION_TEXT_MAX,
    AppScheduleSpec,
    Blackout,
    Task,
    fields_bytes,
)
from .schedule import UNION_SEPARATOR, ScheduleError, hashed_seed, parse, resolve_hashed

Manifest = dict[str, Any]
RESERVED_ENV_PREFIX = "APPSCHEDULE_"
RESERVED_LABEL_PREFIXES = (f"{naming.GROUP}/", "batch.kubernetes.io/", naming.MANAGED_BY)


@dataclass(frozen=True)
class SpecError:
    """One thing wrong with the spec: where (a field path) and, when it is one task's, which task."""

    field: str
    message: str
    task: str | None = None
    reason: str = "InvalidSpec"

    def __str__(self) -> str:
        where = f"task {self.task!r} ({self.field})" if self.task else self.field
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class Rendered:
    cronjobs: dict[str, Manifest] = field(default_factory=dict)  # task name -> CronJob, in spec order
    errors: list[SpecError] = field(default_factory=list)
    image: str | None = None
    spec: AppScheduleSpec | None = None


def _location(loc: Sequence[int | str]) -> str:
    path = "spec"
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


@dataclass(frozen=True)
class ParsedSpec:
    spec: AppScheduleSpec | None
    errors: list[SpecError]
    indices: list[int]  # spec.tasks[i] is raw spec.tasks[indices[i]]


MAX_SPEC_BYTES = SPEC_BYTES_MAX  # the spec's share of the object's budget (models.py); every CronJob carries its part


def parse_spec(raw: Mapping[str, Any]) -> ParsedSpec:
    """Validate a raw spec. Tasks that fail are reported and left out; the rest still parse."""
    size = len(json.dumps(raw, separators=(",", ":"), default=str).encode())
    if size > MAX_SPEC_BYTES:
        message = f"{size // 1024} KiB; an AppSchedule's spec may be at most {MAX_SPEC_BYTES // 1024} KiB"
        return ParsedSpec(None, [SpecError("spec", message)], [])
    # field paths take at most about three times the JSON they come from (an empty map: {} against {".":{}}):
    # only a spec near its share is walked, not every spec on every plan
    fields = fields_bytes(raw, SPEC_MAP_LISTS) if 4 * size > SPEC_FIELDS_BYTES_MAX else 0
    if fields > SPEC_FIELDS_BYTES_MAX:  # its managedFields: many map keys (labels, annotations, resources)
        message = (
            f"sets so many fields ({fields // 1024} KiB of field paths in managedFields; at most "
            f"{SPEC_FIELDS_BYTES_MAX // 1024} KiB) that the object would not fit etcd's limit; use fewer "
            "podLabels, podAnnotations or resources keys"
        )
        return ParsedSpec(None, [SpecError("spec", message)], [])
    try:
        spec = AppScheduleSpec.model_validate(raw)
        return ParsedSpec(spec, [], list(range(len(spec.tasks))))
    except ValidationError as invalid:
        failures = invalid.errors()
    tasks_value = raw.get("tasks")
    raw_tasks: list[Any] = tasks_value if isinstance(tasks_value, list) else []
    errors: list[SpecError] = []
    bad_tasks: set[int] = set()
    spec_level = False
    for failure in failures:
        loc = failure["loc"]
        task = None
        if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
            bad_tasks.add(loc[1])
            entry = raw_tasks[loc[1]] if loc[1] < len(raw_tasks) else None
            task = entry.get("name") if isinstance(entry, dict) and isinstance(entry.get("name"), str) else None
            task = task or f"#{loc[1]}"
        else:
            spec_level = True
        message = failure["msg"].removeprefix("Value error, ")  # our own checks (models.py) say what is wrong
        if failure["type"] == "extra_forbidden":
            message = "unknown field"
        errors.append(SpecError(_location(loc), message, task))
    indices = [i for i in range(len(raw_tasks)) if i not in bad_tasks]
    if spec_level or not indices:
        return ParsedSpec(None, errors, [])
    try:
        return ParsedSpec(
            AppScheduleSpec.model_validate({**raw, "tasks": [raw_tasks[i] for i in indices]}), errors, indices
        )
    except ValidationError:  # pragma: no cover - the remaining tasks validated above
        return ParsedSpec(None, errors, [])


def _get(obj: Any, *path: str) -> Any:
    """obj[path...] when every step is a mapping, else None: input is never trusted to be well formed."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _pod(deployment: Mapping[str, Any]) -> Mapping[str, Any]:
    pod = _get(deployment, "spec", "template", "spec")
    return pod if isinstance(pod, Mapping) else {}


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _pod_metadata(deployment: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The pod template's annotations, and its labels minus those the Deployment's selector matches on."""
    metadata = _get(deployment, "spec", "template", "metadata")
    selector = _strings(_get(deployment, "spec", "selector", "matchLabels"))
    expressions = _get(deployment, "spec", "selector", "matchExpressions")
    selected = set(selector) | {
        str(e.get("key")) for e in (expressions if isinstance(expressions, list) else []) if isinstance(e, Mapping)
    }
    labels = {k: v for k, v in _strings(_get(metadata, "labels")).items() if k not in selected}
    return {"annotations": _strings(_get(metadata, "annotations")), "labels": labels}


def _run_metadata(
    pod_metadata: Mapping[str, Mapping[str, str]], settings: Mapping[str, Any], labels: Mapping[str, str]
) -> dict[str, Any]:
    """A run's pod metadata: the Deployment's, then the task's, then ours (which nothing overrides)."""
    metadata: dict[str, Any] = {}
    annotations = {**pod_metadata["annotations"], **settings["podAnnotations"]}
    if annotations:
        metadata["annotations"] = annotations
    metadata["labels"] = {**pod_metadata["labels"], **settings["podLabels"], **labels}
    return metadata


def _container(deployment: Mapping[str, Any], wanted: str | None) -> dict[str, Any] | SpecError:
    listed = _pod(deployment).get("containers")
    containers = [c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []
    name = _get(deployment, "metadata", "name") or "?"
    if not containers:
        return SpecError("spec.deploymentRef", f"Deployment {name!r} has no containers")
    if wanted is None:
        return dict(containers[0])
    for container in containers:
        if container.get("name") == wanted:
            return dict(container)
    names = ", ".join(str(c.get("name")) for c in containers)
    return SpecError(
        "spec.deploymentRef.container", f"container {wanted!r} not found in Deployment {name!r} (has: {names})"
    )


def _merge_env(base: list[dict[str, Any]], added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One variable per name (the API server refuses duplicates in an apply): a later one replaces an
    earlier one in place, as the kubelet would let it win; ``added`` comes after ``base``."""
    merged: dict[str, dict[str, Any]] = {}
    for variable in [*base, *added]:
        name = str(variable.get("name", ""))
        if name and not (variable in base and name.startswith(RESERVED_ENV_PREFIX)):
            merged[name] = dict(variable)
    return list(merged.values())


def _static_env(
    appschedule: str, namespace: str | None, task: Task, time_zone: str, deadline: int | None
) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "APPSCHEDULE_NAME", "value": appschedule},
        {"name": "APPSCHEDULE_NAMESPACE", "value": namespace or ""},
        {"name": "APPSCHEDULE_TASK", "value": task.name},
        {"name": "APPSCHEDULE_SCHEDULE", "value": task.schedule},
        {"name": "APPSCHEDULE_TIME_ZONE", "value": time_zone},
        {
            "name": "APPSCHEDULE_JOB_NAME",
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{naming.JOB_NAME_LABEL}']"}},
        },
    ]
    if deadline is not None:  # the claim libraries take over a claim left unfinished past it, never sooner
        env.append({"name": "APPSCHEDULE_ACTIVE_DEADLINE_SECONDS", "value": str(deadline)})
    if namespace is None:
        env[1] = {"name": "APPSCHEDULE_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
    return env


def _zone_field(task: Task, spec: AppScheduleSpec, where: str) -> str:
    """The field a task's time zone comes from: its own, spec.defaults', or spec's."""
    if task.time_zone is not None:
        return f"{where}.timeZone"
    if spec.defaults is not None and spec.defaults.time_zone is not None:
        return "spec.defaults.timeZone"
    return "spec.timeZone"


def _check_task(task: Task, index: int, spec: AppScheduleSpec, settings: Mapping[str, Any]) -> list[SpecError]:
    errors = []
    where = f"spec.tasks[{index}]"
    try:
        parse(task.schedule, settings["timeZone"])
    except ScheduleError as error:
        text = str(error)
        part = re.match(r"schedules\[(\d+)\]: ", text)
        if part:
            text = text[part.end() :]
        field = (
            _zone_field(task, spec, where)
            if text.startswith("timeZone")
            else _schedule_field(task, index, int(part[1]) if part else None)
        )
        errors.append(SpecError(field, text, task.name))
    if UNION_SEPARATOR.strip() in task.schedule and not errors:
        if len(task.schedule) > UNION_TEXT_MAX:
            message = (
                f"its schedules come to {len(task.schedule)} characters once H is resolved; at "
                f"most {UNION_TEXT_MAX}, which the status holds: use fewer or shorter ones"
            )
            errors.append(SpecError(_schedule_field(task, index, None), message, task.name))
        if settings["concurrencyPolicy"] == "Replace":
            field = f"{where}.concurrencyPolicy" if task.concurrency_policy else "spec.defaults.concurrencyPolicy"
            message = (
                "Replace cannot hold across a task's several schedules (each runs as a CronJob of its own, which "
                "replaces only its own runs): use Forbid or Allow for this task"
            )
            errors.append(SpecError(field, message, task.name))
    elif len(task.schedule) > SCHEDULE_MAX:
        message = f"comes to {len(task.schedule)} characters once H is resolved; at most {SCHEDULE_MAX}"
        errors.append(SpecError(_schedule_field(task, index, None), message, task.name))
    for key in settings["podLabels"]:
        if key.startswith(RESERVED_LABEL_PREFIXES):
            source = f"{where}.podLabels" if key in (task.pod_labels or {}) else "spec.defaults.podLabels"
            errors.append(SpecError(source, f"{key!r}: this label key is reserved for the operator", task.name))
    for j, variable in enumerate(task.env or []):
        if variable.name.startswith(RESERVED_ENV_PREFIX):
            errors.append(
                SpecError(
                    f"{where}.env[{j}].name", f"{variable.name!r}: names starting APPSCHEDULE_ are reserved", task.name
                )
            )
    return errors


def _reserved_default_env(spec: AppScheduleSpec) -> SpecError | None:
    for j, variable in enumerate((spec.defaults.env if spec.defaults else None) or []):
        if variable.name.startswith(RESERVED_ENV_PREFIX):
            message = f"{variable.name!r}: names starting APPSCHEDULE_ are reserved"
            return SpecError(f"spec.defaults.env[{j}].name", message)
    return None


def valid_tasks(raw_spec: Mapping[str, Any]) -> set[str]:
    """The tasks of a spec that would get a CronJob, whatever the Deployment: what claims a task name."""
    parsed = parse_spec(raw_spec)
    spec = parsed.spec
    if spec is None or _reserved_default_env(spec):
        return set()
    valid: set[str] = set()
    for index, task in zip(parsed.indices, spec.tasks, strict=True):
        hashed = _hashed(task, index, "")  # whether it is valid does not depend on the names H hashes
        if isinstance(hashed, SpecError):
            continue
        if task.name not in valid and not _check_task(hashed, index, spec, hashed.resolved(spec)):
            valid.add(task.name)
    return valid


def _hashed(task: Task, index: int, seed: str) -> Task | SpecError:
    """The task with its schedule's H forms resolved (the schedule its CronJob runs), or what is wrong."""
    for part, expression in enumerate(task.schedules or [task.schedule]):
        try:
            resolve_hashed(expression, seed)
        except ScheduleError as error:
            return SpecError(_schedule_field(task, index, part), f"schedule {expression!r}: {error}", task.name)
    schedule = resolve_hashed(task.schedule, seed)
    return task if schedule == task.schedule else task.model_copy(update={"schedule": schedule})


def _schedule_field(task: Task, index: int, part: int | None) -> str:
    """Where a task's schedule is written: spec.tasks[i].schedule, or spec.tasks[i].schedules[j]."""
    if not task.schedules:
        return f"spec.tasks[{index}].schedule"
    return f"spec.tasks[{index}].schedules" + ("" if part is None else f"[{part}]")


def render(
    appschedule: Mapping[str, Any], deployment: Mapping[str, Any], calendars: Sequence[Blackout] = ()
) -> Rendered:
    """The CronJobs an AppSchedule means, given its Deployment (and the blackouts of the calendars it names),
    plus what is wrong with it. The manifests share nothing with ``deployment`` (its template's pieces are copied):
    plans hand them to the shell and reuse them (reconcile._Rendering), the watches' views keep the Deployment."""
    deployment = json.loads(json.dumps(deployment))
    metadata = appschedule.get("metadata") or {}
    name = str(metadata.get("name") or "")
    raw_spec = appschedule.get("spec")
    parsed = parse_spec(raw_spec if isinstance(raw_spec, Mapping) else {})
    spec, errors = parsed.spec, list(parsed.errors)
    if not name:
        errors.append(SpecError("metadata.name", "required"))
        return Rendered(errors=errors)
    if len(name) > naming.TASK_NAME_MAX:
        errors.append(SpecError("metadata.name", f"must be at most {naming.TASK_NAME_MAX} characters (a label value)"))
        return Rendered(errors=errors)
    if spec is None:
        return Rendered(errors=errors)
    container = _container(deployment, spec.deployment_ref.container)
    if isinstance(container, SpecError):
        return Rendered(errors=[*errors, container], spec=spec)
    pod = _pod(deployment)
    pod_metadata = _pod_metadata(deployment)
    reserved = _reserved_default_env(spec)
    if reserved:
        return Rendered(errors=[*errors, reserved], spec=spec)

    cronjobs: dict[str, Manifest] = {}
    used_names: dict[str, str] = {}
    namespace = str(metadata.get("namespace") or "")
    for index, declared in zip(parsed.indices, spec.tasks, strict=True):
        task = _hashed(declared, index, hashed_seed(namespace, name, declared.name))
        if isinstance(task, SpecError):
            errors.append(task)
            continue
        settings = task.resolved(spec)
        if calendars:  # spec.blackouts, then the calendars', then the task's own
            settings["blackouts"] = [*(spec.blackouts or []), *calendars, *(task.blackouts or [])]
        task_errors = _check_task(task, index, spec, settings)
        cronjob = naming.cronjob_name(name, task.name)
        if task.name in cronjobs or used_names.get(cronjob) == task.name:
            task_errors.append(SpecError(f"spec.tasks[{index}].name", "duplicate task name", task.name))
        elif cronjob in used_names:
            message = f"its CronJob name {cronjob!r} is taken by task {used_names[cronjob]!r}"
            task_errors.append(SpecError(f"spec.tasks[{index}].name", message, task.name))
        parts = [naming.part_cronjob_name(cronjob, i) for i in range(1, _part_count(task, settings))]
        for part in parts:
            if part in used_names:
                message = f"its CronJob {part!r} for a schedule of task {task.name!r} is task {used_names[part]!r}'s"
                task_errors.append(SpecError(f"spec.tasks[{index}].name", message, task.name))
        if task_errors:
            errors.extend(task_errors)
            continue
        used_names.update(dict.fromkeys([cronjob, *parts], task.name))
        cronjobs[task.name] = _cronjob(appschedule, task, settings, container, pod, cronjob, pod_metadata)
    return Rendered(cronjobs=cronjobs, errors=errors, image=container.get("image"), spec=spec)


def _part_count(task: Task, settings: Mapping[str, Any]) -> int:
    """How many CronJobs run the task (its schedules merged where exact); 1 when its schedule does not parse."""
    try:
        return len(parse(task.schedule, settings["timeZone"]).cronjob_expressions)
    except ScheduleError:
        return 1


def _cronjob(
    appschedule: Mapping[str, Any],
    task: Task,
    settings: Mapping[str, Any],
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    cronjob: str,
    pod_metadata: Mapping[str, Mapping[str, str]],
) -> Manifest:
    metadata = appschedule.get("metadata") or {}
    name, namespace = str(metadata["name"]), metadata.get("namespace")
    labels = naming.labels(name, task.name)

    env_added = [v.model_dump(by_alias=True, exclude_none=True) for v in settings["env"]]
    run: dict[str, Any] = {"name": container.get("name", "task"), "image": container.get("image")}
    if "imagePullPolicy" in container:
        run["imagePullPolicy"] = container["imagePullPolicy"]
    run["command"] = list(task.command)
    if task.args:
        run["args"] = list(task.args)
    run["env"] = _merge_env(list(container.get("env") or []), env_added) + _static_env(
        name, namespace, task, settings["timeZone"], settings["activeDeadlineSeconds"]
    )
    for key in ("envFrom", "volumeMounts", "securityContext", "workingDir"):
        if key in container:
            run[key] = container[key]
    resources = settings["resources"]
    if resources is not None:
        run["resources"] = resources.model_dump(by_alias=True, exclude_none=True)
    elif "resources" in container:
        run["resources"] = container["resources"]

    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [run]}
    for key in ("serviceAccountName", "imagePullSecrets", "securityContext", "nodeSelector", "tolerations"):
        if key in pod:
            pod_spec[key] = pod[key]
    mounted = {m.get("name") for m in container.get("volumeMounts") or []}
    volumes = [v for v in pod.get("volumes") or [] if v.get("name") in mounted]
    if volumes:
        pod_spec["volumes"] = volumes

    manifest_metadata: dict[str, Any] = {"name": cronjob}
    if namespace:
        manifest_metadata["namespace"] = namespace
    manifest_metadata["labels"] = dict(labels)
    if metadata.get("uid"):
        manifest_metadata["ownerReferences"] = [
            {
                "apiVersion": naming.API_VERSION,
                "kind": naming.KIND,
                "name": name,
                "uid": metadata["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": manifest_metadata,
        "spec": {
            "schedule": parse(task.schedule, settings["timeZone"]).cronjob_expressions[0],
            "timeZone": settings["timeZone"],
            "suspend": settings["suspend"],
            "concurrencyPolicy": settings["concurrencyPolicy"],
            "startingDeadlineSeconds": settings["startingDeadlineSeconds"],
            "successfulJobsHistoryLimit": settings["successfulJobsHistoryLimit"],
            "failedJobsHistoryLimit": settings["failedJobsHistoryLimit"],
            "jobTemplate": {
                "metadata": _template_metadata(
                    labels, settings["blackouts"], task.schedule, settings, task.cut_over_from
                ),
                "spec": {
                    "parallelism": 1,
                    "completions": 1,
                    "backoffLimit": settings["backoffLimit"],
                    "activeDeadlineSeconds": settings["activeDeadlineSeconds"],
                    "template": {"metadata": _run_metadata(pod_metadata, settings, labels), "spec": pod_spec},
                },
            },
        },
    }


def _template_metadata(
    labels: Mapping[str, str],
    blackouts: Sequence[Any],
    schedule: str,
    settings: Mapping[str, Any],
    cut_over_from: str | None = None,
) -> dict[str, Any]:
    """The job template's metadata: the task's labels, its blackouts for the ledger and the key webhook, and its
    several schedules (the union its Jobs are keyed and counted by; cronjobs.parts_of makes a CronJob a part)
    with its concurrencyPolicy, which the key webhook holds across them. A task taking over from a CronJob under
    Forbid names it: a run of that CronJob still active holds back the task's fires as a run of its own would
    (the CronJob controller's Forbid sees only the CronJob's own runs)."""
    metadata: dict[str, Any] = {"labels": dict(labels)}
    annotations = {}
    if blackouts:
        annotations[blackout.ANNOTATION] = blackout.encode(blackouts)
    if UNION_SEPARATOR.strip() in schedule:
        annotations[naming.ANNOTATION_SCHEDULES] = schedule
        annotations[naming.ANNOTATION_CONCURRENCY] = str(settings["concurrencyPolicy"])
    if cut_over_from and settings["concurrencyPolicy"] == "Forbid":
        annotations[naming.ANNOTATION_CUT_OVER_FROM] = cut_over_from
        annotations[naming.ANNOTATION_CONCURRENCY] = "Forbid"
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def schedule_text(spec: Mapping[str, Any]) -> str:
    """What a task's CronJob spec runs by: its several schedules (``A | B``, on its job template) where it has
    them, else its own ``schedule``. A part's CronJob says the same union as the first."""
    template = spec.get("jobTemplate")
    metadata = template.get("metadata") if isinstance(template, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    union = annotations.get(naming.ANNOTATION_SCHEDULES) if isinstance(annotations, Mapping) else None
    return union if isinstance(union, str) and union else str(spec.get("schedule"))


def part_of(metadata: Mapping[str, Any]) -> int:
    """Which of its task's schedules a CronJob (or its Job) runs: 0 for the first, or for anything unreadable."""
    annotations = metadata.get("annotations")
    value = annotations.get(naming.ANNOTATION_PART) if isinstance(annotations, Mapping) else None
    return int(value) if isinstance(value, str) and re.fullmatch(r"[0-9]{1,2}", value) else 0
