"""Lookup maps over one snapshot, built once when the snapshot arrives.

Every query reads a ``QueryIndex`` and never the raw tables, so the per-query work is
dictionary lookups. The service builds a new index for a new snapshot and swaps the
reference; an index is never mutated after ``from_snapshot`` returns, so a query that started
on the old one finishes on it.

Community hierarchy: ``SnapshotCommunity.community`` (the human-readable number) is the key
of the tree, as in GraphRAG's tables, where ``parent`` and ``children`` hold numbers. Report
citations use that number too.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from pathlib import Path
from typing import TypeVar

from core.tables.store import GraphTables
from graph.communities.leiden_graph import gc_paused
from graph.keys import entity_key
from graph.versions.model import (
    Snapshot,
    SnapshotClaim,
    SnapshotCommunity,
    SnapshotDocument,
    SnapshotEntity,
    SnapshotMeta,
    SnapshotRelationship,
    SnapshotReport,
    SnapshotTextUnit,
)
from query.aliases import AliasIndex
from query.entity_names import NameIndex
from query.text_store import TextStore, TextStoreBuilder, without_text
from query.time_window import DailyCounts, to_date

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class QueryIndex:
    meta: SnapshotMeta
    documents: dict[str, SnapshotDocument]
    entities: dict[str, SnapshotEntity]  # by entity key
    entity_by_hrid: dict[int, SnapshotEntity]
    relationships: dict[str, SnapshotRelationship]
    relationship_by_hrid: dict[int, SnapshotRelationship]
    relationships_by_entity: dict[str, tuple[str, ...]]  # relationship ids, sorted
    relationship_ends: dict[str, tuple[str, str]]  # relationship id -> entity keys
    claims_by_entity: dict[str, tuple[SnapshotClaim, ...]]
    claim_by_hrid: dict[int, SnapshotClaim]
    text_units: dict[str, SnapshotTextUnit]
    text_unit_by_hrid: dict[int, SnapshotTextUnit]
    text_units_by_entity: dict[str, tuple[str, ...]]
    text_units_by_document: dict[str, tuple[str, ...]]
    communities: dict[int, SnapshotCommunity]  # by community number
    community_by_id: dict[str, SnapshotCommunity]
    reports: dict[int, SnapshotReport]  # by community number
    entity_communities: dict[str, dict[int, int]]  # entity key -> level -> community number
    unit_dates: dict[str, date | None]
    entity_daily: dict[str, DailyCounts]
    community_daily: dict[int, DailyCounts]
    newest: date | None  # the newest document's day: what "last N days" counts back from
    names: NameIndex  # entity keys by name word, for the entities a question names
    texts: TextStore  # bulk text (descriptions, text, report bodies): ``full(row)`` reads it
    # which keys name one thing (the ``aliases`` table, ``query.aliases``)
    aliases: AliasIndex = field(default_factory=AliasIndex)

    def entity_units(self, key: str) -> list[str]:
        """The text units of an entity under any of its names: its own, those of the keys
        merged into it, and those where a surname it shares with others means it."""
        own = self.text_units_by_entity.get(key, ())
        extra = [
            u for r in self.aliases.whole(key) for u in self.text_units_by_entity.get(r.alias, ())
        ]
        extra += self.aliases.namesake_units(key)
        if not extra:
            return list(own)
        return list(dict.fromkeys([*own, *sorted(u for u in extra if u in self.text_units)]))

    @property
    def version(self) -> int:
        return self.meta.version

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, texts: TextStore | None = None) -> QueryIndex:
        """The index of ``snapshot``; its bulk text from ``texts`` when the rows were read
        without it (``read``), else taken out of the rows into a store of its own, so an
        index made from rows reads text as one the service reads (``full``) does."""
        if texts is None:
            texts = TextStore.from_rows(
                {
                    "entities": snapshot.entities,
                    "relationships": snapshot.relationships,
                    "claims": snapshot.claims,
                    "text_units": snapshot.text_units,
                    "community_reports": snapshot.community_reports,
                }
            )
            snapshot = replace(
                snapshot,
                entities=tuple(map(without_text, snapshot.entities)),
                relationships=tuple(map(without_text, snapshot.relationships)),
                claims=tuple(map(without_text, snapshot.claims)),
                text_units=tuple(map(without_text, snapshot.text_units)),
                community_reports=tuple(map(without_text, snapshot.community_reports)),
            )
        return _build(snapshot, texts)

    @classmethod
    def read(
        cls,
        store: GraphTables,
        version: int | str | datetime | None = None,
        text_dir: Path | None = None,
    ) -> QueryIndex:
        """The index of a version of the graph tables, its bulk text kept in memory-mapped
        segments under ``text_dir`` (the system's temporary directory when None)."""
        sink = TextStoreBuilder(text_dir)
        with gc_paused():  # millions of acyclic rows: no full collections while they arrive
            snapshot = store.load(version, text_sink=sink)
            return _build(snapshot, sink.build())

    def full(self, row: R) -> R:
        """``row`` (an entity, relationship, claim, text unit or report of this index) with
        its bulk text, which the index's rows carry empty."""
        return self.texts.full(row)

    def degree(self, key: str) -> int:
        """An entity's degree (relationships at it; a loop counts twice)."""
        e = self.entities.get(key)
        if e is not None:
            return e.degree
        ends = self.relationship_ends
        rels = self.relationships_by_entity.get(key, ())
        return sum(2 if a == b else 1 for a, b in map(ends.__getitem__, rels))

    def combined_degree(self, r: SnapshotRelationship) -> int:
        """GraphRAG's ``combined_degree`` of a relationship: its ends' degrees summed. Asked
        of the index, not the row: the query service's reader leaves that derived column out,
        so a hub's new relationship does not rewrite every other one of its relationships."""
        a, b = self.relationship_ends[r.id]
        return self.degree(a) + self.degree(b)

    def children(self, community: int) -> tuple[int, ...]:
        """Children that exist in this snapshot (a dangling child number is ignored)."""
        c = self.communities.get(community)
        return tuple(k for k in c.children if k in self.communities) if c else ()

    def community_at(self, entity: str, level: int) -> int | None:
        """The entity's community at ``level``, or the deepest one above it when the entity's
        branch of the hierarchy stops earlier (that leaf stands in for itself below)."""
        levels = self.entity_communities.get(entity, {})
        usable = [lv for lv in levels if lv <= level]
        return levels[max(usable)] if usable else None

    def communities_at_level(self, level: int) -> list[SnapshotCommunity]:
        """Communities of ``level`` plus the leaves above it, which stand in for themselves."""
        return [
            c
            for c in self.communities.values()
            if c.level == level or (c.level < level and not self.children(c.community))
        ]


def grouped(pairs: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """Group values by key, first occurrence first, without duplicates."""
    out: dict[str, dict[str, None]] = defaultdict(dict)
    for key, item in pairs:
        out[key][item] = None
    return {k: tuple(v) for k, v in out.items()}


def _entity_key_of(title: str, key: str, by_title: dict[str, str]) -> str:
    return key or by_title.get(title) or entity_key(title)


def daily_counts(counts: Iterable[tuple[str, int]]) -> DailyCounts:
    tally: Counter[date] = Counter()
    for day_text, n in counts:
        day = to_date(day_text)
        if day is not None and n > 0:
            tally[day] += n
    return tuple(sorted(tally.items()))


def sum_daily(histories: Iterable[DailyCounts]) -> DailyCounts:
    tally: Counter[date] = Counter()
    for history in histories:
        for day, n in history:
            tally[day] += n
    return tuple(sorted(tally.items()))


def entity_daily(
    e: SnapshotEntity, units: dict[str, SnapshotTextUnit], dates: dict[str, date | None]
) -> DailyCounts:
    """``mentions_per_day`` when the snapshot has it, else one mention per dated text unit."""
    if e.mentions_per_day:
        return daily_counts(e.mentions_per_day)
    days = [dates.get(u) for u in e.text_unit_ids if u in units]
    return tuple(sorted(Counter(d for d in days if d is not None).items()))


def newest_day(
    meta: SnapshotMeta, documents: Iterable[SnapshotDocument], dates: Iterable[date | None]
) -> date | None:
    meta_day = to_date(meta.newest_document_time)
    if meta_day is not None:
        return meta_day
    doc_days = [to_date(d.creation_date) for d in documents]
    known = [d for d in [*doc_days, *dates] if d is not None]
    return max(known) if known else None


def _build(snapshot: Snapshot, texts: TextStore) -> QueryIndex:
    entities = {e.id: e for e in snapshot.entities}
    by_title = {e.title: e.id for e in snapshot.entities}
    units = {u.id: u for u in snapshot.text_units}
    dates = {u.id: to_date(u.published_at) for u in snapshot.text_units}
    ends = {
        r.id: (
            _entity_key_of(r.source, r.source_id, by_title),
            _entity_key_of(r.target, r.target_id, by_title),
        )
        for r in snapshot.relationships
    }
    rels_by_entity: dict[str, list[SnapshotRelationship]] = defaultdict(list)
    for r in sorted(snapshot.relationships, key=lambda r: r.id):
        for key in set(ends[r.id]):
            rels_by_entity[key].append(r)
    claims: dict[str, list[SnapshotClaim]] = defaultdict(list)
    for claim in snapshot.claims:
        claims[_entity_key_of(claim.subject_id, "", by_title)].append(claim)
    by_entity_daily = {e.id: entity_daily(e, units, dates) for e in snapshot.entities}
    communities = {c.community: c for c in snapshot.communities}
    memberships: dict[str, dict[int, int]] = defaultdict(dict)
    for c in snapshot.communities:
        for key in c.entity_ids:
            memberships[key][c.level] = c.community
    return QueryIndex(
        meta=snapshot.meta,
        documents={d.id: d for d in snapshot.documents},
        entities=entities,
        entity_by_hrid={e.human_readable_id: e for e in snapshot.entities},
        relationships={r.id: r for r in snapshot.relationships},
        relationship_by_hrid={r.human_readable_id: r for r in snapshot.relationships},
        relationships_by_entity={k: tuple(r.id for r in v) for k, v in rels_by_entity.items()},
        relationship_ends=ends,
        claims_by_entity={k: tuple(v) for k, v in claims.items()},
        claim_by_hrid={c.human_readable_id: c for c in snapshot.claims},
        text_units=units,
        text_unit_by_hrid={u.human_readable_id: u for u in snapshot.text_units},
        text_units_by_entity=_units_by_entity(snapshot, entities, units),
        text_units_by_document=grouped(
            (u.document_id, u.id) for u in sorted(snapshot.text_units, key=lambda u: u.id)
        ),
        communities=communities,
        community_by_id={c.id: c for c in snapshot.communities},
        reports={r.community: r for r in snapshot.community_reports},
        entity_communities=dict(memberships),
        unit_dates=dates,
        entity_daily=by_entity_daily,
        # its members' (the graph tables derive a community's day series, ``DERIVED``), so a
        # followed index changes a community's by its members that changed
        community_daily={
            c.community: sum_daily(by_entity_daily.get(k, ()) for k in c.entity_ids)
            for c in snapshot.communities
        },
        newest=newest_day(snapshot.meta, snapshot.documents, dates.values()),
        names=NameIndex.build(entities),
        texts=texts,
        aliases=AliasIndex.of(snapshot.aliases),
    )


def _units_by_entity(
    snapshot: Snapshot, entities: dict[str, SnapshotEntity], units: dict[str, SnapshotTextUnit]
) -> dict[str, tuple[str, ...]]:
    """Each entity's text units: those it names and those that name it."""
    by_entity: dict[str, set[str]] = defaultdict(set)
    for e in snapshot.entities:
        by_entity[e.id].update(u for u in e.text_unit_ids if u in units)
    for u in snapshot.text_units:
        for k in u.entity_ids:
            if k in entities:
                by_entity[k].add(u.id)
    return {k: tuple(sorted(v)) for k, v in by_entity.items() if v}
