"""The targets of the graph-table and query benches: each read from the figure its pointer
names on a small synthetic full run, judged as record judges them, and the file passes the
results check."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import check_results, graph_tables, record

HEAD = subprocess.run(
    ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
).stdout.strip()


def _run(mode: str, figures: dict[str, Any]) -> dict[str, Any]:
    return {
        "commit": HEAD,
        "dirty": False,
        "date": "2026-12-05T10:00:00+00:00",
        "machine": {"cpu": "x", "cores": 2, "load_at_start": [0.1, 0.1, 0.1]},
        "mode": mode,
        "settings": {},
        "measures": ["bench/graph_tables.py"],
        "figures": figures,
    }


def _document(name: str, figures: dict[str, Any], specs: dict[str, record.Target]) -> dict:
    document: dict[str, Any] = {"bench": name, "full": _run("full", figures)}
    document["targets"] = record.derive(document, specs)
    return document


# ---- graph tables ----


def _corpus(n: int, growth: float, swap_p95: float) -> dict[str, Any]:
    swaps = [swap_p95 * 0.6] * 94 + [swap_p95] * 6  # nearest rank: the 95th of 100
    return {
        "articles": n,
        "share_plus40": 0.02,
        "swap_ms": record.percentiles(swaps, (50, 95), 1),
        "commit_s_plus40": record.timing([0.9, 1.0, 1.1], 3),
        "context_ms": record.percentiles([float(i % 20) for i in range(200)], (50, 95), 2),
        "query_growth_mib": growth,
    }


def _tables_figures(sizes: tuple[int, ...]) -> dict[str, Any]:
    growth = {2000: 80.0, 8000: 356.0, graph_tables.LARGE_CORPUS: 1060.0}
    return {"corpora": {str(n): _corpus(n, growth[n], 400.0) for n in sizes}}


@pytest.mark.parametrize("where", ["local", "s3"])
def test_graph_tables_targets_read_their_corpus_figures(where: str) -> None:
    sizes = graph_tables.corpora_for("full", where)
    specs = graph_tables.targets_for(where)
    document = _document(graph_tables.result_name(where), _tables_figures(sizes), specs)
    targets = document["targets"]
    assert set(targets) == set(specs)
    assert targets["swap_p95_ms_8000"]["value"] == 400.0
    assert targets["swap_p95_ms_8000"]["from"] == "/full/figures/corpora/8000/swap_ms/p95"
    # a limit stays a limit when unmet: 356 MiB against 150
    assert (targets["query_growth_mib_8000"]["value"], targets["query_growth_mib_8000"]["met"]) == (
        356.0,
        False,
    )
    assert targets["context_p95_ms_8000"]["met"] is True
    assert check_results.file_problems(document) == []


def test_graph_tables_large_corpus_only_on_the_local_disk() -> None:
    assert graph_tables.LARGE_CORPUS in graph_tables.corpora_for("full", "local")
    assert graph_tables.LARGE_CORPUS not in graph_tables.corpora_for("full", "s3")
    assert graph_tables.corpora_for("quick", "s3") == graph_tables.corpora_for("quick", "local")
    assert not set(graph_tables.targets_for("s3")) & set(graph_tables.LARGE_TARGETS)
    assert graph_tables.result_name("s3") == "graph_tables_s3"


def test_a_full_run_of_fewer_than_100_swaps_fails_the_check() -> None:
    figures = _tables_figures(graph_tables.corpora_for("full", "s3"))
    figures["corpora"]["8000"]["swap_ms"] = record.percentiles([300.0] * 20, (50, 95), 1)
    document = _document("graph_tables_s3", figures, graph_tables.targets_for("s3"))
    assert any("fewer than 100" in p for p in check_results.file_problems(document))


def test_a_quick_run_beside_a_full_one_leaves_it_and_its_targets(tmp_path: Path) -> None:
    path = tmp_path / "graph_tables_s3.json"
    specs = graph_tables.targets_for("s3")
    full = _tables_figures(graph_tables.corpora_for("full", "s3"))
    record.record("graph_tables_s3", "full", full, specs, {}, path=path, script="bench/x.py")
    quick = _tables_figures(graph_tables.corpora_for("quick", "s3"))
    document = record.record("graph_tables_s3", "quick", quick, specs, {}, path=path)
    assert document["full"]["figures"] == full
    assert document["targets"]["swap_p95_ms_8000"]["value"] == 400.0
    assert "bench/x.py" in document["full"]["measures"]
    assert "bench/graph_tables_s3.py" in document["quick"]["measures"]
