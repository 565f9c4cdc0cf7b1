"""The question-answering endpoints: ``/v1/query/{local,global,basic,drift}``, ``/v1/questions``
and ``/v1/trends``, with their request bodies.

Each route reads the served index once, checks the question against the service's limits and
hands the work to ``query.engine``, so HTTP adds only validation, timing, error mapping and
the views. ``stream: true`` answers as server-sent events (status, chunks, done) instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from query.api.errors import ApiError, documented, error_body
from query.api.state import Service, ServiceState
from query.api.views import result_view
from query.deps import OnText
from query.drift_search import DriftConfig
from query.engine import Method, QueryOptions, run_query, run_questions
from query.index import QueryIndex
from query.results import QueryResult, QuestionsResult
from query.sse import EVENT_SCHEMA, HEADERS, MEDIA_TYPE, answer_pieces, sse_event
from query.time_window import parse_time_window
from query.trends import compare_trends, trends

log = logging.getLogger(__name__)


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"] = "user"
    content: str


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, description="The question")
    since: str | None = Field(None, description="ISO date, or 'last N days' (document time)")
    until: str | None = Field(None, description="ISO date (document time)")
    as_of: int | str | None = Field(
        None,
        description="Answer from an older graph version: its number, or an ISO time (the "
        "version committed at or before it); default the latest",
    )
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


class DriftQueryRequest(QueryRequest):
    """Breadth, depth and budgets; each left out takes the service's ``drift`` setting."""

    primer_k: int | None = Field(None, ge=1, le=50, description="Reports the primer reads")
    followups: int | None = Field(None, ge=1, le=20, description="Follow-ups per step")
    depth: int | None = Field(None, ge=0, le=5, description="Steps of follow-ups")
    local_max_tokens: int | None = Field(
        None, ge=200, le=500_000, description="Local context tokens per follow-up"
    )


def _stream(
    state: ServiceState,
    method: str,
    index: QueryIndex,
    work: Callable[[OnText | None], Awaitable[QueryResult]],
) -> StreamingResponse:
    """The answer as server-sent events: ``chunk`` events with the model's text as it writes
    it, then ``done`` with the rest. The citations are checked on the completed text, so
    ``done`` carries that text as ``answer`` when it differs from the chunks (a made-up
    citation removed). An answer no model wrote piece by piece (offline, or the data did not
    cover the question) comes in chunks once it is complete."""

    async def events() -> AsyncIterator[bytes]:
        yield sse_event({"method": method, "snapshot_version": index.version}, event="status")
        pieces: asyncio.Queue[str | None] = asyncio.Queue()

        async def on_text(text: str) -> None:
            await pieces.put(text)

        async def run() -> QueryResult:
            try:
                return await state.timed(method, lambda: work(on_text))
            finally:
                await pieces.put(None)

        task = asyncio.ensure_future(run())
        streamed: list[str] = []
        try:
            while (piece := await pieces.get()) is not None:
                streamed.append(piece)
                yield sse_event({"text": piece}, event="chunk")
            result = await task
        except ApiError as e:
            yield sse_event(error_body(e.code, e.message), event="error")
            return
        except Exception:
            log.exception("streamed %s query failed", method)
            yield sse_event(error_body("internal", "internal error"), event="error")
            return
        finally:
            task.cancel()  # a client that went away stops the work
        state.metrics.record_result(result)
        if not streamed:
            for piece in answer_pieces(result.answer):
                yield sse_event({"text": piece}, event="chunk")
        done = result_view(result, index)
        if not streamed or "".join(streamed) == result.answer:
            done.pop("answer")
        yield sse_event(done, event="done")

    return StreamingResponse(events(), media_type=MEDIA_TYPE, headers=HEADERS)


# with ``"stream": true`` an answer comes as server-sent events instead of one JSON body
STREAMED: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The answer as JSON; with `stream: true`, server-sent events: `chunk` "
        'events (`{"text": …}`) whose texts concatenate to the answer, then one `done` event '
        "with everything else (citations, context ids, usage, basis)",
        "content": {MEDIA_TYPE: {"schema": EVENT_SCHEMA}},
    }
}


