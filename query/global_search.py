"""Global search: map community reports to scored points, reduce the best into one answer.

Map: each batch of reports (``query.report_batches``) goes to one call that returns
``{"points": [{"description", "score"}]}``. An answer that is not that JSON is asked for once
more, then counted as no points. Points scoring 0 ("the reports do not help") are dropped.
Reduce: the remaining points, best first, fill the reduce budget as "analyst reports"; one
call writes the answer, keeping the report citations. When no point scores above 0 the
answer says the data does not cover the question and no reduce call is made, so a search
costs exactly (batches + 1) calls, or (batches) when nothing is relevant.

Citations are checked twice: each point against the reports of its own batch, the answer
against the reports its points cite (the reduce call sees nothing else).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from core.errors import LLMError
from graph.versions.model import SnapshotReport
from prompts import render_global_map_system, render_global_reduce_system
from query.citations import CitationCheck, check_citations, cited_ids
from query.deps import OnText, QueryDeps, ask, forget
from query.dynamic import DynamicConfig, select_communities
from query.errors import AllMapCallsFailedError
from query.history import HistoryTurn, history_table
from query.index import QueryIndex
from query.json_answers import MalformedAnswerError, parse_map_points
from query.report_batches import ReportBatch, level_reports, make_batches
from query.results import LLMUsage, QueryResult
from query.tables import TokenCounter, within_budget
from query.time_window import TimeWindow

log = logging.getLogger(__name__)

NO_DATA_ANSWER = (
    "The data does not cover this question: none of the community reports holds anything "
    "relevant to it."
)


@dataclass(frozen=True, slots=True)
class GlobalSearchConfig:
    level: int = 2
    batch_max_tokens: int = 8_000  # reports (and history) per map call
    reduce_max_tokens: int = 8_000  # points given to the reduce call
    map_max_answer_tokens: int | None = 1_000
    reduce_max_answer_tokens: int | None = 2_000
    seed: int = 0xDEADBEEF
    use_report_summary: bool = False  # summaries instead of full reports in the map context
    history_max_tokens: int = 1_000
    history_max_turns: int = 5
    concurrency: int = 8


@dataclass(frozen=True, slots=True)
class MapPoint:
    description: str  # citations already checked against the batch
    score: int
    batch: int


@dataclass(frozen=True, slots=True)
class _MapOutcome:
    points: list[MapPoint]
    removed: int
    failed: bool


async def _map_batch(
    question: str,
    batch: ReportBatch,
    n: int,
    deps: QueryDeps,
    usage: LLMUsage,
    config: GlobalSearchConfig,
    conversation: str,
) -> _MapOutcome:
    llm = deps.require_llm()
    data = "\n\n".join(t for t in (conversation, batch.text) if t)
    system = render_global_map_system(deps.prompts, context_data=data)
    for attempt in (1, 2):
        text = await ask(
            llm,
            usage,
            purpose="global_map",
            system=system,
            user=question,
            json_mode=True,
            max_tokens=config.map_max_answer_tokens,
        )
        try:
            raw = parse_map_points(text)
            break
        except MalformedAnswerError as e:
            log.warning("map batch %d, attempt %d: %s", n, attempt, e)
            await forget(
                llm,
                user=question,
                system=system,
                json_mode=True,
                max_tokens=config.map_max_answer_tokens,
            )
    else:
        return _MapOutcome([], 0, failed=False)
    allowed = {"Reports": set(batch.ids)}
    points, removed = [], 0
    for description, score in raw:
        checked = check_citations(description, allowed)
        removed += checked.removed
        if score > 0:
            points.append(MapPoint(checked.text, score, n))
    return _MapOutcome(points, removed, failed=False)


async def _map_all(
    question: str,
    batches: Sequence[ReportBatch],
    deps: QueryDeps,
    usage: LLMUsage,
    config: GlobalSearchConfig,
    conversation: str,
) -> list[_MapOutcome]:
    gate = asyncio.Semaphore(config.concurrency)

    async def one(n: int, batch: ReportBatch) -> _MapOutcome:
        async with gate:
            try:
                return await _map_batch(question, batch, n, deps, usage, config, conversation)
            except LLMError as e:
                log.warning("map batch %d failed: %s", n, e)
                return _MapOutcome([], 0, failed=True)

    outcomes = await asyncio.gather(*(one(n, b) for n, b in enumerate(batches)))
    if batches and all(o.failed for o in outcomes):
        raise AllMapCallsFailedError(f"all {len(batches)} map calls failed; see the log")
    return list(outcomes)


def reduce_context(
    points: Sequence[MapPoint], *, budget: int, count: TokenCounter
) -> tuple[str, set[int]]:
    """The best points as analyst reports within ``budget``, and the report ids they cite."""
    ranked = sorted(points, key=lambda p: -p.score)
    blocks = (
        f"----Analyst {n}----\nImportance Score: {p.score}\n{p.description}"
        for n, p in enumerate(ranked, start=1)
    )
    text = "\n\n".join(within_budget(blocks, budget, count))
    return text, set(cited_ids(text).get("Reports", []))


async def _reduce(
    question: str,
    points: Sequence[MapPoint],
    deps: QueryDeps,
    usage: LLMUsage,
    config: GlobalSearchConfig,
    conversation: str,
    response_type: str,
    on_text: OnText | None = None,
) -> CitationCheck:
    data, allowed = reduce_context(points, budget=config.reduce_max_tokens, count=deps.count_tokens)
    data = "\n\n".join(t for t in (conversation, data) if t)
    system = render_global_reduce_system(
        deps.prompts, report_data=data, response_type=response_type
    )
    text = await ask(
        deps.require_llm(),
        usage,
        purpose="global_reduce",
        system=system,
        user=question,
        max_tokens=config.reduce_max_answer_tokens,
        on_text=on_text,
    )
    return check_citations(text, {"Reports": allowed})


async def _reports(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    config: GlobalSearchConfig,
    window: TimeWindow,
    dynamic: DynamicConfig | None,
    usage: LLMUsage,
) -> tuple[Sequence[SnapshotReport], dict[str, object]]:
    """The reports to map: a level's, or those dynamic selection rated relevant (with its
    ratings for the result's ``extra``)."""
    if dynamic is None:
        return level_reports(index, config.level, window), {}
    selection = await select_communities(question, index, deps, dynamic, window, usage)
    return selection.reports, {"rating_calls": selection.rating_calls, "ratings": selection.ratings}


