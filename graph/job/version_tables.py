"""The snapshot tables of one run, assembled from the job's view and state.

Column names follow Microsoft GraphRAG's output tables (``graph.versions.model``); the
emerging score of each community comes from its members' mentions per day of document time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from datetime import date
from typing import Any

import orjson

from graph.aliases.resolution import alias_rows
from graph.communities.human_ids import HumanIds
from graph.job.committed import CommunityChanges
from graph.job.dailies import community_daily
from graph.job.state import JobState
from graph.job.summaries import summary
from graph.merge.aggregates import EntityAggregate, RelationshipAggregate
from graph.merge.view import FreshKeys, GraphView
from graph.model import Community
from graph.protocols import values_at
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
    report_body,
)
from graph.versions.rows import row_digests


def degrees(view: GraphView) -> Counter[str]:
    deg: Counter[str] = Counter()
    for r in view.relationships.values():
        deg[r.source_key] += 1
        deg[r.target_key] += 1
    return deg


def _iso(d: date | None) -> str:
    return d.isoformat() if d else ""


def _daily(d: Mapping[date, int]) -> tuple[tuple[str, int], ...]:
    return tuple((k.isoformat(), v) for k, v in sorted(d.items()))


def newest_time(view: GraphView) -> str:
    return view.newest_time()


def assemble(
    view: GraphView, state: JobState, communities: tuple[Community, ...], meta: SnapshotMeta
) -> Snapshot:
    """The snapshot tables from the view, the state's summaries, ids and reports."""
    rows = row_tables(view, state, deg=degrees(view))
    snap_communities = community_tables(view, state, communities)
    reports = tuple(_reports(state, communities))
    return Snapshot(
        meta,
        rows["entities"],
        rows["relationships"],
        snap_communities,
        reports,
        rows["text_units"],
        rows["documents"],
        rows["claims"],
        alias_rows(view, state.names_resolved()),
    )


def community_tables(
    view: GraphView,
    state: JobState,
    communities: tuple[Community, ...],
    *,
    derived: bool = True,
    touched: set[str] | None = None,
) -> tuple[SnapshotCommunity, ...]:
    """The communities table of a run. ``derived=False`` leaves out the columns the graph
    tables derive on reading (a community's relationship and text-unit ids), which a commit
    does not store. ``touched``: the entities changes touched since the
    last call (None: not known), whose communities' mentions per day are summed again
    (``graph.job.dailies``)."""
    ids = state.human_ids
    period = newest_time(view)[:10]
    dailies, scores = state.dailies.update(view, communities, touched)
    by_id = {c.id: c for c in communities}
    rels_by_entity = _relationships_by_entity(view) if derived else None
    snap_communities = tuple(
        community_row(
            c,
            by_id,
            ids,
            view,
            rels_by_entity,
            period,
            scores.get(c.id, 0.0),
            state.reports[c.id].title if c.id in state.reports else "",
            state.size_history.get(c.id, ()),
            dailies[c.id],
        )
        for c in communities
    )
    snap_communities = tuple(
        replace(sc, unreflected=state.reports[sc.id].unreflected) if sc.id in state.reports else sc
        for sc in snap_communities
    )
    return snap_communities


def _reports(state: JobState, communities: tuple[Community, ...]) -> Iterator[SnapshotReport]:
    for c in communities:
        report = state.reports.get(c.id)
        if report is not None:
            yield report


def _reports_differing(
    state: JobState, communities: tuple[Community, ...], known: Mapping[str, bytes]
) -> tuple[tuple[SnapshotReport, ...], frozenset[str]]:
    """The reports whose row differs from ``known`` (the tables' digests by id), read one at
    a time rather than all held at once (tens of thousands at 100,000 articles), and the ids
    ``known`` holds that no live community's report has."""
    was = values_at(known, [c.id for c in communities])  # by chunks of ids, not one by one
    differing, live = [], set()
    for report in _reports(state, communities):
        live.add(report.id)
        if was.get(report.id) != row_digests("community_reports", (report,))[report.id]:
            differing.append(report)
    return tuple(differing), frozenset(k for k in known if k not in live)


