"""What a query returns, and the running tally of LLM calls and tokens behind it.

The HTTP layer and the CLI serialise these; ``as_dict`` gives plain JSON-ready values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from graph.protocols import ChatResult

AnswerMode = Literal["llm", "offline"]


@dataclass(slots=True)
class LLMUsage:
    """Calls and tokens spent by one query, per purpose, so a user sees what an answer cost."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    by_purpose: dict[str, int] = field(default_factory=dict)

    def add(self, purpose: str, result: ChatResult) -> None:
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.by_purpose[purpose] = self.by_purpose.get(purpose, 0) + 1


@dataclass(frozen=True, slots=True)
class QueryResult:
    """One answer. ``citations`` are the ids left in the answer text per dataset;
    ``removed_citations`` counts cited ids that were not in the context given to the model;
    ``context_ids`` are the ids of every record the model was shown."""

    answer: str
    mode: AnswerMode
    citations: dict[str, list[int]]
    removed_citations: int
    context_ids: dict[str, list[int]]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    snapshot_version: int
    elapsed_ms: float
    extra: dict[str, Any] = field(default_factory=dict)
    method: str = ""  # "local", "global", "basic"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class QuestionsResult:
    """Suggested next questions, with the context they were drawn from."""

    questions: list[str]
    mode: AnswerMode
    context_ids: dict[str, list[int]]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    snapshot_version: int
    elapsed_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
