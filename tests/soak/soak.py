"""The chaos soak (issue 10): the operator's ledger against ground truth while things break.

On a local cluster of its own (``$APPSCHEDULE_CLUSTER_DIR``, default ~/.cache/appschedule-operator/
soak-cluster, ports shifted by ``$APPSCHEDULE_PORT_OFFSET``, default 2000: it stops the API server and the
controller manager, so it never shares the test cluster), the operator runs for real with its webhooks.
It reconciles AppSchedules (50 with 4 tasks each by default: most ``* * * * *``, some ``*/2``; some pods
fail and some hang until activeDeadlineSeconds, steered through kwok; Forbid and Allow mixed) while a
seeded plan of chaos runs:

* the operator runs as two replicas (processes) with ``--leader-elect`` on one Lease, or with ``--shards N``
  (N > 1) as three replicas sharing N shards (a Lease each), serving the webhooks all on one port
  (SO_REUSEPORT: the kernel spreads the API server's connections over the live ones, as a Service does over
  ready pods); every 30 to 120 s one of them is killed (SIGKILL) and started again, in turn, the leader or a
  standby (with shards: whichever shards it holds); every fourth kill (second in a short soak) takes them all
  down from :57 to :03 of a minute (a whole-operator outage across a fire);
* kube-controller-manager is stopped once (3 minutes), kube-apiserver once (2 minutes); a soak shorter
  than 10 minutes shortens them to 90 s (over two minute boundaries, so some fires are really missed) and
  30 s;
* Deployment rollouts, task edits, suspensions (from :30 to :30 of a later minute), Jobs created by hand
  for a time that already ran (duplicates), AppSchedules deleted and created again under a new name.

After each outage the operator must be caught up within 30 s: every Job created since the outage began
recorded in its task's status and every fire due before the outage ended settled. At the end every
AppSchedule is suspended, the soak waits for the last runs to end and the ledger to settle, and then
compares, per task, runs, duplicates, failed, missed and unkeyed runs with ground truth rebuilt from the API
server's audit log (tests/soak/groundtruth.py). It also checks that no task ever had two CronJobs, no
Job is left behind the ledger's finalizer, and every Job whose admission ran while a replica was serving
carries its key (an unkeyed one is excused only when a replica was killed during its create request, or
up to KILL_GRACE before its answer: it may have been in flight to that one). Exit status 0 only when
everything holds; a report (JSON, the replicas' logs, the audit log) is left in ``--out``.

Usage: python -m tests.soak.soak --minutes 10 --seed 1 [--shards 3] [--appschedules 50] [--out DIR] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("APPSCHEDULE_CACHE", Path.home() / ".cache" / "appschedule-operator"))
# before anything imports localcluster (tests.kit.chart does): it reads both when it is first imported
os.environ.setdefault("APPSCHEDULE_CLUSTER_DIR", str(CACHE / "soak-cluster"))
os.environ.setdefault("APPSCHEDULE_PORT_OFFSET", "2000")
sys.path.insert(0, str(REPO / "hack" / "cluster"))

from croniter import croniter  # noqa: E402
from kubernetes import client, config  # noqa: E402
from kubernetes.client.exceptions import ApiException  # noqa: E402
from urllib3.exceptions import HTTPError  # noqa: E402

import localcluster  # noqa: E402
from appschedule.core import naming  # noqa: E402
from appschedule.shell import certs  # noqa: E402
from tests.kit import operator as kit  # noqa: E402
from tests.kit.chart import OUTCOME  # noqa: E402
from tests.kit.wait import Timeout, wait_for  # noqa: E402

from . import groundtruth as gt  # noqa: E402

# the soak stops the API server and the controller manager: never on the test cluster (a second soak may
# choose its own directory and offset)
if localcluster.STATE == CACHE / "cluster" or localcluster.PORT_OFFSET == 0:
    raise SystemExit(f"the soak would run on the test cluster ({localcluster.STATE}, port offset 0)")

GROUP, VERSION, PLURAL, FINALIZER = naming.GROUP, naming.VERSION, naming.PLURAL, naming.LEDGER_FINALIZER
_SHIFT = int(os.environ["APPSCHEDULE_PORT_OFFSET"]) - 2000  # a second soak beside the first: another offset
WEBHOOK_PORT = 20501 + _SHIFT  # both replicas listen on it (SO_REUSEPORT)
PORTS = {
    "a": {"metrics": 20502 + _SHIFT, "liveness": 20503 + _SHIFT},
    "b": {"metrics": 20504 + _SHIFT, "liveness": 20505 + _SHIFT},
    "c": {"metrics": 20506 + _SHIFT, "liveness": 20507 + _SHIFT},  # with --shards
}
LEASE = "appschedule-soak"
KILL_GRACE = 1.0  # a request answered this long after a kill was reaped may still have been in flight to it
WHOLE_OUTAGE_EVERY = 4  # every fourth kill takes both replicas down (every third in a short soak)
LISTENING = "admission webhooks listening"  # the admission process logs it once its port is open
CATCH_UP_LIMIT = 30.0
CATCH_UP_BACKLOG_LIMIT = 180.0  # a controller still catching up this long after it returned: measured then
TIMEOUT = 10  # seconds for one API call: an outage must not hang the driver
API_ERRORS = (ApiException, HTTPError, OSError)  # what a call may raise while the API server is away


def log(text: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {text}", flush=True)


# ---------------------------------------------------------------------------------------------------
# The workload


@dataclass(frozen=True)
class TaskSpec:
    name: str
    schedule: str
    outcome: str | None  # None (succeeds), "fail" or "hang"
    policy: str  # Forbid | Allow

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": self.name,
            "schedule": self.schedule,
            "command": ["/app/task", self.name],
            "concurrencyPolicy": self.policy,
        }
        if self.outcome:
            body["podAnnotations"] = {OUTCOME: self.outcome}
        if self.outcome == "hang":
            body["activeDeadlineSeconds"] = 90
        return body


def workload(rng: random.Random, count: int, tasks_each: int) -> dict[str, list[TaskSpec]]:
    """AppSchedule name -> its tasks, chosen by the seed."""
    plan = {}
    for i in range(count):
        tasks = []
        for j in range(tasks_each):
            roll = rng.random()
            outcome = "fail" if roll < 0.10 else "hang" if roll < 0.16 else None
            schedule = "*/2 * * * *" if rng.random() < 0.15 else "* * * * *"
            policy = "Allow" if rng.random() < 0.3 else "Forbid"
            tasks.append(TaskSpec(f"task-{j}", schedule, outcome, policy))
        plan[f"app-{i:02d}"] = tasks
    return plan


def namespace_of(appschedule: str, namespaces: int) -> str:
    return f"soak-{int(appschedule.split('-')[1]) % namespaces}"


def deployment_of(appschedule: str) -> str:
    return f"web-{int(appschedule.split('-')[1]) % 2}"


# ---------------------------------------------------------------------------------------------------
# The plan of chaos: (seconds after the start, action, argument), fixed by the seed


@dataclass(order=True)
class Step:
    at: float
    action: str = field(compare=False)
    arg: str = field(default="", compare=False)


def chaos_plan(rng: random.Random, seconds: float, names: list[str], replicas: str = "ab") -> list[Step]:
    long = seconds >= 600
    # the controller manager is away over two minute boundaries at least, so some fires are really missed
    kcm = 180.0 if long else 90.0
    apiserver = 120.0 if long else 30.0
    kcm_at = _at_second(rng.uniform(0.12, 0.3) * seconds, 40)  # away over two boundaries at least
    # after the controller manager's catch-up has been measured (its backlog may take CATCH_UP_LIMIT itself)
    api_at = max(kcm_at + kcm + CATCH_UP_LIMIT * 3 + 15, rng.uniform(0.5, 0.65) * seconds)
    steps = [
        Step(kcm_at, "stop", "kube-controller-manager"),
        Step(kcm_at + kcm, "start", "kube-controller-manager"),
        Step(api_at, "stop", "kube-apiserver"),
        Step(api_at + apiserver, "start", "kube-apiserver"),
    ]
    outages = [(kcm_at, kcm_at + kcm), (api_at, api_at + apiserver)]
    # no kill while the API server is away (the operator could not start) or while catch-up is measured
    settle = CATCH_UP_LIMIT * 2 + 10  # the controllers' backlog, then the operator's catch-up
    quiet = [(kcm_at + kcm - 5, kcm_at + kcm + settle), (api_at - 5, api_at + apiserver + settle)]

    def free(at: float, windows: list[tuple[float, float]]) -> bool:
        return not any(start <= at <= end for start, end in windows)

    def every(low: float, high: float, action: str, arg: Callable[[], str] = lambda: "") -> None:
        at = rng.uniform(low, high) / 2
        while at < seconds:
            steps.append(Step(at, action, arg()))
            at += rng.uniform(low, high)

    low, high = (30.0, 120.0) if long else (20.0, 45.0)  # a short soak still kills it a few times
    every(low, high, "kill")
    steps[:] = [s for s in steps if s.action != "kill" or (free(s.at, quiet) and s.at < seconds)]
    whole = WHOLE_OUTAGE_EVERY if long else 2
    # both down: not while the controller manager is away or making its backlog's Jobs (no Job would need a
    # key), nor near the API server's outage; the operator's catch-up is measured on the backlog's Jobs only
    apart = [(kcm_at - 15, kcm_at + kcm + 30), quiet[1]]
    for n, step in enumerate(s for s in steps if s.action == "kill"):
        step.arg = replicas[n % len(replicas)]  # one replica, in turn, the others serving: whatever it leads
        if n % whole == whole - 1:  # both, down from :57 to :03 (execute): across a fire
            for at in (step.at - (step.at - 57) % 60, _at_second(step.at, 57)):  # the :57 before it, or after
                if 0 < at < seconds and free(at, apart) and free(at + 15, apart):
                    step.at, step.arg = at, "all"
                    break
    steps.sort()
    every(120, 240, "rollout", lambda: rng.choice(["web-0", "web-1"]) + f"@{rng.randrange(5)}")
    every(45, 90, "edit", lambda: f"{rng.choice(names)}/task-{rng.randrange(2)}")
    every(40, 80, "duplicate", lambda: rng.choice(names))
    # suspensions: from :30 to :30 one to three minutes later; neither end near the API server's outage (the
    # ledger settles a suspended time while the CronJob is suspended and it can see so; DESIGN "The ledger")
    api_window = (api_at - 30, api_at + apiserver + 45)
    at = rng.uniform(0, 60)
    while at + 90 < seconds:
        start = _half_past(at)
        end = _half_past(start + rng.uniform(40, 170) if long else start + 40)
        if end < seconds and free(start, [api_window]) and free(end, [api_window]):
            name = rng.choice(names)
            steps += [Step(start, "suspend", name), Step(end, "resume", name)]
        at = end + rng.uniform(30, 120)
    for _ in range(2 if long else 1):
        steps.append(Step(rng.uniform(0.3, 0.9) * seconds, "replace", rng.choice(names)))
    # nothing is written while the API server is away (the controller manager's outage leaves it up)
    return sorted(s for s in steps if free(s.at, [outages[1]]) or s.action in ("stop", "start"))


def _at_second(at: float, second: float) -> float:
    """``at`` moved to the next ``second`` of a wall-clock minute (the plan starts at :00)."""
    return at - at % 60 + second + (60 if at % 60 > second else 0)


def _half_past(at: float) -> float:
    """``at`` moved to the next :30 of a wall-clock minute (the plan is relative; the soak starts at :00)."""
    return at - at % 60 + 30 + (60 if at % 60 > 30 else 0)


@dataclass
class CatchUp:
    component: str
    began: float  # when the outage began
    ended: float  # when the component was back
    last_poll: float = 0.0
    clean_since: float | None = None  # first poll of the current run of polls with nothing lagging
    last_job: float | None = None  # when the last Job created since the outage began was created
    lagging: list[str] = field(default_factory=list)  # what the last poll that found any found


# ---------------------------------------------------------------------------------------------------
# Processes


class Operator(kit.Operator):
    """One replica of the operator under chaos (the kit's launcher): counting its kills and the exits it did
    not ask for, and keeping the spans of time its webhooks served (from its port seen open to its kill)."""

    def __init__(self, replica: str, kubeconfig: Path, log_path: Path, cert_dir: Path, shards: int = 1) -> None:
        ports = PORTS[replica]
        args = [
            "run",
            "--log-format",
            "json",
            *(["--shards", str(shards)] if shards > 1 else ["--leader-elect"]),
            "--leader-election-namespace",
            "default",
            "--leader-election-name",
            LEASE,
            "--liveness",
            f"http://127.0.0.1:{ports['liveness']}/healthz",
            "--webhook-port",
            str(WEBHOOK_PORT),
            "--webhook-cert-dir",  # one certificate for both: the configuration they both keep is the same
            str(cert_dir),
            "--webhooks",
            "keys,validation",
            "--webhook-config-name",
            "soak.appschedule.dev",
            "--metrics-port",
            str(ports["metrics"]),
        ]
        env = dict(os.environ, POD_NAME=f"soak-{replica}")  # its identity on the Lease
        super().__init__(args, log=log_path, kubeconfig=kubeconfig, env=env, name=f"operator-{replica}")
        self.unexpected_exits = 0
        self.kills = 0
        self.serving: list[list[float | None]] = []  # [from, until] on time.time()
        self._mark = 0

    def launch(self) -> None:
        self._mark = self.size()
        self.start()

    def await_ready(self, timeout: float = 90) -> None:
        """Wait for the replica launched last to have started and to listen for admissions."""
        wait_for(
            lambda: kit.STARTED in (text := self.text(self._mark)) and LISTENING in text,
            timeout=timeout,
            what=f"{self.name} to start and listen",
            interval=0.1,
            guard=self.guard,
        )
        self.serving.append([time.time(), None])

    def start_and_wait(self, *, ready: str = kit.STARTED, timeout: float = 60) -> None:
        self.launch()
        self.await_ready(timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int | None:
        if self.serving and self.serving[-1][1] is None:
            self.serving[-1][1] = time.time()
        return super().stop(sig, timeout)

    def kill(self) -> int | None:
        """SIGKILL to its process group, as a container is killed: the admission process (which holds the
        webhook's socket) dies with the controller, not a moment later by the parent-death signal."""
        if self.serving and self.serving[-1][1] is None:
            self.serving[-1][1] = time.time()
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        return None if self.process is None else self.process.returncode

    def check(self) -> None:
        """Start it again if it exited on its own (counted: it must not happen)."""
        if self.process is not None and self.process.poll() is not None:
            self.unexpected_exits += 1
            if self.serving and self.serving[-1][1] is None:
                self.serving[-1][1] = time.time()  # at the latest: the exit was seen only now
            log(f"{self.name} exited on its own with {self.process.returncode}; starting it again")
            self.start_and_wait(timeout=90)


# ---------------------------------------------------------------------------------------------------
# The soak


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.cluster = localcluster.LocalCluster()
        self.out = Path(args.out)
        self.plan = workload(self.rng, args.appschedules, args.tasks)
        self.live: dict[str, list[TaskSpec]] = {}  # AppSchedules that exist now
        self.replaced = 0
        self.done: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.catch_up: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self.api_down = False
        self.sources: dict[str, str] = {}  # live AppSchedule -> the plan's name it stands for
        self.kills: list[tuple[float, float]] = []  # every SIGKILL of a replica: sent, and the exit seen
        self.chaos_began = 0.0  # time.time() at the plan's 0

    # -- API access (every call bounded: the API server goes away on purpose)

    def connect(self) -> None:
        self.api = config.new_client_from_config(config_file=str(self.cluster.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def appschedules(self) -> list[dict[str, Any]]:
        result = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, _request_timeout=TIMEOUT)
        return list(result["items"])

    def jobs(self) -> list[dict[str, Any]]:
        raw = self.batch.list_job_for_all_namespaces(
            label_selector=f"{GROUP}/task", _preload_content=False, _request_timeout=TIMEOUT
        )
        return list(json.loads(raw.data)["items"])

    def create_appschedule(self, name: str, plan: list[TaskSpec], source: str) -> None:
        namespace = namespace_of(source, self.args.namespaces)
        # a task name is unique beside its Deployment (DESIGN "Task ownership")
        tasks = [TaskSpec(f"{name}-{t.name}", t.schedule, t.outcome, t.policy) for t in plan]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "AppSchedule",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"deploymentRef": {"name": deployment_of(source)}, "tasks": [t.body() for t in tasks]},
        }
        self.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body, _request_timeout=TIMEOUT)
        self.live[name] = tasks
        self.sources[name] = source

    # -- set-up

    def setup(self) -> None:
        if self.cluster.running():
            log("a soak cluster from an earlier run is up: stopping it for a fresh audit log")
            self.cluster.down()
        self.cluster.up(real_node=False, build=False)
        self.connect()
        kubectl = localcluster.binary("kubectl")
        crds = [REPO / "crds" / f"appschedule.dev_{p}.yaml" for p in ("appschedules", "appschedulecalendars")]
        env = dict(os.environ, KUBECONFIG=str(self.cluster.kubeconfig))
        files = [arg for crd in crds for arg in ("-f", str(crd))]
        subprocess.run([kubectl, "apply", "--server-side", *files], env=env, check=True, capture_output=True)
        jsonpath = "jsonpath={.status.conditions[?(@.type=='Established')].status}"
        get = [kubectl, "get", "crd", "appschedules.appschedule.dev", "-o", jsonpath]
        # not `kubectl wait`: it fails, not waits, while the new CRD has no conditions yet
        _wait(
            lambda: subprocess.run(get, env=env, capture_output=True, text=True).stdout.strip() == "True",
            60,
            "the AppSchedule CRD to be Established",
        )
        self.out.mkdir(parents=True, exist_ok=True)
        cert_dir = self.out / "webhook-certs"
        certs.generate(cert_dir, ["127.0.0.1", "localhost"])
        self.replicas = {
            name: Operator(name, self.cluster.kubeconfig, self.out / f"operator-{name}.log", cert_dir, self.args.shards)
            for name in (PORTS if self.args.shards > 1 else "ab")
        }
        self.restart(list(self.replicas.values()))
        for n in range(self.args.namespaces):
            namespace = f"soak-{n}"
            self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
            _wait(
                lambda ns=namespace: any(  # type: ignore[misc]
                    sa.metadata.name == "default" for sa in self.core.list_namespaced_service_account(ns).items
                ),
                60,
                f"the default ServiceAccount in {namespace}",
            )
            for d in range(2):
                self.apps.create_namespaced_deployment(namespace, _deployment(f"web-{d}", "1.0"))
        for name, tasks in self.plan.items():
            self.create_appschedule(name, tasks, name)
        total = sum(len(t) for t in self.live.values())
        _wait(
            lambda: len(self.batch.list_cron_job_for_all_namespaces(label_selector=f"{GROUP}/task").items) == total,
            180,
            f"{total} CronJobs",
        )
        _wait(self._all_tracked, 180, "every task tracked by the ledger")
        log(f"{len(self.live)} AppSchedules with {total} tasks in {self.args.namespaces} namespaces are running")

    def _all_tracked(self) -> bool:
        statuses = self.statuses()
        return all(
            (ns, name, t.name) in statuses
            for name, tasks in self.live.items()
            for ns in [namespace_of(self.sources[name], self.args.namespaces)]
            for t in tasks
        )

    def statuses(self) -> dict[gt.TaskKey, dict[str, Any]]:
        found = {}
        for obj in self.appschedules():
            meta = obj["metadata"]
            for task in (obj.get("status") or {}).get("tasks") or []:
                if task.get("trackingSince"):
                    found[meta["namespace"], meta["name"], task["name"]] = task
        return found

    # -- the chaos phase

    def run(self) -> None:
        seconds = self.args.minutes * 60
        plan = chaos_plan(self.rng, seconds, sorted(self.plan), "".join(self.replicas))
        (self.out / "plan.json").write_text(json.dumps([s.__dict__ for s in plan], indent=1))
        # the plan is relative to a minute boundary, so its :30 suspensions fall at :30
        time.sleep(60 - time.time() % 60)
        start = self.chaos_began = time.time()
        log(f"chaos for {self.args.minutes} min: {len(plan)} steps, seed {self.args.seed}")
        pending: CatchUp | None = None
        began = time.time()
        for step in plan:
            while time.time() < start + step.at:
                if pending is not None:
                    pending = self.poll_catch_up(pending)
                elif not self.api_down:
                    self.check_replicas()
                time.sleep(min(1.0, max(0.0, start + step.at - time.time())))
            if step.action == "stop":
                began = time.time()
            try:
                self.execute(step)
            except (*API_ERRORS, ValueError, LookupError) as error:
                self.skipped[step.action] += 1
                reason = " ".join(str(error).split())[:160]
                log(f"{step.action} {step.arg}: not done ({type(error).__name__}: {reason})")
            if step.action == "start":
                pending = CatchUp(step.arg, began, time.time())
        while pending is not None:
            pending = self.poll_catch_up(pending)
            time.sleep(1)
        left = start + seconds - time.time()
        if left > 0:
            time.sleep(left)

    def execute(self, step: Step) -> None:
        action, arg = step.action, step.arg
        if action == "kill":
            targets = list(self.replicas.values()) if arg == "all" else [self.replicas[arg]]
            leader = self.leader()
            for replica in targets:
                sent = time.time()
                replica.kill()
                replica.kills += 1
                self.kills.append((sent, time.time()))
            if arg == "all":  # down across the fire: from :57 until :03 as planned, even when the step ran late
                time.sleep(max(0.0, self.chaos_began + step.at + 6 - time.time()))
            self.restart(targets)
            arg = f"{arg} (the leader was {leader or 'unknown'})"
        elif action == "stop":
            log(f"stopping {arg}")
            self.api_down = arg == "kube-apiserver"
            # SIGKILL after 5 s: the API server's graceful shutdown took 20 s of a 30 s outage, which then
            # lasted 10 s
            self.cluster.stop(arg, timeout=5)
        elif action == "start":
            self.cluster.start(arg)
            self.api_down = False
            for component in localcluster.COMPONENTS:  # one may have given up while the API server was gone
                if component not in self.cluster.running():
                    log(f"{component} exited during the outage: starting it again")
                    self.cluster.start(component)
            self.check_replicas()
        elif action == "rollout":
            name, tag = arg.split("@")
            for n in range(self.args.namespaces):
                self.apps.patch_namespaced_deployment(
                    name,
                    f"soak-{n}",
                    {
                        "spec": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "web",
                                            "image": f"registry.example.com/soak/web:1.{tag}.{self.done['rollout']}",
                                        }
                                    ]
                                }
                            }
                        }
                    },
                    _request_timeout=TIMEOUT,
                )
        elif action == "edit":
            name, task = arg.split("/")
            name = self.current(name)
            index = int(task.split("-")[1])
            self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace(name),
                PLURAL,
                name,
                [{"op": "add", "path": f"/spec/tasks/{index}/args", "value": [f"--edit={self.done['edit']}"]}],
                _content_type="application/json-patch+json",
                _request_timeout=TIMEOUT,
            )
        elif action in ("suspend", "resume"):
            name = self.current(arg)
            self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace(name),
                PLURAL,
                name,
                {"spec": {"suspend": action == "suspend"}},
                _request_timeout=TIMEOUT,
            )
        elif action == "duplicate":
            self.duplicate(self.current(arg))
        elif action == "replace":
            old = self.current(arg)
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace(old), PLURAL, old, _request_timeout=TIMEOUT
            )
            self.replaced += 1
            self.live.pop(old)
            self.create_appschedule(f"{arg}-r{self.replaced}", self.plan[arg], arg)
        self.done[action] += 1
        log(f"{action} {arg}")

    def restart(self, replicas: list[Operator]) -> None:
        """Start them all, then wait for each (they start side by side: an outage lasts one start)."""
        for replica in replicas:
            replica.launch()
        for replica in replicas:
            replica.await_ready(timeout=90)

    def check_replicas(self) -> None:
        for replica in self.replicas.values():
            replica.check()

    def leader(self) -> str | None:
        """The replica the Lease names (its holder is soak-<replica>_<suffix>, from POD_NAME), None when unreadable;
        with shards, the holder of each shard's Lease in order ("-": none)."""
        leases = [f"{LEASE}-shard-{n}" for n in range(self.args.shards)] if self.args.shards > 1 else [LEASE]
        holders = []
        coordination = client.CoordinationV1Api(self.api)
        for name in leases:
            try:
                lease = coordination.read_namespaced_lease(name, "default", _request_timeout=TIMEOUT)
            except API_ERRORS:
                holders.append("-")
                continue
            holders.append((lease.spec.holder_identity or "").removeprefix("soak-").split("_")[0] or "-")
        return None if set(holders) == {"-"} else ",".join(holders)

    def current(self, original: str) -> str:
        """The live AppSchedule that stands for ``original`` (it may have been replaced)."""
        return next(name for name in sorted(self.live, reverse=True) if self.sources[name] == original)

    def namespace(self, name: str) -> str:
        return namespace_of(self.sources[name], self.args.namespaces)

    def duplicate(self, name: str) -> None:
        """A Job made by hand for the scheduled time of the task's newest Job: the ledger must see a duplicate."""
        namespace = self.namespace(name)
        raw = self.batch.list_namespaced_job(
            namespace, label_selector=f"{GROUP}/appschedule={name}", _preload_content=False, _request_timeout=TIMEOUT
        )
        owned = [j for j in json.loads(raw.data)["items"] if j["metadata"].get("ownerReferences")]
        if not owned:
            raise LookupError(f"no Job of {name} yet")
        newest = max(owned, key=lambda j: (j["metadata"]["creationTimestamp"], j["metadata"]["name"]))
        meta = newest["metadata"]
        generated = ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name")
        labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in generated}
        template = copy.deepcopy(newest["spec"]["template"])
        template["metadata"]["labels"] = {
            k: v for k, v in (template["metadata"].get("labels") or {}).items() if k not in generated
        }
        spec = {k: v for k, v in newest["spec"].items() if k not in ("selector", "template", "manualSelector")}
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{meta['name'][:40]}-dup{self.done['duplicate']}",
                "namespace": namespace,
                "labels": labels,
                "annotations": {gt.CONTROLLER_TIME: meta["annotations"][gt.CONTROLLER_TIME]},
            },
            "spec": {**spec, "template": template},
        }
        self.batch.create_namespaced_job(namespace, body, _request_timeout=TIMEOUT)

    # -- catching up after an outage

    def poll_catch_up(self, state: CatchUp) -> CatchUp | None:
        """Poll every second after an outage until CATCH_UP_LIMIT + 10 s after the component's own backlog was
        done (it came back, and its controllers created the last Job for a fire due before it came back); caught
        up from the first poll of the final run of polls that found nothing lagging, measured from that moment."""
        now = time.time()
        if now - state.last_poll < 1:
            return state
        state.last_poll = now
        try:
            lag, last_job = self.lagging(state, now)
        except API_ERRORS as error:
            lag, last_job = [f"cannot read: {type(error).__name__}"], None
        if last_job is not None:
            state.last_job = max(state.last_job or 0.0, last_job)
        if lag:
            state.lagging, state.clean_since = lag, None
        elif state.clean_since is None:
            state.clean_since = now
        backlog_done = max(state.ended, state.last_job or 0.0)
        if now - backlog_done < CATCH_UP_LIMIT + 10 and now - state.ended < CATCH_UP_BACKLOG_LIMIT:
            if lag and int(now - state.ended) % 10 == 0:
                log(f"after {state.component}: {len(lag)} lagging, e.g. {lag[:2]}")
            return state
        seconds = None if state.clean_since is None else round(max(0.0, state.clean_since - backlog_done), 1)
        controller = None if state.last_job is None else round(state.last_job - state.ended, 1)
        self.catch_up.append(
            {
                "component": state.component,
                "seconds": seconds,
                "controller_seconds": controller,
                "last_lagging": state.lagging[:5],
            }
        )
        made = "no Job for an earlier fire" if controller is None else f"its last Job for an earlier fire {controller}s"
        log(
            f"after {state.component}: caught up {seconds}s after its backlog was done ({made} after it returned)"
            if seconds is not None
            else f"after {state.component}: NOT caught up: {state.lagging[:3]}"
        )
        if seconds is None or seconds > CATCH_UP_LIMIT:
            self.failures.append(
                f"the operator was not caught up {CATCH_UP_LIMIT:.0f}s after {state.component}'s "
                f"backlog was done: {state.lagging[:3]}"
            )
        return None

    def lagging(self, state: CatchUp, now: float) -> tuple[list[str], float | None]:
        """What the ledger does not hold yet of what the outage left behind: the Jobs created since the outage
        began for fires due before it ended (up to 3 s ago) and the fires due before it ended. Also when the
        last of those Jobs was created (the controllers' own catch-up)."""
        statuses = self.statuses()
        lag = []
        ended = datetime.fromtimestamp(state.ended, UTC)
        last_job = None
        with_job: set[tuple[gt.TaskKey, datetime]] = set()
        for job in self.jobs():
            meta = job["metadata"]
            labels = meta.get("labels") or {}
            key = (meta["namespace"], labels.get(f"{GROUP}/appschedule", ""), labels.get(f"{GROUP}/task", ""))
            created = gt.parse_time(meta.get("creationTimestamp"))
            scheduled = gt.parse_time((meta.get("annotations") or {}).get(gt.CONTROLLER_TIME))
            status = statuses.get(key)
            if status is None or created is None or scheduled is None:
                continue
            with_job.add((key, scheduled))
            since = gt.parse_time(status.get("trackingSince"))
            if since is None or scheduled < since or scheduled > ended or created.timestamp() < state.began - 1:
                continue
            last_job = max(last_job or 0.0, created.timestamp())
            if created.timestamp() > now - 3:
                continue
            filed = (meta.get("annotations") or {}).get(f"{GROUP}/filed")  # recorded, and its record let go
            if not filed and meta["name"] not in {r["name"] for r in status.get("jobs") or []}:
                lag.append(f"Job {meta['namespace']}/{meta['name']} not recorded")
        ended = datetime.fromtimestamp(state.ended, UTC)
        for key, status in statuses.items():
            if key[1] not in self.live:
                continue
            spec = next(t for t in self.live[key[1]] if t.name == key[2])
            # the ledger's rule: the latest fire is settled once it has a Job, the one before it in any case
            latest = croniter(spec.schedule, ended).get_prev(datetime).astimezone(UTC)
            due = latest if (key, latest) in with_job else croniter(spec.schedule, latest).get_prev(datetime)
            checked = gt.parse_time(status.get("checkedUntil"))
            since = gt.parse_time(status.get("trackingSince"))
            if since is not None and due > since and (checked is None or checked < due):
                lag.append(f"{'/'.join(key)} settled only until {status.get('checkedUntil')}, not {due:%H:%M}")
        return lag, last_job

    # -- the end

    def finish(self) -> dict[str, Any]:
        # suspend everything at :20, so no run is on its way, then let the last runs end and the ledger settle
        time.sleep((80 - time.time() % 60) % 60)
        stopped_at = datetime.now(UTC)
        for name in sorted(self.live):
            self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace(name),
                PLURAL,
                name,
                {"spec": {"suspend": True}},
                _request_timeout=TIMEOUT,
            )
        log("every AppSchedule suspended; waiting for the last runs to end and the ledger to settle")
        try:
            _wait(lambda: self.settled(stopped_at), 300, "the last runs to end and the ledger to settle")
        except Timeout as error:
            self.failures.append(str(error) + ": " + "; ".join(self.unsettled(stopped_at)[:5]))
        statuses = {k: v for k, v in self.statuses().items() if k[1] in self.live}
        held = [
            f"{j['metadata']['namespace']}/{j['metadata']['name']}"
            for j in self.jobs()
            if FINALIZER in (j["metadata"].get("finalizers") or [])
        ]
        for replica in self.replicas.values():
            replica.stop()
        logs = self.cluster.state / "logs"
        segments = [*sorted(logs.glob("audit-*.log")), logs / "audit.log"]  # rotated ones first, oldest first
        for segment in segments:
            shutil.copy(segment, self.out / segment.name)
        history = gt.read_audit(_lines(segments))
        specs = {(self.namespace(n), n, t.name): t for n, tasks in self.live.items() for t in tasks}
        rows = gt.compare(
            history,
            statuses,
            schedules={k: specs[k].schedule for k in statuses},
            forbid={k: specs[k].policy == "Forbid" for k in statuses},
        )
        differing = [r for r in rows if not r.same]
        for row in differing:
            self.failures.append(f"{'/'.join(row.task)}: ledger {row.ledger.as_dict()} truth {row.truth.as_dict()}")
        if len(rows) != sum(len(t) for t in self.live.values()):
            self.failures.append(f"{len(rows)} tasks in the status, {sum(len(t) for t in self.live.values())} live")
        if history.duplicate_cronjobs:
            self.failures.append(f"duplicate CronJobs: {history.duplicate_cronjobs[:5]}")
        if held:
            self.failures.append(f"{len(held)} Jobs left behind the ledger's finalizer: {held[:5]}")
        keys = self.key_check(history)
        if keys["unexplained"]:
            self.failures.append(
                f"{len(keys['unexplained'])} Jobs admitted without their key while a replica served: "
                f"{keys['unexplained'][:5]}"
            )
        exits = sum(r.unexpected_exits for r in self.replicas.values())
        if exits:
            self.failures.append(f"the operator's replicas exited on their own {exits} times")
        fields = ("runs", "duplicates", "failed", "missed", "unkeyed")
        totals = {
            side: {k: sum(getattr(r, side).as_dict()[k] for r in rows) for k in fields} for side in ("truth", "ledger")
        }
        return {
            "seed": self.args.seed,
            "minutes": self.args.minutes,
            "tasks": len(rows),
            "appschedules": len(self.live),
            "audit_events": history.events,
            "jobs_created": len(history.jobs),
            "totals": totals,
            "tasks_identical": len(rows) - len(differing),
            "catch_up": self.catch_up,
            "chaos": dict(self.done),
            "chaos_not_done": dict(self.skipped),
            "operator_kills": {name: r.kills for name, r in self.replicas.items()},
            "operator_errors": sum(_errors(r.log) for r in self.replicas.values()),
            "keys": {k: v if isinstance(v, int) else len(v) for k, v in keys.items()},
            "failures": self.failures,
        }

    def key_check(self, history: gt.History) -> dict[str, Any]:
        """Every Job (of any task) whose create request ran while a replica served, from before the request
        arrived to after it was answered, carries its key. An unkeyed one is excused when no replica served
        then (a whole-operator outage: the ledger counts it, compared per task) or a replica was killed during
        the request (it may have gone to that one, as it would to a pod killed behind a Service)."""
        spans = [
            (start, end if end is not None else float("inf"))
            for replica in self.replicas.values()
            for start, end in replica.serving
            if start is not None
        ]
        found: dict[str, Any] = {"keyed": 0, "unkeyed_none_serving": 0, "unkeyed_in_flight_at_a_kill": 0}
        unexplained: list[str] = []
        for job in history.jobs.values():
            if job.keyed:
                found["keyed"] += 1
                continue
            received = (job.received or job.created).timestamp()
            answered = (job.answered or job.created).timestamp()
            if not any(start <= received and answered <= end for start, end in spans):
                found["unkeyed_none_serving"] += 1
            elif any(received <= reaped + KILL_GRACE and sent <= answered for sent, reaped in self.kills):
                found["unkeyed_in_flight_at_a_kill"] += 1
            else:
                unexplained.append(f"{job.namespace}/{job.name}")
        found["unexplained"] = unexplained
        return found

    def settled(self, stopped_at: datetime) -> bool:
        return not self.unsettled(stopped_at)

    def unsettled(self, stopped_at: datetime) -> list[str]:
        waiting = []
        for job in self.jobs():
            meta, status = job["metadata"], job.get("status") or {}
            if not any(
                c.get("status") == "True" and c.get("type") in ("Complete", "Failed")
                for c in status.get("conditions") or []
            ):
                waiting.append(f"Job {meta['name']} still active")
            elif FINALIZER in (meta.get("finalizers") or []):
                waiting.append(f"Job {meta['name']} still held")
        statuses = self.statuses()
        for name, tasks in self.live.items():
            for task in tasks:
                status = statuses.get((self.namespace(name), name, task.name)) or {}
                last = croniter(task.schedule, stopped_at).get_prev(datetime).astimezone(UTC)
                checked = gt.parse_time(status.get("checkedUntil"))
                if checked is None or checked < last:
                    waiting.append(f"{name}/{task.name} settled until {status.get('checkedUntil')}")
                if any(not r.get("finished") for r in status.get("jobs") or []):
                    waiting.append(f"{name}/{task.name} has a run not yet recorded as finished")
        return waiting

    def teardown(self) -> None:
        for replica in getattr(self, "replicas", {}).values():
            with contextlib.suppress(Exception):
                replica.stop()
        if not self.args.keep_cluster:
            self.cluster.down()