def community_changes(
    view: GraphView,
    state: JobState,
    communities: tuple[Community, ...],
    touched: set[str] | None,
) -> CommunityChanges:
    """The community and report rows that changed since the last commit, with every
    community's row (``graph.job.committed``); every row (``whole``) when that is not known.
    ``touched`` as for ``community_tables``."""
    cache = state.committed
    if not cache.known():
        every = community_tables(view, state, communities, derived=False, touched=touched)
        had = state.tables_known.digests.get("community_reports", {}) if state.tables_known else {}
        reports, gone = _reports_differing(state, communities, had)
        return CommunityChanges(every, every, reports, gone_reports=gone, whole=True)
    assert cache.rows is not None and cache.communities is not None  # known()
    assert cache.reports_changed is not None
    dailies, scores = state.dailies.update(view, communities, touched)
    before, changed_reports = cache.communities, cache.reports_changed
    live = {c.id: c for c in communities}
    gone = frozenset(k for k in before if k not in live)
    born = {k for k in live if k not in before}
    moved = gone | born
    redone = state.dailies.redone
    period = newest_time(view)[:10]
    rows = {k: v for k, v in cache.rows.items() if k not in gone}
    upserts = []
    for c in communities:
        if (
            c.id in redone
            or c.id in changed_reports
            or before.get(c.id) != c
            or any(ch in moved for ch in c.children)
        ):
            rows[c.id] = _row_now(c, live, view, state, period, scores, dailies[c.id])
            upserts.append(rows[c.id])
    wanted = sorted((changed_reports | born) & live.keys())
    held = values_at(state.reports, wanted)
    return CommunityChanges(
        tuple(rows[c.id] for c in communities),
        tuple(upserts),
        tuple(held[k] for k in wanted if k in held),
        gone,
        frozenset(k for k in changed_reports | gone if k not in live or k not in state.reports),
    )


def _row_now(
    c: Community,
    live: Mapping[str, Community],
    view: GraphView,
    state: JobState,
    period: str,
    scores: Mapping[str, float],
    daily: Mapping[date, int],
) -> SnapshotCommunity:
    """A community's row as ``community_tables`` makes it (without the derived columns)."""
    report = state.reports.get(c.id)
    row = community_row(
        c,
        live,
        state.human_ids,
        view,
        None,
        period,
        scores.get(c.id, 0.0),
        report.title if report is not None else "",
        state.size_history.get(c.id, ()),
        daily,
    )
    return row if report is None else replace(row, unreflected=report.unreflected)


ROW_TABLES = ("entities", "relationships", "text_units", "documents", "claims")


def row_tables(
    view: GraphView,
    state: JobState,
    keys: FreshKeys | None = None,
    deg: Mapping[str, int] | None = None,
) -> dict[str, tuple[Any, ...]]:
    """The rows of the tables that follow the articles rather than the clustering (entities,
    relationships, text units, documents, claims): all of them, or those ``keys`` names that
    still exist. ``deg`` only fills the derived ``degree`` columns, which are not stored."""
    ids, deg = state.human_ids, deg if deg is not None else Counter()
    empty: frozenset[str] = frozenset()
    entities = tuple(
        _entity(k, view.entities[k], ids, deg, state, view.entity_units.get(k, empty))
        for k in _wanted(view.entities, None if keys is None else keys.entities)
    )
    relationships = tuple(
        _relationship(
            k, view.relationships[k], ids, deg, state, view.relationship_units.get(k, empty)
        )
        for k in _wanted(view.relationships, None if keys is None else keys.relationships)
    )
    return {
        "entities": entities,
        "relationships": relationships,
        "text_units": _text_unit_rows(
            view, ids, _wanted(view.text_units, None if keys is None else keys.text_units)
        ),
        "documents": _document_rows(
            view, ids, _wanted(view.documents, None if keys is None else keys.documents)
        ),
        "claims": _claim_rows(
            view, ids, _wanted(view.claims, None if keys is None else keys.claims)
        ),
    }


