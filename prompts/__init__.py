"""Prompt templates as files, rendered by small typed functions.

Each prompt is ``prompts/<name>.txt`` with ``{named}`` placeholders. Users override a prompt
by putting a file of the same name in a directory of their own
(``KGRAG_EXTRACTION__PROMPTS_DIR``); the shipped file is used otherwise.

Substitution is a plain ``str.replace`` of each ``{name}``: the bodies contain JSON examples
whose braces would break ``str.format``. A placeholder the caller did not supply, or a value
supplied for a placeholder the template does not have, is an error, so a renamed placeholder
in an override fails loudly instead of sending ``{input_text}`` to the model.

Each prompt's first line, ``TASK: ...``, names its kind. The scripted test server
(``kgrag.testing.scripted_llm``) recognises requests by these lines (see ``TASK_MARKERS``),
so an override must keep its first line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from core.errors import KgragError

SHIPPED_DIR = Path(__file__).resolve().parent

# The delimiters of GraphRAG's extraction protocol. graph/extraction/parsing.py owns them;
# these fall-backs (same values) keep prompts renderable if that module is absent.
_DEFAULT_DELIMITERS = {
    "tuple_delimiter": "<|>",
    "record_delimiter": "##",
    "completion_delimiter": "<|COMPLETE|>",
}

# prompt name -> the first line that marks a request of that kind
TASK_MARKERS: dict[str, str] = {
    "extract_graph": "TASK: EXTRACT ENTITIES AND RELATIONSHIPS",
    "glean_continue": "TASK: CONTINUE EXTRACTION",
    "glean_loop": "TASK: CHECK FOR MISSED ENTITIES",
    "extract_claims": "TASK: EXTRACT CLAIMS",
    "summarize_descriptions": "TASK: SUMMARIZE DESCRIPTIONS",
    "community_report": "TASK: WRITE A COMMUNITY REPORT",
    "community_reports": "TASK: WRITE COMMUNITY REPORTS",
    "local_search_system": "TASK: ANSWER FROM LOCAL CONTEXT",
    "basic_search_system": "TASK: ANSWER FROM TEXT SOURCES",
    "global_map_system": "TASK: MAP REPORTS TO KEY POINTS",
    "global_reduce_system": "TASK: REDUCE ANALYST REPORTS",
    "community_rating": "TASK: RATE REPORT RELEVANCE",
    "question_generation": "TASK: GENERATE QUESTIONS",
    "confirm_alias": "TASK: CONFIRM AN ALIAS",
    "drift_primer": "TASK: PRIME A DRIFT SEARCH",
    "drift_local_system": "TASK: ANSWER A DRIFT FOLLOW-UP",
    "drift_reduce_system": "TASK: REDUCE DRIFT ANSWERS",
}
PROMPT_NAMES: tuple[str, ...] = tuple(TASK_MARKERS)

_PLACEHOLDER_RE = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


class PromptError(KgragError):
    """A prompt file is missing, or a render left or lacked a placeholder."""


def delimiters() -> dict[str, str]:
    """The extraction delimiters, from graph.extraction.parsing when it defines them."""
    try:
        from graph.extraction import parsing as ep
    except ImportError:
        return dict(_DEFAULT_DELIMITERS)
    return {
        "tuple_delimiter": getattr(ep, "TUPLE_DELIMITER", _DEFAULT_DELIMITERS["tuple_delimiter"]),
        "record_delimiter": getattr(
            ep, "RECORD_DELIMITER", _DEFAULT_DELIMITERS["record_delimiter"]
        ),
        "completion_delimiter": getattr(
            ep, "COMPLETION_DELIMITER", _DEFAULT_DELIMITERS["completion_delimiter"]
        ),
    }


def placeholders(template: str) -> set[str]:
    """The ``{name}`` placeholders of a template (JSON braces such as ``{"a"`` are not)."""
    return set(_PLACEHOLDER_RE.findall(template))


def fill(template: str, values: Mapping[str, str], optional: frozenset[str] = frozenset()) -> str:
    """Replace every ``{name}`` by its value; every placeholder must get a value, and every
    value but the ``optional`` ones (an override may write the delimiters out) a placeholder."""
    wanted = placeholders(template)
    missing = wanted - values.keys()
    if missing:
        raise PromptError(f"no value for placeholder(s) {sorted(missing)}")
    unknown = values.keys() - wanted - optional
    if unknown:
        raise PromptError(f"template has no placeholder(s) {sorted(unknown)}")
    # One pass, so a value that itself contains "{name}" (a document quoting a template)
    # is never substituted again.
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], template)


class PromptLibrary:
    """Loads ``<name>.txt`` from ``override_dir`` when present there, else the shipped file."""

    def __init__(self, override_dir: Path | None = None) -> None:
        if override_dir is not None and not override_dir.is_dir():
            raise PromptError(f"prompt override directory {override_dir} does not exist")
        self.override_dir = override_dir
        self._cache: dict[str, str] = {}

    def path(self, name: str) -> Path:
        """The file a prompt is read from (the override when there is one)."""
        if name not in TASK_MARKERS:
            raise PromptError(f"unknown prompt {name!r}; known: {', '.join(PROMPT_NAMES)}")
        if self.override_dir is not None:
            candidate = self.override_dir / f"{name}.txt"
            if candidate.is_file():
                return candidate
        return SHIPPED_DIR / f"{name}.txt"

    def template(self, name: str) -> str:
        if name not in self._cache:
            self._cache[name] = self.path(name).read_text(encoding="utf-8")
        return self._cache[name]

    def render(self, name: str, **values: str) -> str:
        try:
            return fill(self.template(name), values, frozenset(_DEFAULT_DELIMITERS))
        except PromptError as e:
            raise PromptError(f"{self.path(name)}: {e}") from e


# ---- response models -----------------------------------------------------------------


class Finding(BaseModel):
    summary: str
    explanation: str


class CommunityReportResponse(BaseModel):
    """What ``community_report.txt`` asks the model to return."""

    title: str
    summary: str
    rating: float = Field(ge=0, le=10)
    rating_explanation: str
    findings: list[Finding]


class BatchedReport(CommunityReportResponse):
    community: str  # the community id the prompt gave after "Community:"


class CommunityReportsResponse(BaseModel):
    """What ``community_reports.txt`` asks the model to return: one report per community."""

    reports: list[BatchedReport]


class MapPoint(BaseModel):
    description: str
    score: int = Field(ge=0, le=100)


class MapResponse(BaseModel):
    """What ``global_map_system.txt`` asks the model to return."""

    points: list[MapPoint]


class RatingResponse(BaseModel):
    """What ``community_rating.txt`` asks the model to return."""

    rating: int = Field(ge=0, le=5)
    reason: str = ""


# ---- one render function per prompt -----------------------------------------------------


def render_extract_graph(
    lib: PromptLibrary, *, entity_types: Sequence[str], input_text: str
) -> str:
    if not entity_types:
        raise PromptError("extraction needs at least one entity type")
    return lib.render(
        "extract_graph",
        entity_types=", ".join(entity_types),
        input_text=input_text,
        **delimiters(),
    )


def render_glean_continue(lib: PromptLibrary) -> str:
    return lib.render("glean_continue", **delimiters())


def render_glean_loop(lib: PromptLibrary) -> str:
    return lib.render("glean_loop")


def render_extract_claims(
    lib: PromptLibrary, *, entity_specs: str, claim_description: str, input_text: str
) -> str:
    return lib.render(
        "extract_claims",
        entity_specs=entity_specs,
        claim_description=claim_description,
        input_text=input_text,
        **delimiters(),
    )


def render_summarize_descriptions(
    lib: PromptLibrary, *, entity_name: str, descriptions: Sequence[str]
) -> str:
    """``entity_name`` is one name, or for a relationship the pair as "A -> B"."""
    listed = "\n".join(f"- {d.strip()}" for d in descriptions)
    return lib.render("summarize_descriptions", entity_name=entity_name, description_list=listed)


def render_community_report(
    lib: PromptLibrary, *, input_text: str, max_report_length: int = 1500
) -> str:
    return lib.render(
        "community_report", input_text=input_text, max_report_length=str(max_report_length)
    )


def render_community_reports(
    lib: PromptLibrary,
    *,
    contexts: Sequence[tuple[str, str]],
    max_report_length: int = 500,
) -> str:
    """Several small communities in one request: ``contexts`` is (community id as the model
    should echo it, report context) in the order the reports should come back."""
    blocks = "\n\n".join(f"Community: {cid}\nData:\n{text}" for cid, text in contexts)
    return lib.render(
        "community_reports", input_text=blocks, max_report_length=str(max_report_length)
    )


def render_local_search_system(
    lib: PromptLibrary,
    *,
    context_data: str,
    response_type: str = "multiple paragraphs",
    conversation_history: str = "",
) -> str:
    return lib.render(
        "local_search_system",
        context_data=context_data,
        response_type=response_type,
        conversation_history=conversation_history or "(none)",
    )


def render_basic_search_system(
    lib: PromptLibrary,
    *,
    context_data: str,
    response_type: str = "multiple paragraphs",
    conversation_history: str = "",
) -> str:
    return lib.render(
        "basic_search_system",
        context_data=context_data,
        response_type=response_type,
        conversation_history=conversation_history or "(none)",
    )


def render_global_map_system(lib: PromptLibrary, *, context_data: str) -> str:
    return lib.render("global_map_system", context_data=context_data)


def render_global_reduce_system(
    lib: PromptLibrary, *, report_data: str, response_type: str = "multiple paragraphs"
) -> str:
    return lib.render("global_reduce_system", report_data=report_data, response_type=response_type)


def render_community_rating(lib: PromptLibrary, *, question: str, report_text: str) -> str:
    return lib.render("community_rating", question=question, report_text=report_text)


class AliasVerdict(BaseModel):
    """The answer to ``confirm_alias``."""

    same: bool
    reason: str = ""


def render_confirm_alias(
    lib: PromptLibrary, *, alias: str, canonical: str, evidence: str, passages: Sequence[str]
) -> str:
    """Ask whether two names the alias rules matched name one entity
    (``graph.aliases.resolution``)."""
    body = "\n\n".join(f"[{i}] {p.strip()}" for i, p in enumerate(passages, 1))
    return lib.render(
        "confirm_alias",
        alias=alias,
        canonical=canonical,
        evidence=evidence,
        passages=body or "(none)",
    )


def render_question_generation(
    lib: PromptLibrary,
    *,
    context_data: str,
    question_count: int = 5,
    conversation_history: str = "",
) -> str:
    return lib.render(
        "question_generation",
        context_data=context_data,
        question_count=str(question_count),
        conversation_history=conversation_history or "(none)",
    )


def render_drift_primer(lib: PromptLibrary, *, community_reports: str, followups: int) -> str:
    return lib.render("drift_primer", community_reports=community_reports, followups=str(followups))


def render_drift_local_system(
    lib: PromptLibrary,
    *,
    context_data: str,
    global_query: str,
    followups: int,
    response_type: str = "a few paragraphs",
) -> str:
    return lib.render(
        "drift_local_system",
        context_data=context_data,
        global_query=global_query,
        followups=str(followups),
        response_type=response_type,
    )


def render_drift_reduce_system(
    lib: PromptLibrary, *, intermediate_answers: str, response_type: str = "multiple paragraphs"
) -> str:
    return lib.render(
        "drift_reduce_system",
        intermediate_answers=intermediate_answers,
        response_type=response_type,
    )
