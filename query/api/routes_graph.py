"""Browsing the graph: ``/v1/entities/{ident}``, ``/v1/communities`` (by emerging score in a
document-time window), ``/v1/communities/{ident}`` and the live lineage events ``/v1/events``.

Reads only: each route answers from the one index it read, through ``query.api.views``;
``/v1/events`` streams the community-events topic as server-sent events.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from graph.documents import has_control_characters
from graph.lineage import PUBLISHED_KINDS, kinds_shown
from query.api.errors import ApiError, documented
from query.api.state import ServiceState
from query.api.views import (
    CommunitySort,
    community_view,
    entity_view,
    find_community,
    find_entity,
    list_communities,
)
from query.sse import EVENT_SCHEMA, HEADERS, MEDIA_TYPE, StartAt, community_events
from query.time_window import parse_time_window


def _printable(ident: str) -> None:
    """An id with control characters names nothing (and must not be normalised into one
    that does): a 422 saying so."""
    if has_control_characters(ident):
        raise ApiError(
            422, "invalid_id", f"{ident!r} contains control characters; ids are printable text"
        )


def routes(state: ServiceState) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["graph"], responses=documented(401, 404, 422, 503))

    @router.get("/entities/{ident}", summary="One entity by key or human-readable id")
    async def get_entity(ident: str) -> Any:
        _printable(ident)
        index = await state.holder.require()
        e = find_entity(index, ident)
        if e is None:
            raise ApiError(
                404, "unknown_entity", f"no entity {ident!r} in snapshot {index.version}"
            )
        return entity_view(index, e)

    @router.get("/communities", summary="Communities, by emerging score in a window")
    async def get_communities(
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
    ) -> Any:
        index = await state.holder.require()

        async def work() -> dict[str, Any]:
            window = parse_time_window(since, until, newest=index.newest)
            rows = list_communities(
                index, level=level, window=window, sort=sort, limit=limit, fold=fold
            )
            return {
                "communities": rows,
                "window": window.as_dict(),
                "snapshot_version": index.version,
            }

        return await state.timed("communities", work)

    @router.get("/communities/{ident}", summary="One community and its report")
    async def get_community(ident: str) -> Any:
        _printable(ident)
        index = await state.holder.require()
        c = find_community(index, ident)
        if c is None:
            raise ApiError(
                404, "unknown_community", f"no community {ident!r} in snapshot {index.version}"
            )
        return community_view(index, c)

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

    return router
