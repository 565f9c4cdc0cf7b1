"""JSON views of answers and of the snapshot's records, as the API returns them.

Pure functions of a ``QueryIndex``: no HTTP, no I/O. ``kgrag query --json`` prints the same
views, so an answer reads the same on the command line and over HTTP. Every view names the
snapshot version it was read from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from graph.keys import entity_key
from graph.versions.model import SnapshotCommunity, SnapshotEntity
from query.index import QueryIndex
from query.results import QueryResult, age_s, graph_basis
from query.time_window import TimeWindow
from query.trends import effective_span, trending_communities

CommunitySort = Literal["emerging", "size", "rank"]


def references(
    index: QueryIndex, citations: dict[str, list[int]]
) -> dict[str, list[dict[str, Any]]]:
    """The cited records, so a reader can follow each citation back to its source."""
    out: dict[str, list[dict[str, Any]]] = {}
    for dataset, ids in citations.items():
        rows = [_reference(index, dataset, i) for i in ids]
        out[dataset] = [r for r in rows if r is not None]
    return out


def _reference(index: QueryIndex, dataset: str, i: int) -> dict[str, Any] | None:
    if dataset == "Entities" and (e := index.entity_by_hrid.get(i)):
        return {"id": i, "key": e.id, "title": e.title, "type": e.type}
    if dataset == "Relationships" and (r := index.relationship_by_hrid.get(i)):
        r = index.full(r)
        return {"id": i, "source": r.source, "target": r.target, "description": r.description}
    if dataset == "Claims" and (c := index.claim_by_hrid.get(i)):
        c = index.full(c)
        return {"id": i, "subject": c.subject_id, "type": c.type, "description": c.description}
    if dataset == "Reports" and (rep := index.reports.get(i)):
        return {"id": i, "community_id": rep.id, "level": rep.level, "title": rep.title}
    if dataset == "Sources" and (u := index.text_unit_by_hrid.get(i)):
        return {
            "id": i,
            "chunk_id": u.id,
            "document_id": u.document_id,
            "title": u.title,
            "published_at": u.published_at,
        }
    return None


def result_view(result: QueryResult, index: QueryIndex) -> dict[str, Any]:
    return {**result.as_dict(), "references": references(index, result.citations)}


def find_entity(index: QueryIndex, ident: str) -> SnapshotEntity | None:
    """By human-readable id (digits), entity key, or any spelling with that key."""
    if ident.strip().isascii() and ident.strip().isdigit():  # not "¹": int() refuses it
        return index.entity_by_hrid.get(int(ident))
    return index.entities.get(ident) or index.entities.get(entity_key(ident))


def entity_view(index: QueryIndex, e: SnapshotEntity, limit: int = 20) -> dict[str, Any]:
    e = index.full(e)
    units = [index.text_units[u] for u in index.entity_units(e.id)[:limit]]
    return {
        "id": e.human_readable_id,
        "key": e.id,
        "title": e.title,
        "type": e.type,
        "description": e.description,
        "frequency": e.frequency,
        "degree": e.degree,
        "document_count": e.document_count,
        "first_seen": e.first_seen,
        "last_seen": e.last_seen,
        "communities": {
            str(level): n for level, n in sorted(index.entity_communities.get(e.id, {}).items())
        },
        "relationships": _entity_relationships(index, e.id, limit),
        "claims": [
            {
                "id": c.human_readable_id,
                "type": c.type,
                "status": c.status,
                "description": c.description,
            }
            for c in map(index.full, index.claims_by_entity.get(e.id, ())[:limit])
        ],
        "sources": [_reference(index, "Sources", u.human_readable_id) for u in units],
        "timeline": [(d.isoformat(), n) for d, n in index.entity_daily.get(e.id, ())],
        # other names of this entity, each with why (query.aliases); sources include theirs
        "aliases": [
            {"key": r.alias, "title": r.alias_title, "rule": r.rule, "evidence": r.evidence}
            for r in index.aliases.whole(e.id)
        ],
        "namesake_units": len(index.aliases.namesake_units(e.id)),
        # the entity this name resolves to, when it is an alias
        "alias_of": _alias_of(index, e.id),
        "snapshot_version": index.version,
    }


def _entity_relationships(index: QueryIndex, key: str, limit: int) -> list[dict[str, Any]]:
    """An entity's relationships, the best connected first."""
    rels = sorted(
        map(index.relationships.__getitem__, index.relationships_by_entity.get(key, ())),
        key=lambda r: -index.combined_degree(r),
    )
    return [
        {
            "id": r.human_readable_id,
            "source": r.source,
            "target": r.target,
            "description": r.description,
            "weight": r.weight,
        }
        for r in map(index.full, rels[:limit])
    ]


