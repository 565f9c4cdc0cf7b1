"""The query service: local, global and basic search, trends and the graph over HTTP.

``create_app(settings)`` builds a FastAPI app whose lifespan creates the clients once
(Weaviate, the embedder, the LLM or none in offline mode, the prompts, the token counter) and
a snapshot holder.

Snapshot swaps without restart or failed request: every request reads the holder's current
``QueryIndex`` once and uses only that object to the end, so a swap never changes the data
under a request. Each request also stats the snapshot pointer (one ``stat``); when it moved,
a single background task loads the snapshot and builds its index in a worker thread
(``asyncio.to_thread``) while requests keep being served from the previous index, then the
reference is replaced. A background refresher does the same every ``refresh_interval_s``, so
the index is usually warm before the first request after a publish. Only the very first
snapshot is waited for; before it, query endpoints answer 503 and say what to do.

Errors are JSON ``{"error": {"code", "message"}}`` and never carry a stack trace.
``run_query`` and the views (``entity_view``, ``community_view``, ``references``) are plain
async/pure functions that the CLI uses without HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
import orjson
from aiokafka import AIOKafkaProducer
from fastapi import APIRouter, Body, Depends, FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core.clients import build_embedder
from core.clients import build_llm as build_query_llm
from core.errors import ConfigError
from core.health import assess, pending_changes
from core.job_status import read_status
from core.llm import LLMError
from core.settings import Settings
from core.snapshot_store import PointerStamp, SnapshotStore, SnapshotWatcher
from core.tokenizer import get_encoding
from core.vector_store import VectorStoreError, WeaviateStore
from graph.documents import document_from_obj, document_to_obj
from graph.errors import InvalidDocumentError, PicklableError
from graph.keys import entity_key
from graph.protocols import LLM, VectorHit
from graph.snapshot_model import SnapshotCommunity, SnapshotEntity
from prompts import PromptError, PromptLibrary
from query.basic_search import BasicSearchConfig, basic_search
from query.context import LocalContextConfig
from query.deps import QueryDeps
from query.dynamic import DynamicConfig
from query.errors import AllMapCallsFailedError, QueryError, TimeWindowError
from query.global_search import GlobalSearchConfig, global_search
from query.history import HistoryTurn
from query.index import QueryIndex
from query.local_search import local_search
from query.metrics import LagProbe, PendingProbe, QueryMetrics
from query.offline_answers import (
    offline_basic,
    offline_global,
    offline_local,
    offline_questions,
)
from query.questions import generate_questions
from query.results import QueryResult, QuestionsResult
from query.sse import HEADERS, MEDIA_TYPE, StartAt, answer_pieces, community_events, sse_event
from query.tables import TokenCounter
from query.time_window import TimeWindow, parse_time_window
from query.trends import effective_span, trending_communities, trends

log = logging.getLogger(__name__)

Method = Literal["local", "global", "basic"]
NO_SNAPSHOT = (
    "the index is not built yet: no graph snapshot has been published. Run a worker "
    "(`kgrag worker`), publish documents (`kgrag publish <file.jsonl>` or POST /v1/documents) "
    "and wait for the community job to write the first snapshot"
)
OPEN_PATHS = frozenset({"/healthz", "/metrics", "/docs", "/docs/oauth2-redirect", "/openapi.json"})


# ==== errors ====================================================================================


class ApiError(PicklableError):
    """An error the client can act on: an HTTP status, a stable code and a sentence.

    Picklable by state, like the project's other errors, though it is not a ``KgragError``:
    handlers that catch those must not turn an HTTP answer into something else.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status)


