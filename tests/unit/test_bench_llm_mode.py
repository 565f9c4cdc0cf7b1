"""bench/llm_mode.py's visible version: the newest community run of the graph tables, once it
holds every wanted document (light commits between runs never count)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from bench.llm_mode import newest_run, visible
from core.tables.store import GraphTables
from graph.versions.model import Snapshot, SnapshotMeta


def version(n: int, kind: str) -> Snapshot:
    meta = SnapshotMeta(version=n, created_at="t", newest_document_time="1987-03-02")
    return Snapshot(replace(meta, kind=kind), (), (), (), (), (), ())


def test_the_newest_run_is_visible_and_a_light_commit_after_it_is_not(tmp_path: Path) -> None:
    store = GraphTables(tmp_path)
    assert newest_run(store) is None  # no tables yet
    store.write(version(1, "run"))
    store.write(version(2, "rows"))
    assert newest_run(store) == 1
    figures = visible(store, 1, set())
    assert figures is not None and figures["version"] == 1 and figures["communities"] == 0
    store.write(version(3, "run"))
    assert newest_run(store) == 3


def test_a_run_missing_a_wanted_document_is_not_visible(tmp_path: Path) -> None:
    store = GraphTables(tmp_path)
    store.write(version(1, "run"))
    assert visible(store, 1, {"reuters-1"}) is None