def _alias_of(index: QueryIndex, key: str) -> dict[str, Any] | None:
    """The entity ``key`` resolves to and why, when it is an alias (else None)."""
    canonical = index.aliases.resolve(key)
    merged_into = next((r for r in index.aliases.whole(canonical) if r.alias == key), None)
    if merged_into is None:
        return None
    return {
        "key": canonical,
        "id": index.entities[canonical].human_readable_id if canonical in index.entities else None,
        "title": merged_into.canonical_title,
        "rule": merged_into.rule,
        "evidence": merged_into.evidence,
    }


def find_community(index: QueryIndex, ident: str) -> SnapshotCommunity | None:
    """By community number (digits) or stable id."""
    number = ident.strip().lstrip("-")
    if number.isascii() and number.isdigit():
        return index.communities.get(int(ident))
    return index.community_by_id.get(ident)


def community_summary(index: QueryIndex, c: SnapshotCommunity, score: float) -> dict[str, Any]:
    report = index.reports.get(c.community)
    summary = index.texts.get("community_reports", "summary", report.id) if report else None
    return {
        "id": c.id,
        "community": c.community,
        "level": c.level,
        "parent": c.parent,
        "children": list(index.children(c.community)),
        "title": report.title if report else c.title,
        "size": c.size,
        "rank": report.rank if report else None,
        "emerging_score": score,
        "summary": summary if summary is not None else (report.summary if report else ""),
    }


def community_view(index: QueryIndex, c: SnapshotCommunity) -> dict[str, Any]:
    report = index.reports.get(c.community)
    report = index.full(report) if report is not None else None
    members = [index.entities[k] for k in c.entity_ids if k in index.entities]
    return {
        **community_summary(index, c, c.emerging_score),
        "report": None
        if report is None
        else {
            "title": report.title,
            "summary": report.summary,
            "full_content": report.body(),
            "rating_explanation": report.rating_explanation,
            "findings": list(report.findings),
            "mode": report.mode,
            "unreflected": report.unreflected,
            "generated_in": report.generated_in,
        },
        "members": [
            {"id": e.human_readable_id, "key": e.id, "title": e.title, "type": e.type}
            for e in members
        ],
        "timeline": [(d.isoformat(), n) for d, n in index.community_daily.get(c.community, ())],
        "snapshot_version": index.version,
    }


def list_communities(
    index: QueryIndex,
    *,
    level: int | None,
    window: TimeWindow,
    sort: CommunitySort,
    limit: int,
    fold: bool = True,
) -> list[dict[str, Any]]:
    """By emerging score (``fold``): one row per storyline mentioned in the window (the last
    week when none is given), as ``query.trends`` ranks them, each with the ids of the
    communities it folds. Otherwise, with a window: the communities mentioned in it, scored
    on it; without: every community with the snapshot's own emerging score."""
    if sort == "emerging" and fold:
        since, until = effective_span(index, window, default_days=7)
        rows = trending_communities(index, since, until, limit=limit, level=level, detail=False)
        return [
            {
                **community_summary(index, index.communities[t.community], t.score),
                "documents": t.documents,
                "expected_documents": t.expected_documents,
                "folded": list(t.folded),
                "within": list(t.within),
            }
            for t in rows
        ]
    if window.bounded:
        since, until = effective_span(index, window, default_days=7)
        ranked = trending_communities(
            index,
            since,
            until,
            limit=len(index.communities),
            level=level,
            detail=False,
            distinct=False,
        )
        scores = {t.community: t.score for t in ranked}
    else:
        scores = {
            c.community: c.emerging_score
            for c in index.communities.values()
            if level is None or c.level == level
        }
    rank = {n: r.rank for n, r in index.reports.items()}
    keys: dict[str, Callable[[SnapshotCommunity], tuple[float, ...]]] = {
        "emerging": lambda c: (-scores[c.community], -c.size, c.community),
        "size": lambda c: (-c.size, -scores[c.community], c.community),
        "rank": lambda c: (-rank.get(c.community, 0.0), -c.size, c.community),
    }
    chosen = sorted((index.communities[n] for n in scores), key=keys[sort])[:limit]
    return [community_summary(index, c, scores[c.community]) for c in chosen]


