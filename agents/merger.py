"""Merge agents: re-key extraction items, then merge each key's rows (one writer per key).

1. The re-keyer reads ``extractions`` (keyed by document id), keeps each chunk's manifest,
   publishes the text unit on ``graph-changes`` and forwards every contribution keyed by
   its entity, relationship or claim-subject key; a retracted chunk becomes a retraction for
   every key of its manifest.
2. One merger per kind reads its items topic, reads the key's rows by point look-up, applies
   ``graph.merge.rules`` and publishes the row as it is after the write on ``graph-changes``.

Rows are written only after the batch's outputs are delivered, and the next batch waits until
their changelog records are acknowledged (``streams.batching``); a redelivered item finds its
contribution already absorbed and changes nothing. Rows carry the aggregate version they
belong to, and deletions leave tombstones, so a redelivery after a crash in the middle of
writing a batch's rows can tell which of them landed, for additions and retractions alike
(``RowCache.flush``, ``_merge_one``). Tombstones keep the row count at what it was before the
deletion: one small row per (key, chunk) and per key ever seen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from graph.merge.aggregates import (
    ClaimAggregate,
    EntityAggregate,
    RelationshipAggregate,
    resample_claims,
    resample_entity,
    resample_relationship,
)
from graph.merge.changes import (
    GraphChange,
    claims_changed,
    entity_changed,
    relationship_changed,
    text_unit_added,
    text_unit_retracted,
)
from graph.merge.codec import from_dict, to_dict
from graph.merge.contributions import (
    ChunkManifest,
    ClaimContribution,
    EntityContribution,
    RelationshipContribution,
    chunk_contributions,
    contribution_key,
    document_key,
    stale_keys,
)
from graph.merge.rules import (
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
from streams.batching import as_current, deliver, finished_batches, write_rows
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
from streams.rows import RowCache
from streams.topology import Topology

log = logging.getLogger(__name__)

# A batch is merged without awaiting anything but its sends; yielding to the event loop every
# this many items keeps a long batch from holding up the extractor's LLM calls in the same
# worker (a response that waits for the loop leaves an LLM slot idle).
YIELD_EVERY = 50


# ---- re-keyer ---------------------------------------------------------------------------


def _retractions(manifest: ChunkManifest) -> list[tuple[str, str, bytes]]:
    """(merge kind, key, payload) for every key the manifest routes a retraction to."""
    out = []
    for kind, keys in (
        ("entity", manifest.entity_keys),
        ("relationship", manifest.relationship_keys),
        ("claim", manifest.claim_keys),
    ):
        for key in keys:
            out.append(
                (kind, key, encode_item_retraction(key, manifest.chunk_id, manifest.document_id))
            )
    return out


def _additions(extraction: ChunkExtraction) -> tuple[ChunkManifest, list[tuple[str, str, bytes]]]:
    contrib = chunk_contributions(extraction)
    out = [("entity", c.key, encode_item(c)) for c in contrib.entities]
    out += [("relationship", c.key, encode_item(c)) for c in contrib.relationships]
    out += [("claim", c.key, encode_item(c)) for c in contrib.claims]
    return contrib.manifest, out


def register_rekeyer(topo: Topology) -> None:
    manifests, changes = topo.tables.manifests, topo.topics.graph_changes
    dlq = topo.topics.extractions_dlq

    @topo.app.agent(topo.topics.extractions, name=f"{topo.settings.namespace}.rekeyer")
    async def rekeyer(stream: Any) -> None:
        async for batch in finished_batches(stream, 200, within=topo.settings.kafka.batch_within_s):
            pending: list[Any] = []
            writes: list[tuple[Any, str, dict[str, Any] | None]] = []
            # manifests this batch wrote (None: removed), by chunk id: the table gets them
            # only after delivery, and an add and a retraction of one chunk in one batch must
            # see each other
            written: dict[str, dict[str, Any] | None] = {}
            for n, event in enumerate(batch, 1):
                if not n % YIELD_EVERY:
                    await asyncio.sleep(0)
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
                if chunk_id in written:
                    stored = written[chunk_id]
                else:
                    with as_current(event):
                        stored = manifests.get(chunk_id)
                old = from_dict(ChunkManifest, stored) if stored else None
                if isinstance(item, ChunkExtraction):
                    manifest, sends = _additions(item)
                    if old is not None:
                        sends = _retractions(stale_keys(old, manifest)) + sends
                    change = text_unit_added(item)
                    row: dict[str, Any] | None = to_dict(manifest)
                else:
                    sends = _retractions(old) if old is not None else []
                    change = text_unit_retracted(item.chunk_id, item.document_id)
                    row = None
                for kind, key, payload in sends:
                    pending.append(await topo.topics.items(kind).send(key=key, value=payload))
                pending.append(await changes.send(key=chunk_id, value=encode_change(change)))
                writes.append((event, chunk_id, row))
                written[chunk_id] = row
            await deliver(pending)

            def write(writes: list[tuple[Any, str, dict[str, Any] | None]] = writes) -> None:
                for event, chunk_id, row in writes:
                    with as_current(event):
                        if row is None:
                            manifests.pop(chunk_id, None)
                        else:
                            manifests[chunk_id] = row

            if not await write_rows(topo.app, write):
                return  # shutting down: see streams.batching.stopping


# ---- mergers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MergeKind:
    """How one kind of row is stored, merged and announced."""

    kind: ItemKind
    aggregate_table: str
    contribution_table: str
    aggregate: type  # the aggregate record (stored through graph.merge.codec)
    contribution: type  # the contribution record
    changed: Callable[..., GraphChange]

    def decode_aggregate(self, row: Any) -> Any:
        return from_dict(self.aggregate, row)

    def decode_contribution(self, row: Any) -> Any:
        return from_dict(self.contribution, row)


KINDS = {
    "entity": MergeKind(
        "entity",
        "entities",
        "entity_contributions",
        EntityAggregate,
        EntityContribution,
        entity_changed,
    ),
    "relationship": MergeKind(
        "relationship",
        "relationships",
        "relationship_contributions",
        RelationshipAggregate,
        RelationshipContribution,
        relationship_changed,
    ),
    "claim": MergeKind(
        "claim",
        "claims",
        "claim_contributions",
        ClaimAggregate,
        ClaimContribution,
        claims_changed,
    ),
}


# Write order of a batch's rows: contributions first, then aggregates, then counters. The
# writes are not atomic, so their order and the versions they carry make a crash in between
# recoverable (see ``_merge_one``): a contribution row records the version the aggregate
# reached when it absorbed (or, as a tombstone, released) that contribution, and a document
# counter the version it belongs to. A redelivered item whose contribution row is newer than
# its aggregate is applied or released again (the aggregate write was lost); a counter older
# than its contribution is brought up to date. Deleted rows stay as small tombstones, so
# versions never restart.
FLUSH_RANK = {
    "entity_contributions": 0,
    "relationship_contributions": 0,
    "claim_contributions": 0,
    "entity_documents": 2,
}


@dataclass(frozen=True)
class _Stored:
    """A key's rows as stored, decoded. Deleted rows are kept as tombstones carrying the
    version they were deleted at (and, for a contribution, what it contributed), so a
    redelivered retraction can tell a lost write from a finished one."""

    aggregate: Any | None
    aggregate_v: int  # version of the aggregate row or of its tombstone; 0 when never written
    contribution: Any | None  # the live contribution of this (key, chunk)
    retracted: Any | None  # the contribution a tombstone says was released
    contribution_v: int  # aggregate version its last write produced; -1 when none
    count: int | None  # entity only: live chunks of this document naming the key
    count_v: int


def _read_rows(
    cache: RowCache, event: Any, spec: MergeKind, key: str, ckey: str, counter_key: str
) -> _Stored:
    agg_row = cache.get(event, spec.aggregate_table, key)
    if not agg_row:
        aggregate, aggregate_v = None, 0
    elif agg_row.get(_TOMBSTONE):
        aggregate, aggregate_v = None, int(agg_row["v"])
    else:
        aggregate = spec.decode_aggregate(agg_row)
        aggregate_v = int(aggregate.version)
    row = cache.get(event, spec.contribution_table, ckey)
    contribution = retracted = None
    contribution_v = -1
    if row:
        decoded = spec.decode_contribution(row["c"])
        contribution_v = int(row.get("v", -1))
        if row.get(_TOMBSTONE):
            retracted = decoded
        else:
            contribution = decoded
    count, count_v = None, -1
    if spec.kind == "entity":
        counter = cache.get(event, "entity_documents", counter_key)
        if counter:
            count, count_v = int(counter["n"]) or None, int(counter.get("v", -1))
    return _Stored(aggregate, aggregate_v, contribution, retracted, contribution_v, count, count_v)


def _merge_one(
    cache: RowCache, event: Any, spec: MergeKind, item: Any, max_descriptions: int
) -> GraphChange | None:
    """Apply one item to its key's rows (in ``cache``); the change to publish, or None.

    A flush writes contribution rows, then aggregates, then document counters, and a crash
    can stop it anywhere in that order. Every row records the aggregate version it belongs
    to, and deletions leave tombstones, so a redelivered item can tell how far its first
    pass got (``_redelivered``); all current → nothing to do (the rows are written again,
    see ``_rewrite_rows``).
    """
    retraction = isinstance(item, ItemRetraction)
    key, chunk_id, doc_id = item.key, item.chunk_id, item.document_id
    ckey, counter_key = contribution_key(key, chunk_id), document_key(key, doc_id)
    rows_now = _read_rows(cache, event, spec, key, ckey, counter_key)
    stored, count = _redelivered(cache, event, spec, item, rows_now, counter_key)
    step = _step(spec, item, rows_now.aggregate, stored, count, max_descriptions)
    if not step.changed:
        _rewrite_rows(cache, event, spec, key, ckey, counter_key)
        return None
    version = rows_now.aggregate_v + 1  # versions count writes and survive deletion
    after = _write_step(cache, event, spec, step, stored, version, key, ckey, counter_key)
    if step.resample and after is not None:
        after = _resampled(cache, event, spec, after, max_descriptions)
        cache.put(event, spec.aggregate_table, key, to_dict(after))
    if spec.kind == "claim":  # which facts this chunk backs: the claims' text units
        backed = stored if retraction else item  # a retraction that changed a row released one
        facts = backed.facts if backed is not None else ()
        return spec.changed(
            key,
            after,
            chunk_id=chunk_id,
            document_id=doc_id,
            retraction=retraction,
            claim_ids=tuple(f.id for f in facts),
        )
    return spec.changed(key, after, chunk_id=chunk_id, document_id=doc_id, retraction=retraction)


def _redelivered(
    cache: RowCache, event: Any, spec: MergeKind, item: Any, rows_now: _Stored, counter_key: str
) -> tuple[Any, int | None]:
    """The contribution and document count to apply ``item`` against, repaired for a
    redelivery: contribution stored but aggregate older → the aggregate write was lost, apply
    (or release) again; aggregate current but counter older → bring the counter up to date."""
    stored, count = rows_now.contribution, rows_now.count
    first_pass_v = rows_now.contribution_v
    landed = rows_now.aggregate_v >= first_pass_v
    key, chunk_id = item.key, item.chunk_id
    if not isinstance(item, ItemRetraction) and stored is not None and stored == item:
        if not landed:
            log.warning("%s %s: apply %s again, aggregate write lost", spec.kind, key, chunk_id)
            stored = None
        elif spec.kind == "entity" and rows_now.count_v < first_pass_v:
            count = (count or 0) + 1  # the aggregate landed, this counter's write did not
            cache.put(event, "entity_documents", counter_key, {"n": count, "v": first_pass_v})
    elif isinstance(item, ItemRetraction) and stored is None and rows_now.retracted is not None:
        if not landed:
            log.warning("%s %s: release %s again, aggregate write lost", spec.kind, key, chunk_id)
            stored = rows_now.retracted
        elif spec.kind == "entity" and rows_now.count_v < first_pass_v:
            count = max((count or 0) - 1, 0) or None
            cache.put(event, "entity_documents", counter_key, {"n": count or 0, "v": first_pass_v})
    return stored, count


def _step(
    spec: MergeKind,
    item: Any,
    aggregate: Any,
    stored: Any,
    count: int | None,
    max_descriptions: int,
) -> Any:
    """The pure merge step of ``graph.merge.rules`` for ``item``'s kind: absorb it, or release the
    contribution a retraction names."""
    retraction = isinstance(item, ItemRetraction)
    if spec.kind == "entity":
        rows: Any = EntityRows(aggregate, stored, count)
        if retraction:
            return release_entity(rows)
        return absorb_entity(rows, item, max_descriptions=max_descriptions)
    if spec.kind == "relationship":
        rows = RelationshipRows(aggregate, stored)
        if retraction:
            return release_relationship(rows)
        return absorb_relationship(rows, item, max_descriptions=max_descriptions)
    rows = ClaimRows(aggregate, stored)
    return release_claims(rows) if retraction else absorb_claims(rows, item)


def _write_step(
    cache: RowCache,
    event: Any,
    spec: MergeKind,
    step: Any,
    stored: Any,
    version: int,
    key: str,
    ckey: str,
    counter_key: str,
) -> Any:
    """Write a changed step's rows at ``version``, in flush order (aggregate, contribution,
    document counter); the aggregate after it, None when the key is gone."""
    after = step.rows.aggregate
    if after is not None:
        after = replace(after, version=version)
    cache.put(
        event,
        spec.aggregate_table,
        key,
        to_dict(after) if after is not None else {_TOMBSTONE: 1, "v": version},
    )
    contribution = step.rows.contribution
    if contribution is not None:
        crow: dict[str, Any] = {"c": to_dict(contribution), "v": version}
    else:  # released: keep what it was, so a redelivery can release it again if need be
        crow = {"c": to_dict(stored), "v": version, _TOMBSTONE: 1}
    cache.put(event, spec.contribution_table, ckey, crow)
    if spec.kind == "entity":
        n = step.rows.document_chunks
        cache.put(event, "entity_documents", counter_key, {"n": n or 0, "v": version})
    return after


def _resampled(
    cache: RowCache, event: Any, spec: MergeKind, after: Any, max_descriptions: int
) -> Any:
    """``after`` with its description (or claim) sample refolded from every live contribution
    row of its key, read after this item's own row was written (``graph.merge.rules.Step``). Needed
    only when a retraction takes a kept value out of a full sample, so rarely: for a hub with
    thousands of distinct descriptions a retraction hits one of its few kept ones with that
    small a chance, and the scan it then costs is amortised to a few rows per retraction."""
    rows = cache.scan(event, spec.contribution_table, contribution_key(after.key, ""))
    live = [spec.decode_contribution(r["c"]) for r in rows.values() if not r.get(_TOMBSTONE)]
    refolded: Any
    if spec.kind == "entity":
        refolded = resample_entity(after, live, max_descriptions=max_descriptions)
    elif spec.kind == "relationship":
        refolded = resample_relationship(after, live, max_descriptions=max_descriptions)
    else:
        refolded = resample_claims(after, live)
    if refolded is None:
        log.warning(
            "%s %s: its %d live contribution rows do not account for its sample; kept as it is",
            spec.kind, after.key, len(live),
        )  # fmt: skip
        return after
    return refolded


_TOMBSTONE = "x"


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
    changes, dlq = topo.topics.graph_changes, topo.topics.extractions_dlq
    max_descriptions = topo.settings.extraction.max_descriptions
    source = topo.topics.items(spec.kind)

    @topo.app.agent(source, name=f"{topo.settings.namespace}.{spec.kind}-merger")
    async def merger(stream: Any) -> None:
        async for batch in finished_batches(stream, 500, within=topo.settings.kafka.batch_within_s):
            cache = RowCache(topo.tables, FLUSH_RANK)
            pending: list[Any] = []
            for n, event in enumerate(batch, 1):
                if not n % YIELD_EVERY:
                    await asyncio.sleep(0)  # let LLM calls and heartbeats in between
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
            if not await write_rows(topo.app, cache.flush):
                return  # shutting down: see streams.batching.stopping


def register(topo: Topology) -> None:
    register_rekeyer(topo)
    kinds = ["entity", "relationship"]
    if topo.settings.extraction.claims_enabled:
        kinds.append("claim")
    for kind in kinds:
        register_merger(topo, KINDS[kind])
