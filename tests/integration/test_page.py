"""`kubectl appschedule ui` in a real browser (Debian's headless Chromium, driven by Selenium through Debian's
chromium-driver) against the real API server with the operator running: the page loads, shows a real fire
within seconds of its Job, starts a run, a rerun of that fire (with the fire's key) and a backfill from its
buttons (and removes the backfill), marks a fire missed while kube-controller-manager was down, shows the run
counts a real Prometheus scraped from the operator hour by hour, and hides the buttons from a user who may not
create Jobs.
The screenshots it takes (light and dark, 1280 and 390 pixels wide) are the README's:
``APPSCHEDULE_SCREENSHOTS=docs/ui make integration`` writes them there."""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from selenium.common.exceptions import (
    ElementNotInteractableException,
    NoAlertPresentException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from appschedule.core import naming
from appschedule.plugin import _Cluster
from appschedule.shell.pageserver import PageServer
from tests.kit import browser as browser_kit
from tests.kit.chart import service_account_kubeconfig, user_role
from tests.kit.prometheus import Prometheus
from tests.kit.wait import wait_for

from .conftest import ClusterUnderTest, Kubectl, OperatorProcess
from .test_ledger import wait_for_boundary
from .test_operator import Namespaced, task


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    why = browser_kit.missing()
    if why:
        pytest.fail(why)
    driver = browser_kit.chromium()
    yield driver
    driver.quit()


def serve(kubeconfig: Path, namespace: str, prometheus: str | None = None) -> PageServer:
    args = argparse.Namespace(
        kubeconfig=str(kubeconfig), context=None, namespace=namespace, all_namespaces=False, prometheus=prometheus
    )
    cluster = _Cluster(args)
    server = PageServer(cluster.snapshot, cluster.act, cluster.follow, port=0)
    server.start()
    return server


def fires(driver: Any, appschedule: str, task_name: str) -> list[dict[str, str]]:
    found: list[dict[str, str]] = driver.execute_script(
        """const s = document.querySelector(`[data-appschedule="${arguments[0]}"] [data-task="${arguments[1]}"]`);
        return s ? [...s.querySelectorAll('.timeline .fire')].map(b => ({time: b.dataset.time, mark: b.dataset.mark,
            cls: b.className, label: b.getAttribute('aria-label')})) : [];""",
        appschedule,
        task_name,
    )
    return found


# what WebDriver says of an element the live page drew anew between finding it and acting on it
REDRAWN = (StaleElementReferenceException, ElementNotInteractableException)


def click(driver: Any, css: str) -> None:
    """Click what ``css`` finds, as a user would; the live page may draw it anew between finding and clicking."""

    def clicked() -> bool:
        driver.find_element(By.CSS_SELECTOR, css).click()
        return True

    wait_for(clicked, timeout=10, what=f"a click on {css}", ignore=REDRAWN)


def type_into(driver: Any, css: str, text: str) -> None:
    """Replace what a field holds as a user does, select all and type, with the focus kept in it: the page does
    not draw a field anew while it has the focus, but WebDriver's clear() blurs it, and the redraw that the blur
    lets through can take the field from under the next keystroke (page.html)."""

    def typed() -> bool:
        box = driver.find_element(By.CSS_SELECTOR, css)
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(text)
        return bool(box.get_attribute("value") == text)

    wait_for(typed, timeout=10, what=f"{text} typed into {css}", ignore=REDRAWN)


def accept_confirm(driver: Any) -> None:
    def alert() -> Any:
        try:
            return driver.switch_to.alert
        except NoAlertPresentException:
            return None

    wait_for(alert, timeout=10, what="the confirmation").accept()


def jobs(world: Namespaced) -> list[dict[str, Any]]:
    raw = world.batch.list_namespaced_job(world.namespace, _preload_content=False)
    return list(json.loads(raw.data)["items"])


def shoot(driver: Any, out: Path, name: str, width: int, dark: bool) -> None:
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]},
    )
    driver.set_window_size(width, 900)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(int(height) + 140, 500), 2400))
    driver.save_screenshot(str(out / name))


