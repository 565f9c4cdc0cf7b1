"""``GraphChange``: what the merger publishes on ``graph-changes`` after each write.

The community job (issue 4) builds snapshots from this topic alone, never from Weaviate, so a
change carries whole rows, not deltas: the aggregates as they are after the write (or the
keys of deleted ones), plus the chunk and document the write came from. Replaying the topic
from the start and keeping the last row per key (changes for one key share its partition, so
their order holds; ``version`` grows with every write of a row's lifetime) gives the current
graph; collecting ``chunk_id`` per key while doing so (added unless ``retraction``) gives each
row's text units. The text unit itself (its text, document, title and published time — all
the documents and text_units tables need) is published once per chunk by the re-keying step
with ``text_unit_added`` and withdrawn with ``text_unit_retracted``. A deleted document is
announced once by the chunker with ``DocumentRemoved`` (its text units and the rows they backed
are withdrawn by their own retractions, which follow through the extractor and the mergers).
"""

from __future__ import annotations

from dataclasses import dataclass

from graph.merge.aggregates import ClaimAggregate, EntityAggregate, RelationshipAggregate
from graph.model import Chunk, ChunkExtraction, ExtractionMode


@dataclass(frozen=True, slots=True)
class GraphChange:
    chunk_id: str  # the chunk whose contribution was applied or retracted
    document_id: str
    retraction: bool = False  # True: the chunk no longer backs these rows
    text_unit: Chunk | None = None  # set once per chunk by the re-keying step
    mode: ExtractionMode | None = None  # which extractor produced the chunk's items
    entities: tuple[EntityAggregate, ...] = ()  # upserted rows, as after the write
    deleted_entities: tuple[str, ...] = ()  # keys whose last chunk was retracted
    relationships: tuple[RelationshipAggregate, ...] = ()
    deleted_relationships: tuple[str, ...] = ()
    claims: tuple[ClaimAggregate, ...] = ()
    deleted_claims: tuple[str, ...] = ()  # subject keys with no claim left
    # with ``text_unit``: (prompt, completion) tokens the chunk's extraction spent; None: none
    llm_tokens: tuple[int, int] | None = None
    # the ids of the facts this chunk states about the claim subject above (absorbed, or
    # released by a retraction): which text unit backs which claim. None from a merger that
    # did not send them.
    claim_ids: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class DocumentRemoved:
    """The document was deleted (a tombstone on the documents topic): its row goes."""

    document_id: str


def text_unit_added(extraction: ChunkExtraction) -> GraphChange:
    """The chunk and its provenance, published once when its extraction is first seen, with
    the tokens its extraction spent."""
    chunk = extraction.chunk
    tokens = (extraction.prompt_tokens, extraction.completion_tokens)
    return GraphChange(
        chunk.id,
        chunk.document_id,
        text_unit=chunk,
        mode=extraction.mode,
        llm_tokens=tokens if any(tokens) else None,
    )


def text_unit_retracted(chunk_id: str, document_id: str) -> GraphChange:
    """The chunk is gone (its document was replaced by a new version)."""
    return GraphChange(chunk_id, document_id, retraction=True)


def entity_changed(
    key: str,
    after: EntityAggregate | None,
    *,
    chunk_id: str,
    document_id: str,
    retraction: bool,
) -> GraphChange:
    if after is None:
        return GraphChange(chunk_id, document_id, retraction, deleted_entities=(key,))
    return GraphChange(chunk_id, document_id, retraction, entities=(after,))


def relationship_changed(
    key: str,
    after: RelationshipAggregate | None,
    *,
    chunk_id: str,
    document_id: str,
    retraction: bool,
) -> GraphChange:
    if after is None:
        return GraphChange(chunk_id, document_id, retraction, deleted_relationships=(key,))
    return GraphChange(chunk_id, document_id, retraction, relationships=(after,))


def claims_changed(
    key: str,
    after: ClaimAggregate | None,
    *,
    chunk_id: str,
    document_id: str,
    retraction: bool,
    claim_ids: tuple[str, ...] | None = None,
) -> GraphChange:
    if after is None:
        return GraphChange(
            chunk_id, document_id, retraction, deleted_claims=(key,), claim_ids=claim_ids
        )
    return GraphChange(chunk_id, document_id, retraction, claims=(after,), claim_ids=claim_ids)
