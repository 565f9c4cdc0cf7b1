"""Keep every room one job: fail when a product module passes 500 lines or a function 60.

Run by ``make test`` (the ``lint`` step). Product code is every tracked ``*.py`` outside
``tests/``, ``bench/`` and ``*/testing/``. A function's length runs from its ``def`` line to its
last line, nested functions included in their parent (and counted on their own too). The
exceptions live in ``pyproject.toml`` under ``[tool.kgrag.sizes]`` as ``{path or
path:function = "reason"}``; there may be at most five, each with its reason, and an exception
that no longer exceeds its limit is an error too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE_LIMIT = 500
FUNCTION_LIMIT = 60
MAX_EXCEPTIONS = 5
EXCLUDED_PREFIXES = ("tests/", "bench/", "scripts/")


@dataclass(frozen=True, slots=True)
class Oversize:
    """One module or function over its limit: ``key`` is ``path`` or ``path:qualified.name``."""

    key: str
    lines: int
    limit: int


def product_files(root: Path) -> list[str]:
    """Tracked Python files that ship: not tests, benchmarks, scripts or test support."""
    out = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.split()
    return sorted(f for f in out if not f.startswith(EXCLUDED_PREFIXES) and "/testing/" not in f)


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, line count) of every function, methods and nested ones included."""
    found: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            found.append((name, (node.end_lineno or node.lineno) - node.lineno + 1))
            found.extend(_functions(node, f"{name}."))
        elif isinstance(node, ast.ClassDef):
            found.extend(_functions(node, f"{prefix}{node.name}."))
        else:
            found.extend(_functions(node, prefix))
    return found


def oversized(root: Path, files: list[str]) -> list[Oversize]:
    """Every module over ``MODULE_LIMIT`` lines and function over ``FUNCTION_LIMIT``."""
    found: list[Oversize] = []
    for path in files:
        text = (root / path).read_text(encoding="utf-8")
        n_lines = len(text.splitlines())
        if n_lines > MODULE_LIMIT:
            found.append(Oversize(path, n_lines, MODULE_LIMIT))
        for name, length in _functions(ast.parse(text, filename=path)):
            if length > FUNCTION_LIMIT:
                found.append(Oversize(f"{path}:{name}", length, FUNCTION_LIMIT))
    return found


def exceptions(root: Path) -> dict[str, str]:
    """The listed exceptions, ``{key: reason}``."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    listed = config.get("tool", {}).get("kgrag", {}).get("sizes", {})
    return {str(k): str(v) for k, v in listed.items()}


def problems(found: list[Oversize], allowed: dict[str, str]) -> list[str]:
    """What is wrong, one line each: an oversize not listed, a listed one that is not over,
    an exception without a reason, too many exceptions."""
    lines = [
        f"{o.key}: {o.lines} lines (limit {o.limit}); split it by concern"
        for o in found
        if o.key not in allowed
    ]
    over = {o.key for o in found}
    lines += [
        f"{key}: listed in [tool.kgrag.sizes] but not over its limit; remove the entry"
        for key in allowed
        if key not in over
    ]
    lines += [f"{key}: its exception gives no reason" for key, why in allowed.items() if not why]
    if len(allowed) > MAX_EXCEPTIONS:
        n = len(allowed)
        lines.append(f"[tool.kgrag.sizes] lists {n} exceptions; at most {MAX_EXCEPTIONS}")
    return lines


def main() -> int:
    found = oversized(ROOT, product_files(ROOT))
    wrong = problems(found, exceptions(ROOT))
    for line in wrong:
        print(line, file=sys.stderr)
    if wrong:
        return 1
    print(f"sizes: no module over {MODULE_LIMIT} lines, no function over {FUNCTION_LIMIT}", end="")
    print(f" ({len(found)} listed exception(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
