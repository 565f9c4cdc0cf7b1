"""Merge agents: re-key extraction items, then merge each key's rows (one writer per key).

1. The re-keyer reads ``extractions`` (keyed by document id), keeps each chunk's manifest,
   publishes the text unit on ``graph-changes`` and forwards every contribution keyed by
   its entity, relationship or claim-subject key; a retracted chunk becomes a retraction for
   every key of its manifest.
2. One merger per kind reads its items topic, reads the key's rows by point look-up, applies
   ``graph.merge`` and publishes the row as it is after the write on ``graph-changes``.

Rows are written only after the batch's outputs are delivered (``streams.batching``); a
redelivered item finds its contribution already absorbed and changes nothing. Rows carry the
aggregate version they belong to, so a redelivery after a crash in the middle of writing a
batch's rows can tell which of them landed (``RowCache.flush``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graph import merge_codec as mc
from graph.contributions import (
    ChunkManifest,
    chunk_contributions,
    contribution_key,
    document_key,
    stale_keys,
)
from graph.graph_changes import (
    GraphChange,
    claims_changed,
    entity_changed,
    relationship_changed,
    text_unit_added,
    text_unit_retracted,
)
from graph.merge import (
    ClaimRows,
    EntityRows,
    RelationshipRows,
    absorb_claims,
    absorb_entity,
    absorb_relationship,
    release_claims,
    release_entity,
    release_relationship,
)
from graph.model import ChunkExtraction
from streams.app import Topology
from streams.batching import as_current, changelog_writes, deliver
from streams.codecs import (
    ItemKind,
    ItemRetraction,
    PayloadError,
    decode_extraction_event,
    decode_item,
    encode_change,
    encode_item,
    encode_item_retraction,
)
from streams.dlq import send_dead_letter

log = logging.getLogger(__name__)


# ---- re-keyer ---------------------------------------------------------------------------


def _retractions(manifest: ChunkManifest) -> list[tuple[str, str, bytes]]:
    """(topic name, key, payload) for every key the manifest routes a retraction to."""
    out = []
    for topic, keys in (
        ("entity_items", manifest.entity_keys),
        ("relationship_items", manifest.relationship_keys),
        ("claim_items", manifest.claim_keys),
    ):
        for key in keys:
            out.append(
                (topic, key, encode_item_retraction(key, manifest.chunk_id, manifest.document_id))
            )
    return out


def _additions(extraction: ChunkExtraction) -> tuple[ChunkManifest, list[tuple[str, str, bytes]]]:
    contrib = chunk_contributions(extraction)
    out = [("entity_items", c.key, encode_item(c)) for c in contrib.entities]
    out += [("relationship_items", c.key, encode_item(c)) for c in contrib.relationships]
    out += [("claim_items", c.key, encode_item(c)) for c in contrib.claims]
    return contrib.manifest, out


def register_rekeyer(topo: Topology) -> None:
    manifests, changes = topo.table("manifests"), topo.topic("graph_changes")
    dlq = topo.topic("extractions_dlq")

    @topo.app.agent(topo.topic("extractions"), name=f"{topo.settings.namespace}.rekeyer")
    async def rekeyer(stream: Any) -> None:
        async for batch in stream.take_events(200, within=0.5):
            pending: list[Any] = []
            writes: list[tuple[Any, str, dict[str, Any] | None]] = []
            for event in batch:
                try:
                    item = decode_extraction_event(event.value)
                except PayloadError as e:
                    pending.append(
                        await send_dead_letter(dlq, event, reason=str(e), stage="rekeyer")
                    )
                    continue
                chunk_id = (
                    item.chunk_id if not isinstance(item, ChunkExtraction) else (item.chunk.id)
                )
                with as_current(event):
                    stored = manifests.get(chunk_id)
                old = mc.chunk_manifest_from_dict(stored) if stored else None
                if isinstance(item, ChunkExtraction):
                    manifest, sends = _additions(item)
                    if old is not None:
                        sends = _retractions(stale_keys(old, manifest)) + sends
                    change = text_unit_added(item)
                    row: dict[str, Any] | None = mc.chunk_manifest_to_dict(manifest)
                else:
                    sends = _retractions(old) if old is not None else []
                    change = text_unit_retracted(item.chunk_id, item.document_id)
                    row = None
                for topic, key, payload in sends:
                    pending.append(await topo.topic(topic).send(key=key, value=payload))
                pending.append(await changes.send(key=chunk_id, value=encode_change(change)))
                writes.append((event, chunk_id, row))
            await deliver(pending)
            with changelog_writes() as written:
                for event, chunk_id, row in writes:
                    with as_current(event):
                        if row is None:
                            manifests.pop(chunk_id, None)
                        else:
                            manifests[chunk_id] = row
            await deliver(written)


# ---- mergers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MergeKind:
    """How one kind of row is stored, merged and announced."""

    kind: ItemKind
    aggregate_table: str
    contribution_table: str
    decode_aggregate: Callable[[Any], Any]
    encode_aggregate: Callable[[Any], Any]
    decode_contribution: Callable[[Any], Any]
    encode_contribution: Callable[[Any], Any]
    changed: Callable[..., GraphChange]


KINDS = {
    "entity": MergeKind(
        "entity",
        "entities",
        "entity_contributions",
        mc.entity_aggregate_from_dict,
        mc.entity_aggregate_to_dict,
        mc.entity_contribution_from_dict,
        mc.entity_contribution_to_dict,
        entity_changed,
    ),
    "relationship": MergeKind(
        "relationship",
        "relationships",
        "relationship_contributions",
        mc.relationship_aggregate_from_dict,
        mc.relationship_aggregate_to_dict,
        mc.relationship_contribution_from_dict,
        mc.relationship_contribution_to_dict,
        relationship_changed,
    ),
    "claim": MergeKind(
        "claim",
        "claims",
        "claim_contributions",
        mc.claim_aggregate_from_dict,
        mc.claim_aggregate_to_dict,
        mc.claim_contribution_from_dict,
        mc.claim_contribution_to_dict,
        claims_changed,
    ),
}


class RowCache:
    """Rows read or written within one batch, so repeated keys see the batch's own writes."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self.rows: dict[tuple[str, str], Any] = {}
        self.events: dict[tuple[str, str], Any] = {}

    def get(self, event: Any, table: str, key: str) -> Any:
        if (table, key) not in self.rows:
            with as_current(event):
                self.rows[(table, key)] = self.topo.table(table).get(key)
        return self.rows[(table, key)]

    def put(self, event: Any, table: str, key: str, value: Any) -> None:
        self.rows[(table, key)] = value
        self.events[(table, key)] = event

    def flush(self) -> None:
        """Write the batch's rows: contributions first, then aggregates, then counters.

        The writes are not atomic, so their order and the versions they carry make a crash in
        between recoverable (see ``_merge_one``): a contribution row records the version the
        aggregate reached when it absorbed that contribution, and a document counter the
        version it belongs to. A redelivered item whose contribution is stored but whose
        aggregate is older than that version is applied again (the aggregate write was
        lost); a counter older than its contribution is brought up to date.
        Known gap: a retraction interrupted between its contribution delete and its
        aggregate write is not recovered (it would need tombstones).
        """
        order = sorted(self.events.items(), key=lambda kv: _FLUSH_RANK.get(kv[0][0], 1))
        for (table, key), event in order:
            value = self.rows[(table, key)]
            with as_current(event):
                if value is None:
                    self.topo.table(table).pop(key, None)
                else:
                    self.topo.table(table)[key] = value


