"""`appschedule import source` on real published code: npm and PyPI artifacts pinned by SHA-256 in hack/corpus.py,
downloaded and unpacked by `make corpus` (outside the work tree; nothing of them is committed). Each package is
read as a team would point the import at it; what it finds and what it lists (file, line and reason) is exactly
what is asserted here. The translations' fires are checked against the frameworks in test_pysource.py and
test_jssource.py; these files prove the reader on code nobody wrote for it. They are where the import learnt to
read a Celery entry set by subscript, add_job(func=...) and to refuse a directory Python cannot import. The
system crontabs of four Debian packages (`appschedule import crontab`) are where it learnt to split a user field
on tabs, to name a task after the program inside `if ... then ... fi`, and to write `$` as `$$`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from appschedule.cli import main
from appschedule.core.admission import check_appschedule

HACK = Path(__file__).resolve().parents[2] / "hack" / "corpus.py"


def _corpus() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hack_corpus", HACK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hack_corpus"] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


CORPUS = _corpus()


def imported(key: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, str], list[str]]:
    """The import of one unpacked artifact: its exit status, each task's schedule by name, what it listed."""
    where = CORPUS.root() / key
    if not (where / ".complete").exists():
        pytest.fail(f"{where}: not downloaded: make corpus")
    status = main(["import", "source", str(where), "--deployment", "web", "--name", "corpus"])
    out = capsys.readouterr()
    tasks: dict[str, str] = {}
    if status == 0:
        document = yaml.safe_load(out.out)
        assert check_appschedule(document) is None  # the AppSchedule printed is one the API server takes
        tasks = {t["name"]: t["schedule"] for t in document["spec"]["tasks"]}
    listed = [line.replace(f"{where}/", "") for line in out.err.splitlines() if line.startswith("not carried over")]
    return status, tasks, listed


def reasons(listed: list[str]) -> dict[str, str]:
    """file:line -> what was listed there (the framework, the code and the reason)."""
    return {line.removeprefix("not carried over: ").split(" (", 1)[0]: line for line in listed}


def test_thepopebot_node_cron_callbacks_of_the_file_and_schedules_of_run_time_are_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, tasks, listed = imported("thepopebot-1.2.82", capsys)
    assert status == 1 and tasks == {}
    said = reasons(listed)
    assert said["package/lib/cron.js:227"].endswith(
        "the callback 'runVersionCheck' is neither imported nor exported by the file; its schedule would be '0 * * * *'"
    )
    assert "'runMaintenance'" in said["package/lib/maintenance.js:67"]
    for where in ("package/lib/cron.js:259", "package/lib/cluster/runtime.js:68"):
        assert said[where].endswith("schedule is not a literal: a schedule built at run time")


