"""Names, labels and annotations of everything the operator creates.

Invariants: a CronJob name is a function of (AppSchedule name, task name) only, so it never changes while
the task exists; it fits Kubernetes' 52-character CronJob limit (the controller appends an 11-character
``-<minutes>`` suffix to make Job names); when ``<appschedule>-<task>`` is too long it is cut and given
a hash of the full pair, so two tasks never share a name.
"""

from __future__ import annotations

import base64
import hashlib
import re

GROUP = "appschedule.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "AppSchedule"
PLURAL = "appschedules"
CALENDAR_KIND = "AppScheduleCalendar"  # blackouts several AppSchedules of a namespace share (spec.calendars)
CALENDAR_PLURAL = "appschedulecalendars"

CRONJOB_NAME_MAX = 52
TASK_NAME_MAX = 63  # a label value
HASH_LENGTH = 8

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "appschedule-operator"
LABEL_APPSCHEDULE = f"{GROUP}/appschedule"
LABEL_TASK = f"{GROUP}/task"
ANNOTATION_SCHEDULED_TIME = f"{GROUP}/scheduled-time"
ANNOTATION_IDEMPOTENCY_KEY = f"{GROUP}/idempotency-key"
# on a Job the ledger is done with, set in the patch that releases its finalizer: the Job remembers it is filed
ANNOTATION_FILED = f"{GROUP}/filed"
# on a Job someone asked for (kubectl appschedule run/rerun/backfill) or the operator started (catch-up): what
# kind of run it is, counted as such
ANNOTATION_RUN_KIND = f"{GROUP}/run-kind"
# now, with a key of its own; fire T again, with T's key; a past fire of a backfill (T's key); a fire missed
# within catchUpWindow (T's key: the run of its time)
RUN_KINDS = ("manual", "rerun", "backfill", "catch-up")
ASKED_KINDS = ("manual", "rerun", "backfill")  # never the run of their time
ANNOTATION_BACKFILL = f"{GROUP}/backfill"  # on a backfill's Job: the backfill's name
CRONJOB_SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# a task with several schedules: on its CronJobs' job template, the union (``A | B``, what its Jobs are keyed and
# counted by); on the CronJob of each part after the first and on its job template, which part (1, 2, ...)
ANNOTATION_SCHEDULES = f"{GROUP}/schedules"
ANNOTATION_PART = f"{GROUP}/schedule-part"
# on a Job of a later part whose minute an earlier part also fires: the CronJob whose Job runs it (admission.py)
ANNOTATION_RUN_BY = f"{GROUP}/run-by"
# on the job template of a task with several schedules: its concurrencyPolicy, which the key webhook holds across
# its CronJobs; on a Job whose fire came while a run of another of them was active (Forbid): that run
ANNOTATION_CONCURRENCY = f"{GROUP}/concurrency"
ANNOTATION_BLOCKED_BY = f"{GROUP}/blocked-by"
# on the job template of a task that takes over from a CronJob under Forbid: that CronJob, whose run still active
# at the task's CronJob's first fires holds them back as a run of its own would (the key webhook reads the task's Jobs)
ANNOTATION_CUT_OVER_FROM = f"{GROUP}/cut-over-from"
# on every task Job from admission until the ledger has counted it (DESIGN "The ledger")
LEDGER_FINALIZER = f"{GROUP}/ledger"

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def task_name_error(name: str) -> str | None:
    """Why ``name`` is not a valid task name, or None: a DNS-1123 label of at most 63 characters."""
    if not name:
        return "must not be empty"
    if len(name) > TASK_NAME_MAX:
        return f"must be at most {TASK_NAME_MAX} characters (has {len(name)})"
    if not DNS_LABEL.match(name):
        return "must consist of lower-case letters, digits and '-', and start and end with a letter or digit"
    return None


def short_hash(*parts: str, length: int = HASH_LENGTH) -> str:
    digest = hashlib.sha256("\0".join(parts).encode()).digest()
    # base32, lower-case: only [a-z2-7], valid in DNS labels
    return base64.b32encode(digest).decode().lower()[:length]


def cronjob_name(appschedule: str, task: str) -> str:
    """``<appschedule>-<task>``, or a cut of it plus ``-<hash>`` when longer than 52 characters."""
    full = f"{appschedule}-{task}"
    if len(full) <= CRONJOB_NAME_MAX:
        return full
    keep = CRONJOB_NAME_MAX - HASH_LENGTH - 1
    return f"{full[:keep].rstrip('-.')}-{short_hash(appschedule, task)}"


def part_cronjob_name(cronjob: str, part: int) -> str:
    """The CronJob of a task's schedule after the first (``part`` 1, 2, ...): ``<its CronJob>-s<part>``, or a cut of
    it plus a hash when longer than 52 characters."""
    if part == 0:
        return cronjob
    full = f"{cronjob}-s{part}"
    if len(full) <= CRONJOB_NAME_MAX:
        return full
    keep = CRONJOB_NAME_MAX - HASH_LENGTH - len(f"--s{part}")
    return f"{cronjob[:keep].rstrip('-.')}-{short_hash(cronjob, str(part))}-s{part}"


def labels(appschedule: str, task: str) -> dict[str, str]:
    """Labels on a task's CronJob and, through the job template, on its Jobs and pods."""
    return {MANAGED_BY: MANAGER, LABEL_APPSCHEDULE: appschedule, LABEL_TASK: task}


def fire_minutes(moment_timestamp: float) -> int:
    """Minutes since the epoch: the CronJob controller's suffix for the Job of a fire."""
    return int(moment_timestamp // 60)


def catch_up_job_name(cronjob: str, moment_timestamp: float) -> str:
    """The Job the operator starts for a fire missed within catchUpWindow: the very name the CronJob controller
    gives the Job of that fire (``<cronjob>-<minutes>``), so the two can never both run it."""
    return f"{cronjob}-{fire_minutes(moment_timestamp)}"


def backfill_job_name(appschedule: str, backfill: str, task: str, moment_timestamp: float, identity: str = "") -> str:
    """A backfill's Job for one fire: the same name whatever restart creates it (a second create is refused
    as AlreadyExists), unique in the namespace: ``<appschedule>-<backfill>`` (cut to 38), a hash of those, the
    task and the backfill's ``identity`` (its range), and the fire's minute."""
    base = f"{appschedule}-{backfill}"[:38].rstrip("-.")
    return f"{base}-{short_hash(appschedule, backfill, task, identity, length=5)}-{fire_minutes(moment_timestamp)}"


def literal_text(text: str) -> str:
    """``text`` as a container's command, args or env value that Kubernetes passes on unchanged: it reads
    ``$(NAME)`` there as a variable and ``$$`` as one ``$``, so every ``$`` is written ``$$`` (for what an
    import carries over from a crontab or the app's code, where a ``$`` was the shell's)."""
    return text.replace("$", "$$")


def literal_task(task: dict[str, object]) -> dict[str, object]:
    """An imported task with its command, args and env values as ``literal_text``."""
    out = dict(task)
    for key in ("command", "args"):
        value = out.get(key)
        if isinstance(value, list):
            out[key] = [literal_text(v) if isinstance(v, str) else v for v in value]
    env = out.get("env")
    if isinstance(env, list):
        out["env"] = [
            {**e, "value": literal_text(e["value"])} if isinstance(e, dict) and isinstance(e.get("value"), str) else e
            for e in env
        ]
    return out
