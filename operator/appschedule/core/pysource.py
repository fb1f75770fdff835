"""In-app schedules found in Python source, read with Python's own ``ast`` (``appschedule import source``,
issue 35 item 2, the Python half): pure.

``scan(text, filename, module)`` finds, in one file:

* APScheduler 3: ``@<scheduler>.scheduled_job('cron', ...)`` on a function, ``<scheduler>.add_job(func, 'cron',
  ...)`` (also ``trigger='cron'``), ``add_job(func, CronTrigger(...))`` and ``CronTrigger.from_crontab('...')``;
* Celery beat: a dict assigned to ``beat_schedule`` (``app.conf.beat_schedule = {...}``, a settings module's
  ``CELERY_BEAT_SCHEDULE``/``beat_schedule``, ``app.conf.update(beat_schedule={...})``), each entry's
  ``'schedule': crontab(...)``, and ``sender.add_periodic_task(crontab(...), task.s(...), name=...)``. A field
  may be a number, a string, or a list or set of them; day names may be written in full. A ``solar`` schedule is
  listed; so is a crontab the CronJob controller would not read (the translation is parsed as it would be).

Each becomes a task that runs the function in the Job's own process (``python -c "from module import f; f()"``,
with the entry's literal ``args``/``kwargs``), fires when the framework would (read the module docstrings of each
helper for the rules) and names the file and line it came from, the code to remove. What has no faithful
translation is listed with the reason, never changed:

* an interval (``'interval'``, a number or ``timedelta`` in a beat entry): counted from the process start;
* a one-off ``'date'`` trigger; ``year``, ``week``, ``start_date``, ``end_date``, ``jitter``; a ``second`` other
  than 0; APScheduler's ``last``/``xth`` forms;
* both day of month and day of week restricted: APScheduler and Celery fire on days matching both, a CronJob
  on days matching either;
* a value that is not a literal (a schedule built at run time).

APScheduler 3 numbers the days of the week from Monday (0) and so does ``CronTrigger.from_crontab``: ``0`` there
is Monday, not cron's Sunday; the translation fires on the day APScheduler fires, and says so. Celery numbers
them from Sunday, as cron does.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass, field

from .schedule import ScheduleError, parse

_NAME_PART = re.compile(r"[^a-z0-9]+")
_DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]  # APScheduler's order: 0 = mon
UNFAITHFUL_CRON_ARGS = {
    "year": "a year field",
    "week": "an ISO week field",
    "start_date": "a start date",
    "end_date": "an end date",
    "jitter": "a random jitter",
}


@dataclass(frozen=True)
class Found:
    task: dict[str, object]
    source: str  # FILE:LINE
    code: str  # the code that schedules it in the app: to remove once the AppSchedule runs it
    framework: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unfaithful:
    source: str
    code: str
    framework: str
    reason: str


@dataclass
class Scan:
    found: list[Found] = field(default_factory=list)
    unfaithful: list[Unfaithful] = field(default_factory=list)


class _NotLiteral(ValueError):
    pass


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _NotLiteral(ast.unparse(node)) from None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def task_name(text: str) -> str:
    base = _NAME_PART.sub("-", text.rsplit(".", 1)[-1].lower()).strip("-")[:40].strip("-") or "task"
    return base if base[0].isalpha() else f"t-{base}"[:40]


def _apscheduler_day_of_week(value: str) -> str:
    """APScheduler's day of week (0 = Monday; names; ranges; lists) as cron's (0 = Sunday)."""

    def one(item: str) -> int:
        item = item.strip().lower()
        if item.isdigit() and int(item) <= 6:
            return (int(item) + 1) % 7
        if item[:3] in _DAYS:
            return (_DAYS.index(item[:3]) + 1) % 7
        raise ValueError(f"day_of_week {value!r}: {item!r} is not a day APScheduler knows")

    days: set[int] = set()
    for part in str(value).split(","):
        part = part.strip().lower()
        if part == "*":
            return "*"
        if "/" in part:
            raise ValueError(f"day_of_week {value!r}: a step over days of the week")
        low, dash, high = part.partition("-")
        if dash:
            start = _DAYS.index(low[:3]) if not low.isdigit() else int(low)
            end = _DAYS.index(high[:3]) if not high.isdigit() else int(high)
            days |= {(d + 1) % 7 for d in range(start, end + 1)}
        else:
            days.add(one(part))
    return ",".join(str(d) for d in sorted(days))


def apscheduler_cron(fields: dict[str, object]) -> tuple[str, str | None]:
    """The five cron fields of APScheduler's cron trigger arguments and its ``timezone`` (None: not given).
    Raises ValueError saying what has no counterpart. APScheduler's defaults: fields more significant than the
    least significant one given are ``*``, less significant ones their minimum."""
    for name, what in UNFAITHFUL_CRON_ARGS.items():
        if fields.get(name) is not None:
            raise ValueError(f"{what} ({name}={fields[name]!r}) has no counterpart in a CronJob")
    order = ["month", "day", "day_of_week", "hour", "minute", "second"]
    minimum = {"month": "1", "day": "1", "day_of_week": "*", "hour": "0", "minute": "0", "second": "0"}
    given = [n for n in order if fields.get(n) is not None]
    if not given:
        raise ValueError("a cron trigger with no field: say when it runs")
    least = max(order.index(n) for n in given)
    values: dict[str, str] = {}
    for i, name in enumerate(order):
        if fields.get(name) is not None:
            values[name] = str(fields[name]).strip()
        else:  # more significant than the least given: *; less: its minimum (day of week: *)
            values[name] = minimum[name] if i > least else "*"
    if values["second"] not in ("0", "00"):
        raise ValueError(f"second={values['second']!r}: a CronJob fires at second 0 of a minute")
    for name in ("day", "month", "hour", "minute"):
        if re.search(r"[a-z]", values[name]) and name != "month":
            raise ValueError(f"{name}={values[name]!r} (last, xth...) has no counterpart in a CronJob")
    if values["day"] != "*" and values["day_of_week"] != "*":
        raise ValueError("day and day_of_week are both restricted: APScheduler fires on days matching both, a "
                         "CronJob on days matching either")  # fmt: skip
    dow = _apscheduler_day_of_week(values["day_of_week"])
    zone = fields.get("timezone")
    schedule = f"{values['minute']} {values['hour']} {values['day']} {values['month']} {dow}"
    return schedule, None if zone is None else str(zone)


_WEEKDAY_NAMES = {"sunday": "sun", "monday": "mon", "tuesday": "tue", "wednesday": "wed", "thursday": "thu",
                  "friday": "fri", "saturday": "sat"}  # fmt: skip


def _celery_field(name: str, value: object) -> str:
    """One of Celery's crontab arguments as a cron field: a number, a string, or a list, tuple or set of them
    (Celery takes each); full day names as cron's three letters (Celery reads both)."""
    if isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: not a cron field")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, str):
        text = value.strip()
    elif (
        isinstance(value, list | tuple | set | frozenset)
        and value
        and all(isinstance(v, int | str) and not isinstance(v, bool) for v in value)
    ):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else list(value)
        text = ",".join(str(v).strip() for v in items)
    else:
        raise ValueError(f"{name}={value!r}: not a cron field")
    if name == "day_of_week":
        text = re.sub(r"[A-Za-z]+", lambda m: _WEEKDAY_NAMES.get(m[0].lower(), m[0]), text)
    return re.sub(r"\s+", "", text)


