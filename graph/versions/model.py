"""The in-memory shape of one snapshot: the tables the query service reads.

Column names follow Microsoft GraphRAG's output tables (v3 ``data_model/schemas.py``) so an
export can be read by its tools; a few columns of our own are added at the end of a record
(document time, mode, unreflected evidence). ``id`` is our stable key; ``human_readable_id``
is the short integer that citations use and that never changes once given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from graph.pickling import by_fields


@dataclass(frozen=True, slots=True)
class SnapshotEntity:
    id: str  # entity key (normalised name)
    human_readable_id: int
    title: str  # display name
    type: str
    description: str  # summarised description
    text_unit_ids: tuple[str, ...]
    frequency: int  # mention count (chunks)
    degree: int
    document_count: int = 0
    first_seen: str = ""  # ISO date of the first mention (document time)
    last_seen: str = ""
    mentions_per_day: tuple[tuple[str, int], ...] = ()  # (ISO date, mentions), sorted


@dataclass(frozen=True, slots=True)
class SnapshotRelationship:
    id: str  # relationship key
    human_readable_id: int
    source: str  # entity title
    target: str
    description: str
    weight: float  # distinct chunks asserting it
    combined_degree: int
    text_unit_ids: tuple[str, ...]
    source_id: str = ""  # entity keys (our addition; GraphRAG joins on titles)
    target_id: str = ""
    strength: float = 0.0
    first_seen: str = ""
    last_seen: str = ""


@dataclass(frozen=True, slots=True)
class SnapshotClaim:
    """GraphRAG's covariates table."""

    id: str
    human_readable_id: int
    covariate_type: str  # "claim"
    type: str
    description: str
    subject_id: str  # entity title
    object_id: str | None
    status: str
    start_date: str | None
    end_date: str | None
    source_text: str
    text_unit_id: str


@dataclass(frozen=True, slots=True)
class SnapshotCommunity:
    id: str  # stable community id
    human_readable_id: int
    community: int  # = human_readable_id (GraphRAG's community number)
    level: int
    parent: int  # parent's community number, -1 at level 0
    children: tuple[int, ...]
    title: str
    entity_ids: tuple[str, ...]
    relationship_ids: tuple[str, ...]
    text_unit_ids: tuple[str, ...]
    period: str  # ISO date of the newest document its members are mentioned in
    size: int
    mentions_per_day: tuple[tuple[str, int], ...] = ()
    emerging_score: float = 0.0
    size_history: tuple[tuple[int, int], ...] = ()  # (snapshot version, size), oldest first
    # share of the evidence its report does not reflect yet (the report's ``unreflected``,
    # stored here so a small change to it does not rewrite the report's whole row)
    unreflected: float = 0.0


@by_fields
@dataclass(frozen=True, slots=True)
class SnapshotReport:
    id: str  # = the community's stable id
    human_readable_id: int
    community: int
    level: int
    parent: int
    children: tuple[int, ...]
    title: str
    summary: str
    full_content: str
    rank: float  # the report's rating 0–10
    rating_explanation: str
    findings: tuple[dict[str, str], ...]
    full_content_json: str
    period: str
    size: int
    mode: str = "offline"  # "llm" or "offline"
    unreflected: float = 0.0  # share of evidence the report does not reflect yet
    generated_in: int = 0  # snapshot version that (re)generated it

    def body(self) -> str:
        """``full_content``, built from the title, summary and findings when it was left
        unread (the query index reads reports without it: it repeats the other columns)."""
        return self.full_content or report_body(self.title, self.summary, self.findings)


def report_body(title: str, summary: str, findings: Sequence[Mapping[str, str]]) -> str:
    """A report's ``full_content``: its title, summary and findings as Markdown."""
    return "\n\n".join(
        [f"# {title}", summary, *(f"## {f['summary']}\n\n{f['explanation']}" for f in findings)]
    )


@dataclass(frozen=True, slots=True)
class SnapshotTextUnit:
    id: str  # chunk id
    human_readable_id: int
    text: str
    n_tokens: int
    document_id: str
    entity_ids: tuple[str, ...]
    relationship_ids: tuple[str, ...]
    covariate_ids: tuple[str, ...]
    published_at: str = ""
    title: str = ""


@dataclass(frozen=True, slots=True)
class SnapshotDocument:
    id: str
    human_readable_id: int
    title: str
    text: str
    text_unit_ids: tuple[str, ...]
    creation_date: str  # published_at
    raw_data: dict[str, object] = field(default_factory=dict, hash=False, compare=False)
    # tokens the extraction of its text units spent at the LLM (0 offline, or answered from
    # the response cache); ours, not GraphRAG's
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True, slots=True)
class SnapshotAlias:
    """A key that names the same thing as another (``graph.aliases.resolution``): merged whole, or,
    for a surname several people share, in one text unit only. Not a GraphRAG table."""

    id: str  # the alias key, or "<alias key>@<text unit id>" for one unit
    alias: str  # entity key
    canonical: str  # entity key of the name it resolves to
    alias_title: str
    canonical_title: str
    rule: str  # "acronym", "spelling", "surname" (whole) or "namesake" (one unit)
    evidence: str
    text_unit_ids: tuple[str, ...]  # units showing it: a few for a whole merge, the one unit


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    version: int
    created_at: str  # wall-clock time of writing (operations only)
    newest_document_time: str  # document time: what "now" means for trends
    counts: dict[str, int] = field(default_factory=dict, hash=False, compare=False)
    consumed_offsets: dict[str, int] = field(default_factory=dict, hash=False, compare=False)
    mode: str = "offline"
    reports_regenerated: int = 0
    unreflected_max: float = 0.0
    unreflected_mean: float = 0.0
    # "run": a community run (every table); "rows": a light commit of the rows of new
    # articles between runs (entities, relationships, text units, documents, claims only)
    kind: str = "run"
    reports_version: int = 0  # the run whose communities and reports this version carries
    reports_at: str = ""  # and when that run committed (how old the reports are)
    # what extracting this version's documents spent at the LLM: "prompt" and "completion"
    # tokens (the sums of the documents' rows), and their cost at the chat model's price
    ingest_tokens: dict[str, int] = field(default_factory=dict, hash=False, compare=False)
    ingest_cost_usd: float = 0.0

    @property
    def reports_from(self) -> tuple[int, str]:
        """(version, time) of the run behind this version's communities and reports."""
        if self.kind == "run":
            return self.version, self.created_at
        return self.reports_version, self.reports_at  # (0, "") before the first run


@dataclass(frozen=True, slots=True)
class Snapshot:
    meta: SnapshotMeta
    entities: tuple[SnapshotEntity, ...]
    relationships: tuple[SnapshotRelationship, ...]
    communities: tuple[SnapshotCommunity, ...]
    community_reports: tuple[SnapshotReport, ...]
    text_units: tuple[SnapshotTextUnit, ...]
    documents: tuple[SnapshotDocument, ...]
    claims: tuple[SnapshotClaim, ...] = ()
    aliases: tuple[SnapshotAlias, ...] = ()
