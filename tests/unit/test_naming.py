"""Names: within 52 characters, stable, never colliding; task-name validation."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from appschedule.core import naming

label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)


def test_short_names_are_plain() -> None:
    assert naming.cronjob_name("shop", "weekly-report") == "shop-weekly-report"


def test_52_characters_is_kept_and_53_is_cut_with_a_hash() -> None:
    fifty_two = naming.cronjob_name("a" * 20, "b" * 31)
    assert fifty_two == "a" * 20 + "-" + "b" * 31 and len(fifty_two) == 52
    fifty_three = naming.cronjob_name("a" * 20, "b" * 32)
    assert len(fifty_three) == 52
    assert fifty_three.startswith("a" * 20 + "-" + "b" * 22)
    assert fifty_three != naming.cronjob_name("a" * 20, "b" * 33)


def test_cut_never_ends_in_a_double_hyphen() -> None:
    name = naming.cronjob_name("x" * 42, "y" * 20)  # the cut falls right after the separator
    assert "--" not in name and naming.DNS_LABEL.match(name)


@given(label, label, label)
def test_names_are_valid_stable_and_distinct(appschedule: str, task: str, other: str) -> None:
    name = naming.cronjob_name(appschedule, task)
    assert len(name) <= naming.CRONJOB_NAME_MAX
    assert naming.DNS_LABEL.match(name)
    assert name == naming.cronjob_name(appschedule, task)
    if other != task:
        assert naming.cronjob_name(appschedule, other) != name


def test_fifty_tasks_get_fifty_names() -> None:
    names = {naming.cronjob_name("a-rather-long-appschedule-name-for-a-shop", f"task-{i:02d}-long") for i in range(50)}
    assert len(names) == 50


def test_task_name_validation() -> None:
    assert naming.task_name_error("weekly-report") is None
    assert naming.task_name_error("a" * 63) is None
    assert "63" in str(naming.task_name_error("a" * 64))
    assert naming.task_name_error("") == "must not be empty"
    for bad in ["Weekly", "-x", "x-", "a_b", "wöchentlich", "a.b", "报告"]:
        assert naming.task_name_error(bad), bad


def test_labels() -> None:
    assert naming.labels("shop", "sync") == {
        "app.kubernetes.io/managed-by": "appschedule-operator",
        "appschedule.dev/appschedule": "shop",
        "appschedule.dev/task": "sync",
    }


def test_a_cut_never_ends_in_a_dot() -> None:
    name = naming.cronjob_name("a" * 41 + ".b", "report")
    assert not name[: -naming.HASH_LENGTH - 1].endswith((".", "-"))
