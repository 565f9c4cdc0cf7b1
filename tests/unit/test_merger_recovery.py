"""The merger's rows after a crash in the middle of a flush: a redelivery repairs them.

A flush writes contribution rows, then aggregates, then document counters. These tests drop
the writes a kill -9 could have lost and redeliver the batch, as Kafka would.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from agents.merger import FLUSH_RANK, KINDS, _merge_one
from graph.merge.aggregates import EntityAggregate, RelationshipAggregate
from graph.merge.codec import from_dict
from graph.merge.contributions import chunk_contributions
from graph.model import Chunk, ChunkExtraction, EntityMention, RelationshipMention
from streams.codecs import ItemRetraction
from streams.rows import RowCache


class PrefixDict(dict[str, Any]):
    """A table of one partition: get/set/pop, and the ranged read the merger's refold uses."""

    def prefix_items(self, prefix: str) -> Iterator[tuple[str, Any]]:
        return iter(sorted((k, v) for k, v in self.items() if k.startswith(prefix)))


class DictTopo:
    """Just what RowCache needs: ``named(name)`` tables with get/set/pop/prefix_items."""

    def __init__(self) -> None:
        self.tables: dict[str, PrefixDict] = {}

    def named(self, name: str) -> PrefixDict:
        return self.tables.setdefault(name, PrefixDict())

    def table(self, name: str) -> PrefixDict:
        return self.named(name)


class _Event:
    """Stands in for a faust event: the table context only reads its message's partition."""

    def __init__(self) -> None:
        self.message = SimpleNamespace(partition=0, topic="t", offset=0)


def _event() -> Any:
    return _Event()


def _items(n: int) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for i in range(n):
        chunk = Chunk(f"chunk-{i}", f"doc-{i % 2}", "t", "1987-03-02T00:00:00Z", 0, "x", 1)
        x = ChunkExtraction(
            chunk,
            (
                EntityMention("Acme", "organization", f"Acme fact {i}.", chunk.id),
                EntityMention("Bolt", "organization", "Bolt is a railway.", chunk.id),
            ),
            (RelationshipMention("Acme", "Bolt", "Acme supplies Bolt.", 5.0, chunk.id),),
        )
        c = chunk_contributions(x)
        out += [("entity", e) for e in c.entities] + [("relationship", r) for r in c.relationships]
    return out


def _run(
    topo: DictTopo,
    items: list[tuple[str, Any]],
    lose: frozenset[str] = frozenset(),
    max_descriptions: int = 12,
) -> None:
    """One batch; rows of the tables in ``lose`` are never written (the crash)."""
    caches = {kind: RowCache(topo, FLUSH_RANK) for kind in ("entity", "relationship")}  # type: ignore[arg-type]
    for kind, item in items:
        _merge_one(caches[kind], _event(), KINDS[kind], item, max_descriptions)
    for cache in caches.values():
        for table_key in [tk for tk in cache.events if tk[0] in lose]:
            del cache.events[table_key]
        cache.flush()


def _counts(topo: DictTopo) -> tuple[int, int, int]:
    acme = from_dict(EntityAggregate, topo.table("entities")["acme"])
    rel = from_dict(RelationshipAggregate, topo.table("relationships")["acme\u241ebolt"])
    return acme.mention_count, acme.document_count, int(rel.weight)


def test_a_clean_redelivery_changes_nothing() -> None:
    topo = DictTopo()
    items = _items(4)
    _run(topo, items)
    _run(topo, items)
    assert _counts(topo) == (4, 2, 4)


def test_lost_aggregate_writes_are_redone_once() -> None:
    topo = DictTopo()
    items = _items(4)
    _run(topo, items, lose=frozenset({"entities", "relationships", "entity_documents"}))
    _run(topo, items)
    assert _counts(topo) == (4, 2, 4)


def test_lost_document_counters_are_brought_up_to_date() -> None:
    topo = DictTopo()
    first, second = _items(4), _items(6)[8:]
    _run(topo, first, lose=frozenset({"entity_documents"}))
    _run(topo, first)  # redelivery: aggregates landed, counters did not
    _run(topo, second)
    assert topo.table("entity_documents")["acme|doc-0"]["n"] == 3
    assert _counts(topo) == (6, 2, 6)


