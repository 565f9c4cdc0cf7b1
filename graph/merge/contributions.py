"""What one chunk contributes to each merged row, keyed so every row has one writer.

An extraction arrives keyed by chunk id; the merger re-keys its items by entity key, by
relationship key and by claim subject key, so each key lands on one partition and its rows
are written by one actor. For every (key, chunk) pair this module derives one contribution:

* ``EntityContribution`` — one per distinct entity key in the chunk, however often the chunk
  names it: a chunk counts as one mention. Display name and type are the chunk's most
  frequent ones (ties: smallest string), descriptions are the distinct non-empty ones.
* ``RelationshipContribution`` — one per distinct relationship key (the undirected pair, see
  ``graph.keys``); endpoints are stored in key order, strength is the mean of the chunk's
  assertions in thousandths, an integer, so sums and retractions are exact.
* ``ClaimContribution`` — the chunk's distinct claims about one subject.

Contribution rows are stored under ``contribution_key(key, chunk_id)`` (``key|chunk_id``;
keys never contain ``|``): redelivery is a point look-up (same row → nothing to do) and a
retraction subtracts exactly the stored row. ``ChunkManifest`` lists the keys a chunk
touched; the re-keying step keeps it under the chunk id, so retracting a chunk (a corrected
document) or a changed re-extraction knows which keys to visit (``stale_keys``).

Items that cannot be merged are skipped, not half-merged: names without letters or digits,
self-relationships, claims whose subject has no key. Descriptions longer than
``MAX_TEXT_CHARS`` are cut so that a row's size has a hard bound.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Literal

from graph.keys import entity_key, relationship_key, split_relationship_key
from graph.merge.errors import InvalidContributionError
from graph.model import ChunkExtraction, ClaimMention, RelationshipMention, content_id
from graph.pickling import by_fields

MAX_TEXT_CHARS = 2000  # per description / claim text: bounds a row whatever the LLM writes
KEY_SEPARATOR = "|"  # removed from entity keys by normalisation, so a safe joiner

ClaimStatus = Literal["TRUE", "FALSE", "SUSPECTED"]


def contribution_key(key: str, chunk_id: str) -> str:
    """Row key of one chunk's contribution to one entity, relationship or claim subject."""
    return f"{key}{KEY_SEPARATOR}{chunk_id}"


def document_key(key: str, document_id: str) -> str:
    """Row key of the per-(entity, document) chunk counter (see ``graph.merge.rules``)."""
    return f"{key}{KEY_SEPARATOR}{document_id}"


def split_row_key(row_key: str) -> tuple[str, str]:
    """Inverse of ``contribution_key``/``document_key`` (ids may contain ``|``, keys not)."""
    key, _, rest = row_key.partition(KEY_SEPARATOR)
    return key, rest


def published_day(published_at: str) -> date:
    """Document time → its UTC date (``published_at`` is normalised ISO 8601 UTC)."""
    try:
        return date.fromisoformat(published_at.strip()[:10])
    except ValueError as e:
        raise InvalidContributionError(f"published_at {published_at!r} has no ISO date") from e


def _text(value: str) -> str:
    return value.strip()[:MAX_TEXT_CHARS]


def _distinct(texts: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted({t for t in (_text(x) for x in texts) if t}))


def _majority(values: Iterable[str]) -> str:
    counts = Counter(values)
    return min(counts, key=lambda v: (-counts[v], v))


@dataclass(frozen=True, slots=True)
class EntityContribution:
    key: str  # graph.keys.entity_key of the names below
    name: str  # display name as this chunk wrote it
    type: str  # lower-case type
    descriptions: tuple[str, ...]  # distinct, sorted
    chunk_id: str
    document_id: str
    day: date  # published_at's UTC date


@dataclass(frozen=True, slots=True)
class RelationshipContribution:
    key: str  # graph.keys.relationship_key: sorted pair of endpoint keys
    source_key: str  # the smaller endpoint key
    target_key: str
    source_name: str  # display names as this chunk wrote them, in key order
    target_name: str
    descriptions: tuple[str, ...]
    strength_milli: int  # mean strength of the chunk's assertions × 1000, rounded
    chunk_id: str
    document_id: str
    day: date


@by_fields
@dataclass(frozen=True, slots=True)
class ClaimFact:
    """A claim as extracted, normalised; identical facts from two chunks count twice."""

    subject_key: str
    subject_name: str
    object_key: str | None
    object_name: str | None
    claim_type: str
    status: ClaimStatus
    start_date: str | None
    end_date: str | None
    description: str
    source_text: str

    @property
    def id(self) -> str:
        return content_id(
            "claim",
            self.subject_key,
            self.object_key or "",
            self.claim_type,
            self.status,
            self.start_date or "",
            self.end_date or "",
            self.description,
            self.source_text,
        )


@dataclass(frozen=True, slots=True)
class ClaimContribution:
    key: str  # subject entity key
    facts: tuple[ClaimFact, ...]  # distinct, sorted by id
    chunk_id: str
    document_id: str
    day: date


@dataclass(frozen=True, slots=True)
class ChunkManifest:
    """Which keys one chunk contributed to: the retraction route of that chunk."""

    chunk_id: str
    document_id: str
    entity_keys: tuple[str, ...] = ()
    relationship_keys: tuple[str, ...] = ()
    claim_keys: tuple[str, ...] = ()