def api_error(e: Exception) -> ApiError | None:
    """The client-facing form of an error the query layer raises on purpose (else None)."""
    match e:
        case ApiError():
            return e
        case TimeWindowError():
            return ApiError(422, "invalid_time_window", str(e))
        case AllMapCallsFailedError() | LLMError():
            return ApiError(502, "llm_failed", f"the language model gave no usable answer: {e}")
        case VectorStoreError():
            return ApiError(503, "vector_store_unavailable", str(e))
        case PromptError() | ConfigError():
            return ApiError(500, "misconfigured", str(e))
        case QueryError() | ValueError():
            return ApiError(422, "invalid_query", str(e))
    return None


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            reason = (err.get("ctx") or {}).get("error", "")
            parts.append(f"the request body is not valid JSON ({reason})".replace(" ()", ""))
            continue
        where = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def _install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.code, exc.message)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return error_response(422, "invalid_request", _validation_message(exc))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        codes = {404: "not_found", 405: "method_not_allowed"}
        return error_response(
            exc.status_code, codes.get(exc.status_code, f"http_{exc.status_code}"), str(exc.detail)
        )

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal", "internal error; the server log has the details")

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)


class BodyLimit:
    """Rejects request bodies above ``max_bytes`` with 413: at once when Content-Length says
    so, else while the body streams in (chunked uploads have no Content-Length). When the
    limit is crossed mid-body, whatever the app then tries to answer is replaced by the 413."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def _message(self) -> str:
        return (
            f"the request body is larger than {self.max_bytes} bytes (KGRAG_API__MAX_REQUEST_BYTES)"
        )

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        await error_response(413, "request_too_large", self._message())(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._reject(scope, receive, send)
            return
        seen = 0
        over = False
        replaced = False

        async def counted() -> Message:
            nonlocal seen, over
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    over = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded(message: Message) -> None:
            nonlocal replaced
            if not over:
                await send(message)
            elif message["type"] == "http.response.start" and not replaced:
                replaced = True
                await self._reject(scope, receive, send)

        await self.app(scope, counted, guarded)
        if over and not replaced:
            await self._reject(scope, receive, send)


# ==== clients ===================================================================================


class LazyVectorStore:
    """``VectorStore`` over Weaviate that connects on first use and again after a failed
    connect, so the service starts (and answers /healthz) while Weaviate is still down."""

    def __init__(self, store: WeaviateStore) -> None:
        self._store = store
        self._connected = False
        self._lock = asyncio.Lock()

    async def _ready(self) -> WeaviateStore:
        if not self._connected:
            async with self._lock:
                if not self._connected:
                    await self._store.connect()
                    self._connected = True
        return self._store

    async def upsert(
        self, kind: str, items: Sequence[tuple[str, list[float], dict[str, Any]]]
    ) -> None:
        await (await self._ready()).upsert(kind, items)

    async def delete(self, kind: str, keys: Sequence[str]) -> None:
        await (await self._ready()).delete(kind, keys)

    async def search(
        self, kind: str, vector: list[float], limit: int, filters: dict[str, Any] | None = None
    ) -> list[VectorHit]:
        return await (await self._ready()).search(kind, vector, limit, filters)

    async def close(self) -> None:
        if self._connected:
            await self._store.close()


def token_counter(encoding: str) -> TokenCounter:
    enc = get_encoding(encoding)

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    return count


def build_llm(settings: Settings, metrics: QueryMetrics | None = None) -> LLM | None:
    """The configured model, its counters on the service's registry, or ``None``."""
    return build_query_llm(settings, metrics.registry if metrics is not None else None)


@asynccontextmanager
async def open_deps(
    settings: Settings, metrics: QueryMetrics | None = None
) -> AsyncIterator[QueryDeps]:
    """The clients a query needs, closed on exit."""

    store = LazyVectorStore(WeaviateStore(settings))
    try:
        try:
            await store._ready()
        except VectorStoreError as e:
            log.warning("%s; will retry on the first query", e)
        yield QueryDeps(
            embedder=build_embedder(settings),
            store=store,
            prompts=PromptLibrary(settings.extraction.prompts_dir),
            count_tokens=token_counter(settings.chunking.encoding),
            llm=build_llm(settings, metrics),
        )
    finally:
        await store.close()


# ==== the snapshot holder =======================================================================

_UNSEEN: PointerStamp = (-1, -1, -1)


