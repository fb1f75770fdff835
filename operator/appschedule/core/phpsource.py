"""Laravel's scheduled tasks found in PHP source, read with tree-sitter's PHP grammar (``appschedule import
source``, issue 35 item 2, the PHP half): pure, the parser is a library.

``scan(text, filename)`` reads each statement that schedules (``$schedule->command(...)`` in a console kernel,
``Schedule::command(...)`` in ``routes/console.php``) and plays its chain of calls as Laravel's
``ManagesFrequencies`` does: the expression starts as ``* * * * *`` and each frequency method writes its fields
in order (``dailyAt('13:00')`` the minute and hour, ``weekdays()`` the day of week, ``cron(...)`` all of them);
``timezone(...)`` is the task's zone.

What runs: ``command('emails:send --force', [...])`` as ``php artisan emails:send --force ...``; ``job(new
Heartbeat)`` as ``php artisan tinker --execute='dispatch_sync(new \\App\\Jobs\\Heartbeat);'`` (the class resolved
through the file's ``use`` and ``namespace``); ``exec('...')`` through ``sh -c``. ``withoutOverlapping()`` is
``concurrencyPolicy: Forbid``.

Listed with the reason, never changed: ``call(...)`` (a closure: move it into a command), a command given by its
class (write its artisan name), seconds (``everySecond()`` ... ``everyThirtySeconds()``), ``lastDayOfMonth()``
(Laravel splices in this month's last day when the scheduler runs), the conditions Laravel checks at run time
(``between``, ``unlessBetween``, ``when``, ``skip``), and a value that is not a literal.

The expressions are those its ``ManagesFrequencies`` writes (read from its source), checked in
tests/unit/test_phpsource.py against a table of them, chain order included, and the table against Laravel's own
trait (Debian's php-laravel-framework 8.83, ``make php-tools``) for each chain that Laravel has: the same fires
over the days Berlin's clocks change and the first 3,000 of 2026. How Laravel's ``schedule:run`` (``isDue`` each
minute, in the event's zone) behaves on the days a zone changes is not measured here; the CronJob runs a repeated
wall-clock time twice (one key) and a skipped one never.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from .jssource import syntax_error, walk, words
from .pysource import Found, Scan, Unfaithful, task_name
from .schedule import ScheduleError, parse

LARAVEL = "Laravel"
_DAYS = {"SUNDAY": 0, "MONDAY": 1, "TUESDAY": 2, "WEDNESDAY": 3, "THURSDAY": 4, "FRIDAY": 5, "SATURDAY": 6}
_MINUTES = {"everyMinute": "*", "everyTwoMinutes": "*/2", "everyThreeMinutes": "*/3", "everyFourMinutes": "*/4",
            "everyFiveMinutes": "*/5", "everyTenMinutes": "*/10", "everyFifteenMinutes": "*/15",
            "everyThirtyMinutes": "*/30"}  # fmt: skip
_HOURS = {"everyOddHour": "1-23/2", "everyEvenHour": "0-22/2", "everyTwoHours": "*/2", "everyThreeHours": "*/3",
          "everyFourHours": "*/4", "everySixHours": "*/6"}  # fmt: skip
_WEEKDAYS = {"weekdays": "1-5", "weekends": "6,0", "mondays": "1", "tuesdays": "2", "wednesdays": "3",
             "thursdays": "4", "fridays": "5", "saturdays": "6", "sundays": "0"}  # fmt: skip
_SECONDS = ("everySecond", "everyTwoSeconds", "everyFiveSeconds", "everyTenSeconds", "everyFifteenSeconds",
            "everyTwentySeconds", "everyThirtySeconds")  # fmt: skip
_CONDITIONS = ("between", "unlessBetween", "when", "skip")
_HOOKS = ("runInBackground", "evenInMaintenanceMode", "name", "description", "emailOutputTo", "emailOutputOnFailure",
          "sendOutputTo", "appendOutputTo", "onSuccess", "onFailure", "before", "after", "pingBefore", "thenPing",
          "pingOnSuccess", "pingOnFailure", "withoutOverlapping", "onOneServer", "environments", "user")  # fmt: skip


class NotLiteral(ValueError):
    pass


class Untranslatable(ValueError):
    pass


def _parser() -> Any:
    import tree_sitter
    import tree_sitter_php

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_php.language_php()))


class _Expression:
    """Laravel's event expression as its frequency methods write it (spliceIntoPosition)."""

    def __init__(self) -> None:
        self.fields = ["*"] * 5

    def splice(self, position: int, value: object) -> None:
        self.fields[position - 1] = str(value)

    def hour_based(self, minutes: object, hours: object) -> None:
        self.splice(1, ",".join(map(str, minutes)) if isinstance(minutes, list) else minutes)
        self.splice(2, ",".join(map(str, hours)) if isinstance(hours, list) else hours)

    def daily_at(self, time: object) -> None:
        segments = str(time).split(":")
        minute = _php_int(segments[1]) if len(segments) == 2 else "0"
        self.hour_based(minute, _php_int(segments[0]))


