"""A Job that ended and was filed (its end in the status, its finalizer let go) changes no plan by going: the store
wakes nothing when it leaves the watch (a history limit deleting it), and that is safe because a plan of the world
without it is the plan of the world with it. Checked through Berlin's two nights of clock changes
(tests/unit/test_quiets.py: several fires an hour, the hour that never comes, the hour that comes twice), the Jobs
never deleted before (the most a plan can see of them), at every step: the newest such Job gone, and all of them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from appschedule.core import naming
from appschedule.core.reconcile import plan
from appschedule.core.view import project_job
from appschedule.shell.store import Store, filed_and_over
from tests.kit.worlds import world_of
from tests.unit.test_quiets import NIGHTS, appschedule, done, job, night


@pytest.mark.parametrize("start", NIGHTS, ids=["spring", "autumn"])
def test_a_filed_job_that_ended_changes_no_plan_by_going(deployment: dict[str, Any], start: datetime) -> None:
    end, deployment, fires, first, cronjobs = night(deployment, start)
    status, released, now, compared = first.status, set[str](), start, 0
    while now < end:
        jobs = [j for n, times in fires.items() for f in times if (j := job(n, f, now, released)) is not None]
        stepped = plan(world_of(appschedule(status), deployment, cronjobs, jobs=jobs), now)
        over = [j for j in jobs if filed_and_over(project_job(j))]
        for gone in [over[-1:], over] if over else []:
            left = [j for j in jobs if j not in gone]
            less = plan(world_of(appschedule(status), deployment, cronjobs, jobs=left), now)
            assert (done(less), less.wake_at) == (done(stepped), stepped.wake_at), (now, len(gone))
            compared += 1
        if stepped.status_changed:  # written, and the Jobs it records let go (filed)
            status = stepped.status
            released |= set(stepped.release)
        now += timedelta(seconds=13)
    assert compared > 1000  # most steps had such Jobs to take away


def test_only_a_filed_job_that_ended_and_was_let_go_leaves_without_waking() -> None:
    fire = NIGHTS[0]
    ended = job("beat", fire, fire + timedelta(minutes=5), {"shop-beat-x"})
    assert ended is not None
    filed = {**ended, "metadata": {**ended["metadata"], "annotations": {naming.ANNOTATION_FILED: "true"},
                                   "finalizers": []}}  # fmt: skip
    held = {**filed, "metadata": {**filed["metadata"], "finalizers": [naming.LEDGER_FINALIZER]}}
    unfiled = {**filed, "metadata": {**filed["metadata"], "annotations": {}}}
    running = {**filed, "status": {"active": 1}}
    for body, wakes in ((filed, False), (held, True), (unfiled, True), (running, True)):
        store = Store()
        view = project_job(body)
        store.put_job(view)
        assert store.drop_job("shop", view.name) == ({("shop", "shop")} if wakes else set()), body
        assert not store.jobs