def test_create_nodeapi_backend_seconds_fields_are_listed_in_javascript_and_typescript(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, tasks, listed = imported("create-nodeapi-backend-2.0.0", capsys)
    assert status == 1 and tasks == {}
    said = reasons(listed)
    seconds = "'*/10 * * * * *': a seconds field '*/10' (a CronJob starts on the minute)"
    assert said["package/template/javascript/src/model/token/index.js:39"].endswith(seconds)
    assert said["package/template/typescript/src/model/token.model.ts:39"].endswith(seconds)
    assert "its schedule would be '* * * * *'" in said["package/template/javascript/src/model/otp/otp.js:37"]


def test_superdesk_core_beat_schedule_crontabs_become_tasks_intervals_and_computed_hours_are_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, tasks, listed = imported("Superdesk-Core-2.5.3", capsys)
    assert status == 0
    assert tasks == {
        "content-gc": "*/30 * * * *",
        "content-schedule": "*/5 * * * *",
        "saved-searches-report": "0 * * * *",
    }
    said = reasons(listed)
    intervals = [w for w, r in said.items() if r.endswith("an interval (a number or timedelta) counts from the process "
                                                         "start, not the clock")]  # fmt: skip
    computed = [w for w, r in said.items() if "local_to_utc_hour(" in r and r.endswith("built at run time")]
    assert len(intervals) == 6 and len(computed) == 4 and len(said) == 10, said
    assert all(w.startswith("superdesk/default_settings.py:") for w in said)


def test_superdesk_planning_and_analytics_entries_set_by_subscript_become_tasks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, tasks, listed = imported("superdesk-planning-2.4.0", capsys)
    assert status == 0 and tasks == {
        "planning-expiry": "0 * * * *",
        "planning-delete": "0 * * * *",
        "planning-export-scheduled-filters": "0 * * * *",
    }
    ((where, line),) = reasons(listed).items()
    assert where.endswith("server/planning/__init__.py:271") and "an interval" in line
    status, tasks, _ = imported("superdesk-analytics-2.1.2", capsys)  # crontab imported from a re-export
    assert status == 0 and set(tasks.values()) == {"0 * * * *"} and len(tasks) == 2


def test_nonebot_plugins_apscheduler_jobs_of_literal_fields_become_tasks_and_an_unimportable_path_is_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, tasks, listed = imported("nonebot-plugin-daily-bing-1.0.1", capsys)
    assert status == 0 and tasks == {"clear-daily-bing-cache": "0 0 * * *"}
    said = reasons(listed)
    assert set(said) == {"nonebot_plugin_daily_bing/utils.py:218", "nonebot_plugin_daily_bing/utils.py:254"}
    assert all(r.endswith("is not a literal: a schedule built at run time") for r in said.values())
    status, tasks, listed = imported("nonebot-plugin-auto-sendlike-0.0.12", capsys)
    assert status == 1 and tasks == {}
    ((where, reason),) = reasons(listed).items()
    assert where == "nonebot-plugin-auto-sendlike/__init__.py:147" and "is not importable" in reason


def kubernetes_expanded(text: str) -> str:
    """What the kubelet makes of a container's command or env value (k8s.io/kubernetes third_party/forked/golang/
    expansion): ``$$`` is one ``$``, ``$(NAME)`` a variable (none is defined here, so it stays as written)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


DEBIAN_CRONTABS = {  # key: (file, {task: (schedule, the shell line cron runs)})
    "certbot-2.1.0-4": ("etc/cron.d/certbot", {
        "certbot": ("0 */12 * * *", "test -x /usr/bin/certbot -a \\! -d /run/systemd/system && perl -e 'sleep "
                    "int(rand(43200))' && certbot -q renew --no-random-sleep-on-renew"),
    }),
    "mdadm-4.2-5": ("etc/cron.d/mdadm", {
        "checkarray": ("57 0 * * 0", "if [ -x /usr/share/mdadm/checkarray ] && [ $(date +%d) -le 7 ]; then "
                       "/usr/share/mdadm/checkarray --cron --all --idle --quiet; fi"),
    }),
    "php-common-2:93": ("etc/cron.d/php", {
        "sessionclean": ("09,39 * * * *", "[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; "
                         "then /usr/lib/php/sessionclean; fi"),
    }),
    "sysstat-12.6.1-1": ("etc/cron.d/sysstat", {
        "debian-sa1": ("5-55/10 * * * *", "command -v debian-sa1 > /dev/null && debian-sa1 1 1"),
        "debian-sa1-2": ("59 23 * * *", "command -v debian-sa1 > /dev/null && debian-sa1 60 2"),
    }),
}  # fmt: skip


@pytest.mark.parametrize("key", DEBIAN_CRONTABS)
def test_debians_system_crontabs_become_tasks_that_run_the_line_cron_runs(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The crontabs Debian's packages install (tabs and runs of spaces between fields, a user field, SHELL and PATH,
    ``\\%`` and ``$(...)`` in a command): each entry a task whose command, once the kubelet has expanded it, is the
    shell line cron runs, with the crontab's environment, named after the program it runs."""
    relative, expected = DEBIAN_CRONTABS[key]
    where = CORPUS.root() / key
    if not (where / ".complete").exists():
        pytest.fail(f"{where}: not downloaded: make corpus")
    assert main(["import", "crontab", str(where / relative), "--deployment", "web"]) == 0  # /etc/cron.d/: system
    out = capsys.readouterr()
    document = yaml.safe_load(out.out)
    assert check_appschedule(document) is None
    tasks = {t["name"]: t for t in document["spec"]["tasks"]}
    assert tasks.keys() == expected.keys()
    for name, (schedule, line) in expected.items():
        task = tasks[name]
        assert task["schedule"] == schedule and task["timeZone"] == "UTC"
        assert [kubernetes_expanded(part) for part in task["command"]] == ["/bin/sh", "-c", line]
        for variable in task.get("env", []):
            assert variable["name"] == "PATH" and kubernetes_expanded(variable["value"]).startswith("/usr/")
    assert "ran as user 'root'" in out.out  # the user field, said in the comment above the AppSchedule
