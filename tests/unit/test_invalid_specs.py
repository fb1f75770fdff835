"""The corpus of invalid AppSchedules (tests/data/invalid-appschedules.yaml), offline: each is refused by
the operator's own validation (what the webhook answers and the Ready condition says) naming its field,
except the few only the API server's schema refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from appschedule.core import admission, render

CORPUS = Path(__file__).resolve().parents[1] / "data" / "invalid-appschedules.yaml"


def corpus() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(CORPUS.read_text()) if d]


def test_the_corpus_is_large_and_each_case_is_named() -> None:
    docs = corpus()
    names = [d["metadata"]["name"] for d in docs]
    assert len(docs) >= 50 and len(set(names)) == len(names)
    assert all(d["metadata"]["annotations"]["test.appschedule.dev/field"].startswith("spec") for d in docs)


def test_each_is_refused_naming_its_field() -> None:
    for doc in corpus():
        annotations = doc["metadata"]["annotations"]
        message = admission.check_appschedule(doc)
        if annotations.get("test.appschedule.dev/refused-by") == "api-server":
            continue
        assert message and annotations["test.appschedule.dev/field"] in message, (doc["metadata"]["name"], message)


def test_sizes_beyond_the_bounds_are_refused_at_the_spec() -> None:
    task: dict[str, Any] = {"name": "t", "schedule": "* * * * *", "command": ["sh", "-c", "x" * 60000]}
    task["args"] = ["y" * 60000] * 18  # about 1 MiB
    huge = {"deploymentRef": {"name": "web"}, "tasks": [task]}
    parsed = render.parse_spec(huge)
    assert parsed.spec is None and [str(e) for e in parsed.errors] == [
        "spec: 1113 KiB; an AppSchedule's spec may be at most 144 KiB"
    ]
    tasks = [{"name": f"t{i}", "schedule": "* * * * *", "command": ["true"]} for i in range(1000)]
    many = {"deploymentRef": {"name": "web"}, "tasks": tasks}
    (error,) = render.parse_spec(many).errors
    assert error.field == "spec.tasks" and "100" in error.message
