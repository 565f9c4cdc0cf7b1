"""DRIFT search (Dynamic Reasoning and Inference with Flexible Traversal): from the community
reports down to the detail of single articles.

1. **Primer.** The question's nearest community reports, at any level (by embedding, through
   the report vectors the community job writes; by shared words when there are none), the
   top ``primer_k``, go to ``primer_folds`` calls, each returning a first answer, its score
   and follow-up questions.
2. **Steps.** The ``followups`` best follow-ups not asked yet (ranked by the score of the
   answer that asked them) are answered by local search with the DRIFT prompt, each giving an
   answer, a score and more follow-ups; ``depth`` steps.
3. **Reduce.** Every intermediate answer that scored above 0, best first within
   ``reduce_max_tokens``, goes to one call that writes the answer.

A question costs at most ``primer_folds + depth * followups + 1`` calls. Citations are checked
at each step against what that step was shown, and the answer against the records the
intermediate answers it was given cite (the reduce call sees nothing else).

Offline (no LLM) the traversal is the same and clearly labelled: the primer's answer is the
matched reports' titles and summaries, its follow-ups ask about their most connected
entities, offline local search answers them, and each answer's own entities give the next
step's follow-ups.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from core.errors import ConfigError, LLMError
from core.settings.serving import DriftSettings
from graph.versions.model import SnapshotReport
from prompts import render_drift_local_system, render_drift_primer, render_drift_reduce_system
from query.activity import active_communities
from query.citations import CitationCheck, check_citations, cited_ids
from query.context import LocalContextConfig
from query.deps import OnText, QueryDeps, ask, forget
from query.index import QueryIndex
from query.json_answers import MalformedAnswerError, parse_drift_step
from query.offline_answers import (
    NO_MATCH,
    OFFLINE_LABEL,
    cite,
    offline_local,
    offline_result,
    rank_reports_by_overlap,
)
from query.report_batches import REPORT_HEADER
from query.results import LLMUsage, QueryResult
from query.tables import Table, TokenCounter, fill, within_budget
from query.time_window import TimeWindow

log = logging.getLogger(__name__)

NO_DATA_ANSWER = (
    "The data does not cover this question: neither the community reports nor the articles "
    "behind them hold anything relevant to it."
)


@dataclass(frozen=True, slots=True)
class DriftConfig:
    primer_k: int = 5
    primer_folds: int = 1
    followups: int = 3
    depth: int = 2
    primer_max_tokens: int = 8_000
    local_max_tokens: int = 8_000
    reduce_max_tokens: int = 8_000
    max_answer_tokens: int = 1_500
    reduce_max_answer_tokens: int = 2_000
    concurrency: int = 4

    @classmethod
    def of(cls, settings: DriftSettings, **overrides: int | None) -> DriftConfig:
        """The settings with the ``overrides`` that are not None, checked against the
        settings' bounds (a ``ConfigError`` names the value out of them)."""
        values = settings.model_dump()
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            checked = DriftSettings.model_validate(values)
        except ValidationError as e:
            wrong = "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
            raise ConfigError(f"DRIFT settings out of bounds: {wrong}") from e
        return cls(**checked.model_dump())

    @property
    def max_calls(self) -> int:
        return self.primer_folds + self.depth * self.followups + 1


@dataclass(frozen=True, slots=True)
class Step:
    """One intermediate answer: the primer's (``depth`` 0) or a follow-up's."""

    query: str
    depth: int
    answer: str  # citations already checked against what the step was shown
    score: int
    followups: tuple[str, ...]
    context: dict[str, list[int]] = field(default_factory=dict)
    removed: int = 0
    failed: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "query": self.query,
            "depth": self.depth,
            "score": self.score,
            "followups": list(self.followups),
            "cited": {k: len(v) for k, v in cited_ids(self.answer).items()},
            "failed": self.failed,
        }


# ---- the reports a question starts from ---------------------------------------------------


