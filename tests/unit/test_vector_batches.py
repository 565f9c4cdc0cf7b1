"""Large upserts go to Weaviate in parts under its gRPC message limit, in order, none lost."""

from __future__ import annotations

from core.vector_store import BATCH_BYTES, _estimated_bytes, batches_by_size


def test_parts_cover_every_item_once_in_order_and_stay_under_the_limit() -> None:
    sizes = [30, 50, 20, 90, 10, 10, 60]
    parts = batches_by_size(sizes, limit=100)
    assert [list(p) for p in parts] == [[0, 1, 2], [3, 4], [5, 6]]
    for p in parts:
        assert sum(sizes[i] for i in p) <= 100


def test_an_item_larger_than_the_limit_goes_alone() -> None:
    assert [list(p) for p in batches_by_size([10, 500, 10], limit=100)] == [[0], [1], [2]]


def test_no_items_no_parts() -> None:
    assert batches_by_size([]) == []


def test_a_hundred_thousand_reports_do_not_go_in_one_message() -> None:
    # What a first run over a year of news upserts: 100,000 reports, 1,536-dim vectors.
    size = _estimated_bytes([0.0] * 1536, {"level": 2, "title": "t" * 80, "summary": "s" * 700})
    parts = batches_by_size([size] * 100_000)
    assert len(parts) > 6
    assert all(len(p) * size <= BATCH_BYTES for p in parts)
    assert sum(len(p) for p in parts) == 100_000
