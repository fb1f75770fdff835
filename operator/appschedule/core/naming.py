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
# on a Job someone asked for (kubectl appschedule run/rerun): what kind of run it is, counted as such
ANNOTATION_RUN_KIND = f"{GROUP}/run-kind"
RUN_KINDS = ("manual", "rerun")  # now, with a key of its own; fire T again, with T's key
CRONJOB_SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
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


def labels(appschedule: str, task: str) -> dict[str, str]:
    """Labels on a task's CronJob and, through the job template, on its Jobs and pods."""
    return {MANAGED_BY: MANAGER, LABEL_APPSCHEDULE: appschedule, LABEL_TASK: task}
