"""What a query returns, and the running tally of LLM calls and tokens behind it.

The HTTP layer and the CLI serialise these; ``as_dict`` gives plain JSON-ready values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from graph.protocols import ChatResult
from graph.versions.model import SnapshotMeta

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
    method: str = ""  # "local", "global", "basic", "drift"
    basis: dict[str, Any] = field(default_factory=dict)  # see ``graph_basis``
    cost_usd: float = 0.0  # the tokens at the model's price (``llm.prices``); 0 offline

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


def age_s(iso_time: str, now: datetime | None = None) -> float | None:
    """Seconds since an ISO time (None when there is none or it does not parse)."""
    if not iso_time:
        return None
    try:
        at = datetime.fromisoformat(iso_time.replace("Z", "+00:00"))
    except ValueError:
        return None
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    return round(max(0.0, ((now or datetime.now(UTC)) - at).total_seconds()), 1)


def graph_basis(meta: SnapshotMeta) -> dict[str, Any]:
    """What an answer rests on: the graph version of its rows, and the community run its
    communities and reports come from (between runs, light commits add the rows of new
    articles; reports follow at the run's pace), with how old each is."""
    reports_version, reports_at = meta.reports_from
    return {
        "graph_version": meta.version,
        "graph_committed_at": meta.created_at,
        "graph_age_s": age_s(meta.created_at),
        "reports_version": reports_version,
        "reports_committed_at": reports_at,
        "reports_age_s": age_s(reports_at),
    }


def describe_basis(basis: dict[str, Any]) -> str:
    """One line for people: "graph v12 (3 s old) · reports of v9 (41 s old)"."""
    if not basis:
        return ""

    def old(value: float | None) -> str:
        return "" if value is None else f" ({value:.0f} s old)"

    graph = f"graph v{basis['graph_version']}{old(basis.get('graph_age_s'))}"
    if not basis.get("reports_version"):
        return f"{graph}, no community reports yet"
    if basis.get("reports_version") == basis.get("graph_version"):
        return f"{graph}, reports from the same run"
    return f"{graph} · reports of v{basis['reports_version']}{old(basis.get('reports_age_s'))}"
