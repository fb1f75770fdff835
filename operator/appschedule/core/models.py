"""The AppSchedule API (appschedule.dev/v1alpha1): pydantic models of spec and status.

These models are the single source of the CRD: ``crd()`` turns them into a structural OpenAPI schema
(every node typed and described, no defaults stored by the API server, no preserve-unknown-fields),
and ``crds/appschedule.dev_appschedules.yaml`` is that output, checked in; a unit test fails when it is
stale. Built-in defaults are applied when rendering (``Task.resolved``), never written into objects,
so ``kubectl get -o yaml`` shows what the user wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from . import naming

# The whole object has one budget: etcd stores an object of at most OBJECT_BYTES_MAX (its default request
# limit), and each part of an AppSchedule has its share of it. The spec's is checked at apply (the webhook) and
# by every plan (render.parse_spec); the annotations' (kubectl's last-applied copy of the spec among them) is
# the API server's own limit; managedFields follow the fields set, not their values, and are measured on the
# real API server with the largest spec and status (tests/integration/test_budget.py); the rest of the
# metadata (names, labels, owners, finalizers) is assumed within METADATA_BYTES_MAX; the status gets what is
# left. Every string, list and number of the status has a bound (the API server enforces it), chosen so that
# the largest status the schema allows (STATUS_TASKS_MAX tasks, every list full, every string and number at
# its maximum) stays within its share: tests/unit/test_status_size.py builds it and checks the sum.
OBJECT_BYTES_MAX = 1536 * 1024  # etcd's --max-request-bytes default
SPEC_BYTES_MAX = 144 * 1024
ANNOTATIONS_BYTES_MAX = 256 * 1024  # the API server's limit on metadata.annotations, kubectl's copy included
# managedFields list every field path a manager set (fields_bytes estimates it): the spec's writer's share is
# checked with the spec, the status' follows from its schema, and each entry's own fields (manager, time) get
# the rest. One writer of the spec is assumed: several server-side appliers of the same fields each list them.
SPEC_FIELDS_BYTES_MAX = 112 * 1024
STATUS_FIELDS_BYTES_MAX = 90 * 1024
MANAGED_FIELDS_BYTES_MAX = SPEC_FIELDS_BYTES_MAX + STATUS_FIELDS_BYTES_MAX + 8 * 1024
METADATA_BYTES_MAX = 16 * 1024
STATUS_BYTES_MAX = (
    OBJECT_BYTES_MAX - SPEC_BYTES_MAX - ANNOTATIONS_BYTES_MAX - MANAGED_FIELDS_BYTES_MAX - METADATA_BYTES_MAX
)
COUNT_MAX = 10**9 - 1  # the largest count the status holds (1,900 years of a task firing every minute)


def _utc(value: Any) -> Any:
    """A time the status holds, in UTC with ``Z`` (20 characters): one with an offset (the CronJob controller's
    scheduled-timestamp is in the CronJob's zone) is converted; anything else is left for the bounds to judge."""
    if isinstance(value, str) and len(value) > 20:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        if moment.tzinfo is not None:
            return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


# a time of the status: always UTC (2026-03-29T01:00:00Z), so its bound is 20 bytes, not the 25 of an offset
Time = Annotated[str, BeforeValidator(_utc), Field(max_length=20, json_schema_extra={"format": "date-time"})]
# the lists that the schema makes maps (x-kubernetes-list-type: map), by path, with their key: managedFields list
# each of their items
SPEC_MAP_LISTS = {".tasks": "name", ".backfills": "name"}
STATUS_MAP_LISTS = {".tasks": "name", ".backfills": "name", ".conditions": "type"}


def fields_bytes(node: Any, lists: Mapping[str, str], path: str = "") -> int:
    """An upper estimate of the bytes a manager's fieldsV1 (managedFields) takes for ``node``: every key of a
    map as ``"f:<key>":{...}``, every item of a map list as ``"k:{...}":{...}``, other lists atomic."""
    if isinstance(node, Mapping):
        total = 8  # {".":{}}
        for key, value in node.items():
            text = str(key)
            plain = text.isascii() and text.isprintable() and '"' not in text and "\\" not in text
            total += (len(text) + 4 if plain else len(json.dumps(f"f:{text}"))) + 2
            total += fields_bytes(value, lists, f"{path}.{key}")
        return total
    key = lists.get(path)
    if key is not None and isinstance(node, list):
        total = 8
        for item in node:
            ident = {key: item.get(key)} if isinstance(item, Mapping) else item
            total += len(json.dumps(f"k:{json.dumps(ident, separators=(',', ':'))}")) + 2
            total += fields_bytes(item, lists, f"{path}[]")
        return total
    return 3  # {}


GivenTime = Annotated[str, Field(max_length=32, json_schema_extra={"format": "date-time"})]  # in the spec: fractions
Count = Annotated[int, Field(ge=0, le=COUNT_MAX)]
RUN_COUNT_MAX = 10**6 - 1  # a count of one fire (its pods, duplicates, re-runs): more are shown as this many
RunCount = Annotated[int, Field(ge=0, le=RUN_COUNT_MAX)]
FAILURE_MAX = 20  # "BackoffLimitExceeded", "OOMKilled", "exit 255", "ImagePullBackOff"
ClaimState = Literal["won", "taken-over", "lost", "none"]
STATUS_TASKS_MAX = 100  # as many as the spec may declare
RECENT_MAX = 10  # runs and misses a task's status lists
JOBS_MAX = 6  # Jobs a task's ledger remembers in its status; the rest remember themselves (ledger.py)
NAME_MAX = 63  # a Job's name as the status holds it (a longer one is cut and hashed: ledger.record_name)
MESSAGE_MAX = 1024
SUSPENSIONS_MAX = 5
CATCH_UP_MAX = 10  # fires missed within catchUpWindow a task's status holds to start; older ones are counted missed
CATCH_UP_WINDOW_MAX = 24 * 3600  # seconds: the longest catchUpWindow
BACKFILLS_MAX = 10  # backfill requests an AppSchedule holds (spec and status)
BACKFILL_FIRES_MAX = 1000  # fires one backfill may run
BACKFILL_PARALLEL_MAX = 10
DURATION = r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$"
DURATION_UNITS = {"h": 3600, "m": 60, "s": 1}


def duration_seconds(text: str | None) -> int:
    """Seconds of a duration as DURATION allows it (``1h30m``, ``45s``; empty or None: 0)."""
    total, number = 0, ""
    for char in text or "":
        if char.isdigit():
            number += char
        elif char in DURATION_UNITS and number:
            total += int(number) * DURATION_UNITS[char]
            number = ""
        else:
            raise ValueError(f"{text!r} is not a duration like 30m, 2h or 1h30m")
    if number:
        raise ValueError(f"{text!r} is not a duration like 30m, 2h or 1h30m (a number needs its unit)")
    return total


def _window(text: str | None) -> str | None:
    if text is not None and duration_seconds(text) > CATCH_UP_WINDOW_MAX:
        raise ValueError(f"{text!r} is longer than 24h, the longest catchUpWindow")
    return text


ASCII = r"^[ -~]*$"  # what the operator writes from names, times and keys: one byte a character


def printable(text: str, limit: int) -> str:
    """``text`` as ASCII holds it (one byte a character, within ``limit``): other characters escaped (\\u23f0),
    line breaks and other controls made spaces."""
    escaped = text.encode("ascii", "backslashreplace").decode("ascii")
    return "".join(c if " " <= c <= "~" else " " for c in escaped)[:limit]


# what the API server would refuse in the CronJob it is written into, refused here already (the webhook and the
# Ready condition name the field); the CRD's schema cannot say it (int-or-string, map keys)
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei))?$")
_SUFFIX = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("0.001"), "": Decimal(1),
           "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
           "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10,
           "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50,
           "Ei": Decimal(2) ** 60}  # fmt: skip