class IndexHolder:
    """The ``QueryIndex`` in service, replaced (never mutated) when a newer snapshot appears."""

    def __init__(self, store: SnapshotStore, metrics: QueryMetrics | None = None) -> None:
        self.store = store
        self._watcher = SnapshotWatcher(store)
        self._metrics = metrics
        self._index: QueryIndex | None = None
        self._stamp: PointerStamp | None = _UNSEEN
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[QueryIndex | None] | None = None
        self.swapped_at: float | None = None  # monotonic time of the last swap

    @property
    def index(self) -> QueryIndex | None:
        return self._index

    async def refresh(self) -> QueryIndex | None:
        """Load the latest snapshot and build its index, off the event loop, if it is newer."""
        async with self._lock:
            self._stamp = self.store.pointer_stamp()
            snapshot = await asyncio.to_thread(self._watcher.current)
            held = self._index
            if snapshot is None or (held is not None and snapshot.meta.version <= held.version):
                return held
            try:
                index = await asyncio.to_thread(QueryIndex.from_snapshot, snapshot)
            except Exception:
                log.exception("snapshot %d could not be indexed", snapshot.meta.version)
                return held
            self._index, self.swapped_at = index, time.monotonic()
            if self._metrics is not None:
                self._metrics.snapshot_swaps.inc()
            log.info("serving snapshot %d", index.version)
            return index

    def _refresh_in_background(self) -> asyncio.Task[QueryIndex | None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.refresh(), name="snapshot-refresh")
        return self._task

    async def get(self) -> QueryIndex | None:
        """The index to answer one request with: the current one, after starting a refresh
        when the pointer moved; only the first snapshot is waited for."""
        if self.store.pointer_stamp() != self._stamp:
            self._refresh_in_background()
        task = self._task
        if self._index is None and task is not None and not task.done():
            return await asyncio.shield(task)
        return self._index

    async def require(self) -> QueryIndex:
        index = await self.get()
        if index is None:
            raise ApiError(503, "index_not_built", NO_SNAPSHOT)
        return index

    async def run(self, interval_s: float) -> None:
        """Poll the pointer so the index is warm before the next request needs it."""
        while True:
            if self.store.pointer_stamp() != self._stamp:
                await self._refresh_in_background()
            await asyncio.sleep(interval_s)

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


# ==== answering (shared with the CLI) ===========================================================


@dataclass(frozen=True, slots=True)
class QueryOptions:
    since: str | None = None
    until: str | None = None
    history: tuple[HistoryTurn, ...] = ()
    response_type: str = "multiple paragraphs"
    level: int = 2  # global: report level; local: level of the reports in the context
    dynamic: bool = False  # global: dynamic community selection (ignores ``level``)
    batch_max_tokens: int = 8_000  # global: reports per map call
    top_k_entities: int = 10  # local
    max_context_tokens: int = 12_000  # local and basic
    k: int = 10  # basic: text units


def _window(opts: QueryOptions, index: QueryIndex) -> TimeWindow:
    return parse_time_window(opts.since, opts.until, newest=index.newest)


async def _local(
    question: str, index: QueryIndex, deps: QueryDeps, opts: QueryOptions
) -> QueryResult:
    config = LocalContextConfig(
        max_tokens=opts.max_context_tokens,
        top_k_entities=opts.top_k_entities,
        community_level=opts.level,
    )
    window = _window(opts, index)
    if deps.llm is None:
        return await offline_local(
            question, index, deps, config=config, window=window, history=opts.history
        )
    return await local_search(
        question,
        index,
        deps,
        config=config,
        window=window,
        history=opts.history,
        response_type=opts.response_type,
    )


async def _global(
    question: str, index: QueryIndex, deps: QueryDeps, opts: QueryOptions
) -> QueryResult:
    window = _window(opts, index)
    if deps.llm is None:
        return offline_global(question, index, level=opts.level, window=window)
    config = GlobalSearchConfig(level=opts.level, batch_max_tokens=opts.batch_max_tokens)
    return await global_search(
        question,
        index,
        deps,
        config=config,
        window=window,
        history=opts.history,
        dynamic=DynamicConfig() if opts.dynamic else None,
        response_type=opts.response_type,
    )


