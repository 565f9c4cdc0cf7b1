"""Answers without an LLM: ranked, cited context instead of generated prose.

Same citation format as the model's answers, checked the same way, and labelled: every
answer starts with ``OFFLINE_LABEL`` and every result says ``mode="offline"``.

* local: the nearest entities' descriptions, then the source sentences that share the most
  words with the question (citing Entities and Sources of the local context);
* global: the reports of the level whose title and summary share the most words with the
  question; a question that matches no report ("what are the main themes?") gets the
  highest-rated, largest reports, which is what the main themes are;
* basic: the best sentence of each of the nearest text units;
* questions: "What happened involving <entity> in <month>?" for the nearest entities, the
  month being the one the entity was most mentioned in.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence

from graph.versions.model import SnapshotReport, SnapshotTextUnit
from offline.embedding import tokens
from query.basic_search import BasicSearchConfig, basic_context
from query.citations import check_citations, format_citation
from query.context import LocalContextConfig
from query.deps import QueryDeps
from query.history import HistoryTurn
from query.index import QueryIndex
from query.report_batches import level_reports
from query.results import QueryResult, QuestionsResult
from query.time_window import TimeWindow

OFFLINE_LABEL = "Offline extractive answer (no LLM configured): ranked, cited context."
NO_MATCH = "Nothing in the data matches the question."
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def words(text: str) -> set[str]:
    return set(tokens(text))


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.split()) >= 4]


def best_sentences(
    units: Sequence[SnapshotTextUnit], question: str, n: int
) -> list[tuple[str, SnapshotTextUnit]]:
    """The ``n`` sentences sharing most words with the question, one per unit first, ties
    by unit rank; units without overlap give their first sentence when nothing overlaps."""
    q = words(question)
    scored = []
    for rank, u in enumerate(units):
        for pos, s in enumerate(sentences(u.text) or [u.text.strip()]):
            scored.append((len(q & words(s)), rank, pos, s, u))
    scored.sort(key=lambda x: (-x[0], x[1], x[2]))
    any_overlap = bool(scored) and scored[0][0] > 0
    picked: list[tuple[str, SnapshotTextUnit]] = []
    used: set[str] = set()
    for overlap, _, _, s, u in scored:
        if u.id not in used and (overlap > 0 or not any_overlap):
            picked.append((s, u))
            used.add(u.id)
        if len(picked) == n:
            break
    return picked


def offline_result(
    answer: str,
    context: dict[str, list[int]],
    index: QueryIndex,
    started: float,
    method: str,
    extra: dict[str, object] | None = None,
) -> QueryResult:
    checked = check_citations(answer, {k: set(v) for k, v in context.items()})
    return QueryResult(
        answer=checked.text,
        mode="offline",
        citations=checked.cited,
        removed_citations=checked.removed,
        context_ids=context,
        llm_calls=0,
        prompt_tokens=0,
        completion_tokens=0,
        snapshot_version=index.version,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        extra=extra or {},
        method=method,
    )


def cite(dataset: str, record_id: int) -> str:
    return format_citation([(dataset, [record_id])])


async def offline_local(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    config: LocalContextConfig | None = None,
    window: TimeWindow | None = None,
    history: Sequence[HistoryTurn] = (),
    top_entities: int = 3,
    top_sentences: int = 3,
) -> QueryResult:
    started = time.perf_counter()
    ctx = await deps.local_context(
        question,
        index,
        config=config or LocalContextConfig(),
        window=window,
        history=history,
    )
    lines = [OFFLINE_LABEL]
    for hrid in ctx.ids["Entities"][:top_entities]:
        e = index.full(index.entity_by_hrid[hrid])
        lines.append(f"- {e.title}: {e.description}{cite('Entities', hrid)}")
    units = [index.full(index.text_unit_by_hrid[i]) for i in ctx.ids["Sources"]]
    for s, u in best_sentences(units, question, top_sentences):
        lines.append(
            f'- "{s}" ({u.title}, {u.published_at[:10]}){cite("Sources", u.human_readable_id)}'
        )
    if len(lines) == 1:
        lines.append(NO_MATCH)
    context = {name: list(ids) for name, ids in ctx.ids.items()}
    return offline_result(
        "\n".join(lines),
        context,
        index,
        started,
        "local",
        {"skipped_vector_hits": ctx.skipped_hits},
    )


def rank_reports_by_overlap(
    reports: Sequence[SnapshotReport], question: str
) -> tuple[list[SnapshotReport], bool]:
    """Reports by words shared with the question, then rating and size; the flag says
    whether any report shared a word at all."""
    q = words(question)
    overlap = {r.community: len(q & words(f"{r.title} {r.summary}")) for r in reports}
    ranked = sorted(reports, key=lambda r: (-overlap[r.community], -r.rank, -r.size, r.community))
    matched = [r for r in ranked if overlap[r.community] > 0]
    return (matched, True) if matched else (ranked, False)


def offline_global(
    question: str,
    index: QueryIndex,
    *,
    level: int = 2,
    window: TimeWindow | None = None,
    top_reports: int = 5,
) -> QueryResult:
    started = time.perf_counter()
    reports = level_reports(index, level, window or TimeWindow())
    ranked, matched = rank_reports_by_overlap(reports, question)
    lines = [OFFLINE_LABEL]
    if not matched and ranked:
        lines.append("No report shares words with the question; the highest-rated reports:")
    for r in ranked[:top_reports]:
        lines.append(f"- {r.title}: {r.summary}{cite('Reports', r.community)}")
    if len(lines) == 1:
        lines.append(NO_MATCH)
    context = {"Reports": [r.community for r in reports]}
    return offline_result(
        "\n".join(lines), context, index, started, "global", {"level": level, "matched": matched}
    )


async def offline_basic(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    config: BasicSearchConfig | None = None,
    window: TimeWindow | None = None,
    top_passages: int = 5,
) -> QueryResult:
    started = time.perf_counter()
    ctx = await basic_context(
        question, index, deps, config=config or BasicSearchConfig(), window=window or TimeWindow()
    )
    units = [index.full(index.text_unit_by_hrid[i]) for i in ctx.table.ids]
    lines = [OFFLINE_LABEL]
    for s, u in best_sentences(units, question, top_passages):
        lines.append(
            f'- "{s}" ({u.title}, {u.published_at[:10]}){cite("Sources", u.human_readable_id)}'
        )
    if len(lines) == 1:
        lines.append(NO_MATCH)
    return offline_result(
        "\n".join(lines),
        ctx.ids,
        index,
        started,
        "basic",
        {"skipped_vector_hits": ctx.skipped_hits},
    )


def _busiest_month(index: QueryIndex, key: str, window: TimeWindow) -> str:
    months: Counter[tuple[int, int]] = Counter()
    for day, n in index.entity_daily.get(key, ()):
        if window.contains(day):
            months[(day.year, day.month)] += n
    if not months:
        return ""
    (year, month), _ = max(months.items(), key=lambda kv: (kv[1], kv[0]))
    names = (
        "January February March April May June July August September October November December"
    ).split()
    return f"{names[month - 1]} {year}"


async def offline_questions(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    count: int = 5,
    config: LocalContextConfig | None = None,
    window: TimeWindow | None = None,
) -> QuestionsResult:
    started = time.perf_counter()
    window = window or TimeWindow()
    ctx = await deps.local_context(
        question,
        index,
        config=config or LocalContextConfig(),
        window=window,
    )
    questions = []
    for hrid in ctx.ids["Entities"][:count]:
        e = index.entity_by_hrid[hrid]
        month = _busiest_month(index, e.id, window)
        questions.append(f"What happened involving {e.title}{f' in {month}' if month else ''}?")
    return QuestionsResult(
        questions=questions,
        mode="offline",
        context_ids={name: list(ids) for name, ids in ctx.ids.items()},
        llm_calls=0,
        prompt_tokens=0,
        completion_tokens=0,
        snapshot_version=index.version,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )
