"""Admission: the key of every run, injected into its Job; an AppSchedule's spec, checked at ``kubectl apply``.

Pure functions of the object under admission and ``now``; shell/webhook_server.py serves them in a process of its
own and certs.py provides its certificate.

* ``mutate_job``: a Job of one of our tasks (the webhook's objectSelector is the ``appschedule.dev/task``
  label, so no other Job of the cluster is ever sent here) gets ``APPSCHEDULE_SCHEDULED_TIME`` and
  ``APPSCHEDULE_IDEMPOTENCY_KEY`` in every container and init container, the two annotations of DESIGN
  ("Names, labels, annotations") and the ledger's finalizer, which holds the Job until the ledger has
  recorded it (ledger.py). The schedule a hand-made Job's time is rounded down to is read from the Job
  itself (the ``APPSCHEDULE_SCHEDULE``/``APPSCHEDULE_TIME_ZONE`` variables its CronJob gave it), so the
  webhook needs no state and answers the same before the watches have listed anything.
* ``check_appschedule``: the message the Ready condition would carry for an invalid spec (task and field
  named), or None. Only what the spec alone decides is checked here; a missing Deployment or a task
  another AppSchedule holds is not a reason to refuse (both can change later).
* ``job_access_review`` / ``access_refusal``: an AppSchedule makes the operator create Jobs that run a
  command of the author's choice with the Deployment's image and ServiceAccount, so its author must be
  allowed to create Jobs in that namespace (DESIGN, "Security"): the SubjectAccessReview to ask, and the
  message when the answer is no. Asked on CREATE and on an UPDATE that changes the spec.

* ``respond`` / ``json_patch``: the AdmissionReview answer, and the JSON patch a merge patch makes of an object;
* ``configurations``: the Mutating/ValidatingWebhookConfiguration of the webhooks served, for an operator that
  keeps its own (the Helm chart installs the same ones itself, templates/webhook.yaml).

The webhook's failurePolicy is Ignore: an operator outage never stops a run. A Job admitted without its
key is reported by the ledger (``KeyNotInjected``) and ``appschedule key`` derives the same key inside
the container.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from . import blackout, keys, naming
from .render import part_of, render
from .runs import BackfillRequest
from .schedule import Schedule, ScheduleError, check_time_zone, is_fire, parse
from .status import summarize
from .view import idle, project_calendar


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _env_of(containers: list[Any]) -> dict[str, str]:
    """The literal env values of the first container that has them (the task's container)."""
    for container in containers:
        values = {
            str(v.get("name")): str(v.get("value"))
            for v in _list(_dict(container).get("env"))
            if isinstance(v, Mapping) and "value" in v
        }
        if "APPSCHEDULE_SCHEDULE" in values:
            return values
    return {}


def mutate_job(
    job: Mapping[str, Any],
    now: datetime,
    others: Sequence[Mapping[str, Any]] = (),
    old: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The merge patch that keys a Job of one of our tasks; an empty one for a Job that is not. ``others``: the
    task's Jobs as the API server has them, read when ``forbid_check`` asks for them; ``old``: the CronJob the task
    takes over from, read when ``cut_over_check`` asks for it."""
    meta = _dict(job.get("metadata"))
    labels = _dict(meta.get("labels"))
    task = labels.get(naming.LABEL_TASK)
    if not isinstance(task, str) or not task:
        return {}
    pod = _dict(_dict(_dict(job.get("spec")).get("template")).get("spec"))
    containers = [c for c in _list(pod.get("containers")) if isinstance(c, Mapping)]
    init = [c for c in _list(pod.get("initContainers")) if isinstance(c, Mapping)]
    env = _env_of(containers)
    try:
        schedule = parse(env["APPSCHEDULE_SCHEDULE"], env.get("APPSCHEDULE_TIME_ZONE") or "UTC")
    except (KeyError, ScheduleError):
        schedule = None
    appschedule = labels.get(naming.LABEL_APPSCHEDULE)
    cronjob = naming.cronjob_name(str(appschedule), task) if appschedule else None
    owner = next((o for o in _list(meta.get("ownerReferences")) if _dict(o).get("kind") == "CronJob"), None)
    if owner is not None:
        cronjob = str(_dict(owner).get("name") or cronjob)
    created = keys.parse_time(meta.get("creationTimestamp")) or now.astimezone(UTC)
    scheduled = keys.scheduled_time(
        annotations={k: str(v) for k, v in _dict(meta.get("annotations")).items()},
        job_name=str(meta.get("name") or ""),
        cronjob=cronjob,
        created=created,
        schedule=schedule,
    )
    runner = _runner(meta, appschedule, task, schedule, scheduled)
    if runner is not None:  # an earlier schedule's CronJob runs this minute: this Job does no work, holds nothing
        annotations = {naming.ANNOTATION_IDEMPOTENCY_KEY: scheduled.key(task), naming.ANNOTATION_RUN_BY: runner}
        return {"metadata": {"annotations": annotations}, "spec": {"completions": 0, "parallelism": 0}}
    blocker = blocking_run(job, others) if _forbidding(job) is not None else old_active_run(job, old)
    if blocker is not None:  # Forbid across the task's CronJobs: skipped behind that run, as the controller would
        annotations = {naming.ANNOTATION_IDEMPOTENCY_KEY: scheduled.key(task), naming.ANNOTATION_BLOCKED_BY: blocker}
        return {"metadata": {"annotations": annotations}, "spec": {"completions": 0, "parallelism": 0}}
    added = keys.container_env(scheduled.time, task)
    spec_patch: dict[str, Any] = {"containers": [keys.with_env(c, added) for c in containers]}
    if init:
        spec_patch["initContainers"] = [keys.with_env(c, added) for c in init]
    annotations = {naming.ANNOTATION_IDEMPOTENCY_KEY: scheduled.key(task)}
    if scheduled.problem is None:
        annotations[naming.ANNOTATION_SCHEDULED_TIME] = keys.rfc3339(scheduled.time)
    metadata: dict[str, Any] = {"annotations": annotations}
    # the ledger's finalizer only on a Job the ledger will file: one of an AppSchedule's tasks (both labels) whose
    # time is the cluster's. A Job stating a time the ledger refuses (in the future, not a fire, not a time) keeps
    # what its author wrote, so the ledger sees the same refusal, reports it and never files it: nothing to hold.
    finalizers = meta.get("finalizers")
    finalizers = [str(f) for f in finalizers] if isinstance(finalizers, list) else []
    if (
        isinstance(appschedule, str)
        and appschedule
        and scheduled.problem is None
        and naming.LEDGER_FINALIZER not in finalizers
    ):
        metadata["finalizers"] = [*finalizers, naming.LEDGER_FINALIZER]
    return {"metadata": metadata, "spec": {"template": {"spec": spec_patch}}}


def forbid_check(job: Mapping[str, Any], namespace: str) -> tuple[str, str, str] | None:
    """For the CronJob controller's Job of a task with several schedules under Forbid: the (namespace, AppSchedule,
    task) whose Jobs the key webhook reads, so that a run of one of its CronJobs holds back the others' fires as the
    controller holds back its own. None for any other Job (nothing read)."""
    found = _forbidding(job)
    return (namespace, *found) if found is not None and namespace else None


def cut_over_check(job: Mapping[str, Any], namespace: str) -> tuple[str, str] | None:
    """For the CronJob controller's Job of a task taking over from a CronJob under Forbid: (namespace, that
    CronJob), which the key webhook reads, so that a run of it still active (its ``status.active``: also one that
    began before the hand-over labelled it) holds back the task's fire as a run of the task's own CronJob would.
    Once the old CronJob has no active run, nothing is held. None for any other Job (nothing read)."""
    old = _taken_over(job)
    return (namespace, old) if old is not None and namespace else None


def _taken_over(job: Mapping[str, Any]) -> str | None:
    """The CronJob whose runs hold back this Job's fire under Forbid (``cut_over_check``), or None."""
    meta = _dict(job.get("metadata"))
    annotations = _dict(meta.get("annotations"))
    old = annotations.get(naming.ANNOTATION_CUT_OVER_FROM)
    if annotations.get(naming.ANNOTATION_CONCURRENCY) != "Forbid" or not isinstance(old, str) or not old:
        return None
    if annotations.get(naming.ANNOTATION_RUN_KIND) or not annotations.get(naming.CRONJOB_SCHEDULED_TIMESTAMP):
        return None
    return old if _owner(meta) != old else None


