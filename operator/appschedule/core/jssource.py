"""In-app schedules found in JavaScript and TypeScript source, read with tree-sitter's grammars
(``appschedule import source``, issue 35 item 2, the Node half): pure, the parsers are libraries.

``scan(text, filename, relative)`` finds, in one file (``relative``: its path under the scanned root):

* node-cron: ``cron.schedule(expression, callback, options)`` and ``cron.createTask(...)``, where ``cron`` is
  ``require('node-cron')`` or an import of it (default, namespace or the named ``schedule``); the options'
  ``timezone`` and ``name``;
* @nestjs/schedule: ``@Cron(expression, options)`` on a method, the expression a string or a ``CronExpression``
  member (the enum of @nestjs/schedule 6.0.1, below), the options' ``timeZone`` and ``name``; ``@Interval`` and
  ``@Timeout``, which are listed (counted from the process start).

A task runs the scheduled function in the Job's own process:

* node-cron: a callback that is, or only calls, a function the file imports from a module of the app (``import
  { f } from './jobs'``, ``const { f } = require('./jobs')``) runs as ``node -e`` importing that module (an ES
  module file as ``--input-type=module``). A callback with code of its own, or defined in the scheduling file
  itself (importing that file would start its schedules again), is listed: move it into a module first. The
  module must not start the scheduler or the server when imported (the note says so);
* Nest: the method runs on its provider from an application context (``NestFactory.createApplicationContext``)
  of ``AppModule``, from the compiled files of ``nest build``'s default layout (``src/x.ts`` to ``dist/x.js``).

Both frameworks read five fields (minute first) or six (seconds first). What has no faithful translation is
listed with the reason, never changed: a seconds field other than 0; both day of month and day of week
restricted (node-cron fires on days matching both, a CronJob on days matching either); ``L``, ``W``, ``#``,
``?``; a ``utcOffset``; node-cron's ``maxExecutions`` (a count kept in the process); a value that is not a
literal (a schedule built at run time). Day of week 7 is Sunday to both: ``5-7`` becomes ``5-6,0`` and ``0-7/2``
the days it matches, ``0,2,4,6`` (crontab.weekday_seven). node-cron's ``noOverlap: true`` is
``concurrencyPolicy: Forbid``; ``maxRandomDelay`` and ``scheduled: false`` (node-cron 3's: started by the app;
node-cron 4 ignores it) are noted with the task.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from .crontab import transition_notes as crontab_transition_notes
from .crontab import weekday_seven
from .pysource import Found, Scan, Unfaithful
from .schedule import Schedule, parse

# @nestjs/schedule 6.0.1, dist/enums/cron-expression.enum.js (tests/unit/test_jssource.py compares it with the package)
CRON_EXPRESSION = {
    "EVERY_SECOND": "* * * * * *",
    "EVERY_5_SECONDS": "*/5 * * * * *",
    "EVERY_10_SECONDS": "*/10 * * * * *",
    "EVERY_30_SECONDS": "*/30 * * * * *",
    "EVERY_MINUTE": "*/1 * * * *",
    "EVERY_5_MINUTES": "0 */5 * * * *",
    "EVERY_10_MINUTES": "0 */10 * * * *",
    "EVERY_30_MINUTES": "0 */30 * * * *",
    **{f"EVERY_{n}_HOURS": f"0 0-23/{n} * * *" for n in range(2, 13)},
    "EVERY_HOUR": "0 0-23/1 * * *",
    **{f"EVERY_DAY_AT_{h}AM": f"0 {h:02d} * * *" for h in range(1, 12)},
    "EVERY_DAY_AT_NOON": "0 12 * * *",
    **{f"EVERY_DAY_AT_{h}PM": f"0 {h + 12} * * *" for h in range(1, 12)},
    "EVERY_DAY_AT_MIDNIGHT": "0 0 * * *",
    "EVERY_WEEK": "0 0 * * 0",
    "EVERY_WEEKDAY": "0 0 * * 1-5",
    "EVERY_WEEKEND": "0 0 * * 6,0",
    "EVERY_1ST_DAY_OF_MONTH_AT_MIDNIGHT": "0 0 1 * *",
    "EVERY_1ST_DAY_OF_MONTH_AT_NOON": "0 12 1 * *",
    "EVERY_2ND_HOUR": "0 */2 * * *",
    "EVERY_2ND_HOUR_FROM_1AM_THROUGH_11PM": "0 1-23/2 * * *",
    "EVERY_2ND_MONTH": "0 0 1 */2 *",
    "EVERY_QUARTER": "0 0 1 */3 *",
    "EVERY_6_MONTHS": "0 0 1 */6 *",
    "EVERY_YEAR": "0 0 1 1 *",
    "EVERY_30_MINUTES_BETWEEN_9AM_AND_5PM": "0 */30 9-17 * * *",
    "EVERY_30_MINUTES_BETWEEN_9AM_AND_6PM": "0 */30 9-18 * * *",
    "EVERY_30_MINUTES_BETWEEN_10AM_AND_7PM": "0 */30 10-19 * * *",
    **{f"MONDAY_TO_FRIDAY_AT_{h}AM": f"0 0 {h:02d} * * 1-5" for h in range(1, 12)},
    "MONDAY_TO_FRIDAY_AT_09_30AM": "0 30 09 * * 1-5",
    "MONDAY_TO_FRIDAY_AT_11_30AM": "0 30 11 * * 1-5",
    "MONDAY_TO_FRIDAY_AT_12PM": "0 0 12 * * 1-5",
    **{f"MONDAY_TO_FRIDAY_AT_{h}PM": f"0 0 {h + 12} * * 1-5" for h in range(1, 12)},
}
NODE_CRON = "node-cron"
NEST = "@nestjs/schedule"
OTHERS = ("node-schedule", "cron", "agenda", "bree", "toad-scheduler", "later", "croner")  # listed, not read
_NAME_PART = re.compile(r"[^a-z0-9]+")


class NotLiteral(ValueError):
    pass


def task_name(text: str) -> str:
    base = _NAME_PART.sub("-", text.lower()).strip("-")[:40].strip("-") or "task"
    return base if base[0].isalpha() else f"t-{base}"[:40]


def _parser(filename: str) -> Any:
    """The tree-sitter parser for a file (TypeScript for .ts, TSX for .tsx, else JavaScript with JSX)."""
    import tree_sitter
    import tree_sitter_javascript
    import tree_sitter_typescript

    if filename.endswith((".ts", ".mts", ".cts")):
        language = tree_sitter_typescript.language_typescript()
    elif filename.endswith(".tsx"):
        language = tree_sitter_typescript.language_tsx()
    else:
        language = tree_sitter_javascript.language()
    return tree_sitter.Parser(tree_sitter.Language(language))


def cron_fields(expression: str, days_and: bool = True) -> str:
    """A node-cron or Nest expression (five fields, or six with seconds first) as a CronJob's five fields;
    ValueError with the reason when it has no faithful translation. ``days_and``: the framework fires on days
    matching both day fields (node-cron, Nest), where a CronJob fires on days matching either (Fugit too)."""
    fields = expression.split()
    if len(fields) == 6:
        if fields[0] not in ("0", "00"):
            raise ValueError(f"{expression!r}: a seconds field {fields[0]!r} (a CronJob starts on the minute)")
        fields = fields[1:]
    if len(fields) != 5:
        raise ValueError(f"{expression!r}: {len(fields)} fields (five, or six with seconds, expected)")
    day, weekday = fields[2], fields[4]
    if re.search(r"[LW#?]", day.upper()) or re.search(r"#|\?|\dL|^L$", weekday.upper()):
        raise ValueError(f"{expression!r}: L, W, # and ? have no CronJob equivalent")
    if days_and and day != "*" and weekday != "*":
        raise ValueError(
            f"{expression!r}: both day of month and day of week restricted: the framework fires on days matching "
            "both, a CronJob on days matching either"
        )
    fields = [re.sub(r"\b0+(\d)", r"\1", f) for f in fields]  # 09 as 9
    fields[4] = weekday_seven(fields[4])  # Sunday as 7: 0-7/2 is 0,2,4,6; 5-7 is 5,6,0
    return " ".join(fields)


def translated(expression: str, zone: object) -> tuple[str, Schedule]:
    """The CronJob schedule of a framework's expression, parsed in ``zone`` (UTC when None); ValueError saying why
    there is none (ScheduleError is one)."""
    schedule = cron_fields(expression)
    return schedule, parse(schedule, str(zone or "UTC"))


class _File:
    def __init__(self, text: str, filename: str, relative: str, now: datetime) -> None:
        self.now = now
        self.source = text.encode()
        self.filename = filename
        self.relative = relative
        self.scan = Scan()
        self.module = False  # ES module syntax (import/export)
        self.cron_names: set[str] = set()  # bindings of node-cron itself
        self.schedule_names: set[str] = set()  # node-cron's schedule/createTask imported by name
        self.nest: dict[str, str] = {}  # local name -> Cron / Interval / Timeout / CronExpression
        self.imported: dict[str, tuple[str, str]] = {}  # local name -> (module specifier, exported name)
        self.exported: set[str] = set()  # names this file exports
        self.others: dict[str, str] = {}  # schedulers this module does not read, imported at FILE:LINE
        self.line = ""  # the binding being read, as FILE:LINE

    # -- reading nodes

    def text(self, node: Any) -> str:
        return self.source[node.start_byte : node.end_byte].decode(errors="replace")

    def where(self, node: Any) -> str:
        return f"{self.filename}:{node.start_point[0] + 1}"

    def code(self, node: Any) -> str:
        line = self.text(node).splitlines()[0] if self.text(node) else ""
        return line[:120] + (" ..." if len(line) > 120 or "\n" in self.text(node) else "")

    def literal(self, node: Any) -> Any:
        """The value of a literal (string, template without substitutions, number, boolean, object, array)."""
        kind = node.type
        if kind == "string":
            return "".join(
                self.text(c) if c.type == "string_fragment" else self._escape(c) for c in node.named_children
            )
        if kind == "template_string":
            if any(c.type == "template_substitution" for c in node.named_children):
                raise NotLiteral(self.text(node))
            return self.text(node)[1:-1]
        if kind == "number":
            try:
                return json.loads(self.text(node).replace("_", ""))
            except ValueError:
                raise NotLiteral(self.text(node)) from None
        if kind in ("true", "false"):
            return kind == "true"
        if kind == "object":
            found = {}
            for pair in node.named_children:
                if pair.type != "pair":
                    raise NotLiteral(self.text(pair))
                key = pair.child_by_field_name("key")
                name = self.literal(key) if key.type == "string" else self.text(key)
                found[str(name)] = self.literal(pair.child_by_field_name("value"))
            return found
        if kind == "array":
            return [self.literal(c) for c in node.named_children]
        if kind == "parenthesized_expression" and node.named_children:
            return self.literal(node.named_children[0])
        if kind in ("as_expression", "satisfies_expression") and node.named_children:
            return self.literal(node.named_children[0])
        raise NotLiteral(self.text(node))

    def _escape(self, node: Any) -> str:
        try:
            decoded: str = json.loads(f'"{self.text(node)}"')
            return decoded
        except ValueError:
            return self.text(node)[1:]

    # -- what the file binds

    def bindings(self, root: Any) -> None:
        for node in walk(root):
            self.line = self.where(node)
            if node.type == "import_statement":
                self.module = True
                source = node.child_by_field_name("source")
                specifier = str(self.literal(source)) if source is not None else ""
                self._import(node, specifier)
            elif node.type == "export_statement":
                self.module = True
                declaration = node.child_by_field_name("declaration")
                if declaration is not None:
                    for name in self._declared(declaration):
                        self.exported.add(name)
            elif node.type == "variable_declarator":
                self._require(node)
            elif node.type == "assignment_expression":  # module.exports.f = / exports.f =
                left = self.text(node.child_by_field_name("left"))
                match = re.fullmatch(r"(?:module\.)?exports\.([A-Za-z_$][\w$]*)", left)
                if match:
                    self.exported.add(match[1])

    def _declared(self, node: Any) -> list[str]:
        if node.type in ("function_declaration", "generator_function_declaration", "class_declaration"):
            name = node.child_by_field_name("name")
            return [self.text(name)] if name is not None else []
        if node.type in ("lexical_declaration", "variable_declaration"):
            return [
                self.text(d.child_by_field_name("name")) for d in node.named_children if d.type == "variable_declarator"
            ]
        return []

    def _import(self, node: Any, specifier: str) -> None:
        clause = next((c for c in node.named_children if c.type == "import_clause"), None)
        if clause is None:
            return
        for part in clause.named_children:
            if part.type == "identifier":  # default import
                self._bind(self.text(part), specifier, "default")
            elif part.type == "namespace_import":
                local = next((c for c in part.named_children if c.type == "identifier"), None)
                if local is not None:
                    self._bind(self.text(local), specifier, "*")
            elif part.type == "named_imports":
                for spec in part.named_children:
                    if spec.type != "import_specifier":
                        continue
                    name = spec.child_by_field_name("name")
                    alias = spec.child_by_field_name("alias")
                    self._bind(self.text(alias or name), specifier, self.text(name))

    def _require(self, node: Any) -> None:
        value = node.child_by_field_name("value")
        if value is None or value.type != "call_expression":
            return
        function, arguments = value.child_by_field_name("function"), value.child_by_field_name("arguments")
        if function is None or self.text(function) != "require" or arguments is None or not arguments.named_children:
            return
        try:
            specifier = str(self.literal(arguments.named_children[0]))
        except NotLiteral:
            return
        target = node.child_by_field_name("name")
        if target.type == "identifier":
            self._bind(self.text(target), specifier, "*")
        elif target.type == "object_pattern":
            for item in target.named_children:
                if item.type == "shorthand_property_identifier_pattern":
                    self._bind(self.text(item), specifier, self.text(item))
                elif item.type == "pair_pattern":
                    key, value_node = item.child_by_field_name("key"), item.child_by_field_name("value")
                    self._bind(self.text(value_node), specifier, self.text(key))

    def _bind(self, local: str, specifier: str, name: str) -> None:
        if specifier == NODE_CRON:
            if name in ("*", "default"):
                self.cron_names.add(local)
            elif name in ("schedule", "createTask"):
                self.schedule_names.add(local)
        elif specifier == NEST:
            if name in ("Cron", "Interval", "Timeout", "CronExpression"):
                self.nest[local] = name
        else:
            self.imported[local] = (specifier, name)
            if specifier in OTHERS and specifier not in self.others:
                self.others[specifier] = self.line

    # -- what the file schedules

    def schedules(self, root: Any) -> None:
        for node in walk(root):
            if node.type == "call_expression":
                self._node_cron(node)
            elif node.type == "class_body":
                self._nest_class(node)

    def _node_cron(self, call: Any) -> None:
        function = call.child_by_field_name("function")
        if function is None:
            return
        if function.type == "member_expression":
            target, prop = function.child_by_field_name("object"), function.child_by_field_name("property")
            if self.text(target) not in self.cron_names or self.text(prop) not in ("schedule", "createTask"):
                return
        elif function.type != "identifier" or self.text(function) not in self.schedule_names:
            return
        arguments = [a for a in call.child_by_field_name("arguments").named_children if a.type != "comment"]
        if len(arguments) < 2:
            return self._unfaithful(call, NODE_CRON, "no callback: nothing to run")
        try:
            expression = str(self.literal(arguments[0]))
            options = self.literal(arguments[2]) if len(arguments) > 2 else {}
        except NotLiteral as error:
            return self._unfaithful(call, NODE_CRON, f"{error} is not a literal: a schedule built at run time")
        if not isinstance(options, dict):
            options = {}
        if options.get("maxExecutions") is not None:
            return self._unfaithful(call, NODE_CRON, f"maxExecutions: {options['maxExecutions']!r} stops it after "
                                    "that many runs, counted in the process: not a schedule")  # fmt: skip
        zone = options.get("timezone")
        try:
            schedule, parsed = translated(expression, zone)
        except ValueError as error:
            return self._unfaithful(call, NODE_CRON, str(error))
        command, why = self._callback_command(arguments[1])
        if command is None:
            return self._unfaithful(call, NODE_CRON, f"{why}; its schedule would be {schedule!r}")
        name = str(options.get("name") or why)
        task: dict[str, object] = {"name": task_name(words(name)), "schedule": schedule, "command": command}
        if zone:
            task["timeZone"] = str(zone)
        notes = ["the module it imports must not start the scheduler or the server when imported"]
        if options.get("scheduled") is False:  # node-cron 3: made stopped, started by task.start(); 4: ignored
            notes.append("scheduled: false: node-cron 3 left it stopped until the app called task.start(), "
                         "node-cron 4 ignores it; the task runs every fire (suspend: true if the app never started "
                         "it)")  # fmt: skip
        if options.get("noOverlap") is True:  # node-cron 4: a fire while the last run goes on is skipped
            task["concurrencyPolicy"] = "Forbid"
            notes.append("noOverlap: true: concurrencyPolicy Forbid (a fire while a run goes on is skipped)")
        if options.get("maxRandomDelay"):  # node-cron 4: each run starts up to this many ms late, at random
            notes.append(f"maxRandomDelay: {options['maxRandomDelay']!r} ms: the task starts on the minute; the "
                         "app's random delay is not carried over")  # fmt: skip
        if not zone:
            notes.append("node-cron used the process' zone (TZ, else the host's); the task's is spec.timeZone")
        if self.relative.endswith((".ts", ".tsx", ".mts", ".cts")):
            notes.append("TypeScript: point the command at the compiled module")
        notes += transition_notes(parsed, NODE_CRON, self.now)
        self.scan.found.append(Found(task, self.where(call), self.code(call), NODE_CRON, tuple(notes)))
        return None

    def _callback_command(self, node: Any) -> tuple[list[str] | None, str]:
        """The command that runs a node-cron callback in a process of its own and the function's name, or None and
        why not."""
        called = node
        if node.type in ("arrow_function", "function_expression", "function"):
            body = node.child_by_field_name("body")
            statements = (
                [s for s in body.named_children if s.type != "comment"] if body.type == "statement_block" else [body]
            )
            if len(statements) != 1:
                return None, "the callback is code of its own: move it into an exported function, then import again"
            statement = statements[0]
            if statement.type in ("expression_statement", "return_statement") and statement.named_children:
                statement = statement.named_children[0]
            if statement.type == "await_expression" and statement.named_children:
                statement = statement.named_children[0]
            if statement.type != "call_expression" or statement.child_by_field_name("arguments").named_children:
                return None, "the callback is code of its own: move it into an exported function, then import again"
            called = statement.child_by_field_name("function")
        name = self.text(called)
        if called.type != "identifier":
            return None, f"the callback calls {name!r}, not a function the file imports or exports"
        if name in self.imported:
            specifier, exported = self.imported[name]
            if not specifier.startswith("."):
                return None, f"the callback is {name!r} of the package {specifier!r}: write the task's command by hand"
            path = "./" + posixpath.normpath(posixpath.join(posixpath.dirname(self.relative), specifier))
        elif name in self.exported:
            return None, (
                f"the callback {name!r} is defined in the file that schedules it: importing that file to run it would "
                "start its schedules (and whatever else it starts) again; move it into a module of its own"
            )
        else:
            return None, f"the callback {name!r} is neither imported nor exported by the file"
        return self._node_command(path, exported), name

    def _node_command(self, path: str, exported: str) -> list[str]:
        if self.module:
            binding = f"{{ {exported} as run }}" if exported not in ("default", "*") else "run"
            script = f"import {binding} from {json.dumps(path)}; await run();"
            return ["node", "--input-type=module", "-e", script]
        member = "" if exported in ("default", "*") else f".{exported}"
        script = (f"Promise.resolve(require({json.dumps(path)}){member}()).then(() => process.exit(0), "
                  "(error) => { console.error(error); process.exit(1); });")  # fmt: skip
        return ["node", "-e", script]

    def _nest_class(self, body: Any) -> None:
        if not self.nest:
            return
        pending: list[Any] = []
        cls = body.parent
        class_name = self.text(cls.child_by_field_name("name")) if cls.child_by_field_name("name") else ""
        for child in body.named_children:
            if child.type == "decorator":
                pending.append(child)
                continue
            if child.type == "method_definition":
                decorators = pending + [c for c in child.named_children if c.type == "decorator"]
                for decorator in decorators:
                    self._nest_method(decorator, child, class_name)
            pending = []

    def _nest_method(self, decorator: Any, method: Any, class_name: str) -> None:
        call = decorator.named_children[0] if decorator.named_children else None
        if call is None or call.type != "call_expression":
            return
        kind = self.nest.get(self.text(call.child_by_field_name("function")))
        if kind not in ("Cron", "Interval", "Timeout"):
            return
        if kind != "Cron":
            why = {"Interval": "an interval counted from the process start",
                   "Timeout": "a one-off timeout after the process starts"}[kind]  # fmt: skip
            return self._unfaithful(decorator, NEST, f"@{kind}: {why}: no CronJob equivalent")
        arguments = [a for a in call.child_by_field_name("arguments").named_children if a.type != "comment"]
        if not arguments:
            return self._unfaithful(decorator, NEST, "@Cron without an expression")
        first = arguments[0]
        try:
            if (
                first.type == "member_expression"
                and self.nest.get(self.text(first.child_by_field_name("object"))) == "CronExpression"
            ):
                member = self.text(first.child_by_field_name("property"))
                if member not in CRON_EXPRESSION:
                    return self._unfaithful(
                        decorator, NEST, f"CronExpression.{member} is not in @nestjs/schedule 6.0.1"
                    )
                expression = CRON_EXPRESSION[member]
            else:
                expression = str(self.literal(first))
            options = self.literal(arguments[1]) if len(arguments) > 1 else {}
        except NotLiteral as error:
            return self._unfaithful(decorator, NEST, f"{error} is not a literal: a schedule built at run time")
        options = options if isinstance(options, dict) else {}
        if "utcOffset" in options:
            return self._unfaithful(decorator, NEST, "utcOffset: a fixed offset, not a zone with its daylight saving")
        zone = options.get("timeZone")
        try:
            schedule, parsed = translated(expression, zone)
        except ValueError as error:
            return self._unfaithful(decorator, NEST, str(error))
        method_name = self.text(method.child_by_field_name("name"))
        compiled = "./" + re.sub(r"^src/", "dist/", re.sub(r"\.(m|c)?tsx?$", ".js", self.relative))
        script = (
            "const { NestFactory } = require('@nestjs/core'); const { AppModule } = require('./dist/app.module.js'); "
            f"const {{ {class_name} }} = require({json.dumps(compiled)}); "
            "NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] }).then(async (app) => { "
            f"try {{ await app.get({class_name}).{method_name}(); }} finally {{ await app.close(); }} }})"
            ".then(() => process.exit(0), (error) => { console.error(error); process.exit(1); });"
        )
        name = str(options.get("name") or method_name)
        task: dict[str, object] = {
            "name": task_name(words(name)),
            "schedule": schedule,
            "command": ["node", "-e", script],
        }
        if zone:
            task["timeZone"] = str(zone)
        notes = [f"runs {class_name}.{method_name} from nest build's dist/ (AppModule in dist/app.module.js)"]
        notes += transition_notes(parsed, NEST, self.now)
        if options.get("disabled") is True:
            task["suspend"] = True
            notes.append("disabled: true, so the task is suspended")
        self.scan.found.append(Found(task, self.where(decorator), self.code(decorator), NEST, tuple(notes)))
        return None

    def _unfaithful(self, node: Any, framework: str, reason: str) -> None:
        self.scan.unfaithful.append(Unfaithful(self.where(node), self.code(node), framework, reason))


def transition_notes(schedule: Schedule, framework: str, now: datetime) -> list[str]:
    """How the task's fires differ from node-cron's or Nest's on the days its zone changes (crontab.transition_notes;
    tests/unit/test_jssource.py measures them against the frameworks): Nest runs a skipped hour's fire after the
    change, node-cron does not."""
    return crontab_transition_notes(schedule, framework, now, runs_skipped=framework == NEST)


def words(name: str) -> str:
    """camelCase as words: sendWeeklyReport -> send-Weekly-Report (then lower-cased by task_name)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name)