def _retractions(chunks: list[int]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for i in chunks:
        chunk, doc = f"chunk-{i}", f"doc-{i % 2}"
        out += [
            ("entity", ItemRetraction("acme", chunk, doc)),
            ("entity", ItemRetraction("bolt", chunk, doc)),
            ("relationship", ItemRetraction("acme\u241ebolt", chunk, doc)),
        ]
    return out


def test_a_redelivered_retraction_changes_nothing() -> None:
    topo = DictTopo()
    _run(topo, _items(4))
    _run(topo, _retractions([0, 1]))
    _run(topo, _retractions([0, 1]))
    assert _counts(topo) == (2, 2, 2)


def test_a_retraction_whose_aggregate_write_was_lost_is_released_again_once() -> None:
    topo = DictTopo()
    _run(topo, _items(4))
    lost = frozenset({"entities", "relationships", "entity_documents"})
    _run(topo, _retractions([0, 2]), lose=lost)  # contribution tombstones landed, nothing else
    assert _counts(topo) == (4, 2, 4)
    _run(topo, _retractions([0, 2]))
    _run(topo, _retractions([0, 2]))
    assert _counts(topo) == (2, 1, 2)  # chunks 1 and 3 are left, both of doc-1
    assert topo.table("entity_documents")["acme|doc-0"]["n"] == 0


def test_a_retraction_whose_counter_write_was_lost_closes_the_document_once() -> None:
    topo = DictTopo()
    _run(topo, _items(4))
    _run(topo, _retractions([0]), lose=frozenset({"entity_documents"}))
    _run(topo, _retractions([0]))  # the aggregate landed: only the counter is brought down
    assert topo.table("entity_documents")["acme|doc-0"]["n"] == 1
    _run(topo, _retractions([2]))  # doc-0's last chunk: now the document closes
    assert _counts(topo) == (2, 1, 2)


def test_versions_survive_deletion_so_a_late_retraction_cannot_hit_a_recreated_key() -> None:
    topo = DictTopo()
    _run(topo, _items(1))
    _run(topo, _retractions([0]))  # acme is gone: its row is a tombstone
    assert topo.table("entities")["acme"]["x"] == 1
    _run(topo, _items(2)[3:])  # chunk-1 names acme again
    _run(topo, _retractions([0]))  # a redelivery of the old retraction
    assert _counts(topo) == (1, 1, 1)
    assert from_dict(EntityAggregate, topo.table("entities")["acme"]).version == 3


def _acme(topo: DictTopo) -> EntityAggregate:
    return from_dict(EntityAggregate, topo.table("entities")["acme"])


def _kept_chunks(topo: DictTopo) -> list[int]:
    """The chunks whose description of Acme the sample keeps ("Acme fact <i>.")."""
    return [int(d.split()[-1].rstrip(".")) for d in _acme(topo).descriptions.values()]


def _fresh_without(gone: list[int]) -> DictTopo:
    """Rows of a merger that only ever saw the eight chunks other than ``gone``."""
    fresh = DictTopo()
    kept = [item for item in _items(8) if int(item[1].chunk_id[6:]) not in gone]
    _run(fresh, kept, max_descriptions=3)
    return fresh


def test_retracting_kept_descriptions_of_a_full_sample_equals_never_seeing_them() -> None:
    """Eight chunks, three descriptions kept: retracting two kept ones refolds the sample
    from the live contribution rows, as if those chunks had never been merged."""
    topo = DictTopo()
    _run(topo, _items(8), max_descriptions=3)
    gone = _kept_chunks(topo)[:2]
    _run(topo, _retractions(gone), max_descriptions=3)
    assert _acme(topo) == _acme(_fresh_without(gone))
    assert len(_acme(topo).descriptions.items) == 3 and _acme(topo).descriptions.overflow == 3


def test_a_refold_in_the_same_batch_sees_the_batch_s_own_rows() -> None:
    """Additions and the retraction of a kept description in one batch: the rows of the
    batch are not in the table yet, and the refold must count them."""
    probe = DictTopo()
    _run(probe, _items(8), max_descriptions=3)
    gone = _kept_chunks(probe)[:1]
    topo = DictTopo()
    _run(topo, _items(8) + _retractions(gone), max_descriptions=3)
    assert _acme(topo) == _acme(_fresh_without(gone))