def old_active_run(job: Mapping[str, Any], old: Mapping[str, Any] | None) -> str | None:
    """The run of the CronJob ``job``'s task takes over from (``old``, as the API server has it) that is still
    active (the CronJob controller's ``status.active``), or None."""
    name = _taken_over(job)
    if old is None or name is None or _dict(old.get("metadata")).get("name") != name:
        return None
    for ref in _list(_dict(old.get("status")).get("active")):
        name = _dict(ref).get("name")
        if isinstance(name, str) and name and name != _dict(job.get("metadata")).get("name"):
            return name
    return None


def _forbidding(job: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = _dict(job.get("metadata"))
    labels, annotations = _dict(meta.get("labels")), _dict(meta.get("annotations"))
    if annotations.get(naming.ANNOTATION_CONCURRENCY) != "Forbid" or not annotations.get(naming.ANNOTATION_SCHEDULES):
        return None
    if annotations.get(naming.ANNOTATION_RUN_KIND) or not annotations.get(naming.CRONJOB_SCHEDULED_TIMESTAMP):
        return None
    appschedule, task = labels.get(naming.LABEL_APPSCHEDULE), labels.get(naming.LABEL_TASK)
    if not (isinstance(appschedule, str) and appschedule and isinstance(task, str) and task):
        return None
    return appschedule, task


def _owner(meta: Mapping[str, Any]) -> str | None:
    found = next((o for o in _list(meta.get("ownerReferences")) if _dict(o).get("kind") == "CronJob"), None)
    return str(_dict(found).get("name")) if found is not None else None


def blocking_run(job: Mapping[str, Any], others: Sequence[Mapping[str, Any]]) -> str | None:
    """A run of another of the task's CronJobs still active, which this Job's fire waits behind under Forbid (the
    ledger counts the fire skipped, as behind a run of its own CronJob), or None. A run asked for never blocks (the
    controller does not see it), nor does a Job that runs nothing, is being deleted or has ended."""
    meta = _dict(job.get("metadata"))
    mine = _owner(meta)
    for other in others:
        theirs = _dict(other.get("metadata"))
        owner = _owner(theirs)
        if theirs.get("name") == meta.get("name") or owner is None or owner == mine or theirs.get("deletionTimestamp"):
            continue
        if _dict(theirs.get("annotations")).get(naming.ANNOTATION_RUN_KIND) in naming.RUN_KINDS:
            continue
        if idle(_dict(other.get("spec")).get("completions")):
            continue
        ended = any(
            _dict(c).get("status") == "True" and _dict(c).get("type") in ("Complete", "Failed")
            for c in _list(_dict(other.get("status")).get("conditions"))
        )
        if not ended:
            return str(theirs.get("name"))
    return None


def _runner(
    meta: Mapping[str, Any], appschedule: object, task: str, schedule: Schedule | None, scheduled: keys.Scheduled
) -> str | None:
    """For the CronJob controller's Job of a task's schedule after the first, when an earlier schedule fires in the
    same minute (a minute several schedules match is one fire): the CronJob whose Job runs it. None otherwise: a
    run asked for, a time not the cluster's, a Job of the first schedule."""
    part = part_of(meta)
    annotations = _dict(meta.get("annotations"))
    if not part or schedule is None or not schedule.union or scheduled.problem is not None:
        return None
    if annotations.get(naming.ANNOTATION_RUN_KIND) or not isinstance(appschedule, str) or not appschedule:
        return None
    earlier = next((i for i, p in enumerate(schedule.parts[:part]) if is_fire(p, scheduled.time)), None)
    if earlier is None:
        return None
    return naming.part_cronjob_name(naming.cronjob_name(appschedule, task), earlier)


def blackout_refusal(job: Mapping[str, Any]) -> str | None:
    """Why the CronJob controller's Job for a fire inside one of its task's blackouts is refused (the operator
    suspends the CronJob for the span; this holds at the edges: a CronJob resumed within the starting deadline of
    a blacked-out fire, a suspension that came late). A run asked for (run, rerun, backfill, catch-up) and any
    Job without the CronJob controller's time or with blackouts that do not read are admitted."""
    meta = _dict(job.get("metadata"))
    annotations = {k: v for k, v in _dict(meta.get("annotations")).items() if isinstance(k, str)}
    task = _dict(meta.get("labels")).get(naming.LABEL_TASK)
    stated = keys.parse_time(annotations.get(naming.CRONJOB_SCHEDULED_TIMESTAMP))
    if not isinstance(task, str) or stated is None or annotations.get(naming.ANNOTATION_RUN_KIND):
        return None
    windows = blackout.decode(annotations)
    if not windows:
        return None
    pod = _dict(_dict(_dict(job.get("spec")).get("template")).get("spec"))
    zone = _env_of([c for c in _list(pod.get("containers")) if isinstance(c, Mapping)]).get("APPSCHEDULE_TIME_ZONE")
    try:
        found = blackout.blacked_out(windows, check_time_zone(zone or "UTC"), stated)
    except ScheduleError:
        return None
    if found is None:
        return None
    return f"task {task!r}: the fire at {keys.rfc3339(stated)} is inside blackout {found.said()}: no run starts"


def check_appschedule(appschedule: Mapping[str, Any], now: datetime | None = None) -> str | None:
    """Why the API server should refuse this AppSchedule (the Ready condition's message), or None. With
    ``now``, also its backfills: each names a declared task and a range of the past."""
    spec = _dict(appschedule.get("spec"))
    wanted = _dict(spec.get("deploymentRef")).get("container") or "app"
    deployment = {
        "metadata": {"name": "-"},
        "spec": {"template": {"spec": {"containers": [{"name": wanted, "image": "-"}]}}},
    }
    errors = render(appschedule, deployment).errors
    if errors:
        return summarize(errors)
    return _check_backfills(spec, now) if now is not None else None


def check_calendar(calendar: Mapping[str, Any]) -> str | None:
    """Why the API server should refuse this AppScheduleCalendar (what the schema cannot say: a day the calendar
    lacks, to before from, several forms in one entry, names used twice), or None."""
    problem = project_calendar(calendar).problem
    return f"AppScheduleCalendar {_dict(calendar.get('metadata')).get('name')!r}: {problem}" if problem else None


def _check_backfills(spec: Mapping[str, Any], now: datetime) -> str | None:
    declared = {t.get("name") for t in _list(spec.get("tasks")) if isinstance(t, Mapping)}
    earlier: list[tuple[int, BackfillRequest]] = []
    for index, entry in enumerate(_list(spec.get("backfills"))):
        request = BackfillRequest.read(entry, index)
        if request.problem:
            return request.problem
        if request.task not in declared:
            return f"spec.backfills[{index}].task: {request.task!r} is not a task of this AppSchedule"
        if request.end is not None and request.end > now:
            return (
                f"spec.backfills[{index}].to: {keys.rfc3339(request.end)} is in the future; a backfill runs past fires"
            )
        for other_index, other in earlier:
            assert request.start and request.end and other.start and other.end
            if other.task == request.task and request.start <= other.end and other.start <= request.end:
                return (
                    f"spec.backfills[{index}]: its range overlaps backfill {other.name!r} "
                    f"(spec.backfills[{other_index}]) of task {request.task!r}, so a fire would run twice; "
                    "remove that one first or split the ranges"
                )
        earlier.append((index, request))
    return None


def spec_changed(operation: str | None, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether this admission request sets a spec the author must be entitled to (not a label edit)."""
    if operation == "CREATE":
        return True
    return operation == "UPDATE" and _dict(old).get("spec") != _dict(new).get("spec")


def job_access_review(userinfo: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """May the request's user create Jobs in this namespace? (authorization.k8s.io/v1 SubjectAccessReview)"""
    extra = {key: list(values) for key, values in _dict(userinfo.get("extra")).items()}
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": str(userinfo.get("username") or ""),
            "uid": str(userinfo.get("uid") or ""),
            "groups": [str(g) for g in userinfo.get("groups") or []],
            "extra": extra,
            "resourceAttributes": {"namespace": namespace, "verb": "create", "group": "batch", "resource": "jobs"},
        },
    }


