"""Which of an AppSchedule's tasks it may run (DESIGN "Task ownership"), from facts about its namespace.

A task name is unique within a namespace; two CronJobs for one task would run it twice. So:

* a task that already runs (a CronJob for it exists in the namespace) stays with the AppSchedule whose
  CronJob it is (were there two, the older AppSchedule's stays), also while that CronJob waits for
  garbage collection after its AppSchedule was deleted: taking it over before the old CronJob is gone
  would let one fire run twice;
* a task nobody runs goes to the oldest AppSchedule (by creationTimestamp, then name) that declares
  it *validly*: an invalid declaration (a typo in a schedule) claims nothing;
* a CronJob name is one per namespace too (``shop-weekly`` + ``report`` and ``shop`` +
  ``weekly-report`` are both ``shop-weekly-report``): the older AppSchedule keeps it.

The others report ``TaskConflict`` for the task and get no CronJob for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import naming
from .render import SpecError
from .view import Claimant, Holder, World


def _senior(claimants: Sequence[Claimant], seniority: tuple[str, str]) -> Claimant | None:
    """The oldest of the claimants older than ``seniority`` (creationTimestamp, then name), if any."""
    older = [c for c in claimants if c.seniority < seniority]
    return min(older, key=lambda c: c.seniority) if older else None


def senior_claimants(world: World) -> dict[str, str]:
    """Task -> the oldest AppSchedule older than this one that declares it validly (for the tasks this one
    declares validly)."""
    view = world.appschedule
    found = {task: _senior(others, view.seniority) for task, others in world.declaring.items() if task in view.valid}
    return {task: claim.appschedule for task, claim in found.items() if claim is not None}


def name_claimants(world: World) -> dict[str, Holder]:
    """CronJob name -> the oldest AppSchedule older than this one whose CronJob for one of its tasks has it."""
    view = world.appschedule
    found = {name: _senior(others, view.seniority) for name, others in world.sharing_names.items()}
    return {name: Holder(claim.appschedule, claim.task) for name, claim in found.items() if claim is not None}


def conflicts(world: World, tasks: Mapping[str, int]) -> dict[str, SpecError]:
    """For each task (name -> index in spec.tasks) this AppSchedule may not run, why."""
    view = world.appschedule
    senior, named = senior_claimants(world), name_claimants(world)
    found: dict[str, SpecError] = {}
    for task, index in tasks.items():
        cronjob = naming.cronjob_name(view.name, task)
        mine = cronjob in world.cronjobs and world.cronjobs[cronjob].ours(view)
        where = f"spec.tasks[{index}].name"
        holder = world.held_elsewhere.get(task)
        part = next((n for n in view.task_cronjobs(task)[1:] if n in named), None)
        runs_as = f"CronJob {holder.name!r} of AppSchedule {holder.appschedule!r}" if holder else ""
        if mine and task in world.held_elsewhere and task in senior:
            # two CronJobs for one task (made before this rule): the older AppSchedule keeps its own
            why = (
                f"also runs as {runs_as}; AppSchedule {senior[task]!r} is "
                "older and keeps the task, so this AppSchedule's CronJob for it is removed"
            )
        elif part is not None:
            claim = named[part]
            why = (
                f"the CronJob name {part!r}, for one of its schedules, is also that of AppSchedule "
                f"{claim.appschedule!r} (task {claim.name!r}); the older one keeps it"
            )
        elif mine:
            continue
        elif task in world.held_elsewhere:
            why = f"already runs as {runs_as}; no CronJob of this AppSchedule while that exists"
        elif task in senior:
            why = (
                f"already declared by AppSchedule {senior[task]!r} in this namespace "
                "(the older one keeps it); this AppSchedule gets no CronJob for it"
            )
        elif cronjob in named:
            claim = named[cronjob]
            why = (
                f"its CronJob name {cronjob!r} is also that of AppSchedule {claim.appschedule!r} "
                f"(task {claim.name!r}); "
                "the older one keeps it"
            )
        else:
            continue
        found[task] = SpecError(where, why, task=task, reason="TaskConflict")
    return found