def _wanted(table: Mapping[str, object], keys: set[str] | None) -> list[str]:
    """The keys of ``table`` to write, sorted: all of them, or those of ``keys`` it holds."""
    return sorted(table) if keys is None else sorted(keys & table.keys())


def _text_unit_rows(
    view: GraphView, ids: HumanIds, unit_ids: Iterable[str]
) -> tuple[SnapshotTextUnit, ...]:
    empty: frozenset[str] = frozenset()
    return tuple(
        SnapshotTextUnit(
            u.id,
            ids.get("text_unit", u.id) or 0,
            u.text,
            u.n_tokens,
            u.document_id,
            tuple(sorted(view.unit_entities.get(u.id, empty))),
            tuple(sorted(view.unit_relationships.get(u.id, empty))),
            view.unit_covariates(u.id),
            u.published_at,
            u.title,
        )
        for u in (view.text_units[i] for i in unit_ids)
    )


def _document_rows(
    view: GraphView, ids: HumanIds, doc_ids: Iterable[str]
) -> tuple[SnapshotDocument, ...]:
    empty: frozenset[str] = frozenset()
    return tuple(
        SnapshotDocument(
            d_id,
            ids.get("document", d_id) or 0,
            str(d.get("title", "")),
            str(d.get("text", "")),
            tuple(sorted(view.document_units.get(d_id, empty))),
            str(d.get("published_at", "")),
            dict(d.get("metadata") or {}),
            *view.document_tokens(d_id),
        )
        for d_id, d in ((i, view.documents[i]) for i in doc_ids)
    )


def _claim_rows(
    view: GraphView, ids: HumanIds, claim_keys: Iterable[str]
) -> tuple[SnapshotClaim, ...]:
    """One row per fact of each claim aggregate."""
    return tuple(
        SnapshotClaim(
            f.id,
            ids.get("claim", f.id) or 0,
            "claim",
            f.claim_type,
            f.description,
            f.subject_name,
            f.object_name,
            f.status,
            f.start_date,
            f.end_date,
            f.source_text,
            view.claim_unit(f.id),
        )
        for k in claim_keys
        for f in view.claims[k].facts
    )


def fresh_ids(view: GraphView, ids: HumanIds, keys: FreshKeys) -> HumanIds:
    """Human-readable ids for the rows ``keys`` names that have none yet (sorted keys)."""
    ids = ids.assign("entity", sorted(keys.entities & view.entities.keys()))
    ids = ids.assign("relationship", sorted(keys.relationships & view.relationships.keys()))
    ids = ids.assign("text_unit", sorted(keys.text_units & view.text_units.keys()))
    ids = ids.assign("document", sorted(keys.documents & view.documents.keys()))
    facts = (f.id for k in sorted(keys.claims & view.claims.keys()) for f in view.claims[k].facts)
    return ids.assign("claim", facts)


def _entity(
    k: str,
    e: EntityAggregate,
    ids: HumanIds,
    deg: Mapping[str, int],
    state: JobState,
    units: Iterable[str],
) -> SnapshotEntity:
    return SnapshotEntity(
        k,
        ids.get("entity", k) or 0,
        e.name,
        e.type,
        summary(state, f"e:{k}") or e.descriptions.first(),
        tuple(sorted(units)),
        e.mention_count,
        deg.get(k, 0),
        e.document_count,
        _iso(e.first_seen),
        _iso(e.last_seen),
        _daily(e.days.per_day()),
    )


