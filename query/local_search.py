"""Local search: one LLM call over the context of the question's nearest entities.

The answer's citations are checked against the context the model was given (see
``query.citations``); ids that were not there are removed and counted in the result.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from prompts import render_local_search_system
from query.citations import check_citations
from query.context import LocalContext, LocalContextConfig
from query.deps import OnText, QueryDeps, ask
from query.history import HistoryTurn
from query.index import QueryIndex
from query.results import LLMUsage, QueryResult
from query.time_window import TimeWindow


def context_ids(ctx: LocalContext) -> dict[str, list[int]]:
    return {name: list(ids) for name, ids in ctx.ids.items()}


async def local_search(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    config: LocalContextConfig | None = None,
    window: TimeWindow | None = None,
    history: Sequence[HistoryTurn] = (),
    response_type: str = "multiple paragraphs",
    max_answer_tokens: int | None = None,
    on_text: OnText | None = None,
) -> QueryResult:
    started = time.perf_counter()
    llm = deps.require_llm()
    config = config or LocalContextConfig()
    ctx = await deps.local_context(
        question,
        index,
        config=config,
        window=window,
        history=history,
    )
    system = render_local_search_system(
        deps.prompts,
        context_data=ctx.text or "(no data matched the question)",
        response_type=response_type,
        conversation_history=ctx.history,
    )
    usage = LLMUsage()
    text = await ask(
        llm,
        usage,
        purpose="local_search",
        system=system,
        user=question,
        max_tokens=max_answer_tokens,
        on_text=on_text,
    )
    checked = check_citations(text, ctx.id_sets())
    return QueryResult(
        answer=checked.text,
        mode="llm",
        citations=checked.cited,
        removed_citations=checked.removed,
        context_ids=context_ids(ctx),
        llm_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        snapshot_version=index.version,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        extra={
            "context_tokens": ctx.tokens,
            "skipped_vector_hits": ctx.skipped_hits,
            "entities": list(ctx.entity_keys),
            "window": (window or TimeWindow()).as_dict(),
        },
        method="local",
    )
