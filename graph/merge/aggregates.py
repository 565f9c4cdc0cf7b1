"""Bounded merged rows: entities, relationships and claims, with exact apply and retract.

Each aggregate is a pure fold of the contributions (``graph.merge.contributions``) currently
applied to its key. Plain counters (mentions, documents, weight, strength sum) are exact under
any sequence of apply and retract; per-value detail (names, types, descriptions, claims, days)
lives in capped ``graph.merge.tally`` structures whose loss at the cap is documented there. Below
the caps ``retract(apply(a, c), c) == a`` for every field but ``version``, which counts writes
(it is excluded from equality so that property can be stated at all) and lets a reader of
``graph-changes`` see that a row moved on.

``apply_*`` on ``None`` creates the row; ``retract_*`` returns ``None`` when the last chunk is
gone, meaning the row is deleted. Callers check the stored contribution row before applying
(see ``graph.merge.rules``): these functions count whatever they are given.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import date

from graph.merge.contributions import (
    ClaimContribution,
    ClaimFact,
    EntityContribution,
    RelationshipContribution,
)
from graph.merge.errors import InvalidContributionError, RetractionError
from graph.merge.tally import (
    DayWindow,
    Tally,
    day_add,
    day_remove,
    lost_sample_slot,
    sample_add,
    sample_of,
    tally_add,
    tally_remove,
)
from graph.model import content_id
from graph.pickling import by_fields

MAX_NAMES = 8  # display-name variants kept per entity / endpoint
MAX_TYPES = 8  # types kept per entity
MAX_DAYS = 400  # most recent distinct days with their own mention count
MAX_CLAIMS = 24  # distinct claims kept per subject


@by_fields
@dataclass(frozen=True, slots=True)
class EntityAggregate:
    key: str
    names: Tally  # display name → chunks using it
    types: Tally  # type → chunks assigning it
    descriptions: Tally  # description → chunks giving it (bottom-k sample, max_descriptions)
    mention_count: int  # live chunks naming the entity
    document_count: int  # live documents with at least one such chunk
    days: DayWindow  # mentions per published day
    version: int = field(default=0, compare=False)  # writes so far, not part of equality

    @property
    def name(self) -> str:
        return self.names.most_common() or self.key

    @property
    def type(self) -> str:
        """Most frequent type; ties go to the alphabetically first, so replicas agree."""
        return self.types.most_common() or ""

    @property
    def first_seen(self) -> date | None:
        return self.days.first_seen

    @property
    def last_seen(self) -> date | None:
        return self.days.last_seen


@by_fields
@dataclass(frozen=True, slots=True)
class RelationshipAggregate:
    key: str
    source_key: str  # smaller endpoint key (the graph is undirected)
    target_key: str
    source_names: Tally
    target_names: Tally
    descriptions: Tally
    weight: int  # live chunks asserting the relationship
    strength_milli_sum: int  # sum of the chunks' strengths × 1000: the mean stays exact
    days: DayWindow
    version: int = field(default=0, compare=False)

    @property
    def source_name(self) -> str:
        return self.source_names.most_common() or self.source_key

    @property
    def target_name(self) -> str:
        return self.target_names.most_common() or self.target_key

    @property
    def strength(self) -> float:
        """Mean strength over the asserting chunks (1–10)."""
        return self.strength_milli_sum / self.weight / 1000 if self.weight else 0.0

    @property
    def first_seen(self) -> date | None:
        return self.days.first_seen

    @property
    def last_seen(self) -> date | None:
        return self.days.last_seen


@by_fields
@dataclass(frozen=True, slots=True)
class ClaimAggregate:
    key: str  # subject entity key
    facts: tuple[ClaimFact, ...]  # kept claims, sorted by id
    support: Tally  # claim id → chunks stating it (capped at max_claims)
    mention_count: int  # live chunks with claims about the subject
    version: int = field(default=0, compare=False)

    def support_of(self, fact: ClaimFact) -> int:
        return self.support.count(fact.id)


def description_fingerprint(agg: EntityAggregate | RelationshipAggregate) -> str:
    """Hash of the kept distinct descriptions: the community job re-summarises a row only
    when this differs from the fingerprint recorded with its last summary (a repeated
    description changes a count, not the fingerprint)."""
    return content_id("desc", *agg.descriptions.values())


def claims_fingerprint(agg: ClaimAggregate) -> str:
    """Hash of the kept claim ids, for report materiality."""
    return content_id("claims", *agg.support.values())


def _check_key(row_key: str, contrib_key: str) -> None:
    if row_key != contrib_key:
        raise InvalidContributionError(f"contribution for {contrib_key!r} sent to {row_key!r}")


def _add_all(tally: Tally, values: tuple[str, ...], cap: int) -> Tally:
    """Descriptions and claims: the bottom-k sample, the same in any arrival order."""
    for v in values:
        tally = sample_add(tally, v, cap=cap)
    return tally


def _remove_all(tally: Tally, values: tuple[str, ...]) -> Tally:
    for v in values:
        tally = tally_remove(tally, v)
    return tally


def apply_entity(
    agg: EntityAggregate | None,
    contrib: EntityContribution,
    *,
    max_descriptions: int,
    opens_document: bool,
) -> EntityAggregate:
    """Fold one chunk's contribution in. ``opens_document`` is True when it is the first
    live chunk of its document for this entity (``graph.merge.rules.document_chunk_added``)."""
    base = agg or EntityAggregate(contrib.key, Tally(), Tally(), Tally(), 0, 0, DayWindow())
    _check_key(base.key, contrib.key)
    return replace(
        base,
        names=tally_add(base.names, contrib.name, cap=MAX_NAMES),
        types=tally_add(base.types, contrib.type, cap=MAX_TYPES),
        descriptions=_add_all(base.descriptions, contrib.descriptions, max_descriptions),
        mention_count=base.mention_count + 1,
        document_count=base.document_count + int(opens_document),
        days=day_add(base.days, contrib.day.toordinal(), cap=MAX_DAYS),
        version=base.version + 1,
    )


def retract_entity(
    agg: EntityAggregate | None, contrib: EntityContribution, *, closes_document: bool
) -> EntityAggregate | None:
    """Subtract exactly what ``apply_entity`` added; ``None`` when no chunk names it any
    more. ``closes_document`` is True when it was the document's last live chunk."""
    if agg is None or agg.mention_count == 0:
        raise RetractionError(f"entity {contrib.key!r} has nothing to retract")
    _check_key(agg.key, contrib.key)
    if agg.mention_count == 1:
        return None
    return replace(
        agg,
        names=tally_remove(agg.names, contrib.name),
        types=tally_remove(agg.types, contrib.type),
        descriptions=_remove_all(agg.descriptions, contrib.descriptions),
        mention_count=agg.mention_count - 1,
        document_count=agg.document_count - int(closes_document),
        days=day_remove(agg.days, contrib.day.toordinal()),
        version=agg.version + 1,
    )