async def match_reports(
    question: str, index: QueryIndex, deps: QueryDeps, k: int, window: TimeWindow
) -> list[SnapshotReport]:
    """The ``k`` reports nearest the question, of communities active in ``window``: by the
    report vectors, topped up by shared words when the vectors give fewer (none written yet,
    or Weaviate unreachable). A community nested in (or holding) one already picked, sharing
    more than half of the smaller one's members, is left out: a parent and its child often
    tell the same story, and the primer should read ``k`` different ones."""
    active = active_communities(index, window)

    def wanted(number: int) -> bool:
        return number in index.reports and (active is None or number in active)

    candidates: list[int] = []
    try:
        [vector] = await deps.embedder.embed([question])
        hits = await deps.store.search("report", vector, limit=8 * k)
    except Exception as e:  # the reports' words still match: a search degraded, not failed
        log.warning("report vectors not searched (%s); matching reports by their words", e)
        hits = []
    for hit in hits:
        community = index.community_by_id.get(hit.key)
        if community is not None and wanted(community.community):
            candidates.append(community.community)
    picked = _distinct(index, candidates, k)
    if len(picked) < k:
        pool = [index.full(r) for n, r in sorted(index.reports.items()) if wanted(n)]
        ranked, _ = rank_reports_by_overlap(pool, question)
        best = sorted(pool, key=lambda r: (-r.rank, -r.size, r.community))
        picked = _distinct(index, [*picked, *(r.community for r in (*ranked, *best))], k)
    return [index.full(index.reports[n]) for n in picked]


def _distinct(index: QueryIndex, numbers: Sequence[int], k: int) -> list[int]:
    """The first ``k`` of ``numbers`` whose members do not mostly repeat an earlier one's."""
    picked: list[int] = []
    members: list[set[str]] = []
    for n in dict.fromkeys(numbers):
        mine = set(index.communities[n].entity_ids)
        if any(len(mine & other) * 2 > min(len(mine), len(other)) for other in members):
            continue
        picked.append(n)
        members.append(mine)
        if len(picked) == k:
            break
    return picked


def report_folds(
    reports: Sequence[SnapshotReport], folds: int, budget: int, count: TokenCounter
) -> list[Table]:
    """The reports dealt round-robin into ``folds`` tables (best first in each), each within
    ``budget`` tokens; empty folds are left out."""
    tables = []
    for f in range(folds):
        rows = [(r.community, (r.title, r.rank, r.body() or r.summary)) for r in reports[f::folds]]
        table = fill(Table("Reports", REPORT_HEADER, count), rows, budget)
        if table.lines:
            tables.append(table)
    return tables


# ---- with the LLM -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One DRIFT call: its purpose, prompt, question and the key its JSON answers under."""

    purpose: str
    system: str
    user: str
    answer_key: str


async def _step(
    deps: QueryDeps,
    usage: LLMUsage,
    call: Call,
    config: DriftConfig,
    *,
    depth: int,
    context: dict[str, list[int]],
    allowed: dict[str, set[int]],
) -> Step:
    """Ask ``call``; an answer that is not the prompt's JSON is asked once more (dropped from
    the cache first), then the step counts as failed. Citations are checked against
    ``allowed``, what the call was shown."""
    llm = deps.require_llm()
    for attempt in (1, 2):
        text = await ask(
            llm,
            usage,
            purpose=call.purpose,
            system=call.system,
            user=call.user,
            json_mode=True,
            max_tokens=config.max_answer_tokens,
        )
        try:
            answer, score, followups = parse_drift_step(text, call.answer_key)
        except MalformedAnswerError as e:
            log.warning("%s, attempt %d: %s", call.purpose, attempt, e)
            await forget(
                llm,
                user=call.user,
                system=call.system,
                json_mode=True,
                max_tokens=config.max_answer_tokens,
            )
            continue
        checked = check_citations(answer, allowed)
        return Step(
            call.user, depth, checked.text, score, tuple(followups), context, checked.removed
        )
    return Step(call.user, depth, "", 0, (), context, failed=True)


async def _primer(
    question: str, table: Table, deps: QueryDeps, usage: LLMUsage, config: DriftConfig
) -> Step:
    system = render_drift_primer(
        deps.prompts, community_reports=table.render(), followups=config.followups
    )
    context = {"Reports": list(table.ids)}
    allowed = {"Reports": set(table.ids)}
    call = Call("drift_primer", system, question, "intermediate_answer")
    return await _step(deps, usage, call, config, depth=0, context=context, allowed=allowed)


