"""Property tests (hypothesis): rendering and validation take any input without raising, and the ledger
keeps its invariants on random Job histories (every settled time is a run or a miss, never both, nothing
counted twice, restarts and repeated steps change nothing)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appschedule.core import admission, naming, render
from appschedule.core.keys import rfc3339
from appschedule.core.ledger import ACTIVE_MAX, TaskConfig
from appschedule.core.models import JOBS_MAX, TaskStatus
from appschedule.core.schedule import next_fire
from appschedule.core.view import JobOutcome, JobView

from .test_ledger import CRONJOB, T0, config, job, start, step

VALID_TASK: dict[str, Any] = {"name": "report", "schedule": "*/5 * * * *", "command": ["node", "report.js"]}
DEPLOYMENT = {
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "web:1"}]},
        },
    },
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "name",
    "schedule",
    "command",
    "args",
    "timeZone",
    "suspend",
    "concurrencyPolicy",
    "env",
    "resources",
    "podLabels",
    "podAnnotations",
    "startingDeadlineSeconds",
    "activeDeadlineSeconds",
    "backoffLimit",
]


@st.composite
def specs(draw: st.DrawFn) -> Any:
    """Anything at all, or a valid spec with random values put at known and unknown places."""
    if draw(st.booleans()):
        return draw(json_values)
    tasks = [dict(VALID_TASK, name=f"t{i}") for i in range(draw(st.integers(0, 3)))]
    for task in tasks:
        for key in draw(st.lists(st.sampled_from(FIELDS) | st.text(max_size=8), max_size=3)):
            task[key] = draw(json_values)
    reference: dict[str, Any] = draw(st.sampled_from([{"name": "web"}, {"name": "web", "container": "x"}]))
    if draw(st.booleans()):
        reference = {**reference, "extra": draw(json_values)}
    spec: dict[str, Any] = {"deploymentRef": reference, "tasks": tasks}
    for key in draw(st.lists(st.sampled_from(["timeZone", "suspend", "defaults", "tasks"]), max_size=2)):
        spec[key] = draw(json_values)
    return spec


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=specs())
def test_render_and_validation_take_any_input(spec: Any) -> None:
    appschedule = {
        "apiVersion": "appschedule.dev/v1alpha1",
        "kind": "AppSchedule",
        "metadata": {"name": "shop", "namespace": "shop", "uid": "u"},
        "spec": spec,
    }
    result = render.render(appschedule, DEPLOYMENT)
    message = admission.check_appschedule(appschedule)
    if message:  # what the spec alone decides is refused is also an error of rendering it
        assert result.errors
    for error in result.errors:
        assert error.field.startswith("spec"), error
    for name, cronjob in result.cronjobs.items():
        assert cronjob["metadata"]["namespace"] == "shop" and len(name) <= 52
        json.dumps(cronjob)  # a manifest the API accepts as JSON


OUTCOMES: list[JobOutcome | None] = [None, "Complete", "Complete", "Failed"]


@st.composite
def histories(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, int, JobOutcome | None]]]:
    """Minutes of ``* * * * *`` from T0; per fire, 0 to 2 Jobs (delay in seconds before the next fire, outcome)."""
    minutes = draw(st.integers(1, 20))
    jobs = []
    for minute in range(minutes):
        for copy in range(draw(st.sampled_from([0, 1, 1, 1, 2]))):
            outcome = draw(st.sampled_from(OUTCOMES))
            jobs.append((minute, copy, draw(st.integers(0, 40)), outcome))
    return minutes, jobs


def filed(view: JobView) -> JobView:
    """A Job after the controller released it (api.release_job): no finalizer, marked filed."""
    return dataclasses.replace(view, finalizer=False, annotations={**view.annotations, naming.ANNOTATION_FILED: "true"})


@settings(max_examples=150, deadline=None)
@given(history=histories(), steps=st.lists(st.integers(0, 25 * 60), max_size=12))
def test_the_ledger_counts_every_settled_time_once(
    history: tuple[int, list[tuple[int, int, int, JobOutcome | None]]], steps: list[int]
) -> None:
    """Exact once the Jobs have been seen: also with more Jobs than the status remembers (JOBS_MAX), which
    then wait their turn, uncounted, never missed and never counted twice, as the controller files others."""
    minutes, planned = history
    cfg = config(concurrency="Allow", starting_deadline=None)
    views = [
        job(
            T0 + timedelta(minutes=m),
            created=T0 + timedelta(minutes=m, seconds=delay),
            name=f"{CRONJOB}-{m}-{copy}",
            outcome=outcome,
        )
        for m, copy, delay, outcome in planned
    ]
    status = start(cfg)
    previous: dict[str, int] = {}
    released: set[str] = set()
    final = T0 + timedelta(minutes=minutes + 3)
    drain = [final] * 24  # once everything is visible: a reconcile per Job the controller files
    for now in [*sorted(T0 + timedelta(seconds=s) for s in steps if s < (minutes + 3) * 60), *drain]:
        visible = [
            filed(v) if v.name in released else v
            for v, p in zip(views, planned, strict=True)
            if T0 + timedelta(minutes=p[0], seconds=p[2]) <= now
        ]
        status = TaskStatus.model_validate(json.loads(json.dumps(status.model_dump(by_alias=True))))  # a restart
        status, result = step(status, cfg, visible, now)
        released |= set(result.release)
        assert len(status.jobs or []) <= JOBS_MAX
        assert status.counts is not None
        current = status.counts.model_dump()
        assert all(current[k] >= v for k, v in previous.items()), (previous, current)  # never taken back
        previous = current
    visible = [filed(v) if v.name in released else v for v in views]
    again, _ = step(status, cfg, visible, final)
    assert again.counts == status.counts  # the same world twice changes nothing

    assert status.counts is not None and status.checked_until is not None
    settled = [m for m in range(minutes + 3) if rfc3339(T0 + timedelta(minutes=m)) <= status.checked_until]
    with_job = {m for m, *_ in planned}
    copies = {m: sum(1 for p in planned if p[0] == m) for m in with_job}
    assert status.counts.missed == sum(1 for m in settled if m not in with_job)  # a waiting Job is no miss
    runs = sum(1 for m in settled if m in with_job)
    duplicates = sum(copies[m] - 1 for m in settled if m in with_job)
    waiting = max(0, sum(1 for p in planned if p[3] is None) - ACTIVE_MAX)  # active beyond the status' memory
    if waiting == 0:
        assert status.counts.runs == runs
        assert status.counts.duplicates == duplicates
    else:  # the Jobs beyond JOBS_MAX that never end wait, uncounted; never counted twice
        assert runs - waiting <= status.counts.runs + status.counts.duplicates - duplicates <= runs
    missed = set(status.missed_times or [])
    ran = {r.scheduled_time for r in status.recent or [] if r.state != "Missed"}
    assert not missed & ran


BERLIN_CHANGES = [datetime(2026, 3, 29, 0, 0, tzinfo=UTC), datetime(2026, 10, 25, 0, 0, tzinfo=UTC)]  # 01:00 UTC each


@st.composite
def dst_histories(draw: st.DrawFn) -> tuple[TaskConfig, datetime, list[JobView], list[datetime]]:
    """A task in Berlin over one of its clock changes (several fires an hour, one in the repeated or skipped hour, or a
    daily one at 02:30), its Jobs (on time, late, a second copy, running, failed, deleted while held) and the times
    it is stepped at."""
    change = draw(st.sampled_from(BERLIN_CHANGES))
    expression = draw(st.sampled_from(["*/20 * * * *", "30 2 * * *", "0,30 1-3 * * *", "* * * * *"]))
    cfg = config(
        expression,
        "Europe/Berlin",
        concurrency=draw(st.sampled_from(["Allow", "Forbid", "Replace"])),
        starting_deadline=draw(st.sampled_from([None, 60, 600])),
        grace=draw(st.sampled_from([0, 120])),
    )
    fires: list[datetime] = []
    moment = change - timedelta(hours=2)
    while len(fires) < 12:
        found = next_fire(cfg.schedule, moment)
        if found is None or found > change + timedelta(days=2):
            break
        fires.append(found)
        moment = found
    views = []
    for index, fire in enumerate(fires):
        for copy in range(draw(st.sampled_from([0, 1, 1, 2]))):
            delay = draw(st.sampled_from([1, 5, 90, 400]))
            views.append(
                job(
                    fire,
                    created=fire + timedelta(seconds=delay),
                    name=f"{CRONJOB}-{index}-{copy}",
                    outcome=draw(st.sampled_from(OUTCOMES)),
                    deleting=draw(st.booleans()),
                )
            )
    last = fires[-1] if fires else change + timedelta(hours=4)
    span = int((last - change).total_seconds()) + 4 * 3600
    times = sorted(
        change - timedelta(hours=2) + timedelta(seconds=s) for s in draw(st.lists(st.integers(0, span), max_size=8))
    )
    return cfg, change - timedelta(hours=2, seconds=30), views, times


@settings(max_examples=200, deadline=None)
@given(history=dst_histories())
def test_a_quiet_step_stands_until_it_wakes_on_the_days_the_clocks_change(
    history: tuple[TaskConfig, datetime, list[JobView], list[datetime]],
) -> None:
    """The promise reconcile.Quiets relies on (every step goes through test_ledger.step, which checks it at later
    times), on the two days Berlin changes its clocks, the Jobs appearing as they are created."""
    cfg, begin, views, times = history
    status = start(cfg, begin)
    for now in times:
        visible = [v for v in views if v.created <= rfc3339(now)]
        status, _ = step(status, cfg, visible, now)