def access_refusal(userinfo: Mapping[str, Any], namespace: str, status: Mapping[str, Any]) -> str | None:
    """The refusal for a SubjectAccessReview's status, or None when the user may create Jobs."""
    if status.get("allowed") and not status.get("denied"):
        return None
    user = userinfo.get("username") or "this user"
    because = f" ({status['reason']})" if status.get("reason") else ""
    return (
        f"{user} may not create Jobs in namespace {namespace}{because}: an AppSchedule runs its tasks' commands "
        "as Jobs with the Deployment's image and ServiceAccount, so its author needs that right too"
    )


KEY_JOBS = "key-jobs"  # the webhooks' ids: their URL paths, and their names before the configuration's
CHECK_APPSCHEDULES = "check-appschedules"
WEBHOOK_IDS = {"keys": KEY_JOBS, "validation": CHECK_APPSCHEDULES}
TIMEOUT_SECONDS = 10  # the chart's default: the API server's wait before it fails open (Ignore)


def respond(
    review: Mapping[str, Any], *, patch: list[dict[str, Any]] | None = None, refusal: str | None = None, code: int = 403
) -> dict[str, Any]:
    """The AdmissionReview that answers ``review``: allowed (with a JSON patch), or refused with a message."""
    response: dict[str, Any] = {"uid": str(_dict(review.get("request")).get("uid") or ""), "allowed": refusal is None}
    if refusal is not None:
        response["status"] = {"code": code, "message": refusal}
    elif patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode("ascii")
    return {
        "apiVersion": str(review.get("apiVersion") or "admission.k8s.io/v1"),
        "kind": "AdmissionReview",
        "response": response,
    }


