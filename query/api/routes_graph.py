"""Browsing the graph: ``/v1/entities/{ident}``, ``/v1/communities`` (by emerging score in a
document-time window), ``/v1/communities/{ident}`` and the live lineage events ``/v1/events``.

Reads only: each route answers from the one index it read, through ``query.api.views``;
``/v1/events`` streams the community-events topic as server-sent events.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from core.tables.errors import SnapshotStoreError
from graph.communities.lineage import PUBLISHED_KINDS, kinds_shown
from graph.extraction.documents import has_control_characters
from graph.versions.model import SnapshotCommunity, SnapshotEntity
from query.api.errors import ApiError, documented
from query.api.state import Service
from query.api.views import (
    CommunitySort,
    community_view,
    entity_view,
    find_community,
    find_entity,
    list_communities,
    neighbourhood,
    references,
)
from query.index import QueryIndex
from query.lineage_log import community_history
from query.sse import EVENT_SCHEMA, HEADERS, MEDIA_TYPE, StartAt, community_events
from query.time_window import parse_time_window


def _printable(ident: str) -> None:
    """An id with control characters names nothing (and must not be normalised into one
    that does): a 422 saying so."""
    if has_control_characters(ident):
        raise ApiError(
            422, "invalid_id", f"{ident!r} contains control characters; ids are printable text"
        )


def _entity(index: QueryIndex, ident: str) -> SnapshotEntity:
    e = find_entity(index, ident)
    if e is None:
        raise ApiError(404, "unknown_entity", f"no entity {ident!r} in snapshot {index.version}")
    return e


def _community(index: QueryIndex, ident: str) -> SnapshotCommunity:
    c = find_community(index, ident)
    if c is None:
        raise ApiError(
            404, "unknown_community", f"no community {ident!r} in snapshot {index.version}"
        )
    return c


def _pairs(value: Any) -> list[list[int]]:
    """A stored (version, size) history: a JSON text in the table, or a list."""
    if isinstance(value, (str, bytes)):
        value = orjson.loads(value) if value else []
    return [[int(v), int(n)] for v, n in value or ()]


router = APIRouter(prefix="/v1", tags=["graph"], responses=documented(401, 404, 422, 503))


@router.get("/entities/{ident}", summary="One entity by key or human-readable id")
async def get_entity(state: Service, ident: str) -> Any:
    _printable(ident)
    index = await state.holder.require()
    return entity_view(index, _entity(index, ident))


@router.get("/communities", summary="Communities, by emerging score in a window")
async def get_communities(
    state: Service,
    level: int | None = Query(None, ge=0, le=20),
    since: str | None = Query(None, description="ISO date or 'last N days'"),
    until: str | None = None,
    sort: CommunitySort = "emerging",
    limit: int = Query(50, ge=1, le=1000),
    fold: bool = Query(
        True,
        description="With sort=emerging: one row per storyline (its levels and nested "
        "communities folded into it); false lists every community",
    ),
    timeline: bool = Query(
        False, description="Each row with its mentions per day of document time"
    ),
) -> Any:
    index = await state.holder.require()

    async def work() -> dict[str, Any]:
        window = parse_time_window(since, until, newest=index.newest)
        rows = list_communities(
            index, level=level, window=window, sort=sort, limit=limit, fold=fold
        )
        if timeline:
            for row in rows:
                daily = index.community_daily.get(row["community"], ())
                row["timeline"] = [(d.isoformat(), n) for d, n in daily]
        return {
            "communities": rows,
            "window": window.as_dict(),
            "snapshot_version": index.version,
        }

    return await state.timed("communities", work)


@router.get("/communities/{ident}", summary="One community and its report")
async def get_community(state: Service, ident: str) -> Any:
    _printable(ident)
    index = await state.holder.require()
    return community_view(index, _community(index, ident))


@router.get(
    "/communities/{ident}/history",
    summary="A community's lineage: emerged, grew, split, merged, report updated, headlines",
    description="Read back from the community-events topic, oldest first; `partial` is "
    "true when the topic was too long to read within the time allowed, and `events` then "
    "holds what was read. `size_history` is the community's size per graph version.",
)
async def get_history(state: Service, ident: str) -> Any:
    _printable(ident)
    index = await state.holder.require()
    c = _community(index, ident)
    try:
        stored = await asyncio.to_thread(
            state.holder.store.row, "communities", c.id, index.version, ["size_history"]
        )
    except SnapshotStoreError as e:
        raise ApiError(503, "graph_store_unavailable", str(e)) from e
    sizes = _pairs((stored or {}).get("size_history"))
    try:
        born = sizes[0][0] if sizes else None
        events, partial = await community_history(state.settings, c.id, born_in=born)
    except Exception as e:
        raise ApiError(503, "kafka_unavailable", f"Kafka is not reachable: {e}") from e
    report = index.reports.get(c.community)
    return {
        "id": c.id,
        "community": c.community,
        "events": events,
        "partial": partial,
        "size_history": sizes,
        "report_generated_in": report.generated_in if report else None,
        "snapshot_version": index.version,
    }


@router.get(
    "/graph",
    summary="The neighbourhood of an entity or the members of a community, for drawing",
    description="Nodes (entities, each with its finest community) and the relationships "
    "among them. `entity`: the entity and its strongest neighbours; `community`: its "
    "members (the most connected first) and their neighbours, up to `limit` nodes.",
)
async def get_graph(
    state: Service,
    entity: str | None = Query(None, description="Entity key or human-readable id"),
    community: str | None = Query(None, description="Community number or id"),
    limit: int = Query(120, ge=1, le=500),
) -> Any:
    if (entity is None) == (community is None):
        raise ApiError(422, "invalid_request", "give exactly one of entity or community")
    _printable(entity or community or "")
    index = await state.holder.require()
    if entity is not None:
        return neighbourhood(index, [_entity(index, entity).id], limit=limit)
    c = _community(index, community or "")
    members = sorted(c.entity_ids, key=lambda k: (-index.degree(k), k))
    return neighbourhood(index, members[:limit], limit=limit)


@router.get(
    "/references",
    summary="The records behind citations: [Data: Sources (3, 7); Entities (12)]",
    description="Each parameter is a comma-separated list of the ids a citation names in "
    "that dataset; the answer lists the records found (unknown ids are left out).",
)
async def get_references(
    state: Service, sources: str = "", entities: str = "", relationships: str = "",
    claims: str = "", reports: str = "",
) -> Any:  # fmt: skip
    index = await state.holder.require()
    asked = {"Sources": sources, "Entities": entities, "Relationships": relationships,
             "Claims": claims, "Reports": reports}  # fmt: skip
    cited: dict[str, list[int]] = {}
    for dataset, text in asked.items():
        parts = [p.strip() for p in text.split(",") if p.strip()]
        bad = [p for p in parts if not (p.isascii() and p.isdigit())]
        if bad:
            raise ApiError(
                422, "invalid_id", f"{dataset.lower()}: {bad[0]!r} is not a record id (digits)"
            )
        if parts:
            cited[dataset] = [int(p) for p in parts[:100]]
    return {"references": references(index, cited), "snapshot_version": index.version}


@router.get(
    "/events",
    summary="Server-sent headlines (and, with raw=true, every community event)",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "An endless stream of server-sent events: `event:` is the "
            "kind, `data:` its JSON. By default the headlines: a storyline that emerged "
            "or surged, with rank, title, `why` (articles in the window against "
            "expected), new entities and top documents. With raw=true (or kind=…) the "
            "lineage events too (community, level, sizes, title, top entities, graph "
            "version) and alias merges",
            "content": {MEDIA_TYPE: {"schema": EVENT_SCHEMA}},
        }
    },
)
async def events(
    state: Service,
    start: StartAt = Query("latest", alias="from", description="latest or earliest"),
    kind: list[str] | None = Query(
        None,
        description=f"Only these event kinds: {', '.join(PUBLISHED_KINDS)} "
        "(default: headline, or every kind with raw=true)",
    ),
    raw: bool = Query(
        False, description="Every event (lineage, aliases, headlines), not headlines only"
    ),
) -> StreamingResponse:
    unknown = sorted(set(kind or ()) - set(PUBLISHED_KINDS))
    if unknown:
        raise ApiError(
            422,
            "invalid_kind",
            f"unknown event kind(s) {', '.join(map(repr, unknown))}; "
            f"use {', '.join(PUBLISHED_KINDS)}",
        )
    try:
        await state.ensure_topics()
    except Exception as e:
        raise ApiError(503, "kafka_unavailable", f"Kafka is not reachable: {e}") from e
    stream = community_events(state.settings, start=start, kinds=kinds_shown(kind, raw))
    return StreamingResponse(stream, media_type=MEDIA_TYPE, headers=HEADERS)