async def _basic(
    question: str, index: QueryIndex, deps: QueryDeps, opts: QueryOptions
) -> QueryResult:
    config = BasicSearchConfig(k=opts.k, max_tokens=opts.max_context_tokens)
    window = _window(opts, index)
    if deps.llm is None:
        return await offline_basic(question, index, deps, config=config, window=window)
    return await basic_search(
        question,
        index,
        deps,
        config=config,
        window=window,
        history=opts.history,
        response_type=opts.response_type,
    )


_METHODS: dict[
    str, Callable[[str, QueryIndex, QueryDeps, QueryOptions], Awaitable[QueryResult]]
] = {
    "local": _local,
    "global": _global,
    "basic": _basic,
}


async def run_query(
    method: Method, question: str, index: QueryIndex, deps: QueryDeps, opts: QueryOptions
) -> QueryResult:
    """One answer by ``method``: with the LLM when there is one, else the offline answer."""
    return await _METHODS[method](question, index, deps, opts)


async def run_questions(
    question: str, index: QueryIndex, deps: QueryDeps, *, count: int, opts: QueryOptions
) -> QuestionsResult:
    window = _window(opts, index)
    if deps.llm is None:
        return await offline_questions(question, index, deps, count=count, window=window)
    return await generate_questions(
        question, index, deps, count=count, history=opts.history, window=window
    )


# ==== views ======================================================================================


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
        return {"id": i, "source": r.source, "target": r.target, "description": r.description}
    if dataset == "Claims" and (c := index.claim_by_hrid.get(i)):
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
    if ident.strip().isdigit():
        return index.entity_by_hrid.get(int(ident))
    return index.entities.get(ident) or index.entities.get(entity_key(ident))


def entity_view(index: QueryIndex, e: SnapshotEntity, limit: int = 20) -> dict[str, Any]:
    rels = sorted(index.relationships_by_entity.get(e.id, ()), key=lambda r: -r.combined_degree)
    units = [index.text_units[u] for u in index.text_units_by_entity.get(e.id, ())[:limit]]
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
        "relationships": [
            {
                "id": r.human_readable_id,
                "source": r.source,
                "target": r.target,
                "description": r.description,
                "weight": r.weight,
            }
            for r in rels[:limit]
        ],
        "claims": [
            {
                "id": c.human_readable_id,
                "type": c.type,
                "status": c.status,
                "description": c.description,
            }
            for c in index.claims_by_entity.get(e.id, ())[:limit]
        ],
        "sources": [_reference(index, "Sources", u.human_readable_id) for u in units],
        "timeline": [(d.isoformat(), n) for d, n in index.entity_daily.get(e.id, ())],
        "snapshot_version": index.version,
    }


def find_community(index: QueryIndex, ident: str) -> SnapshotCommunity | None:
    """By community number (digits) or stable id."""
    if ident.strip().lstrip("-").isdigit():
        return index.communities.get(int(ident))
    return index.community_by_id.get(ident)


def community_summary(index: QueryIndex, c: SnapshotCommunity, score: float) -> dict[str, Any]:
    report = index.reports.get(c.community)
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
        "summary": report.summary if report else "",
    }


