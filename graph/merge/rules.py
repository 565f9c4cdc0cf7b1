"""Merge rules: what the merger does with one (key, chunk) item, as pure functions.

Why this shape. A faust table row has one writer only if every item for a key arrives on
that key's partition, and Kafka rows must stay small, so:

1. The re-keying step (keyed by chunk id) derives ``chunk_contributions(extraction)``
   (``graph.merge.contributions``), keeps the ``ChunkManifest`` under the chunk id, publishes
   ``text_unit_added`` (``graph.merge.changes``) and forwards each contribution keyed by its
   entity / relationship / claim-subject key. To retract a chunk (a corrected document) it
   forwards a retraction for every key of the stored manifest; when a chunk is re-extracted
   differently it retracts ``stale_keys(old, new)`` and forwards the new contributions.
2. The merger, for one key, reads at most three rows by point look-up — the aggregate
   (key), the contribution (``contribution_key(key, chunk_id)``) and, for entities, the
   document counter (``document_key(key, document_id)``) — calls ``absorb_*`` or
   ``release_*`` below, writes back the rows of the returned ``*Rows`` (``None`` = delete
   the row) when ``changed``, and publishes ``*_changed(...)`` on ``graph-changes``.

Exactly once in effect. ``absorb_*`` compares the incoming contribution with the stored one:
equal → nothing changes (a redelivery, a replay from offset 0, a restarted worker); different
→ the stored one is retracted and the new one applied (a re-extraction of the same chunk);
absent → applied. ``release_*`` subtracts the *stored* row, so a retraction removes exactly
what was added, and releasing an absent row changes nothing. Plain counts (mentions,
documents, weight, strength) are therefore exact in any order; capped detail follows
``graph.merge.tally``. When a retraction leaves a full description or claim sample a place it
cannot fill by itself, the step says so (``Step.resample``) and the merger refolds the sample
from the key's live contribution rows (a prefix scan of its partition), so the kept
descriptions and claims too are a function of the live evidence.

Document counts. ``document_count`` must drop when the last chunk of a document that named
the entity is retracted, which a bounded aggregate cannot know by itself; a set of document
ids would grow without bound. So each (entity, document) pair has its own small counter row
(live chunks of that document naming the entity): ``document_chunk_added`` says when a
document opens, ``document_chunk_removed`` when it closes, and the aggregate only keeps the
count.

Sizes, for a hub with 10,000 mentions in 3,000 documents: the entity row keeps at most 8
names, 8 types, ``max_descriptions`` descriptions of ≤ 2,000 characters and 400 day counts —
2.5–3.7 KB serialised with 100-character descriptions over 1–730 days (the unit test holds it
under 4 KB) — and an apply costs the same at the 10,000th mention as at the first; the
10,000 contribution rows and 3,000 counter rows are each tens to hundreds of bytes.

Known hazard for the merger: a chunk retraction that overtakes the extraction of the same
chunk (still at the LLM) finds no manifest and retracts nothing; the re-keying step must then
drop the late extraction (e.g. by a document revision carried on chunks), which these rules
cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from graph.merge.aggregates import (
    MAX_CLAIMS,
    ClaimAggregate,
    EntityAggregate,
    RelationshipAggregate,
    apply_claims,
    apply_entity,
    apply_relationship,
    claims_fingerprint,
    description_fingerprint,
    retract_claims,
    retract_entity,
    retract_relationship,
    sample_lost,
)
from graph.merge.contributions import (
    ClaimContribution,
    EntityContribution,
    RelationshipContribution,
    contribution_key,
    document_key,
)
from graph.merge.errors import InvalidContributionError, RetractionError

__all__ = [
    "ClaimRows",
    "EntityRows",
    "RelationshipRows",
    "Step",
    "absorb_claims",
    "absorb_entity",
    "absorb_relationship",
    "apply_claims",
    "apply_entity",
    "apply_relationship",
    "claims_fingerprint",
    "contribution_key",
    "description_fingerprint",
    "document_chunk_added",
    "document_chunk_removed",
    "document_key",
    "release_claims",
    "release_entity",
    "release_relationship",
    "retract_claims",
    "retract_entity",
    "retract_relationship",
]

R = TypeVar("R")
_Contribution = EntityContribution | RelationshipContribution | ClaimContribution


def document_chunk_added(count: int | None) -> tuple[int, bool]:
    """(new counter value, whether this chunk opens the document for the entity)."""
    new = (count or 0) + 1
    return new, new == 1


def document_chunk_removed(count: int | None) -> tuple[int | None, bool]:
    """(new counter value, ``None`` meaning delete the row; whether the document closes)."""
    if not count:
        raise RetractionError("document counter is already empty")
    new = count - 1
    return (new or None), new == 0


@dataclass(frozen=True, slots=True)
class Step(Generic[R]):
    """The rows after one item, and whether anything is to be written and published."""

    rows: R
    changed: bool
    # a retraction took a kept description or claim out of a full sample: the caller refolds
    # it from the key's live contributions (``graph.merge.aggregates.resample_*``), since only they
    # know which left-out value now belongs in the sample
    resample: bool = False


@dataclass(frozen=True, slots=True)
class EntityRows:
    """The three rows one entity item touches (``None`` = absent / to delete)."""

    aggregate: EntityAggregate | None = None  # table row: key
    contribution: EntityContribution | None = None  # row: contribution_key(key, chunk_id)
    document_chunks: int | None = None  # row: document_key(key, document_id)


@dataclass(frozen=True, slots=True)
class RelationshipRows:
    aggregate: RelationshipAggregate | None = None
    contribution: RelationshipContribution | None = None


@dataclass(frozen=True, slots=True)
class ClaimRows:
    aggregate: ClaimAggregate | None = None
    contribution: ClaimContribution | None = None


def _same_chunk(stored: _Contribution | None, incoming: _Contribution) -> None:
    """The stored row must be this key's row for this chunk, or the caller read the wrong row."""
    if stored is not None and (stored.key, stored.chunk_id) != (incoming.key, incoming.chunk_id):
        raise InvalidContributionError(
            f"stored row is for {stored.key!r}/{stored.chunk_id!r}, "
            f"not {incoming.key!r}/{incoming.chunk_id!r}"
        )


