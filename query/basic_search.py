"""Basic search: GraphRAG's baseline RAG, text units nearest to the question and one call.

Retrieval is ``query.basic.search_text_units``; hits for text units the snapshot does not
hold yet (Weaviate may run ahead of it) are skipped, as are units outside the time window.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from graph.versions.model import SnapshotTextUnit
from prompts import render_basic_search_system
from query.basic import search_text_units
from query.citations import DATASETS, check_citations
from query.deps import OnText, QueryDeps, ask
from query.errors import EmptyQuestionError
from query.history import HistoryTurn, history_table
from query.index import QueryIndex
from query.results import LLMUsage, QueryResult
from query.tables import Table, fill
from query.time_window import TimeWindow

SOURCE_HEADER = ("id", "date", "title", "text")


@dataclass(frozen=True, slots=True)
class BasicSearchConfig:
    k: int = 10  # text units wanted
    oversample: int = 3  # hits fetched per wanted unit when some may be skipped
    max_tokens: int = 12_000
    history_max_tokens: int = 1_000
    history_max_turns: int = 5


@dataclass(frozen=True, slots=True)
class BasicContext:
    table: Table
    skipped_hits: int

    @property
    def ids(self) -> dict[str, list[int]]:
        return {name: [] for name in DATASETS} | {"Sources": list(self.table.ids)}


async def basic_context(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    config: BasicSearchConfig,
    window: TimeWindow,
) -> BasicContext:
    """The nearest text units the snapshot holds, in the window, as a Sources table."""
    if not question.strip():
        raise EmptyQuestionError("the question is empty")
    hits = await search_text_units(
        question, embedder=deps.embedder, store=deps.store, limit=config.k * config.oversample
    )
    units: list[SnapshotTextUnit] = []
    skipped = 0
    for hit in hits:
        u = index.text_units.get(hit.chunk_id)
        if u is None:
            skipped += 1
        elif window.contains(index.unit_dates.get(u.id)) and all(u.id != x.id for x in units):
            units.append(u)
    rows = (
        (u.human_readable_id, (u.published_at[:10], u.title, u.text))
        for u in map(index.full, units[: config.k])
    )
    table = fill(Table("Sources", SOURCE_HEADER, deps.count_tokens), rows, config.max_tokens)
    return BasicContext(table, skipped)


async def basic_search(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    config: BasicSearchConfig | None = None,
    window: TimeWindow | None = None,
    history: Sequence[HistoryTurn] = (),
    response_type: str = "multiple paragraphs",
    max_answer_tokens: int | None = None,
    on_text: OnText | None = None,
) -> QueryResult:
    started = time.perf_counter()
    llm = deps.require_llm()
    config = config or BasicSearchConfig()
    window = window or TimeWindow()
    ctx = await basic_context(question, index, deps, config=config, window=window)
    conversation = history_table(
        history,
        budget=config.history_max_tokens,
        count=deps.count_tokens,
        max_turns=config.history_max_turns,
    )
    system = render_basic_search_system(
        deps.prompts,
        context_data=ctx.table.render() or "(no passage matched the question)",
        response_type=response_type,
        conversation_history=conversation,
    )
    usage = LLMUsage()
    text = await ask(
        llm,
        usage,
        purpose="basic_search",
        system=system,
        user=question,
        max_tokens=max_answer_tokens,
        on_text=on_text,
    )
    checked = check_citations(text, {"Sources": set(ctx.table.ids)})
    return QueryResult(
        answer=checked.text,
        mode="llm",
        citations=checked.cited,
        removed_citations=checked.removed,
        context_ids=ctx.ids,
        llm_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        snapshot_version=index.version,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        extra={"skipped_vector_hits": ctx.skipped_hits, "window": window.as_dict()},
        method="basic",
    )