def entity_contributions(extraction: ChunkExtraction) -> list[EntityContribution]:
    """One contribution per distinct entity key the chunk names, sorted by key."""
    chunk = extraction.chunk
    day = published_day(chunk.published_at)
    groups: dict[str, list[tuple[str, str, str]]] = {}
    for m in extraction.entities:
        key = entity_key(m.name)
        if key:
            groups.setdefault(key, []).append(
                (m.name.strip(), m.type.strip().lower(), m.description)
            )
    return [
        EntityContribution(
            key=key,
            name=_majority(n for n, _, _ in items),
            type=_majority(t for _, t, _ in items),
            descriptions=_distinct(d for _, _, d in items),
            chunk_id=chunk.id,
            document_id=chunk.document_id,
            day=day,
        )
        for key, items in sorted(groups.items())
    ]


def _strength_milli(strength: float) -> int:
    if not math.isfinite(strength):
        raise InvalidContributionError(f"relationship strength {strength!r} is not finite")
    return round(strength * 1000)


def _relationship(
    key: str, items: list[RelationshipMention], chunk_id: str, document_id: str, day: date
) -> RelationshipContribution:
    low, high = split_relationship_key(key)
    names: dict[str, list[str]] = {low: [], high: []}
    for m in items:
        for name in (m.source, m.target):
            names[entity_key(name)].append(name.strip())
    milli = [_strength_milli(m.strength) for m in items]
    return RelationshipContribution(
        key=key,
        source_key=low,
        target_key=high,
        source_name=_majority(names[low]),
        target_name=_majority(names[high]),
        descriptions=_distinct(m.description for m in items),
        strength_milli=round(sum(milli) / len(milli)),
        chunk_id=chunk_id,
        document_id=document_id,
        day=day,
    )


def relationship_contributions(extraction: ChunkExtraction) -> list[RelationshipContribution]:
    """One contribution per distinct undirected pair, sorted by key; self-loops skipped."""
    chunk = extraction.chunk
    day = published_day(chunk.published_at)
    groups: dict[str, list[RelationshipMention]] = {}
    for m in extraction.relationships:
        source, target = entity_key(m.source), entity_key(m.target)
        if source and target and source != target:
            groups.setdefault(relationship_key(m.source, m.target), []).append(m)
    return [
        _relationship(key, items, chunk.id, chunk.document_id, day)
        for key, items in sorted(groups.items())
    ]


def _fact(m: ClaimMention) -> ClaimFact:
    object_key = entity_key(m.object) if m.object else ""
    return ClaimFact(
        subject_key=entity_key(m.subject),
        subject_name=m.subject.strip(),
        object_key=object_key or None,
        object_name=m.object.strip() if object_key and m.object else None,
        claim_type=m.claim_type.strip().upper(),
        status=m.status,
        start_date=m.start_date or None,
        end_date=m.end_date or None,
        description=_text(m.description),
        source_text=_text(m.source_text),
    )


def claim_contributions(extraction: ChunkExtraction) -> list[ClaimContribution]:
    """The chunk's distinct claims grouped by subject key, sorted by key."""
    chunk = extraction.chunk
    day = published_day(chunk.published_at)
    groups: dict[str, dict[str, ClaimFact]] = {}
    for m in extraction.claims:
        fact = _fact(m)
        if fact.subject_key:
            groups.setdefault(fact.subject_key, {})[fact.id] = fact
    return [
        ClaimContribution(
            key=key,
            facts=tuple(facts[i] for i in sorted(facts)),
            chunk_id=chunk.id,
            document_id=chunk.document_id,
            day=day,
        )
        for key, facts in sorted(groups.items())
    ]


@dataclass(frozen=True, slots=True)
class ChunkContributions:
    """Everything one chunk contributes, with the manifest that routes its retraction."""

    manifest: ChunkManifest
    entities: tuple[EntityContribution, ...]
    relationships: tuple[RelationshipContribution, ...]
    claims: tuple[ClaimContribution, ...]


def chunk_contributions(extraction: ChunkExtraction) -> ChunkContributions:
    """All contributions of one extraction, derived once (what the re-keying step sends)."""
    entities = tuple(entity_contributions(extraction))
    relationships = tuple(relationship_contributions(extraction))
    claims = tuple(claim_contributions(extraction))
    manifest = ChunkManifest(
        chunk_id=extraction.chunk.id,
        document_id=extraction.chunk.document_id,
        entity_keys=tuple(c.key for c in entities),
        relationship_keys=tuple(c.key for c in relationships),
        claim_keys=tuple(c.key for c in claims),
    )
    return ChunkContributions(manifest, entities, relationships, claims)


def stale_keys(old: ChunkManifest, new: ChunkManifest | None) -> ChunkManifest:
    """Keys ``old`` touched that ``new`` does not: what to retract when a chunk is
    retracted (``new`` is None) or re-extracted differently. Keys present in both are
    handled by the per-key replace (``graph.merge.rules``)."""
    if new is None:
        return old

    def minus(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
        keep = set(b)
        return tuple(k for k in a if k not in keep)

    return ChunkManifest(
        chunk_id=old.chunk_id,
        document_id=old.document_id,
        entity_keys=minus(old.entity_keys, new.entity_keys),
        relationship_keys=minus(old.relationship_keys, new.relationship_keys),
        claim_keys=minus(old.claim_keys, new.claim_keys),
    )
