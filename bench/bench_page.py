"""The page of runs (``kubectl appschedule ui``) in a real browser: its weight, and how soon it shows 100 AppSchedules
of 5 tasks, against the same page with none (the baseline, same run, same browser).

No cluster: the page's state is ``plugin.page`` of made-up AppSchedules (each task with its status' 10 runs and
10 Jobs beyond them), served by the real server (shell/pageserver.py) to Debian's headless Chromium. Figures, from
the browser's own clock (``performance``): first paint, and the moment the page has drawn every task (a
``MutationObserver`` on the cards); the median of ``--runs`` fresh loads, each in a new tab.

    .venv/bin/python bench/bench_page.py [--appschedules 100 --tasks 5 --runs 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the test kit is tests.kit

from tests.kit import browser

from appschedule.core import naming
from appschedule.plugin import page
from appschedule.shell.pageserver import PageServer

NOW = datetime(2026, 10, 25, 12, 0, tzinfo=UTC)
STATES = ["Succeeded"] * 7 + ["Missed", "Failed", "Succeeded"]


def world(count: int, tasks: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    items, jobs = [], []
    for a in range(count):
        name = f"app-{a:03d}"
        statuses = []
        for t in range(tasks):
            recent = []
            for r in range(10):
                when = NOW - timedelta(hours=10 - r)
                recent.append({"scheduledTime": f"{when:%Y-%m-%dT%H:%M:%SZ}", "state": STATES[(a + t + r) % 10],
                               "job": f"{name}-t{t}-{r}", "key": f"t{t}@{when:%Y-%m-%dT%H:%M:%SZ}",
                               "delaySeconds": (a + r) % 40})  # fmt: skip
            for r in range(10):
                when = NOW - timedelta(hours=20 - r)
                jobs.append({
                    "metadata": {
                        "name": f"{name}-t{t}-old-{r}", "namespace": "apps",
                        "labels": {naming.LABEL_APPSCHEDULE: name, naming.LABEL_TASK: f"task-{t}"},
                        "annotations": {naming.ANNOTATION_SCHEDULED_TIME: f"{when:%Y-%m-%dT%H:%M:%SZ}"},
                    },
                    "status": {"conditions": [{"type": "Complete", "status": "True"}]},
                })  # fmt: skip
            statuses.append({"name": f"task-{t}", "schedule": f"{t} * * * *", "timeZone": "Europe/Berlin",
                             "counts": {"runs": 200, "missed": 20, "failed": 20}, "recent": recent})  # fmt: skip
        items.append({
            "metadata": {"namespace": "apps", "name": name},
            "spec": {"deploymentRef": {"name": name}, "tasks": [{"name": f"task-{t}"} for t in range(tasks)]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "tasks": statuses},
        })  # fmt: skip
    return items, jobs


MEASURE = """
const done = arguments[arguments.length - 1], want = arguments[0];
const paint = (name) => (performance.getEntriesByName(name)[0] || {}).startTime;
let drawn = null;
const check = () => {
  const read = document.getElementById('summary').textContent.includes('AppSchedules');
  if (drawn === null && read && document.querySelectorAll('[data-task]').length >= want) drawn = performance.now();
  if (drawn !== null && paint('first-contentful-paint') !== undefined) {
    done({drawn: drawn, paint: paint('first-contentful-paint')});
  } else setTimeout(check, 5);
};
check();
"""


def load(driver: Any, url: str, tasks: int) -> dict[str, float]:
    driver.switch_to.new_window("tab")
    driver.get(url)
    found: dict[str, float] = driver.execute_async_script(MEASURE, tasks)
    driver.close()
    driver.switch_to.window(driver.window_handles[0])
    return found


def measure(driver: Any, count: int, tasks: int, runs: int) -> dict[str, Any]:
    items, jobs = world(count, tasks)
    state = page(items, jobs, [], NOW, allowed={"apps": {"run": True}})
    server = PageServer(lambda: state, lambda body: {}, None, port=0)
    server.start()
    try:
        load(driver, server.url, count * tasks)  # warm the browser's own caches once
        loads = [load(driver, server.url, count * tasks) for _ in range(runs)]
        html = len(server_page(server))
    finally:
        server.close()
    return {
        "appschedules": count,
        "tasks": count * tasks,
        "html_bytes": html,
        "state_bytes": len(json.dumps(state)),
        "first_paint_ms": statistics.median(x["paint"] for x in loads),
        "all_drawn_ms": statistics.median(x["drawn"] for x in loads),
    }


def server_page(server: PageServer) -> bytes:
    import urllib.request

    with urllib.request.urlopen(server.url, timeout=10) as answer:
        return bytes(answer.read())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appschedules", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    why = browser.missing()
    if why:
        raise SystemExit(why)
    driver = browser.chromium()
    try:
        base = measure(driver, 0, args.tasks, args.runs)
        full = measure(driver, args.appschedules, args.tasks, args.runs)
    finally:
        driver.quit()
    print(f"the page: {full['html_bytes'] / 1024:.1f} KiB (target: under 200 KB); its state for "
          f"{args.appschedules} x {args.tasks}: {full['state_bytes'] / 1024:.0f} KiB of JSON")  # fmt: skip
    print(f"{'':28}{'none':>10}{f'{args.appschedules} x {args.tasks}':>12}{'ratio':>8}")
    for key, what in (("first_paint_ms", "first contentful paint (ms)"), ("all_drawn_ms", "every task drawn (ms)")):
        ratio = full[key] / base[key] if base[key] else float("nan")
        print(f"{what:28}{base[key]:>10.0f}{full[key]:>12.0f}{ratio:>7.1f}x")
    print(f"median of {args.runs} loads each, headless Chromium; target: every task drawn under 1 s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
