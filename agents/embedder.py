"""Embedder agents: text units and entities into Weaviate, in batches, deterministic UUIDs.

- Text units come from ``chunks`` (an added chunk is upserted, a retracted one deleted).
- Entities come from ``graph-changes`` (name + its most supported descriptions; a deleted
  entity's vector is deleted); relationships too when ``embeddings.embed_relationships``.

If Weaviate is unreachable the batch is retried with backoff until it succeeds; the agent does
not move on, so the offsets behind the batch are not committed and nothing is lost; a batch
interrupted by a shutdown stays unacked (``streams.batching.finished_batches``). Upserts
replace the object with the same UUID, so a retry or a redelivery never adds a second copy.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, wait_exponential_jitter

from core.clients import Clients
from core.vector_store import VectorStoreError, WeaviateStore
from graph.aggregates import EntityAggregate, RelationshipAggregate
from graph.graph_changes import GraphChange
from graph.model import Chunk
from graph.protocols import Embedder
from graph.tally import Tally
from streams.batching import finished_batches
from streams.codecs import PayloadError, Retraction, decode_chunk_event, decode_graph_change
from streams.topology import Topology

log = logging.getLogger(__name__)
T = TypeVar("T")


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, VectorStoreError) and exc.retryable


async def until_done(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """Retry ``call`` with backoff for as long as Weaviate is unreachable."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(_retryable),
        wait=wait_exponential_jitter(multiplier=0.5, max=15),
        reraise=True,
    ):
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                log.warning("retrying %s (attempt %d)", what, attempt.retry_state.attempt_number)
            return await call()
    raise AssertionError("unreachable")  # pragma: no cover


def top_descriptions(tally: Tally, n: int = 3) -> str:
    """The ``n`` descriptions most chunks gave, most supported first."""
    ranked = sorted(tally.items, key=lambda item: (-item[1], item[0]))
    return " ".join(d for d, _ in ranked[:n])


def entity_text(agg: EntityAggregate) -> str:
    return f"{agg.name}: {top_descriptions(agg.descriptions)}"


def text_unit_properties(c: Chunk) -> dict[str, Any]:
    return {
        "document_id": c.document_id,
        "title": c.title,
        "text": c.text,
        "published_at": c.published_at,
        "position": c.position,
        "n_tokens": c.n_tokens,
    }


class VectorWriter:
    """Collects one batch's upserts and deletes per kind, then writes them (last write wins)."""

    def __init__(self, store: Callable[[], Awaitable[WeaviateStore]], embedder: Embedder) -> None:
        self._store = store
        self._embedder = embedder
        self.upserts: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
        self.deletes: dict[str, set[str]] = {}

    def upsert(self, kind: str, key: str, text: str, props: dict[str, Any]) -> None:
        self.upserts.setdefault(kind, {})[key] = (text, props)
        self.deletes.get(kind, set()).discard(key)

    def delete(self, kind: str, key: str) -> None:
        self.upserts.get(kind, {}).pop(key, None)
        self.deletes.setdefault(kind, set()).add(key)

    async def flush(self) -> None:
        store = await self._store()
        for kind, rows in self.upserts.items():
            await self._upsert(store, kind, rows)
        for kind, gone in self.deletes.items():
            if gone:
                await self._delete(store, kind, sorted(gone))
        self.upserts.clear()
        self.deletes.clear()

    async def _upsert(
        self, store: WeaviateStore, kind: str, rows: dict[str, tuple[str, dict[str, Any]]]
    ) -> None:
        keys = list(rows)
        vectors = await self._embedder.embed([rows[k][0] for k in keys])
        items = [(k, v, rows[k][1]) for k, v in zip(keys, vectors, strict=True)]

        async def call() -> None:
            await store.upsert(kind, items)

        await until_done(f"{kind} upsert", call)

    async def _delete(self, store: WeaviateStore, kind: str, keys: Sequence[str]) -> None:
        async def call() -> None:
            await store.delete(kind, keys)

        await until_done(f"{kind} delete", call)


def _apply_change(writer: VectorWriter, change: GraphChange, with_relationships: bool) -> None:
    for agg in change.entities:
        writer.upsert(
            "entity",
            agg.key,
            entity_text(agg),
            {"name": agg.name, "type": agg.type, "description": top_descriptions(agg.descriptions)},
        )
    for key in change.deleted_entities:
        writer.delete("entity", key)
    if not with_relationships:
        return
    for rel in change.relationships:
        writer.upsert(
            "relationship",
            rel.key,
            _relationship_text(rel),
            {
                "source": rel.source_name,
                "target": rel.target_name,
                "description": top_descriptions(rel.descriptions),
            },
        )
    for key in change.deleted_relationships:
        writer.delete("relationship", key)


def _relationship_text(rel: RelationshipAggregate) -> str:
    return f"{rel.source_name} – {rel.target_name}: {top_descriptions(rel.descriptions)}"


def register(topo: Topology, clients: Clients) -> None:
    state: dict[str, WeaviateStore] = {}
    embedder = clients.embedder
    with_relationships = topo.settings.embeddings.embed_relationships

    async def store() -> WeaviateStore:
        if "store" not in state:
            s = WeaviateStore(topo.settings)
            await until_done("Weaviate connection", s.connect)
            state["store"] = s
        return state["store"]

    @topo.app.agent(topo.topics.chunks, name=f"{topo.settings.namespace}.text-embedder")
    async def embed_text_units(stream: Any) -> None:
        async for batch in finished_batches(stream, topo.settings.weaviate.batch_size, 1.0):
            writer = VectorWriter(store, embedder)
            for item in batch:
                try:
                    event = decode_chunk_event(item.value)
                except PayloadError as e:
                    log.warning("skipping undecodable chunk event: %s", e)
                    continue
                if isinstance(event, Retraction):
                    writer.delete("text_unit", event.chunk_id)
                else:
                    writer.upsert(
                        "text_unit",
                        event.id,
                        f"{event.title}\n{event.text}",
                        text_unit_properties(event),
                    )
            await writer.flush()

    @topo.app.agent(topo.topics.graph_changes, name=f"{topo.settings.namespace}.entity-embedder")
    async def embed_entities(stream: Any) -> None:
        async for batch in finished_batches(stream, topo.settings.weaviate.batch_size, 1.0):
            writer = VectorWriter(store, embedder)
            for item in batch:
                try:
                    change = decode_graph_change(item.value)
                except PayloadError as e:
                    log.warning("skipping undecodable graph change: %s", e)
                    continue
                if isinstance(change, GraphChange):
                    _apply_change(writer, change, with_relationships)
            await writer.flush()