router = APIRouter(prefix="/v1", tags=["query"], responses=documented(401, 404, 413, 422, 503))


async def _answer(
    state: ServiceState, method: Method, req: QueryRequest, opts: QueryOptions
) -> Any:
    question = state.check_question(req.question)
    index = await state.holder.at(req.as_of)
    deps = state.require_deps()

    async def work(on_text: OnText | None = None) -> QueryResult:
        return await run_query(method, question, index, deps, opts, on_text)

    if req.stream:
        return _stream(state, method, index, work)
    result = await state.timed(method, work)
    state.metrics.record_result(result)
    return result_view(result, index)


@router.post(
    "/query/local",
    summary="Local search: the question's entities in context",
    responses=STREAMED,
)
async def query_local(state: Service, req: LocalQueryRequest) -> Any:
    opts = req.options(
        level=req.level,
        top_k_entities=req.top_k_entities,
        max_context_tokens=req.max_context_tokens,
    )
    return await _answer(state, "local", req, opts)


@router.post(
    "/query/global",
    summary="Global search: map-reduce over community reports",
    responses=STREAMED,
)
async def query_global(state: Service, req: GlobalQueryRequest) -> Any:
    opts = req.options(level=req.level, dynamic=req.dynamic, batch_max_tokens=req.batch_max_tokens)
    return await _answer(state, "global", req, opts)


@router.post("/query/basic", summary="Basic search: the nearest text units", responses=STREAMED)
async def query_basic(state: Service, req: BasicQueryRequest) -> Any:
    return await _answer(
        state, "basic", req, req.options(k=req.k, max_context_tokens=req.max_context_tokens)
    )


@router.post(
    "/query/drift",
    summary="DRIFT search: community reports first, then follow-ups by local search",
    responses=STREAMED,
)
async def query_drift(state: Service, req: DriftQueryRequest) -> Any:
    config = DriftConfig.of(
        state.settings.drift,
        primer_k=req.primer_k,
        followups=req.followups,
        depth=req.depth,
        local_max_tokens=req.local_max_tokens,
    )
    return await _answer(state, "drift", req, req.options(drift=config))


@router.get("/questions", summary="Suggested next questions from a local context")
async def questions(
    state: Service,
    q: str = Query(..., min_length=1, description="The latest question"),
    count: int = Query(5, ge=1, le=20),
    since: str | None = None,
    until: str | None = None,
    as_of: str | None = Query(None, description="A graph version number or an ISO time"),
) -> Any:
    question = state.check_question(q)
    index = await state.holder.at(as_of)
    deps = state.require_deps()
    opts = QueryOptions(since=since, until=until)

    async def work() -> QuestionsResult:
        return await run_questions(question, index, deps, count=count, opts=opts)

    result = await state.timed("questions", work)
    return result.as_dict()


@router.get("/trends", summary="Emerging communities, new entities, mention timelines")
async def get_trends(
    state: Service,
    since: str | None = Query(None, description="ISO date or 'last N days'"),
    until: str | None = None,
    limit: int = Query(10, ge=1, le=200),
    level: int | None = Query(None, ge=0, le=20),
    as_of: str | None = Query(None, description="A graph version number or an ISO time"),
    compare: str | None = Query(
        None,
        description="Answer the same question from this graph version too (a version "
        "number or an ISO time) and show each community then beside now",
    ),
) -> Any:
    index = await state.holder.at(as_of)
    then = None if compare is None else await state.holder.at(compare)

    async def work() -> dict[str, Any]:
        window = parse_time_window(since, until, newest=index.newest)
        result = trends(index, window, limit=limit, level=level)
        if then is not None:
            then_window = parse_time_window(since, until, newest=then.newest)
            result = compare_trends(result, then, then_window, limit=limit, level=level)
        return result.as_dict()

    return await state.timed("trends", work)
