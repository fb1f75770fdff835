"""Ground truth for the soak: every task's runs rebuilt from the API server's audit log, not from the operator.

Pure: ``read_audit(lines)`` turns the audit log (JSON lines, written by the local cluster's API server with
the policy in hack/cluster/localcluster.py) into the history of Jobs and CronJobs; ``expected(...)`` counts
one task's runs, duplicates, failed and missed runs over the window the ledger reports on, and
``compare(...)`` sets those beside the ledger's counts.

The rules are the CronJob controller's and DESIGN's "The ledger", written here again from the outside:

* a Job belongs to the task named by its labels, and to the scheduled time its annotations give
  (``appschedule.dev/scheduled-time`` when the webhook set it, else the controller's
  ``batch.kubernetes.io/cronjob-scheduled-timestamp``);
* a **run** is a scheduled time (not before ``trackingSince``) that got a Job; every further Job for it is
  a **duplicate**; a run **failed** when the first Job for it ended with the condition Failed;
* a Job (run or duplicate) is **unkeyed** when the object the API server stored has no
  ``appschedule.dev/idempotency-key`` annotation (the key webhook did not answer its admission);
* a fire time in ``(trackingSince, checkedUntil]`` with no Job is **missed** unless the task's CronJob was
  suspended then (from the CronJob writes), or, under ``Forbid``, a Job of the task was active then
  (from its creation to its terminal condition).

Only ``* * * * *``-like schedules without time zones are used by the soak; fire times come from croniter
in UTC, not from the operator's schedule module.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from croniter import croniter

GROUP = "appschedule.dev"
LABEL_APPSCHEDULE = f"{GROUP}/appschedule"
LABEL_TASK = f"{GROUP}/task"
OUR_TIME = f"{GROUP}/scheduled-time"
OUR_KEY = f"{GROUP}/idempotency-key"
CONTROLLER_TIME = "batch.kubernetes.io/cronjob-scheduled-timestamp"

TaskKey = tuple[str, str, str]  # namespace, appschedule, task


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


@dataclass
class JobTruth:
    namespace: str
    name: str
    task: TaskKey
    scheduled: datetime | None
    created: datetime
    keyed: bool = True
    received: datetime | None = None  # the create request's arrival and answer: its admission ran in between
    answered: datetime | None = None
    outcome: str | None = None  # Complete | Failed
    finished: datetime | None = None


@dataclass
class CronJobTruth:
    namespace: str
    name: str
    task: TaskKey
    created: datetime
    deleted: datetime | None = None
    suspended: list[tuple[datetime, datetime | None]] = field(default_factory=list)  # (from, until)


@dataclass
class History:
    jobs: dict[tuple[str, str, str], JobTruth] = field(default_factory=dict)  # by (namespace, name, uid)
    cronjobs: list[CronJobTruth] = field(default_factory=list)
    duplicate_cronjobs: list[str] = field(default_factory=list)  # "ns/name beside ns/other for task t"
    events: int = 0

    def jobs_of(self, task: TaskKey) -> list[JobTruth]:
        return [job for job in self.jobs.values() if job.task == task]

    def suspensions_of(self, task: TaskKey) -> list[tuple[datetime, datetime | None]]:
        return [span for cronjob in self.cronjobs if cronjob.task == task for span in cronjob.suspended]


def _task_of(meta: Mapping[str, Any]) -> TaskKey | None:
    labels = meta.get("labels") or {}
    appschedule, task = labels.get(LABEL_APPSCHEDULE), labels.get(LABEL_TASK)
    if not appschedule or not task:
        return None
    return (str(meta.get("namespace") or ""), str(appschedule), str(task))


def _terminal(status: Mapping[str, Any]) -> tuple[str, datetime | None] | None:
    for condition in status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            finished = parse_time(status.get("completionTime")) or parse_time(condition.get("lastTransitionTime"))
            return str(condition["type"]), finished
    return None


def _answered(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The audit events of requests answered 2xx, in the order they were written."""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        event = json.loads(line)
        code = (event.get("responseStatus") or {}).get("code", 0)
        if event.get("stage") == "ResponseComplete" and 200 <= code < 300:
            yield event