def test_the_page_shows_a_real_fire_runs_and_reruns_it_and_hides_actions_without_job_rights(
    api: client.ApiClient, namespace: str, operator: OperatorProcess, kubectl: Kubectl, cluster: ClusterUnderTest,
    browser: Any, tmp_path: Path, prometheus_server: Prometheus,
) -> None:  # fmt: skip
    ns, world = namespace, Namespaced(api, namespace)
    world.deployment()
    world.appschedule(
        "shop",
        [
            task("heartbeat", "* * * * *", startingDeadlineSeconds=10, missedRunGraceSeconds=10),
            task("nightly", "0,30 2 * * *", timeZone="Europe/Berlin"),  # an hour with two fires, repeated at fall-back
        ],
    )
    wait_for(lambda: world.condition("shop").get("status") == "True", timeout=60, what="shop Ready")
    server = serve(cluster.kubeconfig, ns, prometheus_server.url)
    try:
        browser.set_window_size(1280, 900)
        browser.get(server.url)
        shop_card = f'[data-appschedule="{ns}/shop"]'
        shop = f"{ns}/shop"
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f'{shop_card} [data-task="nightly"]'), timeout=20,
                 what="the page showing shop's tasks")  # fmt: skip
        nightly = browser.find_element(By.CSS_SELECTOR, f'{shop_card} [data-task="nightly"]').text
        assert "0,30 2 * * *" in nightly and "Europe/Berlin" in nightly and "UTC" not in nightly.split("next:")[0]
        assert " CET" in nightly or " CEST" in nightly  # next fires in the task's zone, and in UTC (the Z times)
        assert "Z" in nightly.split("next:")[1]
        wait_for(lambda: "live" in browser.find_element(By.ID, "live").text, timeout=20, what="the page following")

        # a real fire: its Job made by the CronJob controller at the minute, on the page within seconds
        cronjob = naming.cronjob_name("shop", "heartbeat")
        made = wait_for(
            lambda: [j for j in jobs(world) if j["metadata"]["name"].startswith(f"{cronjob}-")],
            timeout=75, interval=0.2, what="the heartbeat's first fire",
        )  # fmt: skip
        seen_job = time.monotonic()
        fire = made[0]["metadata"]["annotations"][naming.ANNOTATION_SCHEDULED_TIME]
        wait_for(lambda: any(f["time"] == fire for f in fires(browser, f"{ns}/shop", "heartbeat")), timeout=15,
                 interval=0.2, what=f"the fire of {fire} on the page")  # fmt: skip
        delay = time.monotonic() - seen_job
        assert delay < 10, f"the fire reached the page {delay:.1f}s after its Job"

        # run now, from the page, after a confirmation
        before = {j["metadata"]["name"] for j in jobs(world)}
        section = f'[data-appschedule="{ns}/shop"] [data-task="heartbeat"]'
        click(browser, f'{section} button[data-action="run"]')
        accept_confirm(browser)
        manual = wait_for(
            lambda: [j for j in jobs(world) if j["metadata"]["name"] not in before
                     and j["metadata"].get("annotations", {}).get(naming.ANNOTATION_RUN_KIND) == "manual"],
            timeout=20, what="the manual run's Job",
        )  # fmt: skip
        assert manual[0]["metadata"]["annotations"].get(naming.ANNOTATION_IDEMPOTENCY_KEY)
        wait_for(lambda: "created (manual" in browser.find_element(By.ID, "toast").text, timeout=10, what="the toast")

        # a rerun of the real fire: picked in the timeline, with that fire's key
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f'{section} .fire[data-time="{fire}"]'), timeout=10,
                 what="the fire's button")  # fmt: skip
        click(browser, f'{section} .fire[data-time="{fire}"]')
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, f'{section} button[data-action="rerun"]'), timeout=10,
                 what="the rerun button")  # fmt: skip
        click(browser, f'{section} button[data-action="rerun"]')
        accept_confirm(browser)
        key = made[0]["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY]
        rerun = wait_for(
            lambda: [j for j in jobs(world)
                     if j["metadata"].get("annotations", {}).get(naming.ANNOTATION_RUN_KIND) == "rerun"],
            timeout=20, what="the rerun's Job",
        )  # fmt: skip
        assert rerun[0]["metadata"]["annotations"][naming.ANNOTATION_IDEMPOTENCY_KEY] == key
        assert rerun[0]["metadata"]["annotations"][naming.ANNOTATION_SCHEDULED_TIME] == fire
        wait_for(lambda: any("rerun" in f["label"] for f in fires(browser, f"{ns}/shop", "heartbeat")), timeout=15,
                 what="the rerun on the page")  # fmt: skip

        # a backfill of that one fire started from the page's form, then removed from the page
        click(browser, f'{section} button[data-action="backfill-form"]')
        for field in ("from", "to"):
            type_into(browser, f'{section} .backfill input[name="{field}"]', fire)
        click(browser, f'{section} button[data-action="backfill"]')
        accept_confirm(browser)
        entry = wait_for(lambda: (world.get("shop")["spec"].get("backfills") or [None])[0], timeout=20,
                         what="the backfill in the spec")  # fmt: skip
        assert (entry["task"], entry["from"], entry["to"]) == ("heartbeat", fire, fire), entry
        row = f'[data-appschedule="{ns}/shop"] [data-backfill="{entry["name"]}"]'
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, row), timeout=20, what="the backfill on the page")
        click(browser, f'{row} button[data-action="remove-backfill"]')
        accept_confirm(browser)
        wait_for(lambda: not world.get("shop")["spec"].get("backfills"), timeout=20, what="the backfill removed")
        wait_for(
            lambda: not browser.find_elements(By.CSS_SELECTOR, row), timeout=20, what="the backfill gone from the page"
        )

        # a fire missed while kube-controller-manager is down (past the task's 10 s starting deadline): marked on
        # the page once the ledger settles it
        local = cluster.need_local()
        boundary = wait_for_boundary(margin=5)
        local.stop("kube-controller-manager")
        try:
            time.sleep(max(0.0, boundary + 15 - time.time()))  # the outage itself: the fire at the boundary goes by
        finally:
            local.start("kube-controller-manager")
        missed = f"{datetime.fromtimestamp(round(boundary), UTC):%Y-%m-%dT%H:%M:%SZ}"
        wait_for(lambda: any(f["time"] == missed and f["mark"] == "M" for f in fires(browser, shop, "heartbeat")),
                 timeout=90, what=f"the fire of {missed} marked missed on the page")  # fmt: skip

        # the run counts Prometheus scraped from the operator, hour by hour, said as such
        hourly = f'{section} .hourly .fire[data-source="metrics"]'
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, hourly), timeout=90, what="the hourly counts")
        title = browser.find_element(By.CSS_SELECTOR, hourly).get_attribute("title")
        # increase() misses a counter's first sample, so which results an hour shows depends on when each first moved
        assert re.search(r"the hour to \S+Z: \d+ [a-z_]+", title) and title.endswith("(from Prometheus)"), title
        assert f"Prometheus at {prometheus_server.url}" in browser.find_element(By.ID, "sources").text

        out = Path(os.environ.get("APPSCHEDULE_SCREENSHOTS") or tmp_path)
        out.mkdir(parents=True, exist_ok=True)
        click(browser, f'{section} .fire[data-time="{fire}"]')  # unpick: no detail
        for width in (1280, 390):
            for dark in (False, True):
                shoot(browser, out, f"page-{width}-{'dark' if dark else 'light'}.png", width, dark)
        assert all((out / f"page-{w}-{t}.png").stat().st_size > 5000 for w in (1280, 390) for t in ("light", "dark"))
    finally:
        server.close()

    # a user who may read but not create Jobs: the page shows the same, with no action
    kubectl("create", "serviceaccount", "viewer", "-n", ns)
    read = {"verbs": ["get", "list", "watch"]}
    kubectl("apply", "-f", "-", input=json.dumps(user_role(ns, f"system:serviceaccount:{ns}:viewer", [
        {"apiGroups": [naming.GROUP], "resources": [naming.PLURAL, naming.CALENDAR_PLURAL], **read},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], **read},
        {"apiGroups": [""], "resources": ["events"], **read},
    ])))  # fmt: skip
    viewer = service_account_kubeconfig(kubectl, ns, "viewer", cluster.kubeconfig, tmp_path / "viewer.kubeconfig")
    server = serve(viewer, ns)
    try:
        browser.set_window_size(1280, 900)
        browser.get(server.url)
        heartbeat = f'[data-appschedule="{ns}/shop"] [data-task="heartbeat"]'
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, heartbeat), timeout=20, what="the viewer's page")
        wait_for(lambda: fires(browser, f"{ns}/shop", "heartbeat"), timeout=10, what="the viewer's timeline")
        assert browser.find_elements(By.CSS_SELECTOR, "button[data-action]") == []
    finally:
        server.close()
