"""``POST /v1/documents``: publish one document for indexing, as ``kgrag publish`` would;
``DELETE /v1/documents/{id}``: delete one, as ``kgrag delete`` would.

The document is validated with the worker's rules (a bad one is a 422 naming the field) and
sent through the service's ``core.publish.DocumentPublisher``, the same publisher the CLI
uses, so both put the same message on the topic. 202: the worker indexes it later.

A deletion is looked up in the graph tables first (``core.publish.plan_deletion``): an indexed
document gets its tombstone (202: the worker retracts it), one deleted before is a 200 that
changes nothing, and an id the graph never held a 404, unless ``force`` sends it anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from core.errors import ConfigError
from core.publish import UNKNOWN_HINT, plan_deletion
from core.tables.errors import SnapshotStoreError
from graph.errors import InvalidDocumentError
from graph.extraction.documents import document_from_obj
from query.api.errors import ApiError, documented
from query.api.state import Service, ServiceState
from query.api.views import document_view


class DocumentIn(BaseModel):
    """A document as ``kgrag publish`` reads it (any other field is kept in ``metadata``).
    For the OpenAPI page: the body is validated by the worker's own rules
    (``graph.extraction.documents``), so both refuse the same documents with the same words."""

    id: str = Field(description="Stable id; a later document with the same id replaces it")
    text: str = Field(description="The article text")
    published_at: str = Field(description="ISO 8601 time, e.g. 1987-03-02T09:00:00Z")
    title: str | None = None
    source: str | None = None
    url: str | None = None
    metadata: dict[str, Any] | None = None


# Listed on the OpenAPI page with the graph routes: what feeds the graph beside what reads it.
router = APIRouter(prefix="/v1", tags=["graph"], responses=documented(401, 413, 422, 503))


async def _send(state: ServiceState, message: Coroutine[Any, Any, None]) -> None:
    """Put one message on the documents topic (creating the topics first if need be)."""
    try:
        await state.ensure_topics()
        await message
    except ConfigError as e:
        raise ApiError(500, "misconfigured", str(e)) from e
    except Exception as e:
        topic = state.publisher.topic
        raise ApiError(503, "kafka_unavailable", f"could not publish to {topic}: {e}") from e
    finally:
        message.close()  # not awaited when the topics could not be made


@router.post(
    "/documents",
    status_code=202,
    summary="Publish one document for indexing",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": DocumentIn.model_json_schema()}},
        }
    },
)
async def post_document(state: Service, payload: dict[str, Any] = Body(...)) -> Any:
    try:
        doc = document_from_obj(payload, max_chars=state.settings.chunking.max_document_chars)
    except InvalidDocumentError as e:
        raise ApiError(422, "invalid_document", str(e)) from e
    await _send(state, state.publisher.publish(doc))
    state.metrics.documents_published.inc()
    return {"id": doc.id, "topic": state.publisher.topic, "status": "accepted"}


@router.get(
    "/documents/{doc_id:path}",
    summary="One indexed document: its passages (the cited text units) and its text",
    responses=documented(404),
)
async def get_document(state: Service, doc_id: str) -> Any:
    index = await state.holder.require()
    view = document_view(index, doc_id, None)
    if view is None:
        raise ApiError(
            404, "unknown_document", f"no document {doc_id!r} in snapshot {index.version}"
        )
    try:
        stored = await asyncio.to_thread(
            state.holder.store.row, "documents", doc_id, index.version, ["text"]
        )
    except SnapshotStoreError as e:
        raise ApiError(503, "graph_store_unavailable", str(e)) from e
    return {**view, "text": stored["text"] if stored else None}


@router.delete(
    "/documents/{doc_id:path}",
    status_code=202,
    summary="Delete one document: retract everything it contributed",
    responses={
        200: {"description": "Deleted before: nothing to do"},
        **documented(404),
    },
)
async def delete_document(
    state: Service,
    doc_id: str,
    force: bool = Query(
        False, description="Send the deletion even if the graph does not hold the id (yet)"
    ),
) -> Any:
    try:
        plan = await asyncio.to_thread(plan_deletion, state.holder.store, [doc_id], force=force)
    except SnapshotStoreError as e:
        raise ApiError(503, "graph_store_unavailable", str(e)) from e
    if plan.unknown:
        raise ApiError(
            404,
            "unknown_document",
            f"no document {doc_id!r} is indexed; {UNKNOWN_HINT} (?force=true)",
        )
    topic = state.publisher.topic
    if plan.already:
        return JSONResponse({"id": doc_id, "topic": topic, "status": "already_deleted"}, 200)
    await _send(state, state.publisher.delete(doc_id))
    state.metrics.documents_deleted.inc()
    return {"id": doc_id, "topic": topic, "status": "accepted"}