def community_view(index: QueryIndex, c: SnapshotCommunity) -> dict[str, Any]:
    report = index.reports.get(c.community)
    members = [index.entities[k] for k in c.entity_ids if k in index.entities]
    return {
        **community_summary(index, c, c.emerging_score),
        "report": None
        if report is None
        else {
            "title": report.title,
            "summary": report.summary,
            "full_content": report.full_content,
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


CommunitySort = Literal["emerging", "size", "rank"]


def list_communities(
    index: QueryIndex,
    *,
    level: int | None,
    window: TimeWindow,
    sort: CommunitySort,
    limit: int,
) -> list[dict[str, Any]]:
    """With a window: the communities mentioned in it, scored on it (``query.trends``);
    without: every community with the snapshot's own emerging score."""
    if window.bounded:
        since, until = effective_span(index, window, default_days=7)
        ranked = trending_communities(
            index, since, until, limit=len(index.communities), level=level
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


# ==== request models =============================================================================


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"] = "user"
    content: str


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, description="The question")
    since: str | None = Field(None, description="ISO date, or 'last N days' (document time)")
    until: str | None = Field(None, description="ISO date (document time)")
    history: list[Turn] = Field(default_factory=list, description="Earlier turns, oldest first")
    stream: bool = Field(False, description="Answer as text/event-stream chunks")
    response_type: str = Field("multiple paragraphs", max_length=200)

    def options(self, **extra: Any) -> QueryOptions:
        history = tuple({"role": t.role, "content": t.content} for t in self.history)
        return QueryOptions(
            since=self.since,
            until=self.until,
            history=history,
            response_type=self.response_type,
            **extra,
        )


class LocalQueryRequest(QueryRequest):
    level: int = Field(2, ge=0, le=20, description="Level of the community reports shown")
    top_k_entities: int = Field(10, ge=1, le=100)
    max_context_tokens: int = Field(12_000, ge=200, le=500_000)


class GlobalQueryRequest(QueryRequest):
    level: int = Field(2, ge=0, le=20, description="Community level of the reports mapped")
    dynamic: bool = Field(False, description="Dynamic community selection (ignores level)")
    batch_max_tokens: int = Field(8_000, ge=50, le=500_000, description="Tokens per map call")


class BasicQueryRequest(QueryRequest):
    k: int = Field(10, ge=1, le=100, description="Text units in the context")
    max_context_tokens: int = Field(12_000, ge=200, le=500_000)


# ==== the app ===================================================================================


@dataclass
class ServiceState:
    settings: Settings
    holder: IndexHolder
    metrics: QueryMetrics
    lag: LagProbe
    deps: QueryDeps | None = None
    producer: AIOKafkaProducer | None = None
    topics_ready: bool = False
    kafka_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def require_deps(self) -> QueryDeps:
        if self.deps is None:
            raise ApiError(503, "starting", "the service is still starting; retry in a moment")
        return self.deps

    def check_question(self, question: str) -> str:
        limit = self.settings.api.max_question_chars
        if len(question) > limit:
            raise ApiError(
                413,
                "question_too_long",
                f"the question has {len(question)} characters; the limit is {limit} "
                "(KGRAG_API__MAX_QUESTION_CHARS)",
            )
        if not question.strip():
            raise ApiError(422, "invalid_query", "the question is empty")
        return question

    async def ensure_topics(self) -> None:
        if not self.topics_ready:
            from streams.admin import ensure_topics

            await ensure_topics(self.settings)
            self.topics_ready = True

    async def get_producer(self) -> AIOKafkaProducer:
        async with self.kafka_lock:
            if self.producer is None:
                await self.ensure_topics()
                producer = AIOKafkaProducer(
                    bootstrap_servers=self.settings.kafka.bootstrap_servers,
                    acks="all",
                    enable_idempotence=True,
                    max_request_size=self.settings.kafka.max_message_bytes,
                )
                await producer.start()
                self.producer = producer
            return self.producer

    async def close(self) -> None:
        await self.holder.stop()
        if self.producer is not None:
            await self.producer.stop()


def create_app(
    settings: Settings,
    *,
    deps: QueryDeps | None = None,
    snapshot_store: SnapshotStore | None = None,
    refresh_interval_s: float = 1.0,
    lag_ttl_s: float = 15.0,
) -> FastAPI:
    """The query service. ``deps`` replaces the clients the lifespan would build (tests);
    ``snapshot_store`` the store under ``settings.snapshots_dir``; consumer lag is read from
    Kafka at most every ``lag_ttl_s`` seconds."""
    metrics = QueryMetrics()
    store = snapshot_store or SnapshotStore(
        settings.snapshots_dir, keep=settings.community.keep_snapshots
    )
    state = ServiceState(
        settings, IndexHolder(store, metrics), metrics, LagProbe(settings, metrics, lag_ttl_s)
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            state.deps = deps or await stack.enter_async_context(open_deps(settings, metrics))
            refresher = asyncio.create_task(state.holder.run(refresh_interval_s))
            try:
                yield
            finally:
                refresher.cancel()
                await asyncio.gather(refresher, return_exceptions=True)
                await state.close()

    app = FastAPI(
        title="kafka-graphrag query service",
        version="0.1.0",
        description="Local, global and basic GraphRAG search over the live graph, trends on "
        "document time, the graph's entities and communities, and their lineage events.",
        lifespan=lifespan,
    )
    app.state.service = state
    _install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.api.max_request_bytes)
    guard = [Depends(_api_key_guard(settings))]
    app.include_router(_query_routes(state), dependencies=guard)
    app.include_router(_graph_routes(state), dependencies=guard)
    app.include_router(_ops_routes(state))
    return app


def _api_key_guard(settings: Settings) -> Callable[[str | None], Awaitable[None]]:
    header = APIKeyHeader(name="X-API-Key", auto_error=False)

    async def guard(key: str | None = Security(header)) -> None:
        wanted = settings.api.api_key
        if wanted and not (key and secrets.compare_digest(key.encode(), wanted.encode())):
            raise ApiError(
                401,
                "unauthorized",
                "a valid API key is required in the X-API-Key header"
                if key is None
                else "the X-API-Key header does not hold a valid API key",
            )

    return guard


async def _timed(state: ServiceState, method: str, work: Callable[[], Awaitable[Any]]) -> Any:
    started = time.perf_counter()
    outcome = "ok"
    try:
        return await work()
    except Exception as e:
        outcome = "error"
        mapped = api_error(e)
        if mapped is None or mapped is e:
            raise
        raise mapped from e
    finally:
        state.metrics.observe(method, time.perf_counter() - started, outcome)


def _stream(
    state: ServiceState, method: str, index: QueryIndex, work: Callable[[], Awaitable[QueryResult]]
) -> StreamingResponse:
    async def events() -> AsyncIterator[bytes]:
        yield sse_event({"method": method, "snapshot_version": index.version}, event="status")
        try:
            result = await _timed(state, method, work)
        except ApiError as e:
            yield sse_event(error_body(e.code, e.message), event="error")
            return
        except Exception:
            log.exception("streamed %s query failed", method)
            yield sse_event(error_body("internal", "internal error"), event="error")
            return
        state.metrics.record_result(result)
        for piece in answer_pieces(result.answer):
            yield sse_event({"text": piece}, event="chunk")
        done = result_view(result, index)
        done.pop("answer")
        yield sse_event(done, event="done")

    return StreamingResponse(events(), media_type=MEDIA_TYPE, headers=HEADERS)


def _query_routes(state: ServiceState) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["query"])

    async def answer(method: Method, req: QueryRequest, opts: QueryOptions) -> Any:
        question = state.check_question(req.question)
        index = await state.holder.require()
        deps = state.require_deps()

        async def work() -> QueryResult:
            return await run_query(method, question, index, deps, opts)

        if req.stream:
            return _stream(state, method, index, work)
        result: QueryResult = await _timed(state, method, work)
        state.metrics.record_result(result)
        return result_view(result, index)

    @router.post("/query/local", summary="Local search: the question's entities in context")
    async def query_local(req: LocalQueryRequest) -> Any:
        opts = req.options(
            level=req.level,
            top_k_entities=req.top_k_entities,
            max_context_tokens=req.max_context_tokens,
        )
        return await answer("local", req, opts)

    @router.post("/query/global", summary="Global search: map-reduce over community reports")
    async def query_global(req: GlobalQueryRequest) -> Any:
        opts = req.options(
            level=req.level, dynamic=req.dynamic, batch_max_tokens=req.batch_max_tokens
        )
        return await answer("global", req, opts)

    @router.post("/query/basic", summary="Basic search: the nearest text units")
    async def query_basic(req: BasicQueryRequest) -> Any:
        return await answer(
            "basic", req, req.options(k=req.k, max_context_tokens=req.max_context_tokens)
        )

    @router.get("/questions", summary="Suggested next questions from a local context")
    async def questions(
        q: str = Query(..., min_length=1, description="The latest question"),
        count: int = Query(5, ge=1, le=20),
        since: str | None = None,
        until: str | None = None,
    ) -> Any:
        question = state.check_question(q)
        index = await state.holder.require()
        deps = state.require_deps()
        opts = QueryOptions(since=since, until=until)

        async def work() -> QuestionsResult:
            return await run_questions(question, index, deps, count=count, opts=opts)

        result: QuestionsResult = await _timed(state, "questions", work)
        return result.as_dict()

    @router.get("/trends", summary="Emerging communities, new entities, mention timelines")
    async def get_trends(
        since: str | None = Query(None, description="ISO date or 'last N days'"),
        until: str | None = None,
        limit: int = Query(10, ge=1, le=200),
        level: int | None = Query(None, ge=0, le=20),
    ) -> Any:
        index = await state.holder.require()

        async def work() -> dict[str, Any]:
            window = parse_time_window(since, until, newest=index.newest)
            return trends(index, window, limit=limit, level=level).as_dict()

        return await _timed(state, "trends", work)

    return router


def _graph_routes(state: ServiceState) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["graph"])

    @router.get("/entities/{ident}", summary="One entity by key or human-readable id")
    async def get_entity(ident: str) -> Any:
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
    ) -> Any:
        index = await state.holder.require()

        async def work() -> dict[str, Any]:
            window = parse_time_window(since, until, newest=index.newest)
            rows = list_communities(index, level=level, window=window, sort=sort, limit=limit)
            return {
                "communities": rows,
                "window": window.as_dict(),
                "snapshot_version": index.version,
            }

        return await _timed(state, "communities", work)

    @router.get("/communities/{ident}", summary="One community and its report")
    async def get_community(ident: str) -> Any:
        index = await state.holder.require()
        c = find_community(index, ident)
        if c is None:
            raise ApiError(
                404, "unknown_community", f"no community {ident!r} in snapshot {index.version}"
            )
        return community_view(index, c)

    @router.get(
        "/events",
        summary="Server-sent community lineage events",
        response_class=StreamingResponse,
    )
    async def events(
        start: StartAt = Query("latest", alias="from", description="latest or earliest"),
        kind: list[str] | None = Query(None, description="Only these event kinds"),
    ) -> StreamingResponse:
        try:
            await state.ensure_topics()
        except Exception as e:
            raise ApiError(503, "kafka_unavailable", f"Kafka is not reachable: {e}") from e
        stream = community_events(
            state.settings, start=start, kinds=frozenset(kind) if kind else None
        )
        return StreamingResponse(stream, media_type=MEDIA_TYPE, headers=HEADERS)

    @router.post("/documents", status_code=202, summary="Publish one document for indexing")
    async def post_document(payload: dict[str, Any] = Body(...)) -> Any:
        try:
            doc = document_from_obj(payload, max_chars=state.settings.chunking.max_document_chars)
        except InvalidDocumentError as e:
            raise ApiError(422, "invalid_document", str(e)) from e
        topic = state.settings.topic("documents")
        try:
            producer = await state.get_producer()
            await producer.send_and_wait(
                topic, orjson.dumps(document_to_obj(doc)), key=doc.id.encode()
            )
        except ConfigError as e:
            raise ApiError(500, "misconfigured", str(e)) from e
        except Exception as e:
            raise ApiError(503, "kafka_unavailable", f"could not publish to {topic}: {e}") from e
        state.metrics.documents_published.inc()
        return {"id": doc.id, "topic": topic, "status": "accepted"}

    return router


