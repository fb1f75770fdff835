"""``kubectl appschedule import cronjob``: the task an existing CronJob becomes, and what it cannot carry over.

Pure: ``translate(cronjob, deployment, container, now)`` reads the two objects as the API server returns them.
A task runs the Deployment's container (DESIGN "What a CronJob gets from the Deployment"), so what the task
carries is what makes the CronJob's run differ from it: the schedule and zone, the command and args, the env
and resources that differ, the run settings (concurrency, deadlines, retries, history), the pod's own labels
and annotations. The settings are written out even where they equal the AppSchedule's defaults' names: a
CronJob's unset field means Kubernetes' default (Allow, no deadline, 6 retries, a failed history of 1), not
ours, and the import never changes how a run behaves without saying so.

What a task has no field for (another image, volumes the Deployment lacks, init containers and sidecars, a
node selector, a ServiceAccount of its own...) is listed in ``left`` with the reason: the import says it,
never drops it silently. A CronJob whose schedule the operator cannot run, or that has no command (it runs its
image's entrypoint), gives no task: ``refused`` says why.

``handover_patch``: the merge patch that hands a CronJob over for a cut-over (core/cutover.py): the labels that
let the operator see it, and the task's labels and variables on its job template, so its runs carry the task's
key and the ledger counts them as the task's.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import cutover, naming
from .schedule import ScheduleError, parse

# Kubernetes' defaults for a CronJob's unset fields (batch/v1), where ours differ
K8S_DEFAULTS = {
    "concurrencyPolicy": "Allow",
    "backoffLimit": 6,
    "successfulJobsHistoryLimit": 3,
    "failedJobsHistoryLimit": 1,
}
_PREFIX = re.compile(r"^(CRON_TZ|TZ)=(\S+)\s+(.*)$")


@dataclass
class Imported:
    cronjob: str
    task: dict[str, Any] | None = None
    left: list[str] = field(default_factory=list)  # what was not carried over, each with why
    refused: str | None = None  # why there is no task


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def task_name(cronjob: str) -> str:
    """A task name from a CronJob's: a DNS label of at most naming.TASK_NAME_MAX characters."""
    name = re.sub(r"[^a-z0-9-]+", "-", cronjob.lower()).strip("-")[: naming.TASK_NAME_MAX].strip("-")
    return name or "task"


def _container(pod: Mapping[str, Any], wanted: str | None) -> tuple[dict[str, Any] | None, list[str]]:
    containers = [_dict(c) for c in _list(pod.get("containers"))]
    if not containers:
        return None, []
    chosen = next((c for c in containers if c.get("name") == wanted), None) if wanted else containers[0]
    if chosen is None:
        return None, []
    others = [str(c.get("name")) for c in containers if c is not chosen]
    return chosen, others


def translate(cronjob: Mapping[str, Any], deployment: Mapping[str, Any], container: str | None = None) -> Imported:
    """The task ``cronjob`` becomes, run in ``deployment``'s ``container`` (default: its first)."""
    meta, spec = _dict(cronjob.get("metadata")), _dict(cronjob.get("spec"))
    name = str(meta.get("name") or "")
    found = Imported(cronjob=name)
    job = _dict(_dict(spec.get("jobTemplate")).get("spec"))
    template = _dict(job.get("template"))
    pod = _dict(template.get("spec"))
    theirs, sidecars = _container(pod, None)
    app_pod = _dict(_dict(_dict(deployment.get("spec")).get("template")).get("spec"))
    app, _ = _container(app_pod, container)
    if app is None:
        found.refused = (
            f"the Deployment has no container {container!r}" if container else "the Deployment has no container"
        )
        return found
    if theirs is None:
        found.refused = "its job template has no container"
        return found
    schedule = str(spec.get("schedule") or "").strip()
    zone = spec.get("timeZone")
    prefix = _PREFIX.match(schedule)
    if prefix and not zone:
        zone, schedule = prefix[2], prefix[3]
        found.left.append(f"schedule: its {prefix[1]}= prefix is the task's timeZone {zone}")
    try:
        parse(schedule, str(zone or "UTC"))
    except ScheduleError as error:
        found.refused = f"schedule {spec.get('schedule')!r}: {error}"
        return found
    command = [str(a) for a in _list(theirs.get("command"))]
    if not command:
        found.refused = (
            "its container has no command (it runs its image's entrypoint); a task replaces the container's command: "
            "write the task with the entrypoint as its command"
        )
        return found
    task: dict[str, Any] = {"name": task_name(name), "schedule": schedule}
    if task["name"] != name:
        found.left.append(f"name: the task is {task['name']!r} (a task name is a DNS label: no dots)")
    if zone:
        task["timeZone"] = str(zone)
    else:
        found.left.append(
            "timeZone: the CronJob has none (kube-controller-manager's zone, usually UTC); the task runs in UTC "
            "unless spec.timeZone says otherwise"
        )
    task["command"] = command
    if _list(theirs.get("args")):
        task["args"] = [str(a) for a in _list(theirs.get("args"))]
    _settings(spec, job, task, found.left)
    _differences(theirs, app, task, found.left)
    _volumes(theirs, app, pod, app_pod, found.left)
    _pod(template, pod, app_pod, _dict(_dict(_dict(deployment.get("spec")).get("template"))), task, found.left)
    if sidecars:
        found.left.append(f"containers {', '.join(sidecars)}: a task runs one container, the Deployment's")
    found.task = task
    return found