def _relationship(
    k: str,
    r: RelationshipAggregate,
    ids: HumanIds,
    deg: Mapping[str, int],
    state: JobState,
    units: Iterable[str],
) -> SnapshotRelationship:
    return SnapshotRelationship(
        k,
        ids.get("relationship", k) or 0,
        r.source_name,
        r.target_name,
        summary(state, f"r:{k}") or r.descriptions.first(),
        float(r.weight),
        deg.get(r.source_key, 0) + deg.get(r.target_key, 0),
        tuple(sorted(units)),
        r.source_key,
        r.target_key,
        r.strength,
        _iso(r.first_seen),
        _iso(r.last_seen),
    )


def _relationships_by_entity(view: GraphView) -> dict[str, list[RelationshipAggregate]]:
    """Each entity's relationships, so a community finds its internal edges from its members
    instead of scanning every relationship of the graph once per community."""
    out: dict[str, list[RelationshipAggregate]] = {}
    for r in view.relationships.values():
        out.setdefault(r.source_key, []).append(r)
        out.setdefault(r.target_key, []).append(r)
    return out


def community_row(
    c: Community,
    by_id: Mapping[str, Community],
    ids: HumanIds,
    view: GraphView,
    rels_by_entity: Mapping[str, list[RelationshipAggregate]] | None,
    period: str,
    score: float,
    title: str,
    size_history: tuple[tuple[int, int], ...] = (),
    daily: Mapping[date, int] | None = None,
) -> SnapshotCommunity:
    """A community's row; without ``rels_by_entity`` the derived columns (its relationship
    and text-unit ids, its mentions per day) are left empty: a commit does not store them,
    and the rows it keeps would hold every community's day series a second time (the job's
    own are in ``graph.job.dailies``). Its report's ``unreflected`` share is the caller's to
    set."""
    hrid = ids.get("community", c.id) or 0
    members = sorted(c.entity_keys)
    rels: list[str] = []
    units: list[str] = []
    if rels_by_entity is not None:
        rels = sorted(
            {
                r.key
                for k in members
                for r in rels_by_entity.get(k, ())
                if r.source_key in c.entity_keys and r.target_key in c.entity_keys
            }
        )
        units = sorted({u for k in members for u in view.entity_units.get(k, ())})
    parent = ids.get("community", c.parent) if c.parent else None
    daily = community_daily(view, members) if daily is None else daily
    # the newest document day of its members' mentions, so the row changes with its news
    # rather than with every version
    period = max(daily).isoformat() if daily else period
    return SnapshotCommunity(
        c.id,
        hrid,
        hrid,
        c.level,
        parent if parent is not None else -1,
        tuple(ids.get("community", ch) or 0 for ch in c.children if ch in by_id),
        title,
        tuple(members),
        tuple(rels),
        tuple(units),
        period,
        len(members),
        _daily(daily) if rels_by_entity is not None else (),
        score,
        size_history,
    )


def report_record(
    community: Community,
    content: Mapping[str, Any],
    *,
    ids: HumanIds,
    period: str,
    mode: str,
    version: int,
) -> SnapshotReport:
    """A snapshot report from a writer's JSON (title, summary, rating, findings…)."""
    hrid = ids.get("community", community.id) or 0
    parent = ids.get("community", community.parent) if community.parent else None
    findings = tuple(
        {"summary": str(f.get("summary", "")), "explanation": str(f.get("explanation", ""))}
        for f in content.get("findings", [])
        if isinstance(f, Mapping)
    )
    title, text = str(content.get("title", "")), str(content.get("summary", ""))
    body = report_body(title, text, findings)
    return SnapshotReport(
        community.id,
        hrid,
        hrid,
        community.level,
        parent if parent is not None else -1,
        tuple(ids.get("community", ch) or 0 for ch in community.children),
        title,
        text,
        body,
        float(content.get("rating", 0.0) or 0.0),
        str(content.get("rating_explanation", "")),
        findings,
        orjson.dumps(dict(content)).decode(),
        period,
        len(community.entity_keys),
        mode,
        0.0,
        version,
    )
