"""Inputs an independent review of the imports wrote (issue 35): forms the framework documents that were missed or
changed, each now carried over as the framework runs it or listed with the reason. A system crontab with tabs,
a crontab's input given to the whole command line, a ``$`` Kubernetes would have expanded, node-cron's day 7 in a
range and its options, Celery's other forms and its list and name fields, sidekiq-cron's list form, a Fugit
line with a zone without a slash, and a YAML file's error with its line."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import yaml

from appschedule.core import crontab, jssource, pysource, rbsource

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_system_crontab_with_tabs_keeps_its_whole_command() -> None:
    found = crontab.read("17 *\t* * *\troot\tcd / && run-parts --report /etc/cron.hourly\n", "/etc/crontab", NOW,
                         system=True)  # fmt: skip
    (task,) = found.tasks
    assert task.task["command"] == ["/bin/sh", "-c", "cd / && run-parts --report /etc/cron.hourly"]
    assert task.notes[0] == "ran as user 'root': the Job runs as its image's user"


def test_a_crontab_input_reaches_every_command_of_the_line(tmp_path: Path) -> None:
    out = tmp_path / "got"
    (task,) = crontab.read(f"* * * * * cd {tmp_path} && cat > {out.name}%first%second\n", "c", NOW).tasks
    command = task.task["command"]
    assert isinstance(command, list)
    subprocess.run(command, check=True, timeout=10)  # the very shell line the Job runs
    assert out.read_text() == "first\nsecond\n"


def test_a_dollar_is_written_so_kubernetes_passes_it_on(tmp_path: Path) -> None:
    path = tmp_path / "app.cron"
    path.write_text("GREETING=cost $5\n* * * * * echo $$ $(date +\\%s) $HOME\n")
    done = subprocess.run([sys.executable, "-m", "appschedule", "import", "crontab", str(path), "--deployment", "web"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    (task,) = yaml.safe_load(done.stdout)["spec"]["tasks"]
    # Kubernetes reads $$ as $ and $(NAME) as a variable in command and env: every $ doubled comes out as written
    assert task["command"] == ["/bin/sh", "-c", "echo $$$$ $$(date +%s) $$HOME"]
    assert task["env"] == [{"name": "GREETING", "value": "cost $$5"}]


NODE_CRON = """const cron = require('node-cron');
const { report } = require('./jobs');
cron.schedule('0 0 * * 0-7/2', report, { name: 'every-other' });
cron.schedule('0 9 * * 5-7', report, { name: 'weekend' });
cron.schedule('0 1 * * *', report, { name: 'once', maxExecutions: 1 });
cron.schedule('0 2 * * *', report, { name: 'later', scheduled: false });
cron.schedule('0 3 * * *', report, { name: 'alone', noOverlap: true, maxRandomDelay: 5000 });
"""


def test_node_cron_day_seven_and_options() -> None:
    scan = jssource.scan(NODE_CRON, "server.js", "server.js", NOW)
    tasks = {f.task["name"]: f for f in scan.found}
    assert tasks["every-other"].task["schedule"] == "0 0 * * 0,2,4,6"  # 0-7/2: Sunday, Tuesday, Thursday, Saturday
    assert tasks["weekend"].task["schedule"] == "0 9 * * 5-6,0"
    assert "suspend" not in tasks["later"].task and any("scheduled: false" in n for n in tasks["later"].notes)
    assert tasks["alone"].task["concurrencyPolicy"] == "Forbid"
    assert any("maxRandomDelay: 5000 ms" in n for n in tasks["alone"].notes)
    (listed,) = scan.unfaithful
    assert listed.source == "server.js:5" and "maxExecutions" in listed.reason


CELERY = """from celery import Celery
from celery.schedules import crontab, solar
app = Celery("shop")

@app.on_after_configure.connect
def setup_periodic_tasks(sender, **kwargs):
    sender.add_periodic_task(10.0, ping.s("hello"), name="ping every 10")
    sender.add_periodic_task(crontab(hour=[1, 13], minute=0, day_of_week="sunday"), ping.s(x=1), name="twice")
    sender.add_periodic_task(solar("sunset", -37.81753, 144.96715), ping.s("sunset"))

app.conf.update(beat_schedule={"cleanup": {"task": "shop.tasks.cleanup", "schedule": crontab(minute="*/15")}})
app.conf.beat_schedule = {"bad": {"task": "shop.tasks.bad", "schedule": crontab(hour="25")}}

@app.task
def ping(arg=None, x=None):
    print(arg)
"""


def test_celery_periodic_tasks_conf_update_lists_and_names() -> None:
    scan = pysource.scan(CELERY, "shop/app.py", "shop.app")
    tasks = {f.task["name"]: f for f in scan.found}
    assert tasks["twice"].task["schedule"] == "0 1,13 * * sun" and tasks["twice"].source == "shop/app.py:8"
    assert tasks["twice"].task["command"] == ["python", "-c", "from shop.app import ping; ping(x=1)"]
    assert tasks["cleanup"].task["schedule"] == "*/15 * * * *"
    reasons = {u.source.rsplit(":", 1)[1]: u.reason for u in scan.unfaithful}
    assert set(reasons) == {"7", "9", "12"}
    assert "interval" in reasons["7"] and "solar" in reasons["9"] and "hour field '25'" in reasons["12"]


def test_sidekiq_cron_list_form_and_a_fugit_zone_without_a_slash() -> None:
    text = "- name: hard_worker\n  cron: '0 5 * * * UTC'\n  class: HardWorker\n- name: stock\n  cron: '*/5 * * * *'\n" \
        "  class: Stock\n  args: [1]\n"  # fmt: skip
    scan = rbsource.scan(text, "config/schedule.yml")
    found = {f.task["name"]: f for f in scan.found}
    assert found["hard-worker"].task["schedule"] == "0 5 * * *" and found["hard-worker"].task["timeZone"] == "UTC"
    assert found["hard-worker"].source == "config/schedule.yml:1" and found["stock"].source == "config/schedule.yml:4"
    assert rbsource.fugit_cron("0 5 * * MON") == ("0 5 * * MON", None)  # a day name is no zone


def test_a_yaml_file_that_does_not_parse_is_named_with_its_line(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "recurring.yml").write_text("production:\n  job:\n    schedule: every day\n   class: [\n")
    done = subprocess.run([sys.executable, "-m", "appschedule", "import", "source", str(tmp_path), "--deployment",
                           "web"], capture_output=True, text=True, check=False)  # fmt: skip
    assert f"{tmp_path / 'config' / 'recurring.yml'}:4:" in done.stderr, done.stderr


def test_tz_goes_to_the_environment_and_is_said_not_to_be_the_schedules_zone() -> None:
    found = crontab.read("TZ=Europe/Berlin\n0 9 * * * /app/report\n", "app.cron", NOW, time_zone="America/New_York")
    (task,) = found.tasks
    assert task.task["timeZone"] == "America/New_York"  # the host's zone, as cron reads the schedule
    assert task.task["env"] == [{"name": "TZ", "value": "Europe/Berlin"}]
    assert found.notes == ["app.cron:1: TZ=Europe/Berlin is passed to the commands' environment, as cron passes it; "
                           "cron reads the schedules in CRON_TZ or the host's zone, and so do the tasks (CRON_TZ, "
                           "else --time-zone)"]  # fmt: skip
