"""A plan that reuses the rendering of its AppSchedule (reconcile._Rendering, kept in reconcile.Quiets: the CronJobs
rendered, stamped and found in sync) plans exactly what one that renders anew does, while everything render reads
or the sync check compares changes under it: the Deployment rolled out, a CronJob edited, unlabelled and deleted by
hand, the spec's schedule changed, a blackout added in the hour that comes twice. Berlin's autumn night, planned
every 13 seconds, the CronJobs applied and the status written back as the shell would."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from appschedule.core import keys
from appschedule.core.reconcile import Quiets, plan
from tests.kit.worlds import world_of
from tests.unit import test_quiets as night

START = night.NIGHTS[1]  # 2026-10-25: 02:00 to 03:00 in Berlin comes twice


def spec_at(offset: timedelta) -> dict[str, Any]:
    """The AppSchedule's spec as its author edits it through the night."""
    spec: dict[str, Any] = copy.deepcopy(night.appschedule({})["spec"])
    if offset >= timedelta(minutes=15):  # 02:40 to 02:50 in Berlin, in the hour that comes twice tonight
        spec["blackouts"] = [{"name": "quiet", "weekly": {"days": ["SUN"], "from": "02:40", "to": "02:50"}}]
    if offset >= timedelta(minutes=65):
        spec["tasks"][1]["schedule"] = "*/30 * * * *"
    return spec


def appschedule_at(offset: timedelta, status: dict[str, Any]) -> dict[str, Any]:
    body = night.appschedule(status)
    body["spec"] = spec_at(offset)
    body["metadata"]["generation"] = 1 + (offset >= timedelta(minutes=15)) + (offset >= timedelta(minutes=65))
    return body


def by_hand(cronjobs: dict[str, dict[str, Any]], offset: timedelta, done: set[str]) -> None:
    """What someone does to the CronJobs: each edit once, at its time."""
    edits: list[tuple[timedelta, str, Callable[[dict[str, dict[str, Any]]], object]]] = [
        (timedelta(minutes=35), "schedule", lambda c: c["shop-beat"]["spec"].update(schedule="*/5 * * * *")),
        (timedelta(minutes=55), "label", lambda c: c["shop-sweep"]["metadata"]["labels"].popitem()),
        (timedelta(minutes=95), "delete", lambda c: c.pop("shop-nightly")),
    ]
    for at, name, edit in edits:
        if offset >= at and name not in done:
            edit(cronjobs)
            done.add(name)


def test_a_plan_reusing_its_rendering_is_the_plan_that_renders_anew(deployment: dict[str, Any]) -> None:
    end, deployment, fires, _, _ = night.night(deployment, START)
    cronjobs: dict[str, dict[str, Any]] = {}
    status: dict[str, Any] = {}
    quiets, released, edited = Quiets(), set[str](), set[str]()
    now, steps, applied = START, 0, 0
    while now < end:
        offset = now - START
        if offset >= timedelta(minutes=20):  # a rollout
            deployment = copy.deepcopy(deployment)
            deployment["spec"]["template"]["spec"]["containers"][0]["image"] = "registry/app:2"
        by_hand(cronjobs, offset, edited)
        jobs = [j for n, times in fires.items() for f in times if (j := night.job(n, f, now, released)) is not None]
        world = world_of(appschedule_at(offset, status), deployment, list(cronjobs.values()), jobs=jobs)
        reused, anew = plan(world, now, quiets=quiets), plan(world, now)
        assert night.done(reused) == night.done(anew), now
        for manifest in anew.apply:  # as the API server holds it: applied over what was there
            name = manifest["metadata"]["name"]
            made = {"uid": f"cj-{name}", "creationTimestamp": keys.rfc3339(now)}
            cronjobs[name] = copy.deepcopy({**manifest, "metadata": {**manifest["metadata"], **made}})
            applied += 1
        for name in anew.delete:
            cronjobs.pop(name, None)
        if anew.status_changed:
            status = anew.status
            released |= set(anew.release)
        steps += 1
        now += timedelta(seconds=13)
    # every change above was applied, once: the three CronJobs made, the blackout added to the spec, the rollout,
    # the CronJob edited by hand, the blackout's two spans (00:40 and 01:40 UTC) each starting and ending, the
    # CronJob unlabelled, the spec's schedule, the CronJob deleted
    assert steps > 550 and applied == 3 + 3 + 3 + 1 + 2 * (3 + 3) + 1 + 1 + 1
    assert quiets.renderings_reused > steps / 2  # and most plans reused the rendering


def test_the_renderings_kept_stay_within_their_bound(deployment: dict[str, Any]) -> None:
    """Those of at most ``size`` tasks (about 8 KiB each), whatever the number of AppSchedules: the least recently
    planned go first."""
    quiets = Quiets(size=7)
    _, deployment, _, _, _ = night.night(deployment, START)
    for name in ("a", "b", "c", "b"):  # three tasks each: a goes when c comes, and b was planned again
        body = night.appschedule({})
        body["metadata"]["name"] = name
        plan(world_of(body, deployment), START, quiets=quiets)
    assert quiets.rendering(("shop", "a")) is None
    assert quiets.rendering(("shop", "c")) is not None and quiets.rendering(("shop", "b")) is not None
    body = night.appschedule({})
    body["metadata"]["name"] = "d"
    plan(world_of(body, deployment), START, quiets=quiets)
    assert quiets.rendering(("shop", "c")) is None  # the least recent: b was looked up after it


def test_renderings_of_invalid_specs_count_in_the_bound(deployment: dict[str, Any]) -> None:
    """A rendering with no CronJob (its container does not exist) still keeps its inputs: it counts as one."""
    quiets = Quiets(size=8)
    _, deployment, _, _, _ = night.night(deployment, START)
    for i in range(40):
        body = night.appschedule({})
        body["metadata"]["name"] = f"s{i}"
        body["spec"]["deploymentRef"]["container"] = "nope"
        plan(world_of(body, deployment), START, quiets=quiets)
    assert sum(quiets.rendering(("shop", f"s{i}")) is not None for i in range(40)) == 8


def _containers(value: Any) -> list[Any]:
    """Every dict and list inside ``value``, itself included."""
    found: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(item)
            stack.extend(item)
    return found


def test_a_plans_manifests_share_nothing_with_the_views(deployment: dict[str, Any]) -> None:
    """The shell may hand a plan's manifests on, and plans reuse them: no dict or list in them is one of the views'
    (the Deployment's template with its securityContext, envFrom, volumeMounts, resources, volumes; the spec)."""
    _, deployment, _, _, _ = night.night(deployment, START)
    quiets = Quiets()
    world = world_of(night.appschedule({}), deployment)
    for _ in range(2):  # rendered, then kept
        decided = plan(world, START, quiets=quiets)
        assert world.deployment is not None
        made = {id(c) for c in _containers(decided.apply) + _containers(decided.create)}
        views = [world.deployment.template, world.deployment.selector, world.appschedule.spec, world.appschedule.status]
        held = {id(c) for view in views for c in _containers(view)}
        assert len(decided.apply) == 3 and not made & held