def read_audit(lines: Iterable[str]) -> History:
    """The Jobs and CronJobs of AppSchedule tasks, from audit events in the order they were written."""
    history = History()
    live: dict[TaskKey, dict[str, CronJobTruth]] = defaultdict(dict)
    by_name: dict[tuple[str, str], CronJobTruth] = {}
    for event in _answered(lines):
        history.events += 1
        ref = event.get("objectRef") or {}
        obj = event.get("responseObject") or {}
        meta = obj.get("metadata") or {}
        at = parse_time(event.get("stageTimestamp")) or datetime.fromtimestamp(0, UTC)
        resource, verb = ref.get("resource"), event.get("verb")
        if resource == "jobs" and not ref.get("subresource") and verb == "create":
            task = _task_of(meta)
            if task is None:
                continue
            annotations = meta.get("annotations") or {}
            scheduled = parse_time(annotations.get(OUR_TIME)) or parse_time(annotations.get(CONTROLLER_TIME))
            created = parse_time(meta.get("creationTimestamp")) or at
            key = (task[0], str(meta.get("name")), str(meta.get("uid")))
            history.jobs[key] = JobTruth(
                task[0],
                str(meta.get("name")),
                task,
                scheduled,
                created,
                keyed=bool(annotations.get(OUR_KEY)),
                received=parse_time(event.get("requestReceivedTimestamp")),
                answered=at,
            )
        elif resource == "jobs" and ref.get("subresource") == "status":
            job = history.jobs.get((str(ref.get("namespace")), str(ref.get("name")), str(meta.get("uid"))))
            ended = _terminal(obj.get("status") or {})
            if job is not None and ended is not None and job.outcome is None:
                job.outcome, job.finished = ended[0], ended[1] or at
        elif resource == "cronjobs" and not ref.get("subresource"):
            namespace, name = str(ref.get("namespace")), str(ref.get("name"))
            if verb == "delete":
                gone = by_name.pop((namespace, name), None)
                if gone is not None:
                    gone.deleted = at
                    _suspend(gone, False, at)
                    live[gone.task].pop(name, None)
                continue
            task = _task_of(meta)
            if task is None:
                continue
            cronjob = by_name.get((namespace, name))
            if cronjob is None:
                cronjob = CronJobTruth(namespace, name, task, at)
                others = sorted(live[task])
                if others:
                    history.duplicate_cronjobs.append(f"{namespace}/{name} beside {', '.join(others)} for {task}")
                by_name[namespace, name] = cronjob
                live[task][name] = cronjob
                history.cronjobs.append(cronjob)
            _suspend(cronjob, bool((obj.get("spec") or {}).get("suspend")), at)
    return history


def _suspend(cronjob: CronJobTruth, suspended: bool, at: datetime) -> None:
    open_span = bool(cronjob.suspended) and cronjob.suspended[-1][1] is None
    if suspended and not open_span:
        cronjob.suspended.append((at, None))
    elif not suspended and open_span:
        cronjob.suspended[-1] = (cronjob.suspended[-1][0], at)


def _within(moment: datetime, start: datetime, end: datetime | None) -> bool:
    return start < moment and (end is None or moment <= end)


def fires(schedule: str, after: datetime, until: datetime) -> list[datetime]:
    """Fire times in (after, until], UTC."""
    found: list[datetime] = []
    it = croniter(schedule, after.astimezone(UTC))
    while True:
        moment = it.get_next(datetime).astimezone(UTC)
        if moment > until:
            return found
        found.append(moment)


@dataclass(frozen=True)
class Counts:
    runs: int
    duplicates: int
    failed: int
    missed: int
    unkeyed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "runs": self.runs,
            "duplicates": self.duplicates,
            "failed": self.failed,
            "missed": self.missed,
            "unkeyed": self.unkeyed,
        }


def expected(
    history: History, task: TaskKey, *, schedule: str, forbid: bool, since: datetime, until: datetime
) -> Counts:
    """What the ledger must report for ``task`` tracked from ``since`` and settled up to ``until``."""
    jobs = sorted(history.jobs_of(task), key=lambda j: (j.created.replace(microsecond=0), j.name))
    first: dict[datetime, JobTruth] = {}
    duplicates = unkeyed = 0
    for job in jobs:
        if job.scheduled is None or job.scheduled < since:
            continue
        unkeyed += not job.keyed
        if job.scheduled in first:
            duplicates += 1
        else:
            first[job.scheduled] = job
    failed = sum(1 for job in first.values() if job.outcome == "Failed")
    had_job = {job.scheduled for job in jobs if job.scheduled is not None}
    suspended = history.suspensions_of(task)
    active = [(job.created.replace(microsecond=0), job.finished) for job in jobs] if forbid else []
    missed = 0
    for moment in fires(schedule, since, until):
        if moment in had_job:
            continue
        if any(_within(moment, start, end) for start, end in suspended):
            continue
        if any(_within(moment, start, end) for start, end in active):
            continue
        missed += 1
    return Counts(runs=len(first), duplicates=duplicates, failed=failed, missed=missed, unkeyed=unkeyed)