def version_age_s(index: QueryIndex) -> float | None:
    return age_s(index.meta.created_at)


def version_view(index: QueryIndex) -> dict[str, Any]:
    meta = index.meta
    return {
        "version": meta.version,
        "created_at": meta.created_at,
        "age_s": version_age_s(index),
        "kind": meta.kind,
        **{k: v for k, v in graph_basis(meta).items() if k.startswith("reports_")},
        "newest_document_time": meta.newest_document_time,
        "mode": meta.mode,
        "counts": {
            "documents": len(index.documents),
            "text_units": len(index.text_units),
            "entities": len(index.entities),
            "relationships": len(index.relationships),
            "communities": len(index.communities),
            "reports": len(index.reports),
        },
    }


def neighbourhood(index: QueryIndex, center: list[str], *, limit: int = 120) -> dict[str, Any]:
    """The graph around ``center`` (entity keys) for drawing: those entities, then their
    neighbours by the weight of the relationship that reaches them, up to ``limit`` nodes,
    and every relationship among the nodes. Each node names its finest community."""
    chosen = [k for k in dict.fromkeys(center) if k in index.entities][:limit]
    taken = set(chosen)
    reach: dict[str, float] = {}
    for key in chosen:
        for rid in index.relationships_by_entity.get(key, ()):
            a, b = index.relationship_ends[rid]
            other = b if a == key else a
            if other not in taken and other in index.entities:
                reach[other] = max(reach.get(other, 0.0), index.relationships[rid].weight)
    for key in sorted(reach, key=lambda k: (-reach[k], -index.degree(k), k)):
        if len(chosen) >= limit:
            break
        chosen.append(key)
        taken.add(key)
    edges: dict[str, dict[str, Any]] = {}
    for key in chosen:
        for rid in index.relationships_by_entity.get(key, ()):
            a, b = index.relationship_ends[rid]
            if a in taken and b in taken and rid not in edges:
                r = index.relationships[rid]
                edges[rid] = {"id": r.human_readable_id, "source": a, "target": b,
                              "weight": r.weight}  # fmt: skip
    nodes = []
    for key in chosen:
        e = index.entities[key]
        levels = index.entity_communities.get(key, {})
        nodes.append(
            {
                "key": key,
                "id": e.human_readable_id,
                "title": e.title,
                "type": e.type,
                "degree": index.degree(key),
                "community": levels[max(levels)] if levels else None,
                "center": key in center,
            }
        )
    return {"nodes": nodes, "edges": list(edges.values()), "snapshot_version": index.version}


def document_view(
    index: QueryIndex, doc_id: str, stored: dict[str, str] | None
) -> dict[str, Any] | None:
    """A document with its passages (the text units answers cite, by their ids) and, when
    the tables still hold it, its whole text; None when the index knows neither."""
    doc = index.documents.get(doc_id)
    units = sorted(
        (index.full(index.text_units[u]) for u in index.text_units_by_document.get(doc_id, ())),
        key=lambda u: u.human_readable_id,
    )
    if doc is None and not units:
        return None
    return {
        "id": doc_id,
        "title": doc.title if doc else units[0].title,
        "published_at": doc.creation_date if doc else units[0].published_at,
        "text": stored["text"] if stored else None,
        "passages": [{"id": u.human_readable_id, "chunk_id": u.id, "text": u.text} for u in units],
        "snapshot_version": index.version,
    }
