"""import-linter contracts of our own (`.importlinter` names them; `make lint` runs them).

``no_clock``: the listed packages never read the clock. Imports cannot show this (``datetime`` is
imported for its types), so the contract reads each module's source: a call of ``.now()``,
``.utcnow()`` or ``.today()`` (``datetime.now()``, ``date.today()``, also under another name), or of
``time.time()``, ``time.monotonic()`` and their kin, breaks it. The core takes ``now`` as an argument.
"""

from __future__ import annotations

import ast
import importlib.util
from typing import Any, cast

from importlinter import Contract, ContractCheck, fields, output

CLOCK_METHODS = {"now", "utcnow", "today"}
CLOCK_FUNCTIONS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"}


def clock_reads(source: str) -> list[tuple[int, str]]:
    """(line, call) of every read of the clock in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
        if node.func.attr in CLOCK_METHODS or (name == "time" and node.func.attr in CLOCK_FUNCTIONS):
            found.append((node.lineno, f"{ast.unparse(node.func)}()"))
    return found


class NoClockContract(Contract):
    modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        broken: list[str] = []
        for package in cast(list[Any], self.modules):  # set from .importlinter by Contract.__init__
            for module in sorted({package.name, *graph.find_descendants(package.name)}):
                spec = importlib.util.find_spec(module)
                if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
                    continue
                with open(spec.origin, encoding="utf-8") as source:
                    broken += [f"{module}:{line} calls {call}" for line, call in clock_reads(source.read())]
        return ContractCheck(kept=not broken, metadata={"broken": broken})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["broken"]:
            output.print_error(line, bold=False)
            output.new_line()
        output.print("Pass `now` in as an argument instead: the core is a function of its inputs.")