def celery_cron(fields: dict[str, object]) -> str:
    """Celery's ``crontab(minute, hour, day_of_week, day_of_month, month_of_year)`` as five cron fields (its
    defaults are ``*``; day of week 0 = Sunday, as cron). Raises ValueError when it has no counterpart, also when
    the CronJob controller would not read the result (ScheduleError is one)."""
    names = ["minute", "hour", "day_of_week", "day_of_month", "month_of_year"]
    unknown = sorted(set(fields) - set(names))
    if unknown:
        raise ValueError(f"crontab({unknown[0]}=...): no cron field")
    values = {n: _celery_field(n, fields.get(n, "*")) for n in names}
    if values["day_of_month"] != "*" and values["day_of_week"] != "*":
        raise ValueError("day_of_month and day_of_week are both restricted: Celery fires on days matching both, "
                         "a CronJob on days matching either")  # fmt: skip
    expression = " ".join(values[n] for n in ("minute", "hour", "day_of_month", "month_of_year", "day_of_week"))
    try:
        parse(expression)
    except ScheduleError as error:
        raise ValueError(f"{expression!r}: the CronJob controller would not run it: {error}") from None
    return expression


def _command(module: str, function: str, args: object = (), kwargs: object = None) -> list[str]:
    """The Job's command: the function called in its own process with the schedule's literal arguments."""
    if not isinstance(args, list | tuple) or not isinstance(kwargs, dict | None):
        raise ValueError(f"args {args!r} or kwargs {kwargs!r}: not a list and a dict")
    if not all(part.isidentifier() for part in [*module.split("."), function]):
        raise ValueError(f"{module}.{function} is not importable (a directory or file whose name is not a Python "
                         "identifier): the task needs the function's import path")  # fmt: skip
    call = ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in (kwargs or {}).items())])
    return ["python", "-c", f"from {module} import {function}; {function}({call})"]