def json_patch(obj: Mapping[str, Any], merge: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch (RFC 6902) that turns ``obj`` into ``obj`` merged with ``merge`` (RFC 7386, lists replaced),
    built from what ``merge`` says, never from a diff of the whole object: its cost follows what the webhook adds,
    not the Job's size. A list the merge replaces with one of the same length (a pod's containers, each given
    its env) becomes operations on the fields of each element that changed."""
    ops: list[dict[str, Any]] = []
    _ops(obj, merge, "", ops)
    return ops


def _pointer(path: str, key: object) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _ops(target: Mapping[str, Any], merge: Mapping[str, Any], path: str, ops: list[dict[str, Any]]) -> None:
    for key, value in merge.items():
        where = _pointer(path, key)
        present = key in target
        current = target.get(key)
        if value is None:
            if present:
                ops.append({"op": "remove", "path": where})
        elif isinstance(value, Mapping) and isinstance(current, Mapping):
            _ops(current, value, where, ops)
        elif isinstance(value, list) and isinstance(current, list) and len(value) == len(current):
            for index, (old, new) in enumerate(zip(current, value, strict=True)):
                if isinstance(old, Mapping) and isinstance(new, Mapping):
                    _replace_fields(old, new, _pointer(where, index), ops)
                elif old != new:
                    ops.append({"op": "replace", "path": _pointer(where, index), "value": copy.deepcopy(new)})
        elif not present:
            ops.append({"op": "add", "path": where, "value": _pruned(value)})
        elif current != value or isinstance(value, Mapping):
            ops.append({"op": "replace", "path": where, "value": _pruned(value)})


def _replace_fields(old: Mapping[str, Any], new: Mapping[str, Any], path: str, ops: list[dict[str, Any]]) -> None:
    """``old`` (an element of a list) becomes ``new``: the fields that differ, each as one operation."""
    for key, value in new.items():
        if key not in old:
            ops.append({"op": "add", "path": _pointer(path, key), "value": copy.deepcopy(value)})
        elif old[key] != value:
            ops.append({"op": "replace", "path": _pointer(path, key), "value": copy.deepcopy(value)})
    for key in old.keys() - new.keys():
        ops.append({"op": "remove", "path": _pointer(path, key)})


def _pruned(value: Any) -> Any:
    """A merge value as it lands where nothing was: a null in it means absent."""
    if isinstance(value, Mapping):
        return {k: _pruned(v) for k, v in value.items() if v is not None}
    return copy.deepcopy(value)


def configurations(name: str, kinds: Iterable[str], client: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The webhook configurations for the webhooks in ``kinds`` (keys, validation) under the name ``name``,
    calling ``client`` (a clientConfig with ``url`` or ``service``, and ``caBundle``) at /<id>: the same
    webhooks as the chart's, for an operator run by hand or by a test."""

    def client_for(webhook: str) -> dict[str, Any]:
        config = copy.deepcopy(dict(client))
        if "url" in config:
            config["url"] = f"{str(config['url']).rstrip('/')}/{webhook}"
        else:
            config["service"] = {**_dict(config.get("service")), "path": f"/{webhook}"}
        return config

    common = {
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "matchPolicy": "Equivalent",
        "timeoutSeconds": TIMEOUT_SECONDS,
    }
    found: list[dict[str, Any]] = []
    if "keys" in kinds:
        found.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": f"{KEY_JOBS}.{name}",
                        **common,
                        "reinvocationPolicy": "Never",
                        "clientConfig": client_for(KEY_JOBS),
                        "rules": [
                            {
                                "apiGroups": ["batch"],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["jobs"],
                                "scope": "Namespaced",
                            }
                        ],
                        "objectSelector": {"matchExpressions": [{"key": naming.LABEL_TASK, "operator": "Exists"}]},
                    }
                ],
            }
        )
    if "validation" in kinds:
        found.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": f"{CHECK_APPSCHEDULES}.{name}",
                        **common,
                        "clientConfig": client_for(CHECK_APPSCHEDULES),
                        "rules": [
                            {
                                "apiGroups": [naming.GROUP],
                                "apiVersions": [naming.VERSION],
                                "operations": ["CREATE", "UPDATE"],
                                "resources": [naming.PLURAL, naming.CALENDAR_PLURAL],
                                "scope": "Namespaced",
                            }
                        ],
                    }
                ],
            }
        )
    return found