def _deployment(name: str, tag: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": f"registry.example.com/soak/web:{tag}"}]},
            },
        },
    }


def _wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    """The kit's wait, polling every second, an API server away on purpose counting as "not yet"."""
    wait_for(check, timeout=timeout, what=what, interval=1, ignore=API_ERRORS)


def _lines(paths: list[Path]) -> Iterator[str]:
    for path in paths:
        with open(path) as lines:
            yield from lines


def _errors(path: Path) -> int:
    count = 0
    with contextlib.suppress(OSError), open(path, errors="replace") as lines:
        for line in lines:
            if '"levelname": "ERROR"' in line or "Traceback" in line:
                count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the chaos phase (default 10)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--appschedules", type=int, default=50)
    parser.add_argument("--shards", type=int, default=1, help="more than 1: three replicas share this many shards")
    parser.add_argument("--tasks", type=int, default=4, help="tasks per AppSchedule (default 4)")
    parser.add_argument("--namespaces", type=int, default=5)
    parser.add_argument("--out", default=str(CACHE / "soak-report"), help="where the report is left")
    parser.add_argument("--keep-cluster", action="store_true", help="leave the soak cluster running")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not (out / "plan.json").exists():
        parser.error(f"{out} is not empty and holds no earlier soak report: give another --out")
    shutil.rmtree(out, ignore_errors=True)
    soak = Soak(args)
    try:
        soak.setup()
        soak.run()
        report = soak.finish()
    finally:
        soak.teardown()
    (Path(args.out) / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "failures"}, indent=1))
    for failure in report["failures"][:40]:
        print("FAIL", failure)
    verdict = "failed" if report["failures"] else "passed"
    print(
        f"soak {verdict}: {report['tasks_identical']}/{report['tasks']} tasks identical to ground truth; "
        f"report in {args.out}"
    )
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