@dataclass(frozen=True)
class Row:
    task: TaskKey
    truth: Counts
    ledger: Counts

    @property
    def same(self) -> bool:
        return self.truth == self.ledger


def compare(
    history: History,
    statuses: Mapping[TaskKey, Mapping[str, Any]],
    *,
    schedules: Mapping[TaskKey, str],
    forbid: Mapping[TaskKey, bool],
) -> list[Row]:
    """One row per task: the ground truth beside the ledger's counts (``statuses`` are the task entries of
    the AppSchedules' status, camelCase as the API serves them)."""
    rows = []
    for task, status in sorted(statuses.items()):
        since, until = parse_time(status.get("trackingSince")), parse_time(status.get("checkedUntil"))
        if since is None or until is None:
            raise ValueError(f"task {task} has no trackingSince/checkedUntil in its status")
        counts = status.get("counts") or {}
        fields = ("runs", "duplicates", "failed", "missed", "unkeyed")
        ledger = Counts(**{name: int(counts.get(name) or 0) for name in fields})
        truth = expected(history, task, schedule=schedules[task], forbid=forbid[task], since=since, until=until)
        rows.append(Row(task, truth, ledger))
    return rows


# ---------------------------------------------------------------------------------------------------
# Who wrote what: the writes made with a pod's ServiceAccount token (the real-node e2e's operator replicas)

POD_NAME = "authentication.kubernetes.io/pod-name"  # what a pod's bound token adds to its user's extra
NOT_STATE = ("leases", "subjectaccessreviews", "tokenreviews")  # the election itself; every replica's webhook


@dataclass(frozen=True)
class Write:
    at: datetime
    pod: str
    user: str  # system:serviceaccount:<namespace>:<name>
    verb: str
    resource: str  # resource or resource/subresource
    namespace: str
    name: str
    holder: str | None = None  # a Lease write: the holder it stored ("" when released)


def pod_writes(lines: Iterable[str]) -> list[Write]:
    """Every write answered 2xx that a pod made with its ServiceAccount token, in the order written."""
    found = []
    for event in _answered(lines):
        if event.get("verb") == "get":
            continue
        pod = ((event.get("user") or {}).get("extra") or {}).get(POD_NAME) or []
        if not pod:
            continue
        ref = event.get("objectRef") or {}
        resource = str(ref.get("resource") or "") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        holder = None
        if ref.get("resource") == "leases":
            holder = str(((event.get("responseObject") or {}).get("spec") or {}).get("holderIdentity") or "")
        at = parse_time(event.get("stageTimestamp")) or datetime.fromtimestamp(0, UTC)
        found.append(
            Write(at, str(pod[0]), str((event.get("user") or {}).get("username") or ""), str(event.get("verb")),
                  resource, str(ref.get("namespace") or ""), str(ref.get("name") or ""), holder)
        )  # fmt: skip
    return found


def leading(writes: Iterable[Write], namespace: str, lease: str) -> list[tuple[str, datetime, datetime | None]]:
    """Who held the Lease when, from its writes: (pod, from, until), until None while it still holds it. The
    holder identity is ``<pod>_<suffix>`` (the operator's)."""
    spans: list[tuple[str, datetime, datetime | None]] = []
    for write in writes:
        if write.resource != "leases" or (write.namespace, write.name) != (namespace, lease) or write.holder is None:
            continue
        pod = write.holder.rsplit("_", 1)[0] if write.holder else ""
        current = spans[-1] if spans and spans[-1][2] is None else None
        if current is not None and current[0] == pod:
            continue  # a renewal
        if current is not None:
            spans[-1] = (current[0], current[1], write.at)
        if pod:
            spans.append((pod, write.at, None))
    return spans


def standby_writes(writes: Iterable[Write], spans: list[tuple[str, datetime, datetime | None]]) -> list[Write]:
    """The writes of the cluster's state (not the election, not a webhook's review) made by a pod that did not
    hold the Lease at the time."""
    return [
        w
        for w in writes
        if w.resource.split("/")[0] not in NOT_STATE
        and not any(pod == w.pod and start <= w.at and (end is None or w.at <= end) for pod, start, end in spans)
    ]
