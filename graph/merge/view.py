"""The community job's own view of the graph, folded from ``graph-changes`` alone.

Changes carry whole rows as they are after each write, so folding keeps the last row per key;
changes for one key share a partition, so their order holds. The view also collects which
text units back each entity and relationship (added unless the change is a retraction), the
text units themselves and the documents.

It also collects what was *touched* since the last run (``take_touched``): the entities
upserted or deleted, at an end of an upserted or deleted relationship, or the subject of a
changed claim; and the description sets (``e:<key>``, ``r:<key>``) of the rows upserted or
deleted. Only communities holding a touched entity (or whose members changed) can have new
evidence, and only touched description sets can need a new summary, so a run looks at those
alone; whether a report or summary is stale is still decided by comparing with the
fingerprints of what it was written from. ``touched`` is None when it is unknown (a view from
a checkpoint written before it was kept): then a run looks at everything.

Separately it collects the rows upserted since the last *light commit* (``take_fresh``): the
job commits the entity, relationship, claim, text-unit and document rows of new articles every
second or so, between community runs, so they are searchable before any re-clustering. A
text unit's row lists its entities and relationships and a document's row its text units, so
the view keeps those reverse maps too, and a change marks every row whose lists it moves.
Deletions wait for the run: until then every row a kept community or row points at exists.

It also keeps what each live text unit's extraction spent at the LLM (``unit_tokens``), so a
document's row and a version can say what extracting their articles cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph.merge.aggregates import ClaimAggregate, EntityAggregate, RelationshipAggregate
from graph.merge.changes import DocumentRemoved, GraphChange
from graph.model import Chunk


@dataclass(frozen=True, slots=True)
class Touched:
    """What changes touched since the last run."""

    entities: set[str]  # entity keys whose evidence may have changed
    slots: set[str]  # description sets ("e:<key>", "r:<key>") whose rows changed


@dataclass
class FreshKeys:
    """The rows a light commit must write (or delete): written since the last one."""

    entities: set[str] = field(default_factory=set)
    relationships: set[str] = field(default_factory=set)
    claims: set[str] = field(default_factory=set)  # claim subject keys
    text_units: set[str] = field(default_factory=set)
    documents: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return any(
            (
                self.entities,
                self.relationships,
                self.claims,
                self.text_units,
                self.documents,
            )
        )


@dataclass
class RemovedKeys:
    """Rows deleted since the last run (light commits leave deletions to the run)."""

    entities: set[str] = field(default_factory=set)
    relationships: set[str] = field(default_factory=set)
    text_units: set[str] = field(default_factory=set)
    claims: set[str] = field(default_factory=set)  # claim fact ids
    documents: set[str] = field(default_factory=set)


@dataclass
class GraphView:
    entities: dict[str, EntityAggregate] = field(default_factory=dict)
    relationships: dict[str, RelationshipAggregate] = field(default_factory=dict)
    claims: dict[str, ClaimAggregate] = field(default_factory=dict)
    text_units: dict[str, Chunk] = field(default_factory=dict)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    entity_units: dict[str, set[str]] = field(default_factory=dict)
    relationship_units: dict[str, set[str]] = field(default_factory=dict)
    changes_applied: int = 0
    touched: set[str] | None = field(default_factory=set, compare=False, repr=False)
    touched_slots: set[str] = field(default_factory=set, compare=False, repr=False)
    # reverse maps for the rows of text units and documents (see the module docstring)
    unit_entities: dict[str, set[str]] = field(default_factory=dict, compare=False, repr=False)
    unit_relationships: dict[str, set[str]] = field(default_factory=dict, compare=False, repr=False)
    document_units: dict[str, set[str]] = field(default_factory=dict, compare=False, repr=False)
    # claims: fact id -> the text units stating it, and unit -> {fact id: subject key}; from
    # the changes' ``claim_ids`` (a checkpoint older than them starts both empty)
    claim_units: dict[str, set[str]] = field(default_factory=dict, compare=False, repr=False)
    unit_claims: dict[str, dict[str, str]] = field(default_factory=dict, compare=False, repr=False)
    fresh: FreshKeys = field(default_factory=FreshKeys, compare=False, repr=False)
    # None: not known (a view from an older checkpoint); the next run compares every row
    removed: RemovedKeys | None = field(default_factory=RemovedKeys, compare=False, repr=False)
    # text unit -> (prompt, completion) tokens its extraction spent; units that spent none
    # are left out (see ``_spent``)
    unit_tokens: dict[str, tuple[int, int]] = field(default_factory=dict, compare=False, repr=False)
    # ``ingest_tokens`` kept up to date as records fold (None: not known, summed when asked),
    # so a commit does not add up every document's units again
    ingest_total: tuple[int, int] | None = field(default=(0, 0), compare=False, repr=False)
    # the newest ``published_at`` of the text units, kept as units fold (None: not known,
    # found by a pass over the units when asked), so a run does not scan every unit for it
    newest_unit_time: str | None = field(default=None, compare=False, repr=False)
    # text unit -> its document, kept as units fold (None: not known, found by a pass over the
    # units when asked), so alias resolution finds an entity's documents without reading the
    # texts of its units
    unit_document: dict[str, str] | None = field(default=None, compare=False, repr=False)
    # published day (``published_at[:10]``) -> the text units of that day, kept the same way,
    # so the headlines find the units of their window without a pass over every unit
    unit_days: dict[str, set[str]] | None = field(default=None, compare=False, repr=False)

    def take_removed(self) -> RemovedKeys | None:
        """The rows deleted since the last call (None: not known), and start afresh."""
        removed = getattr(self, "removed", None)
        self.removed = RemovedKeys()
        return removed

    def take_fresh(self) -> FreshKeys:
        """The rows written since the last call, and start collecting afresh."""
        fresh, self.fresh = self.fresh, FreshKeys()
        return fresh

    def rebuild_reverse_maps(self) -> None:
        """The reverse maps from the forward ones (a view from an older checkpoint)."""
        self.unit_entities, self.unit_relationships, self.document_units = {}, {}, {}
        for key, units in self.entity_units.items():
            for u in units:
                self.unit_entities.setdefault(u, set()).add(key)
        for key, units in self.relationship_units.items():
            for u in units:
                self.unit_relationships.setdefault(u, set()).add(key)
        for unit in self.text_units.values():
            self.document_units.setdefault(unit.document_id, set()).add(unit.id)
        self.ingest_total = None  # summed again from the rebuilt maps when asked
        self.newest_unit_time = None
        self.unit_document = None
        self.unit_days = None
        self.fresh = FreshKeys()

    def take_touched(self) -> Touched | None:
        """What was touched since the last call (None: unknown, assume everything), and start
        collecting afresh."""
        entities = getattr(self, "touched", None)
        slots = getattr(self, "touched_slots", None)
        self.touched, self.touched_slots = set(), set()
        return None if entities is None or slots is None else Touched(entities, slots)

    def touched_so_far(self) -> Touched | None:
        """What was touched since the last ``take_touched``, still collecting (copies)."""
        entities = getattr(self, "touched", None)
        slots = getattr(self, "touched_slots", None)
        return None if entities is None or slots is None else Touched(set(entities), set(slots))

    def apply(self, change: GraphChange | DocumentRemoved | dict[str, Any]) -> None:
        """Fold one record of ``graph-changes`` (a change, a document object or the removal
        of one)."""
        self.changes_applied += 1
        if isinstance(change, dict):
            self._fold_document(change)
            return
        if isinstance(change, DocumentRemoved):
            self._remove_document(change)
            return
        self._touch(change)
        if change.text_unit is not None:
            self._add_unit(change, change.text_unit)
        elif change.retraction and not (
            change.entities
            or change.deleted_entities
            or change.relationships
            or change.deleted_relationships
            or change.claims
            or change.deleted_claims
        ):
            self._retract_unit(change)
        self._fold_rows(change)

    def _fold_document(self, document: dict[str, Any]) -> None:
        """A document object, stored (again) as it came."""
        removed = getattr(self, "removed", None)
        doc_id = str(document["id"])
        before = self._document_share(doc_id)
        self.documents[doc_id] = document
        self._count(self._document_share(doc_id), before)
        self.fresh.documents.add(doc_id)
        if removed is not None:
            removed.documents.discard(doc_id)

    def _remove_document(self, change: DocumentRemoved) -> None:
        """A document taken out; its text units go with their own retractions, which may
        come before or after."""
        removed = getattr(self, "removed", None)
        self._count((0, 0), self._document_share(change.document_id))
        if self.documents.pop(change.document_id, None) is not None and removed is not None:
            removed.documents.add(change.document_id)
        if not self.document_units.get(change.document_id, True):
            del self.document_units[change.document_id]

    def _add_unit(self, change: GraphChange, unit: Chunk) -> None:
        """A change's text unit stored, with the tokens its extraction spent."""
        fresh, removed = self.fresh, getattr(self, "removed", None)
        before = self._share(change.chunk_id, change.document_id)
        replaced = self.text_units.get(change.chunk_id)
        self.text_units[change.chunk_id] = unit
        known = getattr(self, "unit_document", None)
        if known is not None:
            known[change.chunk_id] = unit.document_id
        days = getattr(self, "unit_days", None)
        if days is not None:
            if replaced is not None:
                _unfile(days, replaced.published_at[:10], change.chunk_id)
            days.setdefault(unit.published_at[:10], set()).add(change.chunk_id)
        newest = getattr(self, "newest_unit_time", None)
        if newest is not None and unit.published_at > newest:
            self.newest_unit_time = unit.published_at
        elif replaced is not None and replaced.published_at == newest != unit.published_at:
            self.newest_unit_time = None  # the newest unit came back with an older time
        self._spent(change.chunk_id, change.llm_tokens)
        self.document_units.setdefault(change.document_id, set()).add(change.chunk_id)
        self._count(self._share(change.chunk_id, change.document_id), before)
        fresh.text_units.add(change.chunk_id)
        if removed is not None:
            removed.text_units.discard(change.chunk_id)
        fresh.documents.add(change.document_id)

    def _retract_unit(self, change: GraphChange) -> None:
        """A retraction of a text unit alone: the unit taken out of the view."""
        fresh, removed = self.fresh, getattr(self, "removed", None)
        held = self.text_units.get(change.chunk_id)
        doc = held.document_id if held is not None else change.document_id
        before = self._share(change.chunk_id, doc)
        gone = self.text_units.pop(change.chunk_id, None)
        known = getattr(self, "unit_document", None)
        if known is not None:
            known.pop(change.chunk_id, None)
        days = getattr(self, "unit_days", None)
        if days is not None and gone is not None:
            _unfile(days, gone.published_at[:10], change.chunk_id)
        if gone is not None and gone.published_at == getattr(self, "newest_unit_time", None):
            self.newest_unit_time = None  # the newest may have gone: found again when asked
        self.unit_tokens.pop(change.chunk_id, None)
        if removed is not None and gone is not None:
            removed.text_units.add(change.chunk_id)
        units = self.document_units.get(doc)
        if units is not None:
            units.discard(change.chunk_id)
            if not units and doc not in self.documents:
                del self.document_units[doc]  # a deleted document's last text unit
        self._count((0, 0), before)
        fresh.text_units.add(change.chunk_id)
        fresh.documents.add(doc)

    def _fold_rows(self, change: GraphChange) -> None:
        """A change's entity, relationship and claim rows (and deletions) folded in."""
        fresh, removed = self.fresh, getattr(self, "removed", None)
        self._rows(
            change,
            self.entities,
            self.entity_units,
            self.unit_entities,
            change.entities,
            change.deleted_entities,
        )
        self._rows(
            change,
            self.relationships,
            self.relationship_units,
            self.unit_relationships,
            change.relationships,
            change.deleted_relationships,
        )
        fresh.entities.update(a.key for a in change.entities)
        fresh.entities.update(change.deleted_entities)
        fresh.relationships.update(a.key for a in change.relationships)
        fresh.relationships.update(change.deleted_relationships)
        fresh.claims.update(a.key for a in change.claims)
        if removed is not None:
            self._removed_rows(change, removed)
        for agg in change.claims:
            self._claims_kept(self.claims.get(agg.key), agg)
            self.claims[agg.key] = agg
        for key in change.deleted_claims:
            self._claims_kept(self.claims.pop(key, None), None)
        if change.claim_ids:
            self._claim_units(change, change.claim_ids)

    def _claims_kept(self, old: ClaimAggregate | None, new: ClaimAggregate | None) -> None:
        """A fact the subject's row keeps or drops (its facts are capped) changes the
        ``covariate_ids`` of every unit stating it."""
        before = {f.id for f in old.facts} if old is not None else set()
        after = {f.id for f in new.facts} if new is not None else set()
        units = getattr(self, "claim_units", {})
        for fact_id in before ^ after:
            self.fresh.text_units.update(units.get(fact_id, ()))

    def _claim_units(self, change: GraphChange, fact_ids: tuple[str, ...]) -> None:
        """Link (or, for a retraction, unlink) the chunk and the facts it states; its text
        unit's row moves (its ``covariate_ids``)."""
        subject = change.claims[0].key if change.claims else change.deleted_claims[0]
        chunk = change.chunk_id
        stated = self.unit_claims.setdefault(chunk, {})
        for fact_id in fact_ids:
            units = self.claim_units.setdefault(fact_id, set())
            if change.retraction:
                units.discard(chunk)
                stated.pop(fact_id, None)
                if not units:
                    del self.claim_units[fact_id]
            else:
                units.add(chunk)
                stated[fact_id] = subject
        if not stated:
            del self.unit_claims[chunk]
        self.fresh.text_units.add(chunk)

    def unit_covariates(self, unit_id: str) -> tuple[str, ...]:
        """The ids of the kept claims the text unit states, sorted (GraphRAG's
        ``text_units.covariate_ids``)."""
        stated = getattr(self, "unit_claims", {}).get(unit_id, {})
        return tuple(
            sorted(
                fact_id
                for fact_id, subject in stated.items()
                if (agg := self.claims.get(subject)) is not None and agg.support.count(fact_id)
            )
        )

    def claim_unit(self, fact_id: str) -> str:
        """The first text unit stating the claim (GraphRAG's ``covariates.text_unit_id``
        holds one), "" when none is known."""
        return min(getattr(self, "claim_units", {}).get(fact_id, ()), default="")

    def _spent(self, unit_id: str, tokens: tuple[int, int] | None) -> None:
        """Note what a text unit's extraction spent, keeping the larger figure when the unit
        comes again: a redelivered extraction carries the same figure, and one made again
        after a crash was answered by the response cache and carries 0, so the unit was paid
        for once; keeping the larger makes the fold idempotent and the same in any order."""
        if tokens is not None and sum(tokens) > sum(self.unit_tokens.get(unit_id, (0, 0))):
            self.unit_tokens[unit_id] = tokens

    def document_tokens(self, doc_id: str) -> tuple[int, int]:
        """(prompt, completion) tokens the extraction of the document's live text units
        spent."""
        spent = [self.unit_tokens.get(u, (0, 0)) for u in self.document_units.get(doc_id, ())]
        return sum(p for p, _ in spent), sum(c for _, c in spent)

    def ingest_tokens(self) -> tuple[int, int]:
        """(prompt, completion) tokens the extraction of every document's live text units
        spent: the sum of ``document_tokens`` over the documents (kept as records fold)."""
        total = getattr(self, "ingest_total", None)
        if total is None:
            spent = [self.document_tokens(d) for d in self.documents]
            total = self.ingest_total = (sum(p for p, _ in spent), sum(c for _, c in spent))
        return total

    def newest_time(self) -> str:
        """The newest ``published_at`` of the text units ("" when there is none)."""
        newest = getattr(self, "newest_unit_time", None)
        if newest is None:
            newest = max((u.published_at for u in self.text_units.values()), default="")
            self.newest_unit_time = newest
        return newest

    def unit_documents(self) -> dict[str, str]:
        """Each text unit's document id (found by a pass over the units when not known)."""
        known = getattr(self, "unit_document", None)
        if known is None:
            scan = getattr(self.text_units, "scan", None)  # a DiskMap's pass holds nothing
            units = scan() if scan is not None else self.text_units.items()
            known = self.unit_document = {k: u.document_id for k, u in units}
        return known

    def units_between(self, first: str, last: str) -> list[tuple[str, str]]:
        """(unit id, published day) of the text units published from day ``first`` to day
        ``last`` (ISO dates), by day (found by a pass over the units when not known)."""
        days = getattr(self, "unit_days", None)
        if days is None:
            days = {}
            scan = getattr(self.text_units, "scan", None)
            for key, unit in scan() if scan is not None else self.text_units.items():
                days.setdefault(unit.published_at[:10], set()).add(key)
            self.unit_days = days
        return [
            (u, day) for day in sorted(d for d in days if first <= d <= last) for u in days[day]
        ]

    def _share(self, unit_id: str, doc_id: str) -> tuple[int, int]:
        """What the unit adds to ``ingest_tokens``: its tokens while its document is here."""
        if doc_id in self.documents and unit_id in self.document_units.get(doc_id, ()):
            return self.unit_tokens.get(unit_id, (0, 0))
        return (0, 0)

    def _document_share(self, doc_id: str) -> tuple[int, int]:
        return self.document_tokens(doc_id) if doc_id in self.documents else (0, 0)

    def _count(self, after: tuple[int, int], before: tuple[int, int]) -> None:
        total = getattr(self, "ingest_total", None)
        if total is not None and after != before:
            self.ingest_total = (
                total[0] + after[0] - before[0],
                total[1] + after[1] - before[1],
            )

    def _touch(self, change: GraphChange) -> None:
        touched = getattr(self, "touched", None)
        if touched is None:
            return
        touched.update(agg.key for agg in change.entities)
        touched.update(change.deleted_entities)
        for rel in change.relationships:
            touched.update((rel.source_key, rel.target_key))
        for key in change.deleted_relationships:
            gone = self.relationships.get(key)
            if gone is not None:
                touched.update((gone.source_key, gone.target_key))
        touched.update(agg.key for agg in change.claims)
        touched.update(change.deleted_claims)
        slots = getattr(self, "touched_slots", None)
        if slots is None:
            return
        slots.update(f"e:{agg.key}" for agg in change.entities)
        slots.update(f"e:{key}" for key in change.deleted_entities)
        slots.update(f"r:{agg.key}" for agg in change.relationships)
        slots.update(f"r:{key}" for key in change.deleted_relationships)

    def _removed_rows(self, change: GraphChange, removed: RemovedKeys) -> None:
        """Note deletions for the run (called after the rows are folded, before claims)."""
        removed.entities.update(change.deleted_entities)
        removed.entities.difference_update(a.key for a in change.entities)
        removed.relationships.update(change.deleted_relationships)
        removed.relationships.difference_update(a.key for a in change.relationships)
        for key in (*(a.key for a in change.claims), *change.deleted_claims):
            old = self.claims.get(key)
            if old is not None:
                removed.claims.update(f.id for f in old.facts)
        for agg in change.claims:
            removed.claims.difference_update(f.id for f in agg.facts)

    def _rows(
        self,
        change: GraphChange,
        rows: dict[str, Any],
        units: dict[str, set[str]],
        by_unit: dict[str, set[str]],
        upserted: tuple[Any, ...],
        deleted: tuple[str, ...],
    ) -> None:
        """Fold upserted and deleted rows of one kind, with the text units behind them both
        ways; every text unit whose list of rows moves is marked for the next light commit."""
        moved = self.fresh.text_units
        for agg in upserted:
            rows[agg.key] = agg
            backing = units.setdefault(agg.key, set())
            if change.retraction:
                backing.discard(change.chunk_id)
                by_unit.get(change.chunk_id, set()).discard(agg.key)
            else:
                backing.add(change.chunk_id)
                by_unit.setdefault(change.chunk_id, set()).add(agg.key)
            moved.add(change.chunk_id)
        for key in deleted:
            rows.pop(key, None)
            for u in units.pop(key, ()):
                by_unit.get(u, set()).discard(key)
                moved.add(u)
            by_unit.get(change.chunk_id, set()).discard(key)
            moved.add(change.chunk_id)


def _unfile(days: dict[str, set[str]], day: str, unit_id: str) -> None:
    units = days.get(day)
    if units is not None:
        units.discard(unit_id)
        if not units:
            del days[day]
