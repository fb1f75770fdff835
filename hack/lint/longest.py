"""The longest functions of the operator's code, longest first: `make longest` (N=10 by default).

A function's length is its lines from ``def`` to its last line, docstring and comments included: what a
reader has to hold at once."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def longest(root: Path, count: int) -> list[tuple[int, str]]:
    rows: list[tuple[int, str]] = []
    for path in sorted((root / "operator").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
                rows.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(root)}:{node.lineno} {node.name}"))
    return sorted(rows, key=lambda row: (-row[0], row[1]))[:count]


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 10
    for lines, where in longest(ROOT, count):
        print(f"{lines:4d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