def release_entity(rows: EntityRows) -> Step[EntityRows]:
    """Retract the stored contribution of this (entity, chunk); nothing stored → no change."""
    stored = rows.contribution
    if stored is None:
        return Step(rows, changed=False)
    count, closes = document_chunk_removed(rows.document_chunks)
    agg = retract_entity(rows.aggregate, stored, closes_document=closes)
    return Step(EntityRows(agg, None, count), True, sample_lost(rows.aggregate, agg))


def absorb_entity(
    rows: EntityRows, incoming: EntityContribution, *, max_descriptions: int
) -> Step[EntityRows]:
    """Apply ``incoming`` unless this very contribution is already absorbed."""
    if rows.contribution == incoming:
        return Step(rows, changed=False)
    _same_chunk(rows.contribution, incoming)
    released = release_entity(rows)
    base = released.rows
    count, opens = document_chunk_added(base.document_chunks)
    agg = apply_entity(
        base.aggregate, incoming, max_descriptions=max_descriptions, opens_document=opens
    )
    return Step(EntityRows(agg, incoming, count), True, released.resample)


def release_relationship(rows: RelationshipRows) -> Step[RelationshipRows]:
    if rows.contribution is None:
        return Step(rows, changed=False)
    agg = retract_relationship(rows.aggregate, rows.contribution)
    return Step(RelationshipRows(agg, None), True, sample_lost(rows.aggregate, agg))


def absorb_relationship(
    rows: RelationshipRows, incoming: RelationshipContribution, *, max_descriptions: int
) -> Step[RelationshipRows]:
    if rows.contribution == incoming:
        return Step(rows, changed=False)
    _same_chunk(rows.contribution, incoming)
    released = release_relationship(rows)
    agg = apply_relationship(released.rows.aggregate, incoming, max_descriptions=max_descriptions)
    return Step(RelationshipRows(agg, incoming), True, released.resample)


def release_claims(rows: ClaimRows) -> Step[ClaimRows]:
    if rows.contribution is None:
        return Step(rows, changed=False)
    agg = retract_claims(rows.aggregate, rows.contribution)
    return Step(ClaimRows(agg, None), True, sample_lost(rows.aggregate, agg))


def absorb_claims(
    rows: ClaimRows, incoming: ClaimContribution, *, max_claims: int = MAX_CLAIMS
) -> Step[ClaimRows]:
    if rows.contribution == incoming:
        return Step(rows, changed=False)
    _same_chunk(rows.contribution, incoming)
    released = release_claims(rows)
    agg = apply_claims(released.rows.aggregate, incoming, max_claims=max_claims)
    return Step(ClaimRows(agg, incoming), True, released.resample)
