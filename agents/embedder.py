"""Embedder agents: text units and entities into Weaviate, in batches, deterministic UUIDs.

- Text units come from ``chunks`` (an added chunk is upserted, a retracted one deleted).
- Entities come from ``graph-changes`` (name + its most supported descriptions; a deleted
  entity's vector is deleted); relationships too when ``embeddings.embed_relationships``.

If Weaviate is unreachable the batch is retried with backoff until it succeeds; the agent does
not move on, so the offsets behind the batch are not committed and nothing is lost; a batch
interrupted by a shutdown stays unacked (``streams.batching.finished_batches``). Upserts
replace the object with the same UUID, so a retry or a redelivery never adds a second copy.

They run in a worker of their own, with their own consumer group (``kgrag.worker``): an agent
that waits fills its queue, and faust then holds back delivery of every topic its app consumes.
In the graph worker's app that froze the chunker and the mergers for as long as Weaviate was
down; in an app of their own, only the vectors wait.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

import faust

from core.clients import Clients
from core.settings import Settings
from core.vector_store import WeaviateStore
from graph.merge.aggregates import EntityAggregate, RelationshipAggregate
from graph.merge.changes import GraphChange
from graph.merge.tally import Tally
from graph.model import Chunk
from streams.batching import finished_batches
from streams.codecs import PayloadError, Retraction, decode_chunk_event, decode_graph_change
from streams.topology import Topics
from streams.vectors import VectorWriter, until_done

log = logging.getLogger(__name__)
T = TypeVar("T")


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


def register(app: faust.App, settings: Settings, topics: Topics, clients: Clients) -> None:
    """The two embedders on ``app``: the vector worker's own app, never the graph worker's
    (see ``kgrag.worker``)."""
    state: dict[str, WeaviateStore] = {}
    embedder = clients.embedder
    with_relationships = settings.embeddings.embed_relationships

    async def store() -> WeaviateStore:
        if "store" not in state:
            s = WeaviateStore(settings)
            await until_done("Weaviate connection", s.connect)
            state["store"] = s
        return state["store"]

    @app.agent(topics.chunks, name=f"{settings.namespace}.text-embedder")
    async def embed_text_units(stream: Any) -> None:
        async for batch in finished_batches(
            stream, settings.weaviate.batch_size, settings.kafka.batch_within_s
        ):
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

    @app.agent(topics.graph_changes, name=f"{settings.namespace}.entity-embedder")
    async def embed_entities(stream: Any) -> None:
        async for batch in finished_batches(
            stream, settings.weaviate.batch_size, settings.kafka.batch_within_s
        ):
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