_FLUSH_RANK = {
    "entity_contributions": 0,
    "relationship_contributions": 0,
    "claim_contributions": 0,
    "entity_documents": 2,
}


def _version(aggregate: Any) -> int:
    return int(aggregate.version) if aggregate is not None else -1


def _contribution_row(row: Any) -> tuple[Any, int]:
    """(contribution dict, aggregate version it produced) of a stored row."""
    if not row:
        return None, -1
    return row.get("c"), int(row.get("v", -1))


def _counter_row(row: Any) -> tuple[int | None, int]:
    if not row:
        return None, -1
    return int(row["n"]), int(row.get("v", -1))


def _merge_one(
    cache: RowCache, event: Any, spec: MergeKind, item: Any, max_descriptions: int
) -> GraphChange | None:
    retraction = isinstance(item, ItemRetraction)
    key, chunk_id, doc_id = item.key, item.chunk_id, item.document_id
    agg_raw = cache.get(event, spec.aggregate_table, key)
    ckey = contribution_key(key, chunk_id)
    stored_raw, stored_v = _contribution_row(cache.get(event, spec.contribution_table, ckey))
    aggregate = spec.decode_aggregate(agg_raw) if agg_raw else None
    stored = spec.decode_contribution(stored_raw) if stored_raw else None
    lost_aggregate = (
        not retraction and stored is not None and stored == item and _version(aggregate) < stored_v
    )
    if lost_aggregate:
        log.warning(
            "%s %s: re-applying chunk %s, its aggregate write was lost", spec.kind, key, chunk_id
        )
        stored = None  # the aggregate never absorbed it: apply it again
    counter_key = document_key(key, doc_id)
    if spec.kind == "entity":
        count, count_v = _counter_row(cache.get(event, "entity_documents", counter_key))
        if not retraction and not lost_aggregate and stored == item and count_v < stored_v:
            count = (count or 0) + 1  # the aggregate landed, this counter's write did not
            cache.put(event, "entity_documents", counter_key, {"n": count, "v": stored_v})
        rows: Any = EntityRows(aggregate, stored, count)
        step: Any = (
            release_entity(rows)
            if retraction
            else absorb_entity(rows, item, max_descriptions=max_descriptions)
        )
    elif spec.kind == "relationship":
        rows = RelationshipRows(aggregate, stored)
        step = (
            release_relationship(rows)
            if retraction
            else absorb_relationship(rows, item, max_descriptions=max_descriptions)
        )
    else:
        rows = ClaimRows(aggregate, stored)
        step = release_claims(rows) if retraction else absorb_claims(rows, item)
    if not step.changed:
        _rewrite_rows(cache, event, spec, key, ckey, counter_key)
        return None
    after = step.rows.aggregate
    version = _version(after) if after is not None else _version(aggregate) + 1
    cache.put(
        event,
        spec.aggregate_table,
        key,
        spec.encode_aggregate(after) if after is not None else None,
    )
    contribution = step.rows.contribution
    cache.put(
        event,
        spec.contribution_table,
        ckey,
        {"c": spec.encode_contribution(contribution), "v": version}
        if contribution is not None
        else None,
    )
    if spec.kind == "entity":
        n = step.rows.document_chunks
        cache.put(event, "entity_documents", counter_key, {"n": n, "v": version} if n else None)
    return spec.changed(key, after, chunk_id=chunk_id, document_id=doc_id, retraction=retraction)


