"""The status always fits: every string and list of it has a bound in models.py, and the largest status
those bounds allow (every task, every list full, every string at its maximum, every number at its
longest) serializes within STATUS_BYTES_MAX, well under etcd's 1.5 MiB request limit."""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal

from annotated_types import Le, MaxLen
from pydantic import BaseModel

from appschedule.core.models import (
    ANNOTATIONS_BYTES_MAX,
    ASCII,
    MANAGED_FIELDS_BYTES_MAX,
    METADATA_BYTES_MAX,
    OBJECT_BYTES_MAX,
    SPEC_BYTES_MAX,
    SPEC_FIELDS_BYTES_MAX,
    SPEC_MAP_LISTS,
    STATUS_BYTES_MAX,
    STATUS_FIELDS_BYTES_MAX,
    STATUS_MAP_LISTS,
    STATUS_TASKS_MAX,
    AppScheduleStatus,
    fields_bytes,
)
from appschedule.core.render import parse_spec


def largest(annotation: Any, metadata: list[Any], where: str) -> Any:
    """The largest value of a field the schema allows; fails naming a string or list without a bound."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        return largest(inner, [*metadata, *extra, *(getattr(e, "metadata", []) for e in extra)], where)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return largest(inner, metadata, where)
    flat = [m for item in metadata for m in (item if isinstance(item, list) else [item])]
    bound = next((m.max_length for m in flat if isinstance(m, MaxLen)), None)
    if origin is list:
        assert bound is not None, f"{where}: a list without a bound (max_length)"
        (item,) = typing.get_args(annotation)
        items = [largest(item, [], f"{where}[]") for _ in range(bound)]
        extras = [m.json_schema_extra for m in flat if isinstance(getattr(m, "json_schema_extra", None), dict)]
        listed: dict[str, Any] = extras[0] if extras else {}
        for key in listed.get("x-kubernetes-list-map-keys") or []:  # a map list: its items' keys differ
            for index, entry in enumerate(items):
                entry[key] = f"{index:03d}{entry[key][3:]}"
        return items
    if origin is Literal:
        return max(typing.get_args(annotation), key=len)
    if annotation is str:
        assert bound is not None, f"{where}: a string without a bound (max_length)"
        ascii_only = any(getattr(m, "pattern", None) == ASCII for m in flat) or any(
            (getattr(m, "json_schema_extra", None) or {}).get("format") == "date-time" for m in flat
        )
        if any((getattr(m, "json_schema_extra", None) or {}).get("format") == "date-time" for m in flat):
            if bound < 25:  # the status' times: UTC, "Z"
                return "2026-03-29T01:00:00Z"[:bound]
            return "2026-03-29T01:00:00+01:00"[:bound].rjust(bound, "0")  # a time the API server takes
        return "x" * bound if ascii_only else "\U0001f600" * bound  # else 4 bytes a character in UTF-8
    if annotation is bool:
        return False
    if annotation is int:  # the longest the bounds allow: a negative 64-bit number, or the upper bound
        upper = next((m.le for m in flat if isinstance(m, Le)), None)
        return upper if upper is not None and next((m for m in flat if getattr(m, "ge", None) == 0), None) else -(2**63)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {
            info.alias or name: largest(info.annotation, [info, *info.metadata], f"{where}.{name}")
            for name, info in annotation.model_fields.items()
        }
    raise AssertionError(f"{where}: no largest value for {annotation!r}")


def test_the_largest_status_the_schema_allows_fits() -> None:
    worst = largest(AppScheduleStatus, [], "status")
    assert len(worst["tasks"]) == STATUS_TASKS_MAX
    AppScheduleStatus.model_validate(worst)  # it is a status the schema allows
    size = len(json.dumps({"status": worst}, ensure_ascii=False, separators=(",", ":")).encode())
    print(f"largest status: {size:,} bytes of {STATUS_BYTES_MAX:,}")
    assert size <= STATUS_BYTES_MAX


def test_the_parts_of_the_object_add_up_to_etcds_limit() -> None:
    shares = SPEC_BYTES_MAX + ANNOTATIONS_BYTES_MAX + MANAGED_FIELDS_BYTES_MAX + METADATA_BYTES_MAX + STATUS_BYTES_MAX
    assert shares == OBJECT_BYTES_MAX == 1_572_864


def test_the_largest_status_sets_fields_within_its_share_of_managed_fields() -> None:
    worst = largest(AppScheduleStatus, [], "status")
    assert fields_bytes(worst, STATUS_MAP_LISTS) <= STATUS_FIELDS_BYTES_MAX


def large_task(index: int, labels: int = 8) -> dict[str, Any]:
    """A task with every setting set: what a big real spec looks like, per task."""
    name = f"task-{index:03d}-" + "x" * 30
    return {
        "name": name,
        "schedule": "*/5 9-17 * * MON-FRI",
        "timeZone": "Europe/Berlin",
        "command": ["node", "dist/tasks/run.js"],
        "args": ["--task", name, "--batch-size", "500"],
        "env": [{"name": f"VAR_{i}", "value": "v" * 40} for i in range(5)],
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "256Mi"}},
        "podLabels": {f"team.example.com/l{i}": "value" for i in range(labels)},
        "podAnnotations": {f"example.com/a{i}": "value" for i in range(labels)},
        "suspend": False,
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 300,
        "activeDeadlineSeconds": 3600,
        "backoffLimit": 2,
        "missedRunGraceSeconds": 120,
        "successfulJobsHistoryLimit": 3,
        "failedJobsHistoryLimit": 3,
        "catchUpWindow": "1h",
    }


def test_a_spec_of_a_hundred_tasks_with_every_setting_fits_and_one_made_of_map_keys_is_refused() -> None:
    """The spec's shares: its bytes and the field paths it sets (its managedFields). A spec that sets more
    fields than its share (thousands of label keys) is refused naming what to cut, before it can make the
    object larger than etcd takes."""
    spec = {"deploymentRef": {"name": "web"}, "tasks": [large_task(i) for i in range(STATUS_TASKS_MAX)]}
    assert parse_spec(spec).errors == []
    assert fields_bytes(spec, SPEC_MAP_LISTS) <= SPEC_FIELDS_BYTES_MAX
    keys: dict[str, Any] = {"deploymentRef": {"name": "web"}, "tasks": []}
    for i in range(STATUS_TASKS_MAX):  # short keys, empty values: more bytes of field paths than of spec
        labels = {f"l{j}": "" for j in range(100)}
        keys["tasks"].append({"name": f"t{i}", "schedule": "@daily", "command": ["x"], "podLabels": labels})
    assert len(json.dumps(keys, separators=(",", ":"))) <= SPEC_BYTES_MAX
    (error,) = parse_spec(keys).errors
    assert error.field == "spec" and "podLabels" in error.message and "managedFields" in error.message