def _function_of(node: ast.expr, module: str) -> tuple[str, str] | None:
    """(module, function) of a scheduled callable: a name in this module, ``module.function``, or a
    ``'module:function'`` reference string (APScheduler's textual reference)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value:
        where, _, name = node.value.partition(":")
        return where, name
    dotted = _dotted(node)
    if dotted is None:
        return None
    if "." in dotted:
        where, _, name = dotted.rpartition(".")
        return where, name
    return module, dotted


BEAT_NAMES = ("beat_schedule", "CELERY_BEAT_SCHEDULE", "CELERYBEAT_SCHEDULE")


def _names_beat_schedule(node: ast.expr) -> bool:
    """``x.beat_schedule``, ``CELERY_BEAT_SCHEDULE`` or ``x["CELERY_BEAT_SCHEDULE"]``: Celery's schedule table."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in BEAT_NAMES
    return (_dotted(node) or "").rsplit(".", 1)[-1] in BEAT_NAMES


class _Visitor(ast.NodeVisitor):
    def __init__(self, text: str, filename: str, module: str) -> None:
        self.text, self.filename, self.module = text, filename, module
        self.scan = Scan()

    def _where(self, node: ast.AST) -> str:
        return f"{self.filename}:{getattr(node, 'lineno', 0)}"

    def _code(self, node: ast.AST) -> str:
        return (ast.get_source_segment(self.text, node) or ast.unparse(node)).strip()

    def _unfaithful(self, node: ast.AST, framework: str, reason: str) -> None:
        self.scan.unfaithful.append(Unfaithful(self._where(node), self._code(node), framework, reason))

    # -- APScheduler

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) \
                    and decorator.func.attr == "scheduled_job":  # fmt: skip
                self._apscheduler(decorator, decorator.args, decorator.keywords, (self.module, node.name), decorator)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute) and node.func.attr == "add_periodic_task":
            self._periodic_task(node)
        elif isinstance(node.func, ast.Attribute) and node.func.attr == "update" and \
                (_dotted(node.func.value) or "").endswith("conf"):  # fmt: skip
            for keyword in node.keywords:  # app.conf.update(beat_schedule={...})
                if keyword.arg in BEAT_NAMES and isinstance(keyword.value, ast.Dict):
                    self._celery(keyword.value)
            for argument in node.args:  # app.conf.update({"beat_schedule": {...}})
                if isinstance(argument, ast.Dict):
                    for key, value in zip(argument.keys, argument.values, strict=False):
                        if isinstance(key, ast.Constant) and key.value in BEAT_NAMES and isinstance(value, ast.Dict):
                            self._celery(value)
        func = None
        if isinstance(node.func, ast.Attribute) and node.func.attr == "add_job":  # add_job(f, ...) or add_job(func=f)
            func = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "func"), None)
        if func is not None:
            target = _function_of(func, self.module)
            keywords = [k for k in node.keywords if k.arg != "func"]
            if target is None:
                self._unfaithful(node, "APScheduler", "the job's function is not a name: built at run time")
            else:
                self._apscheduler(node, node.args[1:], keywords, target, node)
        self.generic_visit(node)

    def _apscheduler(self, node: ast.AST, args: list[ast.expr], keywords: list[ast.keyword],
                     target: tuple[str, str], code: ast.AST) -> None:  # fmt: skip
        kw = {k.arg: k.value for k in keywords if k.arg}
        trigger = args[0] if args else kw.pop("trigger", None)
        try:
            notes: list[str] = []
            if isinstance(trigger, ast.Call) and (_dotted(trigger.func) or "").endswith("CronTrigger.from_crontab"):
                expression = str(_literal(trigger.args[0]))
                minute, hour, day, month, dow = expression.split()
                fields: dict[str, object] = {"minute": minute, "hour": hour, "day": day, "month": month,
                                             "day_of_week": dow}  # fmt: skip
                fields |= {k.arg: _literal(k.value) for k in trigger.keywords if k.arg}
                if any(c.isdigit() for c in dow):
                    notes.append(f"from_crontab({expression!r}): APScheduler 3 reads day-of-week numbers from Monday "
                                 "(0), not cron's Sunday; translated as APScheduler fires it")  # fmt: skip
            elif isinstance(trigger, ast.Call) and (_dotted(trigger.func) or "").endswith("CronTrigger"):
                fields = {k.arg: _literal(k.value) for k in trigger.keywords if k.arg}
            elif isinstance(trigger, ast.Constant) and trigger.value == "cron":
                skip = {"id", "name", "args", "kwargs", "replace_existing", "misfire_grace_time", "coalesce",
                        "max_instances", "next_run_time", "jobstore", "executor"}  # fmt: skip
                fields = {k: _literal(v) for k, v in kw.items() if k not in skip}
            elif isinstance(trigger, ast.Constant) and trigger.value == "interval":
                self._unfaithful(
                    code, "APScheduler", "an interval trigger counts from the process start, not the clock"
                )
                return
            elif isinstance(trigger, ast.Constant) and trigger.value == "date":
                self._unfaithful(code, "APScheduler", "a date trigger runs once: not a schedule")
                return
            else:
                return  # not a trigger we know: not a schedule of this kind
            schedule, zone = apscheduler_cron(fields)
            args_value = _literal(kw["args"]) if "args" in kw else ()
            kwargs_value = _literal(kw["kwargs"]) if "kwargs" in kw else None
            name_node = kw.get("id") or kw.get("name")
            name = str(_literal(name_node)) if name_node is not None else target[1]
            command = _command(*target, args_value, kwargs_value)
        except _NotLiteral as error:
            self._unfaithful(code, "APScheduler", f"{error} is not a literal: a schedule built at run time")
            return
        except (ValueError, IndexError) as error:
            self._unfaithful(code, "APScheduler", str(error))
            return
        task: dict[str, object] = {"name": task_name(name), "schedule": schedule,
                                   "command": command}  # fmt: skip
        if zone:
            task["timeZone"] = zone
        else:
            notes.append("no timezone in the trigger: the scheduler's (or the host's) zone applied; the task's is "
                         "spec.timeZone (or --time-zone)")  # fmt: skip
        self.scan.found.append(Found(task, self._where(code), self._code(code), "APScheduler", tuple(notes)))

    # -- Celery beat

    def _periodic_task(self, node: ast.Call) -> None:
        """``sender.add_periodic_task(schedule, sig, name=...)``: Celery's other form, one entry of the table."""
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        schedule = node.args[0] if node.args else kw.get("schedule")
        sig = node.args[1] if len(node.args) > 1 else kw.get("sig")
        if schedule is None or sig is None:
            return
        call = sig if isinstance(sig, ast.Call) else None  # task.s(...), task.si(...), task.signature(...)
        if call is None or not isinstance(call.func, ast.Attribute) or call.func.attr not in ("s", "si", "signature"):
            self._unfaithful(node, "Celery beat", "the task is not written task.s(...): write the task's command by "
                             "hand")  # fmt: skip
            return
        target = _function_of(call.func.value, self.module)
        if target is None:
            self._unfaithful(node, "Celery beat", "the task is not a name: built at run time")
            return
        module, function = target
        entry = ast.Dict(
            keys=[ast.Constant("task"), ast.Constant("schedule"), ast.Constant("args"), ast.Constant("kwargs")],
            values=[ast.Constant(f"{module}.{function}"), schedule, ast.List(elts=list(call.args), ctx=ast.Load()),
                    ast.Dict(keys=[ast.Constant(k.arg) for k in call.keywords if k.arg],
                             values=[k.value for k in call.keywords if k.arg])],
        )  # fmt: skip
        ast.copy_location(entry, node)
        name = kw.get("name") or ast.Constant(function)
        self._celery(ast.Dict(keys=[name], values=[entry]), code=node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            name = (_dotted(target) or "").rsplit(".", 1)[-1]
            if name in BEAT_NAMES and isinstance(node.value, ast.Dict):
                self._celery(node.value)
            elif isinstance(target, ast.Subscript) and _names_beat_schedule(target.value):
                # one entry: app.conf.beat_schedule["name"] = {...}, app.config["CELERY_BEAT_SCHEDULE"]["name"] = {...}
                self._celery(ast.Dict(keys=[target.slice], values=[node.value]))
        self.generic_visit(node)

    def _celery(self, table: ast.Dict, code: ast.AST | None = None) -> None:
        for key, entry_node in zip(table.keys, table.values, strict=False):
            if key is None or not isinstance(entry_node, ast.Dict):
                continue
            entry: ast.AST = code or entry_node
            try:
                name = str(_literal(key))
                fields = {
                    str(_literal(k)): v
                    for k, v in zip(entry_node.keys, entry_node.values, strict=False)
                    if k is not None
                }
                task_ref = str(_literal(fields["task"]))
                schedule_node = fields["schedule"]
                if isinstance(schedule_node, ast.Call) and (_dotted(schedule_node.func) or "").endswith("solar"):
                    self._unfaithful(entry, "Celery beat", "solar(...) fires at sunrise, sunset or dusk of a place: "
                                     "no cron schedule says that")  # fmt: skip
                    continue
                if not (
                    isinstance(schedule_node, ast.Call) and (_dotted(schedule_node.func) or "").endswith("crontab")
                ):
                    self._unfaithful(entry, "Celery beat", "an interval (a number or timedelta) counts from the "
                                     "process start, not the clock")  # fmt: skip
                    continue
                positional = ["minute", "hour", "day_of_week", "day_of_month", "month_of_year"]
                cron = {positional[i]: _literal(a) for i, a in enumerate(schedule_node.args)}
                cron |= {k.arg: _literal(k.value) for k in schedule_node.keywords if k.arg}
                schedule = celery_cron(cron)
                args_value = _literal(fields["args"]) if "args" in fields else ()
                kwargs_value = _literal(fields["kwargs"]) if "kwargs" in fields else None
            except _NotLiteral as error:
                self._unfaithful(entry, "Celery beat", f"{error} is not a literal: a schedule built at run time")
                continue
            except (KeyError, ValueError) as error:
                self._unfaithful(entry, "Celery beat", str(error))
                continue
            module, _, function = task_ref.rpartition(".")
            try:
                command = _command(module or self.module, function, args_value, kwargs_value)
            except ValueError as error:
                self._unfaithful(entry, "Celery beat", str(error))
                continue
            task: dict[str, object] = {"name": task_name(name), "schedule": schedule, "command": command}
            note = ("Celery's timezone setting (default UTC) applies; the task's zone is spec.timeZone (or "
                    "--time-zone). In a zone with daylight saving, Celery beat runs a fire of the hour a "
                    "spring-forward skips an hour later by the clock (02:30 at 03:30) and one of the hour a fall-back "
                    "repeats once; a CronJob skips the first and runs the second twice (both runs with one "
                    "key)")  # fmt: skip
            self.scan.found.append(Found(task, self._where(entry), f"{name!r}: {self._code(entry)}", "Celery beat",
                                         (note,)))  # fmt: skip


def scan(text: str, filename: str, module: str) -> Scan:
    """The schedules in one Python file (``module``: its dotted name, for the tasks' commands). A file Python
    cannot parse raises SyntaxError naming the file and line."""
    with warnings.catch_warnings():  # the app's own invalid escapes ('\w' in a string): its business, not said
        warnings.simplefilter("ignore")
        tree = ast.parse(text, filename=filename)
    visitor = _Visitor(text, filename, module)
    visitor.visit(tree)
    return visitor.scan