def _batches(
    reports: Sequence[SnapshotReport],
    deps: QueryDeps,
    config: GlobalSearchConfig,
    conversation: str,
) -> list[ReportBatch]:
    """The reports packed into map batches, each leaving room for the conversation."""
    budget = config.batch_max_tokens - (deps.count_tokens(conversation) + 2 if conversation else 0)
    return make_batches(
        reports,
        count=deps.count_tokens,
        budget=max(1, budget),
        seed=config.seed,
        use_summary=config.use_report_summary,
    )


async def global_search(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    config: GlobalSearchConfig | None = None,
    window: TimeWindow | None = None,
    history: Sequence[HistoryTurn] = (),
    dynamic: DynamicConfig | None = None,
    response_type: str = "multiple paragraphs",
    on_text: OnText | None = None,
) -> QueryResult:
    started = time.perf_counter()
    deps.require_llm()  # fail before any work in offline mode
    config = config or GlobalSearchConfig()
    window = window or TimeWindow()
    usage = LLMUsage()
    extra: dict[str, object] = {"window": window.as_dict(), "level": config.level}
    reports, chosen = await _reports(question, index, deps, config, window, dynamic, usage)
    extra |= chosen
    conversation = history_table(
        history,
        budget=config.history_max_tokens,
        count=deps.count_tokens,
        max_turns=config.history_max_turns,
    )
    batches = _batches(reports, deps, config, conversation)
    outcomes = await _map_all(question, batches, deps, usage, config, conversation)
    points = [p for o in outcomes for p in o.points]
    map_removed = sum(o.removed for o in outcomes)
    extra |= {
        "reports": len(reports),
        "batches": len(batches),
        "map_calls": usage.by_purpose.get("global_map", 0),
        "points": len(points),
        "failed_batches": sum(o.failed for o in outcomes),
        "map_removed_citations": map_removed,
    }
    all_ids = sorted({i for b in batches for i in b.ids})
    if points:
        answer, removed, cited = await _reduce(
            question, points, deps, usage, config, conversation, response_type, on_text
        )
    else:
        answer, removed, cited = NO_DATA_ANSWER, 0, {}
    return QueryResult(
        answer=answer,
        mode="llm",
        citations=cited,
        removed_citations=removed + map_removed,
        context_ids={"Reports": all_ids},
        llm_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        snapshot_version=index.version,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        extra=extra,
        method="global",
    )