def _ops_routes(state: ServiceState) -> APIRouter:
    router = APIRouter(tags=["operations"])
    pending_probe = PendingProbe(state.settings)

    @router.get(
        "/healthz",
        summary="Snapshot version and age, Kafka and Weaviate reachability, community job",
        description="`status` is `ok`, `degraded` (with one sentence per problem in "
        "`reasons`: Kafka or Weaviate unreachable, graph changes pending while the newest "
        "version is older than `community.stale_after_s`, items the LLM refused) or "
        "`no_snapshot`. `community_job` is the job's status file (null before it ever ran); "
        "`pending_changes` the graph changes not yet in the served snapshot (null when "
        "Kafka could not be read).",
    )
    async def healthz() -> Any:
        kafka, weaviate, ends = await asyncio.gather(
            kafka_reachable(state.settings),
            weaviate_reachable(state.settings),
            pending_probe.refresh(),
        )
        index = await state.holder.get()
        job = read_status(state.settings)
        pending = pending_in(index, ends)
        unreachable = [
            f"{name} is not reachable: {detail}"
            for name, (ok, detail) in (("Kafka", kafka), ("Weaviate", weaviate))
            if not ok
        ]
        health = assess(
            snapshot_version=None if index is None else index.version,
            snapshot_age_s=None if index is None else snapshot_age_s(index),
            pending=pending,
            stale_after_s=state.settings.community.stale_after_s,
            job=job,
            unreachable=unreachable,
        )
        return {
            "status": health.status,
            "reasons": list(health.reasons),
            "snapshot": None if index is None else snapshot_info(index),
            "kafka": {"reachable": kafka[0], "detail": kafka[1]},
            "weaviate": {"reachable": weaviate[0], "detail": weaviate[1]},
            "mode": "offline" if state.deps is None or state.deps.llm is None else "llm",
            "pending_changes": pending,
            "community_job": None if job is None else job.to_json(),
        }

    @router.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def metrics() -> Response:
        index = await state.holder.get()
        _set_snapshot_gauges(state.metrics, index)
        _, ends = await asyncio.gather(state.lag.refresh(), pending_probe.refresh())
        state.metrics.set_community(read_status(state.settings), pending_in(index, ends))
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")

    return router