def apply_relationship(
    agg: RelationshipAggregate | None,
    contrib: RelationshipContribution,
    *,
    max_descriptions: int,
) -> RelationshipAggregate:
    base = agg or RelationshipAggregate(
        contrib.key, contrib.source_key, contrib.target_key,
        Tally(), Tally(), Tally(), 0, 0, DayWindow(),
    )  # fmt: skip
    _check_key(base.key, contrib.key)
    return replace(
        base,
        source_names=tally_add(base.source_names, contrib.source_name, cap=MAX_NAMES),
        target_names=tally_add(base.target_names, contrib.target_name, cap=MAX_NAMES),
        descriptions=_add_all(base.descriptions, contrib.descriptions, max_descriptions),
        weight=base.weight + 1,
        strength_milli_sum=base.strength_milli_sum + contrib.strength_milli,
        days=day_add(base.days, contrib.day.toordinal(), cap=MAX_DAYS),
        version=base.version + 1,
    )


def retract_relationship(
    agg: RelationshipAggregate | None, contrib: RelationshipContribution
) -> RelationshipAggregate | None:
    if agg is None or agg.weight == 0:
        raise RetractionError(f"relationship {contrib.key!r} has nothing to retract")
    _check_key(agg.key, contrib.key)
    if agg.weight == 1:
        return None
    return replace(
        agg,
        source_names=tally_remove(agg.source_names, contrib.source_name),
        target_names=tally_remove(agg.target_names, contrib.target_name),
        descriptions=_remove_all(agg.descriptions, contrib.descriptions),
        weight=agg.weight - 1,
        strength_milli_sum=agg.strength_milli_sum - contrib.strength_milli,
        days=day_remove(agg.days, contrib.day.toordinal()),
        version=agg.version + 1,
    )


