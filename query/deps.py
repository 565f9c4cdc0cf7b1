"""The clients a query needs, built once at start-up and passed in (no module singletons).

``llm`` is ``None`` in offline mode; the search functions that need a model refuse to run
without one, and ``query.offline_answers`` answers instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graph.protocols import LLM, Embedder, VectorStore
from prompts import PromptLibrary
from query.errors import QueryError
from query.results import LLMUsage
from query.tables import TokenCounter


@dataclass(frozen=True, slots=True)
class QueryDeps:
    embedder: Embedder
    store: VectorStore
    prompts: PromptLibrary
    count_tokens: TokenCounter
    llm: LLM | None = None

    def require_llm(self) -> LLM:
        if self.llm is None:
            raise QueryError("no LLM is configured (offline mode): use query.offline_answers")
        return self.llm


async def ask(
    llm: LLM,
    usage: LLMUsage,
    *,
    purpose: str,
    user: str,
    system: str | None = None,
    json_mode: bool = False,
    max_tokens: int | None = None,
) -> str:
    """One chat call, tallied in ``usage``. Prompts that carry data go in the system message
    and the user's question is the user message (GraphRAG's layout)."""
    messages: Sequence[dict[str, str]] = [
        *([{"role": "system", "content": system}] if system is not None else []),
        {"role": "user", "content": user},
    ]
    result = await llm.chat(messages, json_mode=json_mode, max_tokens=max_tokens, purpose=purpose)
    usage.add(purpose, result)
    return result.text