def _settings(spec: Mapping[str, Any], job: Mapping[str, Any], task: dict[str, Any], left: list[str]) -> None:
    """The run settings, each as the CronJob runs it (Kubernetes' default where it has none)."""
    task["suspend"] = bool(spec.get("suspend"))
    policy = spec.get("concurrencyPolicy") or K8S_DEFAULTS["concurrencyPolicy"]
    task["concurrencyPolicy"] = str(policy)
    if policy == "Allow":
        left.append("concurrencyPolicy: Allow, as the CronJob runs (a run may overlap the last one); Forbid is safer")
    if isinstance(spec.get("startingDeadlineSeconds"), int):
        task["startingDeadlineSeconds"] = spec["startingDeadlineSeconds"]
    else:
        left.append("startingDeadlineSeconds: the CronJob has none; the task's default is 300 (a fire the controller "
                    "starts more than 5 minutes late is missed)")  # fmt: skip
    if isinstance(job.get("activeDeadlineSeconds"), int):
        task["activeDeadlineSeconds"] = job["activeDeadlineSeconds"]
    else:
        left.append("activeDeadlineSeconds: the CronJob has none; the task's default is 3600 (a run still going "
                    "after an hour is stopped): set it if runs take longer")  # fmt: skip
    backoff = job.get("backoffLimit")
    task["backoffLimit"] = backoff if isinstance(backoff, int) else K8S_DEFAULTS["backoffLimit"]
    if task["backoffLimit"]:
        left.append(f"backoffLimit: {task['backoffLimit']}, as the CronJob runs: a retry runs the same key again")
    for limit in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        value = spec.get(limit)
        task[limit] = value if isinstance(value, int) else K8S_DEFAULTS[limit]
    for unsupported in ("ttlSecondsAfterFinished", "podFailurePolicy", "completions", "parallelism"):
        value = job.get(unsupported)
        if value is not None and not (unsupported in ("completions", "parallelism") and value == 1):
            left.append(f"jobTemplate.spec.{unsupported}: {value!r}: a task has no such field (one pod a run)")


def _differences(theirs: Mapping[str, Any], app: Mapping[str, Any], task: dict[str, Any], left: list[str]) -> None:
    """What the CronJob's container does differently from the Deployment's: env and resources carried, the rest
    listed."""
    if theirs.get("image") != app.get("image"):
        left.append(f"image: the CronJob ran {theirs.get('image')!r}; the task runs the Deployment's "
                    f"{app.get('image')!r} and follows its rollouts")  # fmt: skip
    app_env = {str(_dict(v).get("name")): _dict(v) for v in _list(app.get("env"))}
    env = []
    for variable in _list(theirs.get("env")):
        variable = _dict(variable)
        variable_name = str(variable.get("name") or "")
        if variable_name.startswith("APPSCHEDULE_"):
            continue  # the operator's own, given to every run
        if app_env.get(variable_name) != variable:
            env.append(variable)
    if env:
        task["env"] = env
    theirs_names = {str(_dict(v).get("name")) for v in _list(theirs.get("env"))}
    extra = sorted(n for n in app_env if n not in theirs_names and not n.startswith("APPSCHEDULE_"))
    if extra:
        left.append(
            f"env: the task also gets the Deployment's {', '.join(extra[:10])}" + (" ..." if len(extra) > 10 else "")
        )
    if _list(theirs.get("envFrom")) != _list(app.get("envFrom")):
        left.append("envFrom: the task gets the Deployment's; the CronJob's differ (a task has no envFrom of its own)")
    resources = _dict(theirs.get("resources"))
    if resources and resources != _dict(app.get("resources")):
        task["resources"] = {k: v for k, v in resources.items() if k in ("limits", "requests")}
    if not resources and _dict(app.get("resources")):
        left.append("resources: the CronJob set none; the task runs with the Deployment container's")
    for key in ("workingDir", "securityContext"):
        if theirs.get(key) != app.get(key):
            left.append(
                f"{key}: the task runs with the Deployment container's ({app.get(key)!r}, not {theirs.get(key)!r})"
            )


