"""The size check ``make test`` runs (``scripts/check_sizes.py``) finds what is over its limit,
holds the exception list to five reasoned entries, and passes on this tree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_sizes", ROOT / "scripts/check_sizes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_sizes"] = module
    spec.loader.exec_module(module)
    return module


sizes = _load()


def _function(name: str, body_lines: int, indent: str = "") -> str:
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(body_lines))
    return f"{indent}def {name}() -> None:\n{body}"


def test_a_long_function_a_long_method_and_a_long_module_are_found(tmp_path: Path) -> None:
    short = _function("short", 59)  # 60 lines with its def: at the limit, allowed
    long = _function("long", 60)  # 61 lines
    method = "class Box:\n" + _function("grow", 70, indent="    ")
    (tmp_path / "a.py").write_text(short + long + method)
    (tmp_path / "b.py").write_text("x = 1\n" * 501)
    found = {o.key: o.lines for o in sizes.oversized(tmp_path, ["a.py", "b.py"])}
    assert found == {"a.py:long": 61, "a.py:Box.grow": 71, "b.py": 501}


def test_an_unlisted_oversize_fails_and_a_listed_one_passes() -> None:
    over = [sizes.Oversize("m.py:f", 80, 60)]
    assert sizes.problems(over, {}) == ["m.py:f: 80 lines (limit 60); split it by concern"]
    assert sizes.problems(over, {"m.py:f": "a table of prompts read top to bottom"}) == []


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        ({"gone.py": "was long"}, "gone.py: listed in [tool.kgrag.sizes] but not over its limit"),
        ({"m.py:f": ""}, "m.py:f: its exception gives no reason"),
    ],
)
def test_a_stale_or_unreasoned_exception_fails(allowed: dict[str, str], expected: str) -> None:
    over = [sizes.Oversize("m.py:f", 80, 60)]
    assert any(line.startswith(expected) for line in sizes.problems(over, allowed))


def test_more_than_five_exceptions_fail() -> None:
    over = [sizes.Oversize(f"m{i}.py", 600, 500) for i in range(6)]
    allowed = {o.key: "reason" for o in over}
    assert sizes.problems(over, allowed) == ["[tool.kgrag.sizes] lists 6 exceptions; at most 5"]


def test_tests_benches_scripts_and_test_support_are_not_product_code() -> None:
    files = sizes.product_files(ROOT)
    assert "agents/community/runner.py" in files
    assert not [f for f in files if f.startswith(("tests/", "bench/", "scripts/"))]
    assert not [f for f in files if "/testing/" in f]


def test_this_tree_is_within_its_limits() -> None:
    found = sizes.oversized(ROOT, sizes.product_files(ROOT))
    assert sizes.problems(found, sizes.exceptions(ROOT)) == []
