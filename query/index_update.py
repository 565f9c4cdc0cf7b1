"""Following graph versions row by row: the next version's ``QueryIndex`` from the one in service
and the rows that changed in between (``core.tables.store.GraphTables.changes``), without
reading or indexing the whole graph again.

The old index is never mutated (a query that started on it finishes on it): every map is
copied, a C-level dict copy that takes milliseconds at 100k rows, and only the entries the
changes reach are rewritten; unchanged row objects are shared. The result equals
``QueryIndex.from_snapshot`` of the new version (the tests check it), including the columns the
graph tables derive on reading (``core.tables.derived.derived_columns``): an entity's ``degree`` and
the ``combined_degree`` of its relationships move when a relationship reaches it, and a
community's ``relationship_ids`` and ``text_unit_ids`` when one of its members' do (except in a
*lean* index, read by the query service's reader, which carries neither).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from core.tables.versions import TableChange
from graph.communities.leiden_graph import gc_paused
from graph.keys import entity_key
from graph.versions.model import (
    SnapshotClaim,
    SnapshotCommunity,
    SnapshotMeta,
    SnapshotReport,
)
from query.index import (
    QueryIndex,
    entity_daily,
    grouped,
    newest_day,
)
from query.index_maps import (
    DailyMoves,
    Membership,
    by_community_id,
    by_hrid,
    moved_daily,
    moved_memberships,
    with_combined_degree,
)
from query.text_store import BULK, rows_text, without_text
from query.time_window import DailyCounts, to_date


def follow(
    index: QueryIndex,
    meta: SnapshotMeta,
    changes: Mapping[str, TableChange],
    *,
    lean: bool = False,
) -> QueryIndex:
    """The index of version ``meta.version``: ``index`` with ``changes`` applied. The
    cyclic collector is paused meanwhile: following allocates a burst of acyclic objects, and
    a full collection over an index of a million objects would take longer than the rest.
    ``lean``: the index was read by the query service's reader, which leaves out the derived
    columns no query reads (communities' ``relationship_ids`` and ``text_unit_ids``,
    relationships' ``combined_degree``); they are not maintained either."""
    with gc_paused():
        return _Follower(index, _text_apart(changes), lean).build(meta)


def _text_apart(changes: Mapping[str, TableChange]) -> dict[str, TableChange]:
    """Changes read with whole rows (no ``split``): their bulk text taken out into
    ``texts``, as the query service's reader gives them."""
    out = dict(changes)
    for name in BULK:
        change = changes.get(name)
        if change is not None and change.texts is None and change.upserts:
            out[name] = TableChange(
                tuple(map(without_text, change.upserts)),
                change.deletes,
                rows_text(name, change.upserts),
            )
    return out


class _Follower:
    def __init__(self, index: QueryIndex, changes: Mapping[str, TableChange], lean: bool) -> None:
        self.old = index
        self.lean = lean
        self.changes = changes
        self.entities = dict(index.entities)
        self.relationships = dict(index.relationships)
        self.ends = dict(index.relationship_ends)
        self.rels_by_entity = dict(index.relationships_by_entity)
        self.units = dict(index.text_units)
        self.communities = dict(index.communities)
        self.community_by_id = dict(index.community_by_id)
        self.reports = dict(index.reports)
        self.documents = dict(index.documents)
        self._days_moved: set[int] = set()  # communities whose mentions per day moved

    def change(self, table: str) -> TableChange:
        return self.changes.get(table, TableChange())

    # ---- rows -------------------------------------------------------------------------------

    def build(self, meta: SnapshotMeta) -> QueryIndex:
        old = self.old
        for doc_id in self.change("documents").deletes:
            self.documents.pop(doc_id, None)
        self.documents.update((doc.id, doc) for doc in self.change("documents").upserts)
        changed_entities = self._entities()
        reached = self._relationships()  # entities a changed relationship ends at
        units_changed, unit_entities, unit_docs = self._units()
        degree_moved = self._degrees(reached | changed_entities)
        if not self.lean:
            self._combined_degrees(degree_moved)
        redone = changed_entities | unit_entities
        daily = self._entity_daily(redone)
        memberships, community_changed, moves = self._communities(changed_entities | reached, old)
        community_daily = self._community_daily(daily, redone, memberships, moves)
        if not self.lean:
            self._days_into_rows(community_changed | self._days_moved, community_daily)
        self._reports(community_changed)
        claims_by_entity, claim_by_hrid = self._claims()
        added = [k for k in self._gone_e if k in self.entities and k not in old.entities]
        removed = [k for k in self._gone_e if k in old.entities and k not in self.entities]
        names = old.names.updated(self.entities, added, removed) if added or removed else old.names
        texts = old.texts.updated(
            {name: (change.texts, change.deletes) for name in BULK if (change := self.change(name))}
        )
        return QueryIndex(
            meta=meta,
            documents=self.documents,
            entities=self.entities,
            entity_by_hrid=by_hrid(old.entity_by_hrid, old.entities, self.entities, self._gone_e),
            relationships=self.relationships,
            relationship_by_hrid=by_hrid(
                old.relationship_by_hrid, old.relationships, self.relationships, self._gone_r
            ),
            relationships_by_entity=self.rels_by_entity,
            relationship_ends=self.ends,
            claims_by_entity=claims_by_entity,
            claim_by_hrid=claim_by_hrid,
            text_units=self.units,
            text_unit_by_hrid=by_hrid(
                old.text_unit_by_hrid, old.text_units, self.units, units_changed
            ),
            text_units_by_entity=self._units_by_entity(unit_entities | changed_entities),
            text_units_by_document=self._units_by_document(unit_docs),
            communities=by_community_id(self.communities),
            community_by_id=dict(sorted(self.community_by_id.items())),
            reports=by_community_id(self.reports),
            entity_communities=memberships,
            unit_dates=self._dates,
            entity_daily=daily,
            community_daily=community_daily,
            newest=newest_day(meta, self.documents.values(), self._dates.values()),
            names=names,
            texts=texts,
            aliases=old.aliases.updated(
                self.change("aliases").upserts, self.change("aliases").deletes
            ),
        )

    def _entity_daily(self, keys: set[str]) -> dict[str, DailyCounts]:
        """Mentions per day, rewritten for the entities whose row or text units changed."""
        daily = dict(self.old.entity_daily)
        for key in keys:
            e = self.entities.get(key)
            if e is None:
                daily.pop(key, None)
            else:
                daily[key] = entity_daily(e, self.units, self._dates)
        return daily

    def _community_daily(
        self,
        daily: Mapping[str, DailyCounts],
        redone: set[str],
        memberships: Mapping[str, Mapping[int, int]],
        moves: tuple[list[Membership], list[Membership]],
    ) -> dict[int, DailyCounts]:
        """Mentions per day of the communities, moved by their members (``moved_daily``);
        ``redone``: the entities whose series ``daily`` holds afresh."""
        out, self._days_moved = moved_daily(
            self.old.community_daily,
            DailyMoves(self.old.entity_daily, daily, redone),
            memberships,
            moves,
        )
        for number in [n for n in out if n not in self.communities]:
            del out[number]
        return out

    def _days_into_rows(self, numbers: set[int], daily: Mapping[int, DailyCounts]) -> None:
        """The derived ``mentions_per_day`` of these communities' rows, as the graph tables
        derive it (rows read as changes carry it empty)."""
        for number in numbers:
            c = self.communities.get(number)
            if c is not None:
                days = tuple((d.isoformat(), n) for d, n in daily.get(number, ()))
                if days != c.mentions_per_day:
                    c = replace(c, mentions_per_day=days)
                    self.communities[number] = c
                    self.community_by_id[c.id] = c

    def _entities(self) -> set[str]:
        change = self.change("entities")
        gone = set(change.deletes)
        for key in change.deletes:
            self.entities.pop(key, None)
        for e in change.upserts:
            self.entities[e.id] = e
        self._gone_e = gone | {e.id for e in change.upserts}
        return gone | {e.id for e in change.upserts}

    def _relationships(self) -> set[str]:
        change = self.change("relationships")
        reached: set[str] = set()
        touched: set[str] = set(change.deletes) | {r.id for r in change.upserts}
        for rid in touched:
            old = self.ends.pop(rid, None)
            if old is not None:
                reached.update(old)
            self.relationships.pop(rid, None)
        titles: dict[str, str] = {}  # rows of earlier releases name their ends by title only

        def key_of(title: str) -> str:
            if not titles:
                titles.update((e.title, k) for k, e in self.entities.items())
            return titles.get(title) or entity_key(title)

        for r in change.upserts:
            ends = (r.source_id or key_of(r.source), r.target_id or key_of(r.target))
            self.ends[r.id] = ends
            self.relationships[r.id] = r
            reached.update(ends)
        self._gone_r = set(touched)
        self._rel_touched = touched
        self._arriving: dict[str, list[str]] = {}  # entity -> changed relationships at it
        for r in change.upserts:
            for end in set(self.ends[r.id]):
                self._arriving.setdefault(end, []).append(r.id)
        return reached

    def _degrees(self, keys: set[str]) -> set[str]:
        """Relationship lists of ``keys`` rebuilt, degrees of their entities set; returns the
        entities whose degree moved."""
        moved: set[str] = set()
        touched = self._rel_touched
        arriving = self._arriving
        for key in keys:
            kept = [rid for rid in self.rels_by_entity.get(key, ()) if rid not in touched]
            kept += arriving.get(key, ())
            if kept:
                self.rels_by_entity[key] = tuple(sorted(kept))
            else:
                self.rels_by_entity.pop(key, None)
            e = self.entities.get(key)
            if e is None:
                continue
            degree = self._degree(key)
            if e.degree != degree:
                self.entities[key] = replace(e, degree=degree)
                self._gone_e.add(key)
                moved.add(key)
            elif key in self._gone_e:
                moved.add(key)
        return moved

    def _degree(self, key: str) -> int:
        ends = self.ends
        return sum(
            2 if a == b else 1 for a, b in map(ends.__getitem__, self.rels_by_entity.get(key, ()))
        )

    def _deg(self, key: str) -> int:
        e = self.entities.get(key)
        return e.degree if e is not None else self._degree(key)

    def _combined_degrees(self, moved: set[str]) -> None:
        """``combined_degree`` of every relationship at an entity whose degree moved, and of
        the changed ones."""
        due = {rid for key in moved for rid in self.rels_by_entity.get(key, ())}
        due |= {rid for rid in self._rel_touched if rid in self.relationships}
        degrees: dict[str, int] = {}
        for rid in due:
            r = self.relationships[rid]
            a, b = self.ends[rid]
            for end in (a, b):
                if end not in degrees:
                    degrees[end] = self._deg(end)
            combined = degrees[a] + degrees[b]
            if r.combined_degree != combined:
                self.relationships[rid] = with_combined_degree(r, combined)
                self._gone_r.add(rid)

    def _units(self) -> tuple[set[str], set[str], set[str]]:
        """Apply text-unit rows; returns the changed unit ids, and the entities and documents
        they were or are attached to."""
        change = self.change("text_units")
        changed: set[str] = set(change.deletes) | {u.id for u in change.upserts}
        entities: set[str] = set()
        docs: set[str] = set()
        self._dates = dict(self.old.unit_dates)
        for uid in changed:
            old = self.units.pop(uid, None)
            self._dates.pop(uid, None)
            if old is not None:
                entities.update(old.entity_ids)
                docs.add(old.document_id)
        for u in change.upserts:
            self.units[u.id] = u
            self._dates[u.id] = to_date(u.published_at)
            entities.update(u.entity_ids)
            docs.add(u.document_id)
        self._units_changed = changed
        return changed, entities, docs

    def _units_by_entity(self, keys: Iterable[str]) -> dict[str, tuple[str, ...]]:
        out = dict(self.old.text_units_by_entity)
        changed = self._units_changed
        for key in keys:
            e = self.entities.get(key)
            if e is None:
                out.pop(key, None)
                continue
            own = {u for u in e.text_unit_ids if u in self.units}
            listed = {
                u
                for u in out.get(key, ())
                if u not in changed and u in self.units and key in self.units[u].entity_ids
            }
            listed |= {u for u in changed if u in self.units and key in self.units[u].entity_ids}
            found = own | listed
            if found:
                out[key] = tuple(sorted(found))
            else:
                out.pop(key, None)
        for key in [k for k in out if k not in self.entities]:
            del out[key]
        return out

    def _units_by_document(self, docs: set[str]) -> dict[str, tuple[str, ...]]:
        out = dict(self.old.text_units_by_document)
        changed = self._units_changed
        for doc in docs:
            kept = [u for u in out.get(doc, ()) if u not in changed]
            kept += [u for u in changed if u in self.units and self.units[u].document_id == doc]
            if kept:
                out[doc] = grouped((doc, u) for u in sorted(kept))[doc]
            else:
                out.pop(doc, None)
        return out

    def _communities(
        self, members_changed: set[str], old: QueryIndex
    ) -> tuple[dict[str, dict[int, int]], set[int], tuple[list[Membership], list[Membership]]]:
        """Apply community rows and fill their derived columns; a community whose member's
        text units or relationships changed is re-derived too. Returns the memberships, the
        community numbers whose row changed, and the memberships that ended and began."""
        change = self.change("communities")
        changed: set[int] = set()
        # (entity, level, community) memberships that end and that begin: a community that
        # kept its number and level changes only for the members that left or joined it (a
        # level-0 community of 100,000 members that gained three changes three entities)
        leave: list[Membership] = []
        join: list[Membership] = []
        for cid in change.deletes:
            c = self.community_by_id.pop(cid, None)
            if c is not None:
                self.communities.pop(c.community, None)
                changed.add(c.community)
                leave.extend((k, c.level, c.community) for k in c.entity_ids)
        for c in change.upserts:
            before = self.community_by_id.get(c.id)
            if before is None:
                join.extend((k, c.level, c.community) for k in c.entity_ids)
            elif (before.community, before.level) == (c.community, c.level):
                was, now = set(before.entity_ids), set(c.entity_ids)
                leave.extend((k, c.level, c.community) for k in was - now)
                join.extend((k, c.level, c.community) for k in now - was)
            else:
                self.communities.pop(before.community, None)
                changed.add(before.community)
                leave.extend((k, before.level, before.community) for k in before.entity_ids)
                join.extend((k, c.level, c.community) for k in c.entity_ids)
            self._set_community(c)
            changed.add(c.community)
        memberships = moved_memberships(old.entity_communities, leave, join)
        for key in () if self.lean else members_changed:
            for n in memberships.get(key, {}).values():
                if n not in changed and n in self.communities:
                    self._set_community(self.communities[n])
                    changed.add(n)
        return memberships, changed, (leave, join)

    def _set_community(self, c: SnapshotCommunity) -> None:
        """``c`` with its derived columns: from its previous form when it has the same
        members (only the relationships and text units of changed members can differ), else
        from all its members; as it is when the index carries no such lists."""
        if self.lean:
            self.communities[c.community] = c
            self.community_by_id[c.id] = c
            return
        before = self.old.community_by_id.get(c.id)
        members = set(c.entity_ids)
        ends = self.ends
        if before is not None and before.entity_ids == c.entity_ids:
            rels = set(before.relationship_ids) - self._rel_touched
            for key in members & self._arriving.keys():
                rels.update(
                    rid
                    for rid in self._arriving[key]
                    if ends[rid][0] in members and ends[rid][1] in members
                )
            units = self._units_of(before, members)
        else:
            rels = {
                rid
                for k in c.entity_ids
                for rid in self.rels_by_entity.get(k, ())
                if ends[rid][0] in members and ends[rid][1] in members
            }
            units = None
        if units is None:
            units = {
                u for k in c.entity_ids if (e := self.entities.get(k)) for u in e.text_unit_ids
            }
        derived = replace(
            c, relationship_ids=tuple(sorted(rels)), text_unit_ids=tuple(sorted(units))
        )
        self.communities[c.community] = derived
        self.community_by_id[c.id] = derived

    def _units_of(self, before: SnapshotCommunity, members: set[str]) -> set[str] | None:
        """The community's text units from its previous ones when its changed members only
        gained units (None: one lost a unit, so every member is read)."""
        units = set(before.text_unit_ids)
        for key in self._gone_e & members:
            was, now = self.old.entities.get(key), self.entities.get(key)
            if now is None or (
                was is not None and not set(was.text_unit_ids) <= set(now.text_unit_ids)
            ):
                return None
            units.update(now.text_unit_ids)
        return units

    def _reports(self, communities_changed: set[int]) -> None:
        change = self.change("community_reports")
        by_id = {r.id: r for r in self.reports.values()}
        for rid in change.deletes:
            r = by_id.pop(rid, None)
            if r is not None and self.reports.get(r.community) is r:
                del self.reports[r.community]
        for r in change.upserts:
            before = by_id.get(r.id)
            if before is not None and self.reports.get(before.community) is before:
                del self.reports[before.community]
            self.reports[r.community] = self._reflect(r)
        for number in communities_changed:
            r = self.reports.get(number)
            if r is not None:
                self.reports[number] = self._reflect(r)

    def _reflect(self, r: SnapshotReport) -> SnapshotReport:
        c = self.community_by_id.get(r.id)
        if c is None or c.unreflected == r.unreflected:
            return r
        return replace(r, unreflected=c.unreflected)

    def _claims(self) -> tuple[dict[str, tuple[SnapshotClaim, ...]], dict[int, SnapshotClaim]]:
        """Claims are few: when any changed, their maps are rebuilt from every claim."""
        change = self.change("claims")
        old = self.old
        if not change:
            return old.claims_by_entity, old.claim_by_hrid
        claims = {c.id: c for c in old.claim_by_hrid.values()}
        for cid in change.deletes:
            claims.pop(cid, None)
        for c in change.upserts:
            claims[c.id] = c
        by_title = {e.title: k for k, e in self.entities.items()}
        grouped: dict[str, list[SnapshotClaim]] = {}
        for c in sorted(claims.values(), key=lambda c: c.id):
            key = by_title.get(c.subject_id) or entity_key(c.subject_id)
            grouped.setdefault(key, []).append(c)
        return (
            {k: tuple(v) for k, v in grouped.items()},
            {c.human_readable_id: c for c in claims.values()},
        )