async def _followup(
    question: str,
    query: str,
    depth: int,
    index: QueryIndex,
    deps: QueryDeps,
    usage: LLMUsage,
    config: DriftConfig,
    window: TimeWindow,
) -> Step:
    ctx = await deps.local_context(
        query, index, config=LocalContextConfig(max_tokens=config.local_max_tokens), window=window
    )
    context = {name: list(ids) for name, ids in ctx.ids.items()}
    system = render_drift_local_system(
        deps.prompts,
        context_data=ctx.text or "(no data matched the question)",
        global_query=question,
        followups=config.followups,
    )
    call = Call("drift_local", system, query, "response")
    return await _step(
        deps, usage, call, config, depth=depth, context=context, allowed=ctx.id_sets()
    )


class Frontier:
    """Follow-up questions not asked yet, best first (by the score of the answer that asked
    them, then in the order they were asked); a question asked once is never asked again."""

    def __init__(self, asked: Sequence[str] = ()) -> None:
        self._waiting: list[tuple[int, int, str]] = []
        self._seen: set[str] = {self._norm(q) for q in asked}

    @staticmethod
    def _norm(query: str) -> str:
        return " ".join(query.lower().split())

    def add(self, queries: Sequence[str], score: int) -> None:
        for q in queries:
            norm = self._norm(q)
            if norm and norm not in self._seen:
                self._seen.add(norm)
                self._waiting.append((-score, len(self._seen), q))

    def take(self, n: int) -> list[str]:
        self._waiting.sort()
        taken, self._waiting = self._waiting[:n], self._waiting[n:]
        return [q for *_, q in taken]


def reduce_context(steps: Sequence[Step], *, budget: int, count: TokenCounter) -> str:
    """The intermediate answers that scored above 0, best first, within ``budget``."""
    ranked = sorted((s for s in steps if s.score > 0 and s.answer), key=lambda s: -s.score)
    # a long answer does not keep the shorter ones after it out; numbered once chosen
    blocks = (f"Question: {s.query}\nScore: {s.score}\n{s.answer}" for s in ranked)
    kept = within_budget(blocks, budget, count, skip_over=True)
    return "\n\n".join(f"----Answer {n}----\n{b}" for n, b in enumerate(kept, start=1))


def merged_context(steps: Sequence[Step]) -> dict[str, list[int]]:
    out: dict[str, set[int]] = {}
    for s in steps:
        for name, ids in s.context.items():
            out.setdefault(name, set()).update(ids)
    return {name: sorted(ids) for name, ids in sorted(out.items())}


async def _followups(
    question: str,
    primers: list[Step],
    index: QueryIndex,
    deps: QueryDeps,
    usage: LLMUsage,
    config: DriftConfig,
    window: TimeWindow,
) -> list[Step]:
    """The follow-up steps, depth by depth: each answers the most promising open follow-ups
    by local search and proposes its own (a failed one is a step that failed)."""
    frontier = Frontier(asked=[question])  # the primer answered the question itself
    for p in primers:
        frontier.add(p.followups, p.score)
    gate = asyncio.Semaphore(config.concurrency)

    async def one(query: str, depth: int) -> Step:
        async with gate:
            try:
                return await _followup(question, query, depth, index, deps, usage, config, window)
            except LLMError as e:
                log.warning("DRIFT follow-up %r failed: %s", query, e)
                return Step(query, depth, "", 0, (), failed=True)

    steps: list[Step] = []
    for depth in range(1, config.depth + 1):
        queries = frontier.take(config.followups)
        if not queries:
            break
        answered = await asyncio.gather(*(one(q, depth) for q in queries))
        for s in answered:
            frontier.add(s.followups, s.score)
        steps += answered
    return steps


async def _reduce(
    question: str,
    steps: list[Step],
    deps: QueryDeps,
    usage: LLMUsage,
    config: DriftConfig,
    response_type: str,
    on_text: OnText | None,
) -> CitationCheck:
    """The answer from the steps' intermediate answers: (answer, removed citations, cited)."""
    data = reduce_context(steps, budget=config.reduce_max_tokens, count=deps.count_tokens)
    if not data:
        return CitationCheck(NO_DATA_ANSWER, 0, {})
    allowed = {name: set(ids) for name, ids in cited_ids(data).items()}
    system = render_drift_reduce_system(
        deps.prompts, intermediate_answers=data, response_type=response_type
    )
    text = await ask(
        deps.require_llm(),
        usage,
        purpose="drift_reduce",
        system=system,
        user=question,
        max_tokens=config.reduce_max_answer_tokens,
        on_text=on_text,
    )
    return check_citations(text, allowed)


