"""Report vectors are embedded and sent a chunk at a time (``agents.community.vectors``), so
a run that regenerates thousands of reports holds a chunk's vectors, not all of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agents.community.vectors as vectors_module
import core.vector_store as vector_store
from agents.community.vectors import write_report_vectors
from graph.model import Community
from graph.versions.model import SnapshotReport
from tests.unit.test_community_run import settings_for


def report(cid: str) -> SnapshotReport:
    return SnapshotReport(
        cid, 1, 1, 0, -1, (), f"{cid} title", f"{cid} summary", "", 5.0, "", (), "{}", "", 3
    )


class Recording:
    """Stands in for the Weaviate store: what each call was given."""

    calls: list[tuple[str, list[Any]]] = []

    def __init__(self, _settings: Any) -> None:
        pass

    async def __aenter__(self) -> Recording:
        return self

    async def __aexit__(self, *_: Any) -> None:
        pass

    async def upsert(self, kind: str, items: list[Any]) -> None:
        self.calls.append(("upsert", [key for key, _, _ in items]))

    async def delete(self, kind: str, keys: list[str]) -> None:
        self.calls.append(("delete", list(keys)))


async def test_reports_are_sent_a_chunk_at_a_time_and_dissolved_ones_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors_module, "CHUNK", 2)
    monkeypatch.setattr(vector_store, "WeaviateStore", Recording)
    Recording.calls = []
    reports = [report(f"c{i}") for i in range(5)]
    gone = Community("old", 0, None, (), frozenset({"x"}))
    now = {r.id: Community(r.id, 0, None, (), frozenset({r.id})) for r in reports}
    regenerated = {"c0", "c1", "c2", "c4"}  # c3 kept its report
    await write_report_vectors(settings_for(tmp_path), reports, {"old": gone}, now, regenerated)
    assert Recording.calls == [
        ("upsert", ["c0", "c1"]),
        ("upsert", ["c2", "c4"]),
        ("delete", ["old"]),
    ]
