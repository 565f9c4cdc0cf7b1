"""Dynamic community selection: rate reports from the top of the hierarchy down, and read
only the branches the question is about (GraphRAG's ``DynamicCommunitySelection``).

Each report of the current level is rated 0–5 for relevance (one call each, concurrently).
A community rated at least ``threshold`` is selected and its children are rated next; the
children of an irrelevant community are never looked at, which is where the saving comes
from. When a child is selected its parent is dropped from the selection (unless
``keep_parent``), since the child's report is the more specific one. A community without a
report is passed through: its children are rated instead.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from graph.versions.model import SnapshotReport
from prompts import render_community_rating
from query.activity import active_communities
from query.deps import QueryDeps, ask
from query.index import QueryIndex
from query.json_answers import MalformedAnswerError, parse_rating
from query.results import LLMUsage
from query.tables import truncate_to_tokens
from query.time_window import TimeWindow

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DynamicConfig:
    threshold: int = 1  # lowest rating (0-5) that counts as relevant
    max_level: int | None = None  # do not descend below this level
    keep_parent: bool = False
    report_max_tokens: int = 2_000  # report text shown to the rater
    concurrency: int = 8


@dataclass(frozen=True, slots=True)
class DynamicSelection:
    reports: tuple[SnapshotReport, ...]  # selected, by community number
    ratings: dict[int, int]  # community number -> rating, for every rated community
    rating_calls: int


async def _rate(
    question: str, report: SnapshotReport, deps: QueryDeps, usage: LLMUsage, config: DynamicConfig
) -> int:
    body = f"{report.title}\n\n{report.body() or report.summary}"
    text = truncate_to_tokens(body, config.report_max_tokens, deps.count_tokens)
    prompt = render_community_rating(deps.prompts, question=question, report_text=text)
    for attempt in (1, 2):
        answer = await ask(
            deps.require_llm(), usage, purpose="community_rating", user=prompt, json_mode=True
        )
        try:
            return parse_rating(answer)
        except MalformedAnswerError as e:
            log.warning("rating of community %d, attempt %d: %s", report.community, attempt, e)
    return 0


def _expand(index: QueryIndex, numbers: list[int], active: set[int] | None) -> list[int]:
    """Pass through communities without a report: their children stand in for them."""
    out: list[int] = []
    pending = list(numbers)
    while pending:
        n = pending.pop(0)
        if active is not None and n not in active:
            continue
        if n in index.reports:
            out.append(n)
        else:
            pending.extend(index.children(n))
    return out


async def select_communities(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    config: DynamicConfig,
    window: TimeWindow,
    usage: LLMUsage,
) -> DynamicSelection:
    active = active_communities(index, window)
    gate = asyncio.Semaphore(config.concurrency)
    calls_before = usage.by_purpose.get("community_rating", 0)

    async def rate(n: int) -> int:
        async with gate:
            return await _rate(question, index.full(index.reports[n]), deps, usage, config)

    roots = sorted(c.community for c in index.communities.values() if c.level == 0)
    queue = _expand(index, roots, active)
    selected: dict[int, SnapshotReport] = {}
    ratings: dict[int, int] = {}
    while queue:
        scores = await asyncio.gather(*(rate(n) for n in queue))
        ratings |= dict(zip(queue, scores, strict=True))
        nxt: list[int] = []
        for n, score in zip(queue, scores, strict=True):
            if score < config.threshold:
                continue
            community = index.communities[n]
            selected[n] = index.full(index.reports[n])
            if not config.keep_parent:
                selected.pop(community.parent, None)
            if config.max_level is None or community.level < config.max_level:
                nxt.extend(index.children(n))
        queue = _expand(index, nxt, active)
    return DynamicSelection(
        reports=tuple(selected[n] for n in sorted(selected)),
        ratings=ratings,
        rating_calls=usage.by_purpose.get("community_rating", 0) - calls_before,
    )