def _php_int(text: str) -> int:
    """PHP's (int) cast of a string: its leading digits, 0 when none."""
    match = re.match(r"\s*[+-]?\d+", text)
    return int(match[0]) if match else 0


class _File:
    def __init__(self, text: str, filename: str) -> None:
        self.source = text.encode()
        self.filename = filename
        self.scan = Scan()
        self.namespace = ""
        self.uses: dict[str, str] = {}  # short name -> fully qualified

    def text(self, node: Any) -> str:
        return self.source[node.start_byte : node.end_byte].decode(errors="replace")

    def where(self, node: Any) -> str:
        return f"{self.filename}:{node.start_point[0] + 1}"

    def code(self, node: Any) -> str:
        text = " ".join(self.text(node).split())
        return text[:160] + (" ..." if len(text) > 160 else "")

    # -- literals

    def literal(self, node: Any) -> Any:
        kind = node.type
        if kind == "argument":
            if node.child_by_field_name("name") is not None:
                raise NotLiteral(self.text(node))  # a named argument
            return self.literal(node.named_children[-1])
        if kind == "string":
            body = self.text(node)[1:-1]
            return body.replace("\\'", "'").replace("\\\\", "\\")
        if kind == "encapsed_string":
            if any(c.type not in ("string_content", "string_value", "escape_sequence") for c in node.named_children):
                raise NotLiteral(self.text(node))
            decoded: str = json.loads('"' + self.text(node)[1:-1].replace("\\$", "$") + '"')
            return decoded
        if kind == "integer":
            return int(self.text(node), 0)
        if kind == "array_creation_expression":
            items = [c for c in node.named_children if c.type == "array_element_initializer"]
            if any(len(c.named_children) != 1 for c in items):
                raise NotLiteral(self.text(node))  # keys: an option map
            return [self.literal(c.named_children[0]) for c in items]
        if kind == "class_constant_access_expression":
            scope, name = node.named_children[0], node.named_children[-1]
            if self.text(scope).rsplit("\\", 1)[-1] == "Schedule" and self.text(name) in _DAYS:
                return _DAYS[self.text(name)]
        raise NotLiteral(self.text(node))

    def arguments(self, node: Any) -> list[Any]:
        arguments = node.child_by_field_name("arguments")
        return [c for c in arguments.named_children if c.type == "argument"] if arguments is not None else []

    def qualified(self, name: str) -> str:
        name = name.lstrip("\\")
        first, _, rest = name.partition("\\")
        if first in self.uses:
            return "\\" + self.uses[first] + (f"\\{rest}" if rest else "")
        return "\\" + (f"{self.namespace}\\{name}" if self.namespace else name)

    # -- the file

    def read(self, root: Any) -> None:
        for node in walk(root):
            if node.type == "namespace_definition":
                name = node.child_by_field_name("name")
                if name is not None:
                    self.namespace = self.text(name)
            elif node.type == "namespace_use_clause":
                names = [c for c in node.named_children if c.type in ("qualified_name", "name")]
                alias = node.child_by_field_name("alias")
                if names:
                    full = self.text(names[0]).lstrip("\\")
                    self.uses[self.text(alias) if alias is not None else full.rsplit("\\", 1)[-1]] = full
        for node in walk(root):
            if node.type == "expression_statement" and node.named_children:
                chain = self._chain(node.named_children[0])
                if chain:
                    self._task(node, chain)

    def _chain(self, node: Any) -> list[tuple[str, Any]]:
        """The calls of a scheduling statement, innermost first; empty when it does not schedule."""
        calls: list[tuple[str, Any]] = []
        while node.type == "member_call_expression":
            calls.append((self.text(node.child_by_field_name("name")), node))
            node = node.child_by_field_name("object")
        if node.type == "scoped_call_expression":
            scope = self.text(node.child_by_field_name("scope"))
            if scope.rsplit("\\", 1)[-1] != "Schedule":
                return []
            calls.append((self.text(node.child_by_field_name("name")), node))
        elif node.type != "variable_name" or self.text(node) != "$schedule":
            return []
        calls.reverse()
        return calls if calls and calls[0][0] in ("command", "job", "call", "exec") else []

    def _task(self, statement: Any, chain: list[tuple[str, Any]]) -> None:
        where, code = self.where(statement), self.code(statement)
        try:
            task, notes = self._translate(chain)
        except (NotLiteral, Untranslatable, ScheduleError) as error:
            reason = (
                f"{error} is not a literal: a value built at run time" if isinstance(error, NotLiteral) else str(error)
            )
            self.scan.unfaithful.append(Unfaithful(where, code, LARAVEL, reason))
            return
        self.scan.found.append(Found(task, where, code, LARAVEL, tuple(notes)))

    def _translate(self, chain: list[tuple[str, Any]]) -> tuple[dict[str, object], list[str]]:
        kind, first = chain[0]
        arguments = self.arguments(first)
        notes: list[str] = []
        if kind == "call":
            raise Untranslatable("call(): a closure runs inside the scheduler; move it into an artisan command")
        if not arguments:
            raise Untranslatable(f"{kind}() without what to run")
        target = arguments[0].named_children[-1]
        if kind == "command":
            if target.type == "class_constant_access_expression":
                raise Untranslatable("a command given by its class: write its artisan name")
            argv = shlex.split(str(self.literal(arguments[0])))
            extra = self.literal(arguments[1]) if len(arguments) > 1 else []
            command = ["php", "artisan", *argv, *map(str, extra)]
            name = argv[0].replace(":", "-")
        elif kind == "job":
            if target.type == "object_creation_expression":
                created = [c for c in target.named_children if c.type in ("name", "qualified_name")]
                if not created or self.arguments(target):
                    raise Untranslatable("a job made with constructor arguments: dispatch it from an artisan command")
                job = self.qualified(self.text(created[0]))
            elif target.type == "class_constant_access_expression":
                job = self.qualified(self.text(target.named_children[0]))
            else:
                raise NotLiteral(self.text(target))
            command = ["php", "artisan", "tinker", f"--execute=dispatch_sync(new {job});"]
            name = job.rsplit("\\", 1)[-1]
            notes.append("runs the job with php artisan tinker (laravel/tinker in the image)")
        else:
            command = ["sh", "-c", str(self.literal(arguments[0]))]
            name = str(self.literal(arguments[0])).split()[0].rsplit("/", 1)[-1]
        expression = _Expression()
        task: dict[str, object] = {}
        for method, call in chain[1:]:
            values = [self.literal(a) for a in self.arguments(call)] if method not in _CONDITIONS + _HOOKS else []
            self._apply(method, values, expression, task, notes)
        schedule = " ".join(expression.fields)
        parse(schedule, str(task.get("timeZone") or "UTC"))  # the CronJob controller's syntax: else listed
        out: dict[str, object] = {"name": task_name(words(name)), "schedule": schedule, "command": command}
        out.update(task)
        if "timeZone" not in task:
            notes.append("Laravel used app.schedule_timezone (else app.timezone); the task's is spec.timeZone")
        return out, notes

    def _apply(
        self, method: str, values: list[Any], expression: _Expression, task: dict[str, object], notes: list[str]
    ) -> None:
        defaults: dict[str, list[Any]] = {
            "weeklyOn": [None, "0:0"], "monthlyOn": [1, "0:0"], "twiceMonthly": [1, 16, "0:0"],
            "quarterlyOn": [1, "0:0"], "yearlyOn": [1, 1, "0:0"], "twiceDaily": [1, 13], "twiceDailyAt": [1, 13, 0],
        }  # fmt: skip
        if method in defaults:
            values = values + defaults[method][len(values) :]
        if method == "cron":
            expression.fields = str(values[0]).split()
            if len(expression.fields) != 5:
                raise Untranslatable(f"cron({values[0]!r}): five fields expected")
        elif method in _MINUTES:
            expression.splice(1, _MINUTES[method])
        elif method == "hourly":
            expression.splice(1, 0)
        elif method == "hourlyAt":
            expression.hour_based(values[0], "*")
        elif method in _HOURS:
            expression.hour_based(values[0] if values else 0, _HOURS[method])
        elif method == "daily":
            expression.hour_based(0, 0)
        elif method in ("at", "dailyAt"):
            expression.daily_at(values[0])
        elif method in ("twiceDaily", "twiceDailyAt"):
            expression.hour_based(values[2] if method == "twiceDailyAt" else 0, f"{values[0]},{values[1]}")
        elif method in _WEEKDAYS:
            expression.splice(5, _WEEKDAYS[method])
        elif method == "days":
            days = values[0] if len(values) == 1 and isinstance(values[0], list) else values
            expression.splice(5, ",".join(map(str, days)))
        elif method == "weekly":
            expression.hour_based(0, 0)
            expression.splice(5, 0)
        elif method == "weeklyOn":
            expression.daily_at(values[1])
            days = values[0] if isinstance(values[0], list) else [values[0]]
            expression.splice(5, ",".join(map(str, days)))
        elif method == "monthly":
            expression.hour_based(0, 0)
            expression.splice(3, 1)
        elif method in ("monthlyOn", "twiceMonthly"):
            expression.daily_at(values[-1])
            expression.splice(3, values[0] if method == "monthlyOn" else f"{values[0]},{values[1]}")
        elif method == "quarterly":
            expression.fields = ["0", "0", "1", "1-12/3", expression.fields[4]]
        elif method == "quarterlyOn":
            expression.daily_at(values[1])
            expression.splice(3, values[0])
            expression.splice(4, "1-12/3")
        elif method == "yearly":
            expression.fields = ["0", "0", "1", "1", expression.fields[4]]
        elif method == "yearlyOn":
            expression.daily_at(values[2])
            expression.splice(3, values[1])
            expression.splice(4, values[0])
        elif method == "timezone":
            task["timeZone"] = str(values[0])
        elif method in _SECONDS:
            raise Untranslatable(f"{method}(): runs within the minute (a CronJob starts on the minute)")
        elif method == "lastDayOfMonth":
            raise Untranslatable("lastDayOfMonth(): Laravel splices in this month's last day; a CronJob has no L")
        elif method in _CONDITIONS:
            raise Untranslatable(f"{method}(): a condition Laravel checks at run time, not a schedule")
        elif method == "withoutOverlapping":
            task["concurrencyPolicy"] = "Forbid"
        elif method == "onOneServer":
            notes.append("onOneServer(): a CronJob runs each fire once already")
        elif method in _HOOKS:
            notes.append(f"{method}(): not carried (Laravel's own)")
        else:
            raise Untranslatable(f"{method}(): not a method this import reads")


def mentions(text: str) -> bool:
    return "$schedule->" in text or "Schedule::" in text


def scan(text: str, filename: str) -> Scan:
    """The scheduled tasks of one PHP file. A file the grammar cannot parse raises SyntaxError naming it."""
    tree = _parser().parse(text.encode())
    error = syntax_error(tree, filename)
    if error is not None:
        raise error
    found = _File(text, filename)
    found.read(tree.root_node)
    return found.scan