def quantity(value: object) -> Decimal | None:
    """A Kubernetes resource quantity's value ("500m", "1Gi", 2, "1e3"), None when it is not one."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return None
    number, exponent, suffix = match.groups()
    try:
        scale = Decimal(10) ** int(exponent[1:]) if exponent else _SUFFIX[suffix or ""]
        return Decimal(number) * scale
    except ArithmeticError:  # an exponent past what any quantity can hold
        return None


def _quantity(value: int | str) -> int | str:
    parsed = quantity(value) if str(value) == str(value).strip() else None
    if parsed is None:
        raise ValueError(f"{value!r} is not a quantity like 500m, 2, 128Mi or 1G")
    if parsed * 1000 != int(parsed * 1000):  # the API server rounds it up to 1m: 1u would be 1m, never in sync
        raise ValueError(f"{value!r} is finer than 1m: the API server rounds it up (use e.g. 1m)")
    return value


# Kubernetes' rules for what goes into a container's env (k8s.io/kubernetes/pkg/apis/core/validation). An env
# name is held to the rule every supported API server enforces (1.32 and later also accept spaces and a leading
# digit): letters, digits, '_', '-', '.', not starting with a digit.
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_FIELD_PATHS = {
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
}
_FIELD_PATH_KEYED = re.compile(r"^metadata\.(labels|annotations)\['[^']+'\]$")
_RESOURCES = {
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
}


def _qualified_keys(what: str, values: dict[str, str] | None, *, label_values: bool) -> dict[str, str] | None:
    for key, value in (values or {}).items():
        prefix, _, name = key.rpartition("/")
        if not _QUALIFIED_NAME.match(key) or len(name) > 63 or len(prefix) > 253:
            raise ValueError(f"{what} key {key!r} is not a qualified name like example.com/my-key")
        if label_values and (len(value) > 63 or not _LABEL_VALUE.match(value)):
            raise ValueError(f"label {key!r}: value {value!r} is not a label value (63 characters of A-Z a-z 0-9 -_.)")
    return values


Arg = Annotated[str, Field(max_length=65536)]  # a bound the API server checks even when the webhook is down
Quantity = Annotated[
    int | str, Field(json_schema_extra={"x-kubernetes-int-or-string": True}), AfterValidator(_quantity)
]
Labels = Annotated[dict[str, str] | None, AfterValidator(lambda v: _qualified_keys("label", v, label_values=True))]
Annotations = Annotated[
    dict[str, str] | None, AfterValidator(lambda v: _qualified_keys("annotation", v, label_values=False))
]
ConcurrencyPolicy = Literal["Forbid", "Allow", "Replace"]

DEFAULTS: dict[str, Any] = {
    "timeZone": "UTC",
    "suspend": False,
    "concurrencyPolicy": "Forbid",
    "startingDeadlineSeconds": 300,
    "activeDeadlineSeconds": 3600,
    "backoffLimit": 0,
    "missedRunGraceSeconds": 120,
    "successfulJobsHistoryLimit": 3,
    "failedJobsHistoryLimit": 3,
    "catchUpWindow": "0s",
}
"""Built-in defaults for task settings (README has the table): spec.defaults and the task override them."""


_CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
_CLOCK_END = r"^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$"
BLACKOUT_DATES_MAX = 64
BLACKOUTS_MAX = 32  # spec.blackouts, for every task
TASK_BLACKOUTS_MAX = 8  # a task's own
SCHEDULE_MAX = 256  # one expression
SCHEDULES_MAX = 4  # a task's several schedules (schedule.UNION_MAX)
SCHEDULES_ITEM_MAX = 100  # each of them: the union said in the status stays within UNION_TEXT_MAX
UNION_TEXT_MAX = SCHEDULES_MAX * SCHEDULES_ITEM_MAX + 3 * (SCHEDULES_MAX - 1)
CALENDARS_MAX = 8  # AppScheduleCalendars an AppSchedule names
CALENDAR_BLACKOUTS_MAX = 64  # blackouts an AppScheduleCalendar holds


def _date(value: str) -> str:
    """A day as YYYY-MM-DD that the calendar has."""
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
        raise ValueError(f"{value!r} is not a day as YYYY-MM-DD")
    try:
        date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a day of the calendar") from None
    return value


class Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


# ---------------------------------------------------------------------------------------------------
# Spec


class DeploymentRef(Model):
    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="Name of the Deployment, in the AppSchedule's namespace, whose image and pod settings "
        "every task runs with. The CronJobs follow its rollouts.",
    )
    container: str | None = Field(
        None,
        min_length=1,
        max_length=63,
        pattern=naming.DNS_LABEL.pattern,
        description="Name of the Deployment's container to run tasks in. Default: the first container.",
    )


class KeySelector(Model):
    name: str = Field(max_length=253, pattern=_SUBDOMAIN.pattern, description="Name of the ConfigMap or Secret.")
    key: str = Field(max_length=253, pattern=_CONFIG_KEY.pattern, description="The key to select.")
    optional: bool | None = Field(None, description="Whether the ConfigMap or Secret or its key may be missing.")


class FieldSelector(Model):
    field_path: str = Field(description="Path of the pod field to select, e.g. metadata.name.")

    @field_validator("field_path")
    @classmethod
    def _supported(cls, value: str) -> str:
        if value not in _FIELD_PATHS and not _FIELD_PATH_KEYED.match(value):
            raise ValueError(
                f"fieldPath {value!r} is not supported; use one of {', '.join(sorted(_FIELD_PATHS))}, "
                "metadata.labels['KEY'] or metadata.annotations['KEY']"
            )
        return value

    api_version: str | None = Field(None, description="Version of the schema fieldPath is written in.")


class ResourceFieldSelector(Model):
    resource: Literal[
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
    ] = Field(description="Container resource to select, e.g. limits.memory.")
    container_name: str | None = Field(None, description="Container to read the resource of.")
    divisor: Quantity | None = Field(None, description="Output format of the exposed resources.")


class EnvVarSource(Model):
    config_map_key_ref: KeySelector | None = Field(None, description="A key of a ConfigMap.")
    secret_key_ref: KeySelector | None = Field(None, description="A key of a Secret.")
    field_ref: FieldSelector | None = Field(None, description="A field of the pod.")
    resource_field_ref: ResourceFieldSelector | None = Field(None, description="A resource of a container.")

    @model_validator(mode="after")
    def _one_source(self) -> EnvVarSource:
        given = [
            f for f in ("config_map_key_ref", "secret_key_ref", "field_ref", "resource_field_ref") if getattr(self, f)
        ]
        if len(given) != 1:
            raise ValueError(
                "valueFrom needs exactly one of configMapKeyRef, secretKeyRef, fieldRef, resourceFieldRef"
                + (f" (has {len(given)})" if given else "")
            )
        return self


class EnvVar(Model):
    name: str = Field(
        min_length=1,
        pattern=_ENV_NAME.pattern,
        description="Name of the environment variable: letters, digits, '_', '-', '.', not starting with a digit.",
    )
    value: str | None = Field(None, description="Literal value.")
    value_from: EnvVarSource | None = Field(None, description="Source of the value, when it is not literal.")

    @model_validator(mode="after")
    def _value_or_source(self) -> EnvVar:
        if self.value and self.value_from is not None:
            raise ValueError(f"env {self.name!r}: value and valueFrom may not both be set")
        return self


class ResourceRequirements(Model):
    limits: dict[str, Quantity] | None = Field(None, description="Most compute resources a run may use.")
    requests: dict[str, Quantity] | None = Field(None, description="Compute resources a run is scheduled with.")

    @property
    def empty(self) -> bool:
        """``resources: {}`` (or only empty maps) means "inherit the container's", never "BestEffort"."""
        return not self.limits and not self.requests


class TaskSettings(Model):
    """The settings that spec.defaults may give every task; a task's own value wins."""

    env: list[EnvVar] | None = Field(
        None,
        description="Environment variables added to the Deployment container's env (a variable of the same "
        "name is replaced). Names starting APPSCHEDULE_ are reserved. In defaults: added before the task's.",
    )
    resources: ResourceRequirements | None = Field(
        None,
        description="Compute resources of a run; replaces the Deployment container's when it sets limits or "
        "requests (empty means: the container's).",
    )
    pod_annotations: Annotations = Field(
        None,
        description="Annotations added to each run's pod, after the Deployment's pod template annotations "
        "(same key: this value). In defaults: added before the task's.",
    )
    pod_labels: Labels = Field(
        None,
        description="Labels added to each run's pod, after the Deployment's pod template labels that are not in "
        "its selector (e.g. for a NetworkPolicy). Keys under appschedule.dev/ and batch.kubernetes.io/, and "
        "app.kubernetes.io/managed-by, are reserved.",
    )
    time_zone: str | None = Field(
        None,
        description="IANA time zone the schedule is read in, e.g. Europe/Berlin. Default: spec.timeZone, else UTC.",
    )
    suspend: bool | None = Field(None, description="Start no new runs of this task. Default: false.")
    concurrency_policy: ConcurrencyPolicy | None = Field(
        None,
        description="What to do when a run is due while the previous one is still active: Forbid (skip the new "
        "run), Allow (run both) or Replace (stop the old one). Default: Forbid.",
    )
    starting_deadline_seconds: int | None = Field(
        None, ge=0, description="A run that cannot start within this many seconds of its time is missed. Default: 300."
    )
    active_deadline_seconds: int | None = Field(
        None,
        ge=1,
        description="A run still going after this many seconds is stuck and is stopped by Kubernetes. Default: 3600.",
    )
    backoff_limit: int | None = Field(
        None,
        ge=0,
        description="Retries of a failed run. A retry is a second execution with the same idempotency key, so "
        "it is opt-in. Default: 0.",
    )
    suspend_after_failures: int | None = Field(
        None,
        ge=1,
        le=RECENT_MAX,
        description="Pause the task after this many failed runs in a row (1 to 10): its CronJob is suspended, its "
        "fires are skipped, RunsHealthy and a TaskPaused Event say why; a success resets the count, and kubectl "
        "appschedule resume NAME TASK runs it again. Manual runs and re-runs count as runs of their fire. "
        "Default: never.",
    )
    missed_run_grace_seconds: int | None = Field(
        None, ge=0, description="How late a run may start before it is reported late. Default: 120."
    )
    successful_jobs_history_limit: int | None = Field(
        None, ge=0, description="Finished successful Jobs kept. Default: 3."
    )
    failed_jobs_history_limit: int | None = Field(None, ge=0, description="Failed Jobs kept. Default: 3.")
    catch_up_window: Annotated[str | None, AfterValidator(_window)] = Field(
        None,
        min_length=2,
        max_length=16,
        pattern=DURATION,
        description="Fires missed within this long (e.g. 30m, 2h, 1h30m; at most 24h) while the CronJob "
        "controller or the cluster was down are started by the operator, oldest first, each with its own "
        "idempotency key and respecting concurrencyPolicy, instead of being counted missed (at most 10 per "
        "task are waiting at a time; older ones are counted missed). Default: 0s (off: Kubernetes starts "
        "only the most recent missed fire).",
    )