async def drift_search(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    config: DriftConfig | None = None,
    window: TimeWindow | None = None,
    response_type: str = "multiple paragraphs",
    on_text: OnText | None = None,
) -> QueryResult:
    started = time.perf_counter()
    deps.require_llm()  # fail before any work in offline mode
    config = config or DriftConfig()
    window = window or TimeWindow()
    usage = LLMUsage()
    reports = await match_reports(question, index, deps, config.primer_k, window)
    folds = report_folds(reports, config.primer_folds, config.primer_max_tokens, deps.count_tokens)
    primers = list(
        await asyncio.gather(*(_primer(question, t, deps, usage, config) for t in folds))
    )
    if folds and all(p.failed for p in primers):
        log.warning("every DRIFT primer call failed to give its JSON; going on with follow-ups")
    steps = list(primers) + await _followups(question, primers, index, deps, usage, config, window)
    answer, removed, cited = await _reduce(
        question, steps, deps, usage, config, response_type, on_text
    )
    return QueryResult(
        answer=answer,
        mode="llm",
        citations=cited,
        removed_citations=removed + sum(s.removed for s in steps),
        context_ids=merged_context(steps),
        llm_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        snapshot_version=index.version,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        extra={
            "window": window.as_dict(),
            "primer_reports": [r.community for r in reports],
            "steps": [s.as_dict() for s in steps],
            "calls_by_purpose": dict(usage.by_purpose),
        },
        method="drift",
    )


# ---- offline ------------------------------------------------------------------------------


def _key_entity_questions(
    index: QueryIndex, keys: Sequence[str], n: int, asked: set[str]
) -> list[str]:
    """ "What about <entity>?" for the ``n`` most connected of ``keys`` not asked about yet."""
    ranked = sorted(
        (k for k in dict.fromkeys(keys) if k in index.entities), key=lambda k: -index.degree(k)
    )
    out: list[str] = []
    for key in ranked:
        if len(out) == n:
            break
        if key not in asked:
            asked.add(key)
            out.append(f"What about {index.entities[key].title}?")
    return out


async def offline_drift(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    config: DriftConfig | None = None,
    window: TimeWindow | None = None,
) -> QueryResult:
    started = time.perf_counter()
    config = config or DriftConfig()
    window = window or TimeWindow()
    reports = await match_reports(question, index, deps, config.primer_k, window)
    lines = [OFFLINE_LABEL, "Community reports nearest the question:"]
    lines += [f"- {r.title}: {r.summary}{cite('Reports', r.community)}" for r in reports]
    context: dict[str, set[int]] = {"Reports": {r.community for r in reports}}
    asked: set[str] = set()
    members = [k for r in reports for k in index.communities[r.community].entity_ids]
    queries = _key_entity_questions(index, members, config.followups, asked)
    steps: list[dict[str, object]] = []
    local_config = LocalContextConfig(max_tokens=config.local_max_tokens)
    for depth in range(1, config.depth + 1):
        if not queries:
            break
        found: list[str] = []
        for q in queries:
            result = await offline_local(q, index, deps, config=local_config, window=window)
            body = [line for line in result.answer.splitlines() if line != OFFLINE_LABEL]
            lines += [f"Follow-up: {q}", *body]
            for name, ids in result.context_ids.items():
                context.setdefault(name, set()).update(ids)
            hrids = result.context_ids.get("Entities", [])
            found += [index.entity_by_hrid[h].id for h in hrids if h in index.entity_by_hrid]
            steps.append({"query": q, "depth": depth, "cited": len(result.citations)})
        queries = _key_entity_questions(index, found, config.followups, asked)
    if not reports:
        lines.append(NO_MATCH)
    merged = {name: sorted(ids) for name, ids in sorted(context.items())}
    extra: dict[str, object] = {
        "window": window.as_dict(),
        "primer_reports": [r.community for r in reports],
        "steps": steps,
    }
    return offline_result("\n".join(lines), merged, index, started, "drift", extra)
