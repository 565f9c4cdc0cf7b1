"""The query index's bulk text in memory-mapped segments: what goes in comes out, per version."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from graph.versions.model import SnapshotEntity, SnapshotReport
from query.text_store import MAX_SEGMENTS, TextStore, rows_text


def entity(key: str, description: str) -> SnapshotEntity:
    return SnapshotEntity(key, 1, key.title(), "person", description, (), 1, 0)


def report(rid: str, summary: str) -> SnapshotReport:
    return SnapshotReport(
        id=rid,
        human_readable_id=1,
        community=1,
        level=0,
        parent=-1,
        children=(),
        title="T",
        summary=summary,
        full_content="",
        rank=5.0,
        rating_explanation="because",
        findings=({"summary": "a finding", "explanation": f"about {rid} [Data: Sources (1)]"},),
        full_content_json="",
        period="1987-03-01",
        size=2,
    )


def test_rows_give_their_text_back_and_the_rows_carry_none(tmp_path: Path) -> None:
    rows = [entity("a", "Alpha, a bank"), entity("b", "Beta, ünïcode — dash")]
    store = TextStore.from_rows(
        {"entities": rows, "community_reports": [report("c1", "S")]}, tmp_path
    )
    blank = dataclasses.replace(rows[1], description="")
    assert store.full(blank) == rows[1]
    assert store.get("entities", "description", "a") == "Alpha, a bank"
    assert store.get("entities", "description", "zzz") is None
    assert store.full(entity("zzz", "")) == entity("zzz", "")  # not here: the row itself
    full = store.full(dataclasses.replace(report("c1", ""), findings=(), rating_explanation=""))
    assert full == report("c1", "S")  # a JSON column decoded as the graph tables decode it
    assert not list(tmp_path.iterdir())  # the files are unlinked once mapped


def test_updates_are_new_stores_and_the_old_one_still_reads(tmp_path: Path) -> None:
    first = TextStore.from_rows({"entities": [entity("a", "one"), entity("b", "two")]}, tmp_path)
    second = first.updated(
        {"entities": (rows_text("entities", [entity("a", "one, revised")]), ["b"])}
    )
    assert second.get("entities", "description", "a") == "one, revised"
    assert second.get("entities", "description", "b") is None
    assert first.get("entities", "description", "a") == "one"
    assert first.get("entities", "description", "b") == "two"
    assert second != first
    again = TextStore.from_rows({"entities": [entity("a", "one, revised")]}, tmp_path)
    assert second == again  # equal by content, whatever the segments


def test_many_versions_are_compacted_into_one_segment_with_the_same_text(
    tmp_path: Path,
) -> None:
    store = TextStore.from_rows({"entities": [entity(f"e{i}", f"v0 {i}") for i in range(50)]})
    kept = [store]
    for version in range(1, MAX_SEGMENTS + 5):
        changed = [entity(f"e{i}", f"v{version} {i}") for i in range(version % 7, 50, 7)]
        store = store.updated({"entities": (rows_text("entities", changed), [])})
        kept.append(store)
        assert store.segments("entities") <= MAX_SEGMENTS
    expected: dict[str, str] = {f"e{i}": f"v0 {i}" for i in range(50)}
    for version in range(1, MAX_SEGMENTS + 5):
        for i in range(version % 7, 50, 7):
            expected[f"e{i}"] = f"v{version} {i}"
    assert {k: store.get("entities", "description", k) for k in expected} == expected
    assert store.segments("entities") < MAX_SEGMENTS  # it was rewritten at least once
    assert kept[1].get("entities", "description", "e1") == "v1 1"  # older stores still read
