"""The domain's own records: frozen, slotted dataclasses used throughout ``graph/``.

Topic payloads live in ``streams/records.py``; agents convert at the edge. Ids are content
hashes with a kind prefix (``chunk-…``, ``ent-…``, ``rel-…``) so a redelivered message
becomes an idempotent upsert.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

from graph.pickling import by_fields

ExtractionMode = Literal["llm", "offline"]


def content_id(prefix: str, *parts: str) -> str:
    """Deterministic id: ``<prefix>-`` + 32 hex chars of SHA-256 over the NUL-joined parts."""
    h = hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()[:32]
    return f"{prefix}-{h}"


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    title: str
    text: str
    published_at: str  # ISO 8601, UTC; document time, not wall-clock time
    source: str = ""
    url: str = ""
    metadata: dict[str, object] = field(default_factory=dict, hash=False, compare=False)


@by_fields
@dataclass(frozen=True, slots=True)
class Chunk:
    """A text unit: a token window of one document."""

    id: str  # content_id("chunk", document_id, text)
    document_id: str
    title: str
    published_at: str
    position: int  # 0-based index of the window within its document
    text: str
    n_tokens: int


@dataclass(frozen=True, slots=True)
class EntityMention:
    """One entity as one chunk describes it."""

    name: str  # display name as extracted (e.g. "FEDERAL RESERVE")
    type: str  # lower-case type, e.g. "organization"
    description: str
    chunk_id: str


@dataclass(frozen=True, slots=True)
class RelationshipMention:
    source: str  # entity display names, as in the same extraction
    target: str
    description: str
    strength: float  # 1..10
    chunk_id: str


@dataclass(frozen=True, slots=True)
class ClaimMention:
    """GraphRAG's covariate: a claim about a subject (and optionally an object)."""

    subject: str
    object: str | None
    claim_type: str
    status: Literal["TRUE", "FALSE", "SUSPECTED"]
    start_date: str | None
    end_date: str | None
    description: str
    source_text: str
    chunk_id: str


@dataclass(frozen=True, slots=True)
class ChunkExtraction:
    """Everything extracted from one chunk, all or nothing."""

    chunk: Chunk
    entities: tuple[EntityMention, ...]
    relationships: tuple[RelationshipMention, ...]
    claims: tuple[ClaimMention, ...] = ()
    mode: ExtractionMode = "offline"
    dropped_records: int = 0  # malformed records the parser discarded
    # tokens the extraction spent at the model (every turn and retry); an answer served from
    # the response cache, or shared with an identical request in flight, spent none
    prompt_tokens: int = 0
    completion_tokens: int = 0


@by_fields
@dataclass(frozen=True, slots=True)
class Community:
    """One community of one level of the hierarchy (level 0 is the coarsest)."""

    id: str  # stable id, kept across runs by member-overlap matching ("c-…")
    level: int
    parent: str | None  # id of the enclosing community one level up
    children: tuple[str, ...]  # ids one level down
    entity_keys: frozenset[str]  # members (entity keys)