def walk(node: Any) -> Iterator[Any]:
    """A tree-sitter node and every named node under it, in source order."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


def syntax_error(tree: Any, filename: str) -> SyntaxError | None:
    """The error of a tree the grammar could not parse whole, naming the file and the line where it went wrong."""
    if not tree.root_node.has_error:
        return None
    errors = [n for n in walk(tree.root_node) if n.type == "ERROR" or n.is_missing] or [tree.root_node]
    broken = min(errors, key=lambda n: n.end_byte - n.start_byte)  # the innermost: where it went wrong
    complete = ("_declaration", "_statement", "comment")  # whole statements the error node swallowed: not it
    broken = next((c for c in broken.children if not (c.type.endswith(complete) and not c.has_error)), broken)
    return SyntaxError(f"{filename}:{broken.start_point[0] + 1}: the grammar cannot parse it")


def mentions(text: str) -> bool:
    """Whether a file can hold a schedule this module reads or lists (a cheap test before parsing)."""
    return any(f"'{p}'" in text or f'"{p}"' in text for p in (NODE_CRON, NEST, *OTHERS))


def scan(text: str, filename: str, relative: str, now: datetime) -> Scan:
    """The schedules in one JavaScript or TypeScript file (``now``: where the year its daylight-saving notes look at
    begins). A file the grammar cannot parse raises SyntaxError naming the file and the line of the first error."""
    tree = _parser(filename).parse(text.encode())
    error = syntax_error(tree, filename)
    if error is not None:
        raise error
    found = _File(text, filename, relative, now)
    found.bindings(tree.root_node)
    found.schedules(tree.root_node)
    for package, where in found.others.items():
        found.scan.unfaithful.append(
            Unfaithful(
                where, f"require({package!r})", package, f"{package} is not read: its schedules are not imported"
            )
        )
    return found.scan
