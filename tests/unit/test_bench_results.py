"""The benchmark results check: a stamped run passes, and each way a file can lie fails."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import check_results, record
from bench.record import Target

HEAD = subprocess.run(
    ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
).stdout.strip()

SPECS = {
    "run_s": Target("/corpora/8000/run_s/median", "<=", 3.0),
    "events": Target("/corpora/8000/events", "<=", 60),
    "kept_apart": Target("/kept_apart", "==", True),
}


def _run(mode: str, figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "commit": HEAD,
        "dirty": False,
        "date": "2026-12-04T19:00:00+00:00",
        "machine": {"cpu": "x", "cores": 2, "load_at_start": [0.1, 0.1, 0.1]},
        "mode": mode,
        "settings": {},
        "measures": ["graph"],
        "figures": figures,
    }


def _document(run_s: dict[str, Any] | None = None, events: int = 12) -> dict[str, Any]:
    figures = {
        "corpora": {"8000": {"run_s": run_s or record.timing([1.0, 1.2, 1.4]), "events": events}},
        "kept_apart": True,
    }
    document: dict[str, Any] = {"bench": "demo", "full": _run("full", figures)}
    document["targets"] = record.derive(document, SPECS)
    return document


def test_a_stamped_full_run_with_derived_targets_passes() -> None:
    document = _document()
    assert check_results.file_problems(document) == []
    assert document["targets"]["run_s"] == {
        "value": 1.2,
        "limit": 3.0,
        "op": "<=",
        "met": True,
        "marginal": False,
        "from": "/full/figures/corpora/8000/run_s/median",
    }


def test_a_limit_inside_the_measured_spread_is_marginal_and_not_met() -> None:
    document = _document(run_s=record.timing([2.5, 2.9, 3.3]))
    verdict = document["targets"]["run_s"]
    assert (verdict["value"], verdict["marginal"], verdict["met"]) == (2.9, True, False)
    assert check_results.file_problems(document) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["full"].pop("commit"), "full: lacks commit"),
        (lambda d: d["full"].update(commit="0" * 40), "is not in this history"),
        (lambda d: d["full"].update(commit="HEAD"), "is not a git hash"),
        (lambda d: d["full"].update(dirty=True), "dirty tree"),
        (lambda d: d["full"].update(mode="quick"), "its mode says 'quick'"),
        (lambda d: d["targets"]["events"].update(value=11), "value 11 but"),
        (lambda d: d["targets"]["events"].update(met=False), "met False but it follows as True"),
        (lambda d: d["targets"]["run_s"].update(marginal=True), "marginal True but"),
        (lambda d: d["targets"]["events"].update({"from": "/full/figures/x"}), "is not in"),
        (lambda d: d["targets"]["events"].update({"from": "/quick/figures/x"}), "not a figure"),
        (lambda d: d["targets"]["events"].pop("from"), "lacks from"),
        (lambda d: d["full"]["figures"]["corpora"]["8000"]["run_s"].update(n=1), "fewer than 3"),
        (lambda d: d["full"]["figures"].update(lat={"p95": 1, "n": 10}), "fewer than 100"),
        (lambda d: d.update(quick=d.pop("full")), "targets without a full run"),
    ],
)
def test_each_lie_is_caught(edit: Any, expected: str) -> None:
    document = copy.deepcopy(_document())
    edit(document)
    problems = check_results.file_problems(document)
    assert any(expected in p for p in problems), problems


def test_a_quick_run_is_written_beside_the_full_one_never_over_it(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    figures = {"corpora": {"8000": {"run_s": record.timing([1, 1, 1]), "events": 3}}}
    full = record.record("demo", "full", {**figures, "kept_apart": True}, SPECS, {}, path=path)
    quick = record.record("demo", "quick", {"corpora": {}}, SPECS, {"n": 5}, path=path)
    stored = json.loads(path.read_text())
    assert stored["full"]["figures"] == full["full"]["figures"]
    assert stored["quick"]["settings"] == {"n": 5}
    assert stored["targets"] == quick["targets"] == full["targets"]
    assert stored["full"]["commit"] == HEAD


def test_the_committed_results_pass_the_check() -> None:
    """The check `make test` runs, on the files in bench/results/."""
    assert check_results.main() == 0


def test_make_bench_runs_every_benchmark_that_writes_results() -> None:
    """Every script under bench/ that records a results file is one of ``make bench``'s."""
    from bench.run_all import BENCHES

    helpers = {"record", "live"}  # the recorder itself, and a module the live benches share
    writers = {
        path.stem
        for path in (Path(__file__).resolve().parents[2] / "bench").glob("*.py")
        if "record(" in path.read_text() and path.stem not in helpers
    }
    assert writers and writers <= set(BENCHES), sorted(writers - set(BENCHES))