def pending_in(index: QueryIndex | None, ends: dict[int, int] | None) -> int | None:
    """Graph changes beyond the served snapshot (None when the end offsets are unknown)."""
    if ends is None:
        return None
    return pending_changes(ends, None if index is None else index.snapshot.meta.consumed_offsets)


def snapshot_age_s(index: QueryIndex) -> float | None:
    created = index.snapshot.meta.created_at
    if not created:
        return None
    try:
        at = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return None
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return max(0.0, (datetime.now(UTC) - at).total_seconds())


def snapshot_info(index: QueryIndex) -> dict[str, Any]:
    meta = index.snapshot.meta
    return {
        "version": meta.version,
        "created_at": meta.created_at,
        "age_s": snapshot_age_s(index),
        "newest_document_time": meta.newest_document_time,
        "mode": meta.mode,
        "counts": {
            "documents": len(index.snapshot.documents),
            "text_units": len(index.text_units),
            "entities": len(index.entities),
            "relationships": len(index.relationships),
            "communities": len(index.communities),
            "reports": len(index.reports),
        },
    }


def _set_snapshot_gauges(metrics: QueryMetrics, index: QueryIndex | None) -> None:
    if index is None:
        metrics.snapshot_version.set(0)
        return
    metrics.snapshot_version.set(index.version)
    metrics.snapshot_age.set(snapshot_age_s(index) or 0.0)
    metrics.documents_indexed.set(len(index.snapshot.documents))
    metrics.text_units_indexed.set(len(index.text_units))
    metrics.entities_indexed.set(len(index.entities))


async def kafka_reachable(settings: Settings, timeout_s: float = 2.0) -> tuple[bool, str]:
    """Whether a TCP connection to a bootstrap server opens (cheap; no client state)."""
    errors = []
    for server in settings.kafka.bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout_s)
        except (OSError, TimeoutError) as e:
            errors.append(f"{server}: {e or type(e).__name__}")
            continue
        writer.close()
        await writer.wait_closed()
        return True, server
    return False, "; ".join(errors)


async def weaviate_reachable(settings: Settings, timeout_s: float = 2.0) -> tuple[bool, str]:
    url = f"{settings.weaviate.url}/v1/.well-known/ready"
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.get(url)
    except httpx.HTTPError as e:
        return False, f"{url}: {e or type(e).__name__}"
    return response.status_code == 200, f"{url}: HTTP {response.status_code}"


__all__ = [
    "ApiError",
    "IndexHolder",
    "QueryOptions",
    "community_view",
    "create_app",
    "entity_view",
    "find_community",
    "find_entity",
    "list_communities",
    "open_deps",
    "references",
    "result_view",
    "run_query",
    "run_questions",
]
