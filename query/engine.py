"""Answering a question by method: local, global, basic or DRIFT search, or suggested
questions.

``run_query`` picks the search for a method and, in offline mode (no LLM configured), its
offline counterpart, so every caller answers the same way: the HTTP routes, ``kgrag query``
and the demo. It knows nothing of HTTP; ``QueryOptions`` carries every knob a method takes,
and each method reads only its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from core.settings.llm import cost_usd
from query.basic_search import BasicSearchConfig, basic_search
from query.context import LocalContextConfig
from query.deps import OnText, QueryDeps
from query.drift_search import DriftConfig, drift_search, offline_drift
from query.dynamic import DynamicConfig
from query.global_search import GlobalSearchConfig, global_search
from query.history import HistoryTurn
from query.index import QueryIndex
from query.local_search import local_search
from query.offline_answers import (
    offline_basic,
    offline_global,
    offline_local,
    offline_questions,
)
from query.questions import generate_questions
from query.results import QueryResult, QuestionsResult, graph_basis
from query.time_window import TimeWindow, parse_time_window

Method = Literal["local", "global", "basic", "drift"]


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
    drift: DriftConfig = field(default_factory=DriftConfig)  # drift: breadth, depth, budgets


def _window(opts: QueryOptions, index: QueryIndex) -> TimeWindow:
    return parse_time_window(opts.since, opts.until, newest=index.newest)


async def _local(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    opts: QueryOptions,
    on_text: OnText | None = None,
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
        on_text=on_text,
    )


async def _global(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    opts: QueryOptions,
    on_text: OnText | None = None,
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
        on_text=on_text,
    )


async def _basic(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    opts: QueryOptions,
    on_text: OnText | None = None,
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
        on_text=on_text,
    )


async def _drift(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    opts: QueryOptions,
    on_text: OnText | None = None,
) -> QueryResult:
    window = _window(opts, index)
    if deps.llm is None:
        return await offline_drift(question, index, deps, config=opts.drift, window=window)
    return await drift_search(
        question,
        index,
        deps,
        config=opts.drift,
        window=window,
        response_type=opts.response_type,
        on_text=on_text,
    )


_METHODS: dict[str, Callable[..., Awaitable[QueryResult]]] = {
    "local": _local,
    "global": _global,
    "basic": _basic,
    "drift": _drift,
}


async def run_query(
    method: Method,
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    opts: QueryOptions,
    on_text: OnText | None = None,
) -> QueryResult:
    """One answer by ``method``: with the LLM when there is one, else the offline answer,
    saying which graph version and which run's reports it rests on. ``on_text`` takes the
    answer's text as the model writes it (not called offline, nor when no answer is
    written); the result's ``answer`` is the final text, its citations checked."""
    result = await _METHODS[method](question, index, deps, opts, on_text)
    cost = cost_usd(deps.price, result.prompt_tokens, result.completion_tokens)
    return replace(result, basis=graph_basis(index.meta), cost_usd=cost)


async def run_questions(
    question: str, index: QueryIndex, deps: QueryDeps, *, count: int, opts: QueryOptions
) -> QuestionsResult:
    """Suggested next questions: from the LLM when there is one, else the offline ones."""
    window = _window(opts, index)
    if deps.llm is None:
        return await offline_questions(question, index, deps, count=count, window=window)
    return await generate_questions(
        question, index, deps, count=count, history=opts.history, window=window
    )