def _kept_facts(support: Tally, *sources: tuple[ClaimFact, ...]) -> tuple[ClaimFact, ...]:
    by_id = {f.id: f for facts in sources for f in facts}
    return tuple(by_id[i] for i in support.values())


def apply_claims(
    agg: ClaimAggregate | None, contrib: ClaimContribution, *, max_claims: int = MAX_CLAIMS
) -> ClaimAggregate:
    base = agg or ClaimAggregate(contrib.key, (), Tally(), 0)
    _check_key(base.key, contrib.key)
    support = _add_all(base.support, tuple(f.id for f in contrib.facts), max_claims)
    return replace(
        base,
        facts=_kept_facts(support, base.facts, contrib.facts),
        support=support,
        mention_count=base.mention_count + 1,
        version=base.version + 1,
    )


def retract_claims(agg: ClaimAggregate | None, contrib: ClaimContribution) -> ClaimAggregate | None:
    if agg is None or agg.mention_count == 0:
        raise RetractionError(f"claims about {contrib.key!r} have nothing to retract")
    _check_key(agg.key, contrib.key)
    if agg.mention_count == 1:
        return None
    support = _remove_all(agg.support, tuple(f.id for f in contrib.facts))
    return replace(
        agg,
        facts=_kept_facts(support, agg.facts),
        support=support,
        mention_count=agg.mention_count - 1,
        version=agg.version + 1,
    )


# ---- refolding a sample from the live evidence -------------------------------------------
# A retraction that takes a kept description (or claim) out of a full sample cannot tell which
# left-out value takes its place (``graph.merge.tally.lost_sample_slot``); the merger then reads the
# key's live contribution rows and refolds the sample with these, so the kept set is the one
# an insert-only stream of the same evidence gives, whatever the order of adds and retractions.


_Row = EntityAggregate | RelationshipAggregate | ClaimAggregate


def _sample(agg: _Row) -> Tally:
    return agg.support if isinstance(agg, ClaimAggregate) else agg.descriptions


def sample_lost(before: _Row | None, after: _Row | None) -> bool:
    """True when ``after`` (``before`` less one contribution) must be refolded from the key's
    evidence."""
    if before is None or after is None:
        return False
    return lost_sample_slot(_sample(before), _sample(after))


def _descriptions_of(
    agg: EntityAggregate | RelationshipAggregate,
    live: Iterable[EntityContribution | RelationshipContribution],
    cap: int,
) -> Tally | None:
    """The refolded sample, or None when the evidence does not add up to the row's total
    (rows read from another partition, or a bug: the incremental sample is then kept)."""
    sample = sample_of((d for c in live for d in c.descriptions), cap=cap)
    return sample if sample.total == agg.descriptions.total else None


def resample_entity(
    agg: EntityAggregate, live: Iterable[EntityContribution], *, max_descriptions: int
) -> EntityAggregate | None:
    """``agg`` with its descriptions refolded from every live contribution of its key; None
    when those contributions do not account for the row's descriptions."""
    sample = _descriptions_of(agg, live, max_descriptions)
    return replace(agg, descriptions=sample) if sample is not None else None


def resample_relationship(
    agg: RelationshipAggregate, live: Iterable[RelationshipContribution], *, max_descriptions: int
) -> RelationshipAggregate | None:
    sample = _descriptions_of(agg, live, max_descriptions)
    return replace(agg, descriptions=sample) if sample is not None else None


def resample_claims(
    agg: ClaimAggregate, live: Iterable[ClaimContribution], *, max_claims: int = MAX_CLAIMS
) -> ClaimAggregate | None:
    contributions = list(live)
    support = sample_of((f.id for c in contributions for f in c.facts), cap=max_claims)
    if support.total != agg.support.total:
        return None
    return replace(
        agg,
        facts=_kept_facts(support, *(c.facts for c in contributions)),
        support=support,
    )
