"""The status always fits: every string and list of it has a bound in models.py, and the largest status
those bounds allow (every task, every list full, every string at its maximum, every number at its
longest) serializes within STATUS_BYTES_MAX, well under etcd's 1.5 MiB request limit."""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal

from annotated_types import MaxLen
from pydantic import BaseModel

from appschedule.core.models import ASCII, STATUS_BYTES_MAX, STATUS_TASKS_MAX, AppScheduleStatus


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
        return [largest(item, [], f"{where}[]") for _ in range(bound)]
    if origin is Literal:
        return max(typing.get_args(annotation), key=len)
    if annotation is str:
        assert bound is not None, f"{where}: a string without a bound (max_length)"
        ascii_only = any(getattr(m, "pattern", None) == ASCII for m in flat) or any(
            (getattr(m, "json_schema_extra", None) or {}).get("format") == "date-time" for m in flat
        )
        return "x" * bound if ascii_only else "\U0001f600" * bound  # else 4 bytes a character in UTF-8
    if annotation is bool:
        return False
    if annotation is int:
        return -(2**63)
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