Day = Annotated[str, AfterValidator(_date), Field(max_length=10, pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")]


class Weekly(Model):
    """A window that comes back every week, in the task's zone."""

    days: list[Literal["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"]] = Field(
        min_length=1, max_length=7, description="Days of the week it starts on: MON TUE WED THU FRI SAT SUN."
    )
    start: str = Field(
        alias="from", pattern=_CLOCK, description="When it starts, HH:MM (00:00-23:59) of the task's wall clock."
    )
    end: str = Field(
        alias="to",
        pattern=_CLOCK_END,
        description="When it ends, HH:MM (00:00-24:00), not included; at or before `from`: on the next day.",
    )

    @model_validator(mode="after")
    def _not_empty(self) -> Weekly:
        if self.start == self.end:
            raise ValueError(f"from and to are both {self.start}: the window is empty (24:00 ends a day)")
        return self


class Blackout(Model):
    """A span in which no run of the task starts: whole days, a range of days, or a weekly window, in the
    task's zone. Its fires are counted blackedOut, not missed, and are not caught up or backfilled."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=naming.DNS_LABEL.pattern,
        description="Name of the blackout (a DNS label), unique in its list: what the status and Events say.",
    )
    reason: str | None = Field(
        None, max_length=256, pattern=ASCII, description="Why, as the Events and kubectl appschedule status say it."
    )
    dates: list[Day] | None = Field(
        None, min_length=1, max_length=BLACKOUT_DATES_MAX, description="Whole days, YYYY-MM-DD (at most 64)."
    )
    first: Day | None = Field(None, alias="from", description="The first day of a range, YYYY-MM-DD (with `to`).")
    last: Day | None = Field(None, alias="to", description="The last day of a range, YYYY-MM-DD, included.")
    weekly: Weekly | None = Field(None, description="A window every week.")

    @model_validator(mode="after")
    def _one_form(self) -> Blackout:
        forms = [self.dates is not None, self.first is not None or self.last is not None, self.weekly is not None]
        if sum(forms) != 1:
            raise ValueError("give exactly one of dates, from/to or weekly")
        if forms[1] and (self.first is None or self.last is None):
            raise ValueError("a range of days needs both from and to")
        if self.first is not None and self.last is not None and self.last < self.first:
            raise ValueError(f"to ({self.last}) is before from ({self.first})")
        return self


def _unique_names(items: list[Blackout] | None) -> list[Blackout] | None:
    names = [b.name for b in items or []]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"blackout names must be unique: {', '.join(twice)}")
    return items


Blackouts = Annotated[list[Blackout] | None, AfterValidator(_unique_names)]


def _one_expression(text: str) -> str:
    if "|" in text:
        raise ValueError(f"{text!r}: one expression an item; give each of several as an item of schedules")
    return text


OneSchedule = Annotated[
    str,
    Field(min_length=1, max_length=SCHEDULES_ITEM_MAX, json_schema_extra={"pattern": r"^[^|]*$"}),
    AfterValidator(_one_expression),
]


class Task(TaskSettings):
    model_config = ConfigDict(
        **Model.model_config,
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.schedules) || (has(self.schedule) && self.schedule != '')",
                    "message": "schedule is required (or schedules, for several)",
                    "fieldPath": ".schedule",
                },
                {
                    "rule": "!has(self.schedules) || !has(self.schedule) || self.schedule == ''",
                    "message": "give schedule or schedules, not both",
                    "fieldPath": ".schedule",
                },
            ]
        },
    )
    name: str = Field(
        min_length=1,
        max_length=naming.TASK_NAME_MAX,
        pattern=naming.DNS_LABEL.pattern,
        description="Name of the task: a DNS label (lower-case letters, digits, '-'), unique within the "
        "namespace across AppSchedules. Part of the CronJob's name and of every run's idempotency key.",
    )
    schedules: list[OneSchedule] | None = Field(
        None,
        min_length=2,
        max_length=SCHEDULES_MAX,
        description="Several schedules for the task, instead of schedule (2 to 4, each in schedule's syntax): it "
        "runs at every minute any of them matches, once, with one key, however many match it. The status, the "
        "ledger, next, catch-up and backfill count the union, said as the schedules joined by ' | '. The operator "
        "runs it as few CronJobs as are exact (schedules differing in one field are joined into one expression), "
        "and where two of its CronJobs fire in one minute the later one's Job does no work (completions 0).",
    )
    schedule: str = Field(
        "",
        validate_default=True,
        max_length=SCHEDULE_MAX,
        description="When to run, in Kubernetes CronJob syntax: five fields (minute hour day-of-month month "
        "day-of-week, Sunday=0) or @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually. Read in "
        "timeZone. No seconds field, no L W #, no TZ= prefix, no @every. H (Jenkins' hashed forms) in any "
        "field: H, H(a-b), H/n, H(a-b)/n pick values from a stable hash of the namespace, AppSchedule and task "
        "names, so tasks spread instead of all firing at :00; the CronJob, the status and the ledger use the "
        "plain schedule it resolves to, which stays the same while the task exists. Give schedule or schedules.",
    )
    command: list[Arg] = Field(
        min_length=1,
        max_length=256,
        description="Command run in the Deployment's image (replaces the container's command).",
    )
    args: list[Arg] | None = Field(None, max_length=1024, description="Arguments to the command. Default: none.")
    cut_over_from: str | None = Field(
        None,
        min_length=1,
        max_length=naming.CRONJOB_NAME_MAX,
        pattern=_SUBDOMAIN.pattern,
        description="Name of a CronJob in this namespace that runs this task today, to take over from at a fire "
        "boundary: the CronJob runs every fire up to the task's own CronJob's creation and is then suspended; the "
        "task's CronJob runs every fire after it, and both sides' runs carry the task's key. The CronJob takes "
        "part only once labelled for this AppSchedule (kubectl appschedule import cronjob --cut-over does it); "
        "until then the task waits and the CronJob keeps running. Never deleted.",
    )
    blackouts: Blackouts = Field(
        None,
        max_length=TASK_BLACKOUTS_MAX,
        description="The task's own blackouts (at most 8), added to spec.blackouts: no run of it starts inside one.",
    )

    @field_validator("schedule")
    @classmethod
    def _one_schedule(cls, given: str, info: ValidationInfo) -> str:
        """schedule or schedules, not both; ``schedule`` then holds the union as every reader takes it (``A | B``)."""
        if "schedules" not in info.data:  # given, and refused (said there): nothing more to say here
            return given
        several = info.data.get("schedules")
        if several is not None:
            joined = " | ".join(several)
            if given and given != joined:  # a Task dumped and read again has both, alike
                raise ValueError("give schedule or schedules, not both")
            return joined
        if not given:
            raise ValueError("schedule is required (or schedules, for several)")
        if "|" in given:
            raise ValueError(f"schedule {given!r}: for several schedules give schedules: [...], one each")
        return given

    def resolved(self, spec: AppScheduleSpec) -> dict[str, Any]:
        """Every setting with the task's value, else spec.defaults', else the built-in default."""
        defaults = spec.defaults or TaskSettings()
        values: dict[str, Any] = dict(DEFAULTS)
        if spec.time_zone is not None:
            values["timeZone"] = spec.time_zone
        for source in (defaults, self):
            for field, value in source.model_dump(by_alias=True, exclude_none=True).items():
                if field in DEFAULTS:
                    values[field] = value
        if spec.suspend:
            values["suspend"] = True
        values["env"] = [*(defaults.env or []), *(self.env or [])]
        own, inherited = self.resources, defaults.resources
        values["resources"] = next((r for r in (own, inherited) if r is not None and not r.empty), None)
        values["podAnnotations"] = {**(defaults.pod_annotations or {}), **(self.pod_annotations or {})}
        values["podLabels"] = {**(defaults.pod_labels or {}), **(self.pod_labels or {})}
        values["blackouts"] = [*(spec.blackouts or []), *(self.blackouts or [])]
        return values


class Backfill(Model):
    """A request to run a task's past fires (kubectl appschedule backfill)."""

    name: str = Field(
        min_length=1,
        max_length=30,
        pattern=naming.DNS_LABEL.pattern,
        description="Name of the backfill: a DNS label of at most 30 characters, unique in this AppSchedule. "
        "Part of its Jobs' names; removing the entry stops its runs and deletes its Jobs.",
    )
    task: str = Field(
        min_length=1, max_length=naming.TASK_NAME_MAX, pattern=naming.DNS_LABEL.pattern, description="The task to run."
    )
    start: GivenTime = Field(alias="from", description="The first time of the range (RFC 3339), inclusive.")
    end: GivenTime = Field(
        alias="to", description="The last time of the range (RFC 3339), inclusive; not in the future."
    )
    parallel: int | None = Field(
        None, ge=1, le=BACKFILL_PARALLEL_MAX, description="Runs of the backfill active at once, at most 10. Default: 1."
    )
    include_blackouts: bool | None = Field(
        None, description="Run the range's fires inside the task's blackouts too. Default: false (they are left out)."
    )


class AppScheduleSpec(Model):
    deployment_ref: DeploymentRef = Field(description="The Deployment whose image and settings the tasks run with.")
    time_zone: str | None = Field(
        None, description="IANA time zone for every task's schedule, e.g. Europe/Berlin. Default: UTC."
    )
    suspend: bool | None = Field(None, description="Suspend every task: no new runs start. Default: false.")
    defaults: TaskSettings | None = Field(None, description="Settings for every task; a task's own value wins.")
    calendars: list[Annotated[str, Field(max_length=253, pattern=_SUBDOMAIN.pattern)]] | None = Field(
        None,
        max_length=CALENDARS_MAX,
        description="Names of AppScheduleCalendars of this namespace (at most 8) whose blackouts hold for every task, "
        "as spec.blackouts do: a team keeps its holidays in one place. One that is missing or invalid is said in "
        "Ready (CalendarNotFound, CalendarInvalid) and the tasks run without it.",
    )
    blackouts: Blackouts = Field(
        None,
        max_length=BLACKOUTS_MAX,
        description="Spans in which no task's run starts (at most 32), each in the task's zone: whole days, a range "
        "of days or a weekly window. A fire inside one is counted blackedOut (never missed), not caught up and not "
        "backfilled; the task's CronJob is suspended for the span.",
    )
    tasks: list[Task] = Field(
        min_length=1,
        max_length=100,
        description="The app's scheduled tasks; each becomes one CronJob.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    backfills: list[Backfill] | None = Field(
        None,
        max_length=BACKFILLS_MAX,
        description="Past fires to run (kubectl appschedule backfill): each fire in a range gets one run with "
        "that fire's idempotency key, oldest first, at most `parallel` at once, at most 1000 fires per backfill. "
        "Progress is in status.backfills.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


# ---------------------------------------------------------------------------------------------------
# Status


class Condition(Model):
    type: str = Field(
        max_length=32, pattern=ASCII, description="Ready (CronJobs match the spec and Deployment) or RunsHealthy."
    )
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(max_length=64, pattern=ASCII, description="CamelCase reason for the last transition.")
    message: str = Field(
        max_length=MESSAGE_MAX,
        pattern=ASCII,
        description="What happened, for humans; names the task and field at fault (other characters escaped).",
    )
    last_transition_time: Time = Field(description="When the status last changed.")
    observed_generation: int | None = Field(None, description="The spec generation this condition is about.")


class DeploymentStatus(Model):
    name: str = Field(max_length=253, pattern=ASCII, description="The Deployment's name.")
    image: str = Field(
        max_length=1024,
        pattern=ASCII,
        description="The image the CronJobs run, from the Deployment's container (other characters escaped).",
    )


class Counts(Model):
    runs: Count = Field(0, description="Scheduled times that got a Job.")
    succeeded: Count = Field(0, description="Runs that succeeded.")
    failed: Count = Field(0, description="Runs that failed.")
    missed: Count = Field(0, description="Scheduled times that got no Job and no longer can.")
    late: Count = Field(0, description="Runs whose Job was created more than missedRunGraceSeconds late.")
    skipped: Count = Field(0, description="Scheduled times skipped for a stated reason (suspended, Forbid).")
    blacked_out: Count = Field(0, description="Scheduled times inside a blackout: no run started, none was due.")
    duplicates: Count = Field(0, description="Jobs or pods beyond the first for one scheduled time.")
    stuck: Count = Field(0, description="Runs still active after activeDeadlineSeconds.")
    manual: Count = Field(0, description="Runs started by hand (kubectl appschedule run), each with a key of its own.")
    backfilled: Count = Field(
        0, description="Runs of past fires a backfill started (each with its fire's key): not runs, not duplicates."
    )
    caught_up: Count = Field(
        0, description="Of the runs: those the operator started for fires missed within catchUpWindow."
    )
    reruns: Count = Field(
        0, description="Fires run again by hand (kubectl appschedule rerun), with the fire's key: not duplicates."
    )
    absorbed: Count = Field(
        0,
        description="Of the duplicates, those whose claim lost (the claim libraries): they did nothing. The others "
        "did the work again.",
    )
    unclaimed: Count = Field(0, description="Runs that finished without claiming their fire (no claim library).")
    unkeyed: Count = Field(
        0,
        description="Jobs (runs and duplicates) admitted without their idempotency key: the key webhook did not "
        "answer (Event KeyNotInjected).",
    )
    refused: Count = Field(
        0,
        description="Jobs of the task not counted because the scheduled time they state is not the cluster's: not "
        "a time, in the future, or not a fire of the task (Event OddJob); each is let go at once.",
    )


class RunBase(Model):
    """What ``lastRun`` and an entry of ``recent`` both say of a run."""

    key: str = Field(
        max_length=naming.TASK_NAME_MAX + 21,
        pattern=ASCII,
        description="The run's idempotency key, <task>@<scheduled time>.",
    )
    job: str | None = Field(
        None,
        max_length=NAME_MAX,
        pattern=ASCII,
        description="Name of the run's Job (past 63 characters: cut, with a hash).",
    )
    scheduled_time: Time = Field(description="The scheduled time the run belongs to.")
    state: Literal["Active", "Succeeded", "Failed", "Missed", "Unknown"] = Field(
        description="Active, Succeeded or Failed (from the Job's conditions); Missed (no Job, and none can start "
        "any more); Unknown (its Job was deleted unseen)."
    )
    start_time: Time | None = Field(None, description="When its Job was created.")
    finish_time: Time | None = Field(None, description="When its Job finished.")
    delay_seconds: RunCount | None = Field(None, description="Seconds from the scheduled time to the Job's creation.")
    attempts: RunCount | None = Field(None, description="Pods started for the run.")
    failure: str | None = Field(
        None,
        max_length=FAILURE_MAX,
        pattern=ASCII,
        description="Why the run failed: the container's (OOMKilled, exit 3), the pod's (Unschedulable, "
        "ImagePullBackOff, Evicted) or the Job's (DeadlineExceeded, BackoffLimitExceeded).",
    )


class LastRun(RunBase):
    """The task's newest run as ``lastRun`` shows it (DESIGN "Status"), with what its claim came to; its entry in
    ``recent`` has the rest."""

    # a lastRun written before it was this short (with duplicates, reruns, caughtUp, stuck, keyInjected) still
    # reads: the rest of the status is not lost with it
    model_config = ConfigDict(**{**Model.model_config, "extra": "ignore"})

    claim: ClaimState | None = Field(
        None,
        description="What the run's claim came to, as its container reported it (the claim libraries' termination "
        "message): won, taken-over (a claim left by a run that died), lost (another run of its time had claimed "
        "it), none (it finished without claiming: no claim library). Absent while it runs.",
    )


class RunRecord(RunBase):
    """A run (or a miss) of the task's recent history. What its claim came to is in ``lastRun`` for the newest
    run and in ``counts`` (unclaimed, absorbed) for all: the object's budget has no room for it in every entry."""

    duplicates: RunCount | None = Field(None, description="Jobs beyond the first for this scheduled time.")
    reruns: RunCount | None = Field(
        None, description="Times this fire was run again, by hand (kubectl appschedule rerun) or by a backfill."
    )
    caught_up: bool | None = Field(
        None, description="The operator started this run: a fire missed within catchUpWindow."
    )
    stuck: bool | None = Field(None, description="Still active after activeDeadlineSeconds, or stopped for it.")
    key_injected: bool | None = Field(
        None, description="False when the Job was admitted without its key (the webhook did not run)."
    )
    absorbed: RunCount | None = Field(
        None, description="Of the duplicates, those whose claim lost: they did nothing (the claim absorbed them)."
    )


class JobRecord(Model):
    """A Job the ledger has counted, kept while the Job exists (or its time, or the span it was active, is not
    settled) so that no restart counts it again and the fires it blocked stay skipped."""

    name: str = Field(
        max_length=NAME_MAX, pattern=ASCII, description="The Job's name (past 63 characters: cut, with a hash)."
    )
    scheduled_time: Time = Field(description="The scheduled time it belongs to.")
    run: bool | None = Field(None, description="True for the run of its time, absent for a duplicate.")
    finished: bool | None = Field(None, description="Its outcome is counted.")
    stuck: bool | None = Field(None, description="Counted stuck.")
    kind: Literal["manual", "rerun", "backfill", "catch-up"] | None = Field(
        None,
        description="A run asked for (kubectl appschedule run, rerun, backfill: never the run of its time) or "
        "started by the operator for a fire missed within catchUpWindow (catch-up: the run of its time); the "
        "CronJob controller does not see them, so none blocks a fire.",
    )
    not_started: bool | None = Field(None, description="Reported as not started (no pod).")
    active_from: Time | None = Field(None, description="When the Job was created.")
    active_until: Time | None = Field(
        None,
        description="When it finished. Under Forbid the fires between its creation and its end are skipped, "
        "not missed: the record is kept until they are settled, also once the Job is gone.",
    )


class FiledThrough(Model):
    """Where the ledger's count of a task's Jobs has got to, in the order the API server created them: every Job
    created at or before it (by creation, then name) and not in ``jobs`` is counted and needs no record."""

    created: Time = Field(description="The creation time of the last Job counted in order.")
    name: str = Field(max_length=NAME_MAX, pattern=ASCII, description="Its name (as ``jobs`` holds names).")


class Suspension(Model):
    """A span the task's CronJob was suspended: its scheduled times are skipped, not missed."""

    since: Time = Field(description="When the operator suspended the task's CronJob.")
    until: Time | None = Field(None, description="When it resumed it; absent while it is suspended.")


class TaskStatus(Model):
    name: str = Field(max_length=63, pattern=ASCII, description="The task's name.")
    cron_job: str | None = Field(
        None, max_length=63, pattern=ASCII, description="Name of the task's CronJob, when it has one."
    )
    next_run_time: Time | None = Field(None, description="The task's next scheduled time.")
    last_run: LastRun | None = Field(None, description="The task's most recent run (its entry in recent has the rest).")
    last_successful_time: Time | None = Field(None, description="Scheduled time of the last successful run.")
    counts: Counts | None = Field(None, description="Runs counted since the task was first tracked.")
    recent: list[RunRecord] | None = Field(
        None, max_length=RECENT_MAX, description="The last 10 runs and misses, newest first."
    )
    missed_times: list[Time] | None = Field(
        None, max_length=RECENT_MAX, description="The last 10 missed scheduled times."
    )
    schedule: str | None = Field(
        None,
        max_length=UNION_TEXT_MAX,
        pattern=ASCII,
        description="The schedule runs are counted for (its CronJob's; several joined by ' | ').",
    )
    time_zone: str | None = Field(
        None, max_length=64, pattern=ASCII, description="The time zone runs are counted in (its CronJob's)."
    )
    tracking_since: Time | None = Field(
        None, description="Since when runs are counted: the task's schedule and time zone are unchanged since."
    )
    checked_until: Time | None = Field(None, description="Scheduled times up to here are settled and counted.")
    late_since: Time | None = Field(None, description="A scheduled time that has no Job past its grace, reported.")
    jobs: list[JobRecord] | None = Field(
        None,
        max_length=JOBS_MAX,
        description="The ledger's memory of Jobs: those not filed yet, and those whose time or span is not "
        "settled. A Job filed and let go carries the appschedule.dev/filed annotation instead.",
    )
    filed_through: FiledThrough | None = Field(
        None,
        description="Every Job created at or before this one (by creation, then name) and not in jobs is "
        "counted: a backlog of any size is counted in one step, whatever jobs can hold.",
    )
    suspensions: list[Suspension] | None = Field(
        None,
        max_length=SUSPENSIONS_MAX,
        description="Suspended spans whose scheduled times are not all settled yet (the ledger's memory).",
    )
    catch_up: list[Time] | None = Field(
        None,
        max_length=CATCH_UP_MAX,
        description="Fires missed within catchUpWindow that the operator has yet to start, oldest first (at most "
        "10); one still waiting when the window has passed is counted missed.",
    )


class BackfillStatus(Model):
    name: str = Field(max_length=63, pattern=ASCII, description="The backfill's name.")
    task: str = Field(max_length=63, pattern=ASCII, description="Its task.")
    state: Literal["Running", "Complete", "Invalid"] = Field(
        description="Running (fires left or runs active), Complete (every fire ran), or Invalid (see message)."
    )
    fires: Count | None = Field(None, description="Fires in the range.")
    started: Count | None = Field(None, description="Fires that got their run.")
    active: Count | None = Field(None, description="Runs still active.")
    succeeded: Count | None = Field(None, description="Runs that succeeded.")
    failed: Count | None = Field(None, description="Runs that failed.")
    next: Time | None = Field(None, description="The next fire to start.")
    message: str | None = Field(
        None,
        max_length=256,
        pattern=ASCII,
        description="Why it is Invalid, or which fires of its range another backfill runs.",
    )


class AppScheduleStatus(Model):
    observed_generation: int | None = Field(None, description="The spec generation last reconciled.")
    backfills: list[BackfillStatus] | None = Field(
        None,
        max_length=BACKFILLS_MAX,
        description="The progress of each backfill in spec.backfills.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    backfill: str | None = Field(
        None, max_length=64, pattern=ASCII, description="Runs started of the backfills still running, e.g. 4/10."
    )
    conditions: list[Condition] | None = Field(
        None,
        max_length=4,
        description="Ready and RunsHealthy.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    deployment: DeploymentStatus | None = Field(None, description="The Deployment the tasks follow.")
    task_count: Count | None = Field(None, description="Number of tasks in the spec.")
    last_run_time: Time | None = Field(None, description="Latest scheduled time that got a run, across tasks.")
    next_run_time: Time | None = Field(None, description="Earliest next scheduled time across tasks.")
    missed: Count | None = Field(None, description="Missed runs, across tasks.")
    duplicates: Count | None = Field(None, description="Duplicate runs, across tasks.")
    failed: Count | None = Field(None, description="Failed runs, across tasks.")
    tasks: list[TaskStatus] | None = Field(
        None,
        max_length=STATUS_TASKS_MAX,
        description="Per task: its CronJob, next run and run ledger (declared tasks first).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


# ---------------------------------------------------------------------------------------------------
# The CRD

PRINTER_COLUMNS: list[dict[str, Any]] = [
    {"name": "Deployment", "type": "string", "jsonPath": ".spec.deploymentRef.name"},
    {"name": "Tasks", "type": "integer", "jsonPath": ".status.taskCount"},
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Last Run", "type": "date", "jsonPath": ".status.lastRunTime"},
    {"name": "Next Run", "type": "string", "jsonPath": ".status.nextRunTime"},
    {"name": "Missed", "type": "integer", "jsonPath": ".status.missed"},
    {"name": "Duplicates", "type": "integer", "jsonPath": ".status.duplicates"},
    {"name": "Failed", "type": "integer", "jsonPath": ".status.failed"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Image", "type": "string", "jsonPath": ".status.deployment.image", "priority": 1},
    {"name": "Backfill", "type": "string", "jsonPath": ".status.backfill", "priority": 1},
    {"name": "Reason", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].reason', "priority": 1},
    {
        "name": "Healthy",
        "type": "string",
        "priority": 1,
        "jsonPath": '.status.conditions[?(@.type=="RunsHealthy")].status',
    },
]

_KEEP = {
    "type",
    "description",
    "enum",
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
}


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema node as a Kubernetes structural schema node."""
    description = node.get("description")
    extra = {k: v for k, v in node.items() if k.startswith("x-kubernetes-list")}
    if "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        if node.get("x-kubernetes-int-or-string"):
            return {"x-kubernetes-int-or-string": True, **({"description": description} if description else {})}
        if len(options) != 1:
            raise ValueError(f"no structural form for {node}")
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        return _structural({**rest, **options[0], **({"description": description} if description else {})}, defs)
    if "const" in node:
        node = {**node, "enum": [node["const"]]}
    out = {k: v for k, v in node.items() if k in _KEEP}
    if description:
        out["description"] = " ".join(description.split())
    out.update(extra)
    if node.get("type") == "object" or "properties" in node:
        out["type"] = "object"
        if "properties" in node:
            out["properties"] = {k: _structural(v, defs) for k, v in node["properties"].items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        additional = node.get("additionalProperties")
        if isinstance(additional, dict):
            out["additionalProperties"] = _structural(additional, defs)
    if node.get("type") == "array":
        out["items"] = _structural(node["items"], defs)
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.pop("anyOf", None)
    return out


def _schema_of(model: type[BaseModel], description: str) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True)
    found = _structural(raw, raw.get("$defs", {}))
    found["description"] = description
    return found


def _object_schema(kind: str, description: str, **parts: dict[str, Any]) -> dict[str, Any]:
    """A kind's openAPIV3Schema: the object's own fields, then ``parts`` (spec, status)."""
    return {
        "type": "object",
        "description": description,
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string", "description": "Versioned schema of this object."},
            "kind": {"type": "string", "description": f"{kind}."},
            "metadata": {"type": "object"},
            **parts,
        },
    }


def openapi_schema() -> dict[str, Any]:
    return _object_schema(
        naming.KIND,
        "An app's scheduled tasks, run as CronJobs with the app's Deployment image; every run gets an idempotency "
        "key, and missed, duplicate, failed and stuck runs are reported.",
        spec=_schema_of(AppScheduleSpec, "What the app runs on a schedule: its Deployment and its tasks."),
        status=_schema_of(
            AppScheduleStatus, "What the operator observed: CronJobs, next runs, and the ledger of runs."
        ),
    )


class CalendarSpec(Model):
    """An AppScheduleCalendar: blackouts kept in one place for the AppSchedules of its namespace that name it."""

    blackouts: Blackouts = Field(
        None,
        max_length=CALENDAR_BLACKOUTS_MAX,
        description="Spans in which no run of a task of an AppSchedule naming this calendar starts (at most 64), "
        "each in that task's zone: whole days, a range of days or a weekly window, as spec.blackouts.",
    )


def _crd(kind: str, plural: str, names: dict[str, Any], version: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{naming.GROUP}", "labels": {"app.kubernetes.io/name": "appschedule-operator"}},
        "spec": {
            "group": naming.GROUP,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, **names},
            "versions": [{"name": naming.VERSION, "served": True, "storage": True, **version}],
        },
    }


def calendar_crd() -> dict[str, Any]:
    """The CustomResourceDefinition of AppScheduleCalendar."""
    schema = _object_schema(
        naming.CALENDAR_KIND,
        "Blackouts shared by the AppSchedules of a namespace: holidays, shutdowns, maintenance nights.",
        spec=_schema_of(CalendarSpec, "The blackouts the AppSchedules naming this calendar (spec.calendars) share."),
    )
    # no category: `kubectl get appschedule NAME` must stay one resource
    names = {"singular": "appschedulecalendar", "shortNames": ["ascal"]}
    return _crd(naming.CALENDAR_KIND, naming.CALENDAR_PLURAL, names, {"schema": {"openAPIV3Schema": schema}})


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition of AppSchedule."""
    names = {"singular": "appschedule", "shortNames": ["asched"], "categories": ["appschedule"]}
    version = {
        "schema": {"openAPIV3Schema": openapi_schema()},
        "subresources": {"status": {}},
        "additionalPrinterColumns": PRINTER_COLUMNS,
    }
    return _crd(naming.KIND, naming.PLURAL, names, version)
