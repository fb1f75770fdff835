"""The ``appschedule`` command: run | render | next | key | claim | crd | release-jobs.

Bad input gets one line on stderr and exit status 1 (2 for usage), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import logging
import os
import re
import socket
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .core import blackout, crontab, jssource, keys, models, naming, phpsource, pysource, rbsource, render, schedule
from .core.shards import SHARDS_MAX

if TYPE_CHECKING:
    from .shell import webhook_server

CRD_PATH = Path("crds") / f"{naming.GROUP}_{naming.PLURAL}.yaml"
CALENDAR_CRD_PATH = Path("crds") / f"{naming.GROUP}_{naming.CALENDAR_PLURAL}.yaml"
CHART_CRD_PATH = Path("charts") / "appschedule-operator" / "files" / CRD_PATH.name  # the chart's copy
CHART_CALENDAR_CRD_PATH = CHART_CRD_PATH.parent / CALENDAR_CRD_PATH.name


class UserError(Exception):
    """A problem with what the user gave us; printed as one line."""


def _load_documents(path: str) -> list[dict[str, Any]]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as error:
        raise UserError(f"{path}: {error.strerror or error}") from None
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise UserError(f"{path}: not valid YAML{where}") from None
    if not all(isinstance(d, dict) for d in documents):
        raise UserError(f"{path}: every YAML document must be a mapping")
    return documents


def _one(path: str, kind: str) -> dict[str, Any]:
    found = [d for d in _load_documents(path) if d.get("kind") == kind]
    if len(found) != 1:
        raise UserError(f"{path}: expected exactly one {kind}, found {len(found)}")
    return found[0]


def crd_yaml(calendar: bool = False) -> str:
    command = "appschedule crd --calendar" if calendar else "appschedule crd"
    header = f"# Generated from operator/appschedule/core/models.py by `{command}`; do not edit.\n"
    return header + yaml.safe_dump(models.calendar_crd() if calendar else models.crd(), sort_keys=False, width=120)


def cmd_crd(args: argparse.Namespace) -> int:
    text = crd_yaml(args.calendar)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    appschedule = _one(args.filename, "AppSchedule")
    deployment = _one(args.deployment, "Deployment")
    result = render.render(appschedule, deployment)
    for error in result.errors:
        print(f"error: {error}", file=sys.stderr)
    sys.stdout.write(yaml.safe_dump_all(list(result.cronjobs.values()), sort_keys=False, width=120))
    return 1 if result.errors else 0


def _parse_time(text: str) -> datetime:
    try:
        return keys.given_time("--after", text)
    except ValueError as error:
        raise UserError(str(error)) from None


def cmd_next(args: argparse.Namespace) -> int:
    appschedule = _one(args.filename, "AppSchedule")
    if args.count < 1:
        raise UserError(f"-n {args.count}: give a positive number of runs")
    after = _parse_time(args.after) if args.after else datetime.now(UTC)
    parsed = render.parse_spec(appschedule.get("spec") or {})
    spec, errors = parsed.spec, parsed.errors
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    status = 1 if errors else 0
    if spec is None:
        return 1
    metadata = appschedule.get("metadata") or {}
    namespace, name = str(metadata.get("namespace") or args.namespace), str(metadata.get("name") or "")
    for task in spec.tasks:
        settings = task.resolved(spec)
        zone, windows = settings["timeZone"], blackout.of(settings["blackouts"])
        try:
            # the schedule its CronJob runs: H forms hashed from the namespace, AppSchedule and task names
            resolved = schedule.resolve_hashed(task.schedule, schedule.hashed_seed(namespace, name, task.name))
            task_schedule = schedule.parse(resolved, zone)
        except schedule.ScheduleError as error:
            print(f"error: task {task.name!r}: {error}", file=sys.stderr)
            status = 1
            continue
        shown = task.schedule if resolved == task.schedule else f"{task.schedule} = {resolved} in {namespace}"
        print(f"{task.name} ({shown}, {zone}):")
        fires: list[datetime] = []
        moment = after
        while len(fires) < args.count:  # past the task's blackouts: the fires whose runs start
            found = blackout.next_allowed(task_schedule, windows, moment)
            if found is None:
                break
            fires.append(found)
            moment = found
        for fire in fires:
            local = fire.astimezone(task_schedule.zone)
            print(f"  {keys.rfc3339(fire)}  {local.isoformat()} {zone}")
    return status


def name_without_passwd_entry() -> None:
    """kopf names this process among its peers after its user (getpass), unless POD_ID names it (the chart
    sets it). The image's user is numeric with no passwd entry, where getpass raises: the host's name then."""
    if "POD_ID" in os.environ:
        return
    try:
        getpass.getuser()
    except (KeyError, OSError):
        os.environ["POD_ID"] = socket.gethostname()


def cmd_run(args: argparse.Namespace) -> int:
    """Start the operator: explicit kopf settings live in handlers.startup, these are the process's."""
    import asyncio

    import kopf

    from .core import admission
    from .shell import controller, handlers, webhook_server

    if args.resync_seconds <= 0 or args.workers < 1 or args.full_resync_every < 1:
        raise UserError("--resync-seconds, --workers and --full-resync-every must be positive")
    odd = [n for n in args.namespace or () if len(n) > 63 or not naming.DNS_LABEL.match(n)]
    if odd:  # the watches list each namespace by its name: no pattern
        raise UserError(f"--namespace takes a namespace's name, not {', '.join(map(repr, odd))}")
    formats = {"json": kopf.LogFormat.JSON, "plain": kopf.LogFormat.PLAIN, "full": kopf.LogFormat.FULL}
    kopf.configure(verbose=args.verbose, log_format=formats[args.log_format], log_refkey="object")
    if not args.verbose:  # kopf reports every watch event's handler at INFO; ours log each reconcile
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    kinds = {k for k in args.webhooks.split(",") if k}
    if not kinds <= set(admission.WEBHOOK_IDS):
        raise UserError(f"--webhooks: choose from {', '.join(admission.WEBHOOK_IDS)}")
    if args.webhook_service and "/" not in args.webhook_service:
        raise UserError("--webhook-service must be <namespace>/<name>")
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    if args.shards is not None and not 1 <= args.shards <= SHARDS_MAX:
        raise UserError(f"--shards takes a number from 1 to {SHARDS_MAX}")
    if args.shards and args.shards > 1 and len(args.leader_election_name) > 63:  # the label value on every Lease
        raise UserError("--leader-election-name: at most 63 characters with --shards")
    election = handlers.Election(
        args.leader_election_namespace, args.leader_election_name, identity, shards=args.shards or 1
    )
    launch = handlers.Launch(
        controller.Options(
            resync_seconds=args.resync_seconds,
            workers=args.workers,
            full_resync_every=args.full_resync_every,
            metrics_port=args.metrics_port,
        ),
        election=election if args.leader_elect or (args.shards or 1) > 1 else None,
        namespaces=tuple(args.namespace or ()),
    )
    name_without_passwd_entry()
    serving = _serving(args, frozenset(kinds))
    if serving is not None:  # forked now, before kopf starts a thread
        heartbeat = webhook_server.Heartbeat()
        launch.admission = (webhook_server.start(serving, heartbeat), heartbeat)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            kopf.operator(
                standalone=True,  # no kopf peering: the Lease decides who reconciles (--leader-elect)
                clusterwide=not args.namespace,
                namespaces=args.namespace or (),
                memo=kopf.Memo(launch=launch),
            )
        )
    return 1 if launch.admission_lost else 0


