"""The objects the benchmark makes (AppSchedules, Deployments, CronJobs) and the views it keeps of them."""

from __future__ import annotations

from dataclasses import dataclass

from .common import (
    DAY,
    GROUP,
    IMAGE,
    LABEL_APPSCHEDULE,
    LABEL_TASK,
    TASKS,
    VERSION,
    Json,
)

# ---------------------------------------------------------------------------------------------------
# The objects


def asched_name(i: int) -> str:
    return f"as-{i:04d}"  # zero-padded: the API lists in name order, so as-0999 comes last


def task_name(i: int, j: int) -> str:
    return f"t{i}-{j}"


def schedule(i: int, j: int, minute: int | None = None) -> str:
    return f"{j if minute is None else minute} {i % 24} {DAY} * *"


def deployment(image: str = IMAGE) -> Json:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": image, "command": ["serve"]}]},
            },
        },
    }


def appschedule(i: int, *, every_minute: bool = False) -> Json:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AppSchedule",
        "metadata": {"name": asched_name(i)},
        "spec": {
            "deploymentRef": {"name": "web"},
            "tasks": [
                {
                    "name": task_name(i, j),
                    "schedule": "* * * * *" if every_minute else schedule(i, j),
                    "command": ["task", str(j)],
                }
                for j in range(TASKS)
            ],
        },
    }


@dataclass(frozen=True)
class BenchJob:
    finished: bool


def job_view(obj: Json) -> BenchJob:
    conditions = (obj.get("status") or {}).get("conditions") or []
    done = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)
    return BenchJob(done)


def finished_jobs(obj: Json) -> frozenset[str]:
    """The Jobs an AppSchedule's status lists as finished runs (each task's recent runs)."""
    tasks = (obj.get("status") or {}).get("tasks") or []
    return frozenset(
        str(run["job"])
        for task in tasks
        for run in (task.get("recent") or [])
        if run.get("job") and run.get("state") in ("Succeeded", "Failed")
    )


def minimal_cronjob(name: str, cron: str) -> Json:
    """What a CronJob needs to be valid, for the floors (the operator's carry more)."""
    container = {"name": "app", "image": IMAGE, "command": ["task"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {
            "schedule": cron,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}},
        },
    }


def schedule_patch(task: int, cron: str) -> list[Json]:
    return [{"op": "replace", "path": f"/spec/tasks/{task}/schedule", "value": cron}]


CRONJOB_SCHEDULE = "/spec/schedule"
CRONJOB_IMAGE = "/spec/jobTemplate/spec/template/spec/containers/0/image"


@dataclass(frozen=True)
class BenchCronJob:
    name: str
    schedule: str
    image: str


def cronjob_view(obj: Json) -> BenchCronJob:
    spec = obj.get("spec") or {}
    pod = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return BenchCronJob(str(obj["metadata"]["name"]), str(spec.get("schedule")), str(containers[0].get("image")))


def task_key(obj: Json) -> str:
    """An operator's CronJob by (AppSchedule, task), from its labels; any other by name."""
    labels = obj["metadata"].get("labels") or {}
    if LABEL_APPSCHEDULE in labels:
        return f"{labels[LABEL_APPSCHEDULE]}/{labels.get(LABEL_TASK)}"
    return str(obj["metadata"]["name"])


def name_key(obj: Json) -> str:
    return str(obj["metadata"]["name"])


def is_ready(obj: Json) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