def _volumes(
    theirs: Mapping[str, Any],
    app: Mapping[str, Any],
    pod: Mapping[str, Any],
    app_pod: Mapping[str, Any],
    left: list[str],
) -> None:
    """The CronJob's mounts the task does not get as they were: a path the Deployment's container does not mount,
    or mounts from another source (a different ConfigMap, Secret, claim... or subPath) at the same path."""

    def mounted(container: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, tuple[Any, ...]]:
        volumes = {str(_dict(v).get("name")): {k: w for k, w in _dict(v).items() if k != "name"}
                   for v in _list(spec.get("volumes"))}  # fmt: skip
        return {
            str(_dict(m).get("mountPath")): (
                volumes.get(str(_dict(m).get("name"))),
                _dict(m).get("subPath"),
                bool(_dict(m).get("readOnly")),
            )
            for m in _list(container.get("volumeMounts"))
        }

    ours, app_mounts = mounted(theirs, pod), mounted(app, app_pod)
    missing = [path for path in ours if path not in app_mounts]
    if missing:
        left.append(
            f"volumeMounts {', '.join(missing)}: the Deployment's container lacks them; a task mounts only the "
            "Deployment's"
        )
    other = [path for path in ours if path in app_mounts and ours[path] != app_mounts[path]]
    if other:
        left.append(
            f"volumeMounts {', '.join(other)}: the Deployment mounts another volume (or subPath, or readOnly) there; "
            "the task gets the Deployment's"
        )


def _pod(
    template: Mapping[str, Any],
    pod: Mapping[str, Any],
    app_pod: Mapping[str, Any],
    app_template: Mapping[str, Any],
    task: dict[str, Any],
    left: list[str],
) -> None:
    """The pod's own metadata carried (podLabels, podAnnotations); what else differs from the Deployment's pod."""
    meta, app_meta = _dict(template.get("metadata")), _dict(app_template.get("metadata"))
    reserved = (f"{naming.GROUP}/", "batch.kubernetes.io/", naming.MANAGED_BY, "controller-uid", "job-name")
    for source, target in (("labels", "podLabels"), ("annotations", "podAnnotations")):
        own = {
            str(k): str(v)
            for k, v in _dict(meta.get(source)).items()
            if _dict(app_meta.get(source)).get(k) != v and not str(k).startswith(reserved)
        }
        if own:
            task[target] = own
    if _list(pod.get("initContainers")):
        left.append("initContainers: a task runs none")
    for key in ("serviceAccountName", "nodeSelector", "tolerations", "affinity", "securityContext", "imagePullSecrets",
                "priorityClassName", "hostNetwork", "dnsPolicy"):  # fmt: skip
        if pod.get(key) != app_pod.get(key) and pod.get(key) is not None:
            left.append(f"{key}: the task runs with the Deployment pod's, not the CronJob's {pod.get(key)!r}")
    if pod.get("restartPolicy") == "OnFailure":
        left.append("restartPolicy: OnFailure restarted a failed container in place; a task's pod is Never "
                    "(backoffLimit retries with a new pod)")  # fmt: skip


def handover_patch(cronjob: Mapping[str, Any], appschedule: str, namespace: str, task: str) -> dict[str, Any]:
    """The merge patch handing ``cronjob`` over to ``appschedule``'s ``task`` for a cut-over: its labels, and on its
    job template the task's labels and variables (its runs then carry the task's key). Guarded by its
    resourceVersion: a CronJob changed meanwhile is not overwritten."""
    meta, spec = _dict(cronjob.get("metadata")), _dict(cronjob.get("spec"))
    template = copy.deepcopy(_dict(_dict(_dict(spec.get("jobTemplate")).get("spec")).get("template")))
    schedule, zone = str(spec.get("schedule") or ""), str(spec.get("timeZone") or "UTC")
    prefix = _PREFIX.match(schedule)
    if prefix and not spec.get("timeZone"):
        zone, schedule = prefix[2], prefix[3]
    variables = {
        "APPSCHEDULE_NAME": appschedule,
        "APPSCHEDULE_NAMESPACE": namespace,
        "APPSCHEDULE_TASK": task,
        "APPSCHEDULE_SCHEDULE": schedule,
        "APPSCHEDULE_TIME_ZONE": zone,
    }
    containers = []
    for container in _list(_dict(template.get("spec")).get("containers")):
        container = _dict(container)
        kept = [v for v in _list(container.get("env")) if str(_dict(v).get("name")) not in variables]
        containers.append({**container, "env": [*kept, *({"name": k, "value": v} for k, v in variables.items())]})
    task_labels = {naming.LABEL_APPSCHEDULE: appschedule, naming.LABEL_TASK: task}
    return {
        "metadata": {"resourceVersion": meta.get("resourceVersion"), "labels": cutover.labels_for(appschedule)},
        "spec": {
            "jobTemplate": {
                "metadata": {"labels": task_labels},
                "spec": {"template": {"metadata": {"labels": task_labels}, "spec": {"containers": containers}}},
            }
        },
    }