def _serving(args: argparse.Namespace, kinds: frozenset[str]) -> webhook_server.Serving | None:
    """What the admission process serves (webhook_server.py): the webhooks, with their certificate from
    --webhook-cert-dir or made now, and the liveness endpoint; None when neither is asked for."""
    import tempfile
    from pathlib import Path
    from urllib.parse import urlsplit

    from .shell import certs, webhook_server

    liveness = None
    if args.liveness:
        url = urlsplit(args.liveness)
        if url.scheme != "http" or not url.port:
            raise UserError("--liveness must be http://HOST:PORT/PATH")
        liveness = (url.hostname or "", url.port, url.path or "/healthz")
    if not args.webhook_port and not liveness:
        return None
    files = scratch = None
    if args.webhook_port:
        if args.webhook_cert_dir:
            files = certs.from_dir(Path(args.webhook_cert_dir))
        else:
            hosts = [args.webhook_host]
            if args.webhook_service:
                namespace, name = args.webhook_service.split("/", 1)
                hosts = [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local", f"{name}.{namespace}"]
            scratch = Path(tempfile.mkdtemp(prefix="appschedule-webhook-"))
            files = certs.generate(scratch, hosts)
    client = webhook_server.client_config(files, args.webhook_port or 0, args.webhook_host, args.webhook_service)
    return webhook_server.Serving(
        kinds=kinds if args.webhook_port else frozenset(),
        port=args.webhook_port,
        addr=args.webhook_addr,
        files=files,
        client=client,
        config_name=(args.webhook_config_name or None) if args.webhook_port else None,
        liveness=liveness,
        scratch=scratch,
    )


def cmd_key(args: argparse.Namespace) -> int:
    """The run's idempotency key inside its container, from its environment (keys.from_environment)."""
    import os

    env = dict(os.environ)
    try:
        scheduled = keys.from_environment(env, datetime.now(UTC))
    except ValueError as error:
        raise UserError(str(error)) from None
    if args.time:
        print(keys.rfc3339(scheduled.time))
    else:
        print(scheduled.key(env.get("APPSCHEDULE_TASK") or ""))
    return 0


def cmd_import_crontab(args: argparse.Namespace) -> int:
    """Print the AppSchedule a crontab means (core/crontab.py), with where each task came from and what was not
    carried over; writes nothing to the cluster."""
    source = Path(args.file)
    try:
        text = sys.stdin.read() if args.file == "-" else source.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{args.file}: {error}") from None
    name = "stdin" if args.file == "-" else str(source)
    where = str(Path(name).resolve()) if name != "-" else name  # etc/cron.d/php from /, as /etc/cron.d/php
    system = args.system if args.system is not None else where.endswith("/etc/crontab") or "/etc/cron.d/" in where
    try:
        found = crontab.read(text, name, datetime.now(UTC), system=system, time_zone=args.time_zone)
    except crontab.CrontabError as error:
        raise UserError(str(error)) from None
    if not found.tasks:
        for line in crontab.comments(found):
            print(line, file=sys.stderr)
        raise UserError(f"{name}: no entry to import")
    _print_imported(args, source.stem, [t.task for t in found.tasks], crontab.comments(found))
    for skipped in found.skipped:
        print(f"not carried over: {skipped.source}: {skipped.reason}", file=sys.stderr)
    return 0


def _print_imported(args: argparse.Namespace, stem: str, tasks: list[dict[str, object]], lines: list[str]) -> None:
    """An import's AppSchedule on stdout (named ``--name``, else after ``stem``), ``lines`` as comments above it.
    A ``$`` in a command or env value is written ``$$``, so Kubernetes passes it on as the app had it."""
    title = args.name or re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[:40] or "imported"
    metadata: dict[str, object] = {"name": title}
    if args.namespace:
        metadata["namespace"] = args.namespace
    document = {
        "apiVersion": f"{naming.GROUP}/{naming.VERSION}",
        "kind": "AppSchedule",
        "metadata": metadata,
        "spec": {"deploymentRef": {"name": args.deployment}, "tasks": [naming.literal_task(t) for t in tasks]},
    }
    header = "".join(f"# {line}\n" for line in lines)
    sys.stdout.write(header + yaml.safe_dump(document, sort_keys=False, width=120))


SOURCE_SKIP = {".git", ".venv", "venv", "node_modules", "site-packages", "__pycache__", ".tox", "build", "dist"}
JS_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")


def cmd_import_source(args: argparse.Namespace) -> int:
    """Print the AppSchedule of the in-app schedules found in a source tree (core/pysource.py: Python's APScheduler
    and Celery beat; core/jssource.py: node-cron and @nestjs/schedule), with where each came from, the code to
    remove, and what has no faithful translation."""
    root = Path(args.dir)
    if not root.is_dir():
        raise UserError(f"{args.dir}: not a directory")
    found: list[pysource.Found] = []
    unfaithful: list[pysource.Unfaithful] = []
    unread: list[str] = []
    for path in sorted(root.rglob("*")):
        if any(part in SOURCE_SKIP or part.startswith(".") for part in path.relative_to(root).parts[:-1]):
            continue
        if path.suffix in JS_SUFFIXES and path.is_file():
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError) as error:
                unread.append(f"{path}: {error}")
                continue
            if not jssource.mentions(text):
                continue
            try:
                scanned = jssource.scan(text, str(path), path.relative_to(root).as_posix(), datetime.now(UTC))
            except ImportError:
                unread.append(f"{path}: reading JavaScript and TypeScript needs tree-sitter: "
                              "pip install 'appschedule-operator[import]'")  # fmt: skip
                continue
            except SyntaxError as error:
                unread.append(f"{error}: not read")
                continue
            found += scanned.found
            unfaithful += scanned.unfaithful
            continue
        if path.suffix == ".php" and path.is_file():
            try:
                text = path.read_text()
                laravel = phpsource.scan(text, str(path)) if phpsource.mentions(text) else pysource.Scan()
            except (OSError, UnicodeDecodeError, SyntaxError) as error:
                unread.append(f"{error}: not read")
                continue
            except ImportError:
                unread.append(f"{path}: reading PHP needs tree-sitter: pip install 'appschedule-operator[import]'")
                continue
            found += laravel.found
            unfaithful += laravel.unfaithful
            continue
        if path.suffix in (".yml", ".yaml") and path.is_file():
            try:
                text = path.read_text()
                recurring = rbsource.scan(text, str(path)) if rbsource.mentions(text) else pysource.Scan()
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
                mark = getattr(error, "problem_mark", None)  # a YAML error knows its line: say it
                where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
                why = getattr(error, "problem", None) or str(error).splitlines()[0]
                unread.append(f"{where}: {why}: not read")
                continue
            found += recurring.found
            unfaithful += recurring.unfaithful
            continue
        if path.suffix != ".py" or not path.is_file():
            continue
        relative = path.relative_to(root).with_suffix("")
        module = ".".join(relative.parts[:-1] if relative.name == "__init__" else relative.parts)
        try:
            scanned = pysource.scan(path.read_text(), str(path), module)
        except SyntaxError as error:
            unread.append(f"{path}:{error.lineno}: Python cannot parse it ({error.msg}): not read")
            continue
        except (OSError, UnicodeDecodeError) as error:
            unread.append(f"{path}: {error}")
            continue
        found += scanned.found
        unfaithful += scanned.unfaithful
    taken: set[str] = set()
    tasks = []
    for item in found:
        task = dict(item.task)
        name, n = str(task["name"]), 2
        while name in taken:
            name = f"{str(task['name'])[:36]}-{n}"
            n += 1
        taken.add(name)
        task["name"] = name
        if "timeZone" not in task and args.time_zone:
            task["timeZone"] = args.time_zone
        tasks.append(task)
    lines = [f"{t['name']}: {f.source} ({f.framework}): remove {f.code!r}" + "".join(f"; {n}" for n in f.notes)
             for t, f in zip(tasks, found, strict=True)]  # fmt: skip
    lines += [f"not carried over: {u.source} ({u.framework}): {u.code!r}: {u.reason}" for u in unfaithful]
    lines += [f"not read: {line}" for line in unread]
    for line in lines[len(tasks) :]:
        print(line, file=sys.stderr)
    if not tasks:
        raise UserError(f"{args.dir}: no schedule found to import")
    _print_imported(args, root.resolve().name, tasks, lines)
    return 0