def _rewrite_rows(
    cache: RowCache, event: Any, spec: MergeKind, key: str, ckey: str, counter_key: str
) -> None:
    """Write a key's stored rows again, unchanged, for an item that changed nothing.

    Such an item is a redelivery. If the worker that first absorbed it was killed after its
    local RocksDB write but before the changelog record left the producer, the local store
    has the row and the changelog does not, and a member that later recovers this partition
    from the changelog would lack it. Writing the same rows again puts them in the changelog;
    to a store that already has them it changes nothing.
    """
    tables = [(spec.aggregate_table, key), (spec.contribution_table, ckey)]
    if spec.kind == "entity":
        tables.append(("entity_documents", counter_key))
    for table, row_key in tables:
        row = cache.get(event, table, row_key)
        if row is not None:
            cache.put(event, table, row_key, row)


def register_merger(topo: Topology, spec: MergeKind) -> None:
    changes, dlq = topo.topic("graph_changes"), topo.topic("extractions_dlq")
    max_descriptions = topo.settings.extraction.max_descriptions
    source = topo.topic(f"{spec.kind}_items")

    @topo.app.agent(source, name=f"{topo.settings.namespace}.{spec.kind}-merger")
    async def merger(stream: Any) -> None:
        async for batch in stream.take_events(500, within=0.5):
            cache = RowCache(topo)
            pending: list[Any] = []
            for event in batch:
                try:
                    item = decode_item(event.value, spec.kind)
                    change = _merge_one(cache, event, spec, item, max_descriptions)
                except PayloadError as e:
                    pending.append(
                        await send_dead_letter(
                            dlq, event, reason=str(e), stage=f"{spec.kind}-merger"
                        )
                    )
                    continue
                if change is not None:
                    pending.append(await changes.send(key=item.key, value=encode_change(change)))
            await deliver(pending)
            with changelog_writes() as written:
                cache.flush()
            await deliver(written)


def register(topo: Topology) -> None:
    register_rekeyer(topo)
    kinds = ["entity", "relationship"]
    if topo.settings.extraction.claims_enabled:
        kinds.append("claim")
    for kind in kinds:
        register_merger(topo, KINDS[kind])
