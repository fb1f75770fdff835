"""Worlds for tests and benchmarks: the World a reconcile of an AppSchedule would read, built from whole
objects through the operator's own store, as its watches build it (so the core's tests build what the shell
would hand the core, without importing the shell themselves)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from appschedule.core.view import (
    World,
    project_appschedule,
    project_calendar,
    project_cronjob,
    project_deployment,
    project_job,
)
from appschedule.shell.store import Store


def world_of(
    appschedule: Mapping[str, Any],
    deployment: Mapping[str, Any] | None,
    cronjobs: Sequence[Mapping[str, Any]] = (),
    siblings: Sequence[Mapping[str, Any]] = (),
    jobs: Sequence[Mapping[str, Any]] = (),
    calendars: Sequence[Mapping[str, Any]] = (),
) -> World:
    """The World a reconcile of ``appschedule`` would read, built from whole objects as the watches
    build the view (for tests, benchmarks and offline use)."""
    state = Store()
    for obj in [*siblings, appschedule]:
        state.put_appschedule(project_appschedule(obj))
    if deployment is not None:
        state.put_deployment(project_deployment(deployment))
    for cronjob in cronjobs:
        state.put_cronjob(project_cronjob(cronjob))
    for job in jobs:
        state.put_job(project_job(job))
    for calendar in calendars:
        state.put_calendar(project_calendar(calendar))
    state.prune()
    view = project_appschedule(appschedule)
    if deployment is None:
        state.drop_deployment(view.namespace, view.deployment)
    built = state.world(view.key)
    if not isinstance(built, World):
        raise ValueError(f"no world for {view.key}: the Deployment is not {view.deployment!r}, or it is being deleted")
    return built