def cmd_release_jobs(args: argparse.Namespace) -> int:
    """Take the ledger's finalizer off every Job of a task: for uninstalling the operator (a Job still
    running would otherwise wait for a ledger that is gone). Uses the current kubeconfig."""
    from .shell.api import Cluster, api_client

    released = Cluster(api_client()).release_all_jobs(args.namespace or [], naming.LEDGER_FINALIZER)
    print(f"released {released} Job(s)")
    return 0


def cmd_claim(argv: Sequence[str]) -> int:
    """``appschedule claim [--database URL] [--create] -- CMD ARGS...``: the claim library's command-line form
    (libs/python, ``appschedule-claim``), for a task whose image has neither a library call nor a wrapper."""
    try:
        from appschedule_claim.__main__ import main as claim_main
    except ImportError:
        print("appschedule: claim needs the claim library in this image: pip install ./libs/python", file=sys.stderr)
        return 2
    return claim_main(list(argv))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="appschedule", description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the operator against the current kubeconfig or in-cluster config")
    run.add_argument("-n", "--namespace", action="append", help="watch only this namespace (repeatable); default all")
    run.add_argument(
        "--resync-seconds",
        type=float,
        default=60.0,
        help="re-plan from memory this often (no request when nothing changed)",
    )
    run.add_argument(
        "--full-resync-every",
        type=int,
        default=10,
        help="resync periods between two re-plans of every AppSchedule (between them only those "
        "whose next run time passed are re-planned; default 10)",
    )
    run.add_argument("--workers", type=int, default=4, help="AppSchedules reconciled at once (default 4)")
    run.add_argument("--liveness", help="serve a liveness endpoint, e.g. http://0.0.0.0:8080/healthz")
    run.add_argument(
        "--leader-elect",
        action="store_true",
        help="several replicas: the one holding a Lease reconciles, the others wait with warm watches "
        "(every replica serves the webhooks); default: this process reconciles alone",
    )
    run.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE") or "default",
        help="namespace of the Lease (default: $POD_NAMESPACE, else default)",
    )
    run.add_argument(
        "--leader-election-name",
        default="appschedule-operator",
        help="name of the Lease (with --shards: the prefix of the shards' and members' Leases)",
    )
    run.add_argument(
        "--shards",
        type=int,
        help="replicas share the work: the AppSchedules are split into this many shards, each led by one replica "
        "on a Lease of its own and rebalanced when a replica comes or goes (implies --leader-elect; default 1: one "
        "Lease, one leader)",
    )
    run.add_argument("--log-format", choices=["json", "plain", "full"], default="json", help="default json")
    run.add_argument(
        "--webhook-port",
        type=int,
        help="serve the admission webhooks (key injection on Jobs, "
        "validation of AppSchedules) on this port; default: no webhooks",
    )
    run.add_argument("--webhook-addr", default="0.0.0.0", help="address the webhook server listens on")
    run.add_argument(
        "--webhook-host",
        default="127.0.0.1",
        help="host the API server calls the webhooks at (https://HOST:PORT), when no --webhook-service",
    )
    run.add_argument(
        "--webhook-service",
        help="<namespace>/<name> of the Service the API server calls the webhooks through (port 443), in a cluster",
    )
    run.add_argument(
        "--webhook-cert-dir",
        help="directory with tls.crt, tls.key and ca.crt (e.g. from "
        "cert-manager); default: the operator makes a CA and certificate at start",
    )
    run.add_argument(
        "--webhooks",
        default="keys,validation",
        help="which webhooks to serve: keys (on Jobs), validation (of AppSchedules); default both",
    )
    run.add_argument(
        "--webhook-config-name",
        default="appschedule-operator.appschedule.dev",
        help="name of the Mutating/ValidatingWebhookConfiguration the operator keeps (a domain: "
        "its webhooks are named <id>.<this>); empty: they are installed by someone else (the Helm "
        "chart), and the operator only serves them at /key-jobs and /check-appschedules",
    )
    run.add_argument(
        "--no-scanning",
        action="store_true",
        help="accepted for older charts: the operator no longer watches CRDs or namespaces (its own watches list "
        "AppSchedules and retry until the CRD exists)",
    )
    run.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port; default: none")
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    run.set_defaults(func=cmd_run)

    crd = commands.add_parser("crd", help="print the AppSchedule CustomResourceDefinition")
    crd.add_argument("-o", "--output", help="write to this file instead of stdout")
    crd.add_argument("--calendar", action="store_true", help="the AppScheduleCalendar's instead")
    crd.set_defaults(func=cmd_crd)

    rend = commands.add_parser("render", help="print the CronJobs an AppSchedule means, offline")
    rend.add_argument("-f", "--filename", required=True, help="AppSchedule YAML (- for stdin)")
    rend.add_argument("--deployment", required=True, help="Deployment YAML")
    rend.set_defaults(func=cmd_render)

    nxt = commands.add_parser("next", help="print each task's next runs")
    nxt.add_argument("-f", "--filename", required=True, help="AppSchedule YAML (- for stdin)")
    nxt.add_argument("-n", "--count", type=int, default=5, help="runs per task (default 5)")
    nxt.add_argument("--after", help="RFC 3339 time to start from (default: now)")
    nxt.add_argument(
        "--namespace",
        default="default",
        help="namespace the AppSchedule is in, when the file does not say (H forms hash it; default: default)",
    )
    nxt.set_defaults(func=cmd_next)

    key = commands.add_parser(
        "key",
        help="print this run's idempotency key, inside a task's container "
        "(from APPSCHEDULE_* variables; for when the webhook did not set it)",
    )
    key.add_argument("--time", action="store_true", help="print the scheduled time instead of the key")
    key.set_defaults(func=cmd_key)

    release = commands.add_parser(
        "release-jobs",
        help="remove the ledger's finalizer from every task Job "
        "(for uninstalling: the chart's pre-delete hook runs it)",
    )
    release.add_argument("-n", "--namespace", action="append", help="only this namespace (repeatable; default: all)")
    release.set_defaults(func=cmd_release_jobs)

    imports = commands.add_parser(
        "import", help="print an AppSchedule for schedules kept elsewhere (writes nothing to the cluster)"
    )
    sources = imports.add_subparsers(dest="source", required=True, metavar="SOURCE")
    cron = sources.add_parser(
        "crontab",
        help="a crontab (user or system form): one task per entry, with the file and line it came from and "
        "what could not be carried over",
    )
    cron.add_argument("file", metavar="FILE", help="the crontab (- for stdin)")
    cron.add_argument("--deployment", required=True, help="the Deployment whose image runs the tasks")
    cron.add_argument("--name", help="the AppSchedule's name (default: from the file's name)")
    cron.add_argument("-n", "--namespace", help="the AppSchedule's namespace (default: none in the YAML)")
    cron.add_argument(
        "--time-zone",
        default="UTC",
        help="the zone the host's cron read schedules in, before any CRON_TZ (default UTC)",
    )
    form = cron.add_mutually_exclusive_group()
    form.add_argument(
        "--system",
        dest="system",
        action="store_true",
        default=None,
        help="the system form (a user after the schedule; default for /etc/crontab, /etc/cron.d/*)",
    )
    form.add_argument("--user", dest="system", action="store_false", help="the user form (crontab -e)")
    cron.set_defaults(func=cmd_import_crontab)
    source = sources.add_parser(
        "source",
        help="a source tree: the app's own schedules (APScheduler, Celery beat, node-cron, @nestjs/schedule, Solid "
        "Queue, sidekiq-cron, Laravel), one task each, with the file and line, the code to remove, and what has no "
        "faithful translation",
    )
    source.add_argument("dir", metavar="DIR", help="the app's source tree")
    source.add_argument("--deployment", required=True, help="the Deployment whose image runs the tasks")
    source.add_argument("--name", help="the AppSchedule's name (default: from the directory's name)")
    source.add_argument("-n", "--namespace", help="the AppSchedule's namespace (default: none in the YAML)")
    source.add_argument("--time-zone", help="the zone of a task whose schedule names none (default: spec's, UTC)")
    source.set_defaults(func=cmd_import_source)

    commands.add_parser(  # its arguments are the library's own: main() hands them over before parsing
        "claim",
        add_help=False,
        help="inside a task's container: claim this run in the app's database and run CMD only when it won "
        "([--database URL] [--create] -- CMD ARGS...; the claim library's appschedule-claim)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["claim"]:
        return cmd_claim(given[1:])
    args = build_parser().parse_args(given)
    try:
        return int(args.func(args))
    except UserError as error:
        print(f"appschedule: {error}", file=sys.stderr)
        return 1
    except (KeyError, TypeError, AttributeError, ValueError) as error:  # input of a shape nothing expected
        print(f"appschedule: cannot read the input ({type(error).__name__}: {error})", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
