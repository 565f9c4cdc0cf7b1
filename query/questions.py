"""Question generation: propose the next questions from a local context (one LLM call).

The context is built for the user's latest question as local search builds it; the prompt
lists the earlier questions so the model does not repeat them. The model is asked for a
"- " list; numbered, starred or bulleted lines are accepted too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from prompts import render_question_generation
from query.context import LocalContextConfig
from query.deps import QueryDeps, ask
from query.history import HistoryTurn, earlier_questions
from query.index import QueryIndex
from query.results import LLMUsage, QuestionsResult
from query.time_window import TimeWindow

_MARKER = re.compile(r"^\s*(?:[-*•]+|\d{1,2}[.)]|q\d{1,2}[:.)]|question\s*\d{1,2}[:.)])\s*", re.I)


def parse_questions(text: str, count: int) -> list[str]:
    """The listed questions, in order, without duplicates, at most ``count``. Lines without
    a list marker count only when they end in a question mark (not the model's preamble)."""
    out: list[str] = []
    for line in text.splitlines():
        marked = _MARKER.match(line)
        body = line[marked.end() :] if marked else line
        body = body.strip().strip('"').strip()
        if not body or (not marked and not body.endswith("?")):
            continue
        if body.lower() not in {q.lower() for q in out}:
            out.append(body)
    return out[:count]


def _asked(question: str, history: Sequence[HistoryTurn]) -> str:
    asked = [*earlier_questions(history), question]
    return "\n".join(f"- {q}" for q in asked if q.strip())


async def generate_questions(
    question: str,
    index: QueryIndex,
    deps: QueryDeps,
    *,
    count: int = 5,
    history: Sequence[HistoryTurn] = (),
    config: LocalContextConfig | None = None,
    window: TimeWindow | None = None,
) -> QuestionsResult:
    started = time.perf_counter()
    llm = deps.require_llm()
    ctx = await deps.local_context(
        question,
        index,
        config=config or LocalContextConfig(),
        window=window,
    )
    prompt = render_question_generation(
        deps.prompts,
        context_data=ctx.text or "(no data matched)",
        question_count=count,
        conversation_history=_asked(question, history),
    )
    usage = LLMUsage()
    text = await ask(llm, usage, purpose="question_generation", user=prompt)
    return QuestionsResult(
        questions=parse_questions(text, count),
        mode="llm",
        context_ids={name: list(ids) for name, ids in ctx.ids.items()},
        llm_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        snapshot_version=index.version,
        elapsed_ms=(time.perf_counter() - started) * 1000,
    )
