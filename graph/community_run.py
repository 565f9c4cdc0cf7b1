"""One run of the community job, as pure steps over the job's state.

A run: summarise the descriptions that changed → re-cluster the whole graph warm-started
from the last hierarchy → give communities stable ids → classify lineage → fingerprint each
community's evidence and decide which reports are stale → (the caller writes those reports,
leaves first) → assemble the snapshot tables. Writing reports and summaries needs an LLM or
the offline writers, so those two steps are left to the caller (``agents.community_runner``);
everything else is here and deterministic.

State carried between runs (``JobState``): the graph view, the consumed offsets, the last
hierarchy and communities, the human-readable id allocator, every current report with the
basis it was written from, the description summaries with the descriptions they summarise,
each community's size history, and the items the LLM refused with when to try them again.

LLM calls follow the news, not the runs: a description set is re-summarised only when the
descriptions its summary has not seen (added or gone) reach a share of the ones it was written
from (``SummaryPolicy``), or when a summary missing anything is older than a maximum age; a
report only when ``graph.evidence`` finds its community materially changed. Until then the
previous text stands, which a snapshot serves as it is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any

import orjson

from graph.aggregates import EntityAggregate, RelationshipAggregate, description_fingerprint
from graph.community_ids import HumanIds, assign_community_ids
from graph.emerging import emerging_scores
from graph.evidence import (
    EntityFacts,
    EvidenceGraph,
    EvidenceSet,
    RegenerationPlan,
    RelationshipFacts,
    ReportBasis,
    decide_regeneration,
)
from graph.graph_view import GraphView
from graph.leiden import Hierarchy, build_graph, hierarchical_leiden
from graph.lineage import LineageEvent, classify
from graph.model import Community
from graph.report_context import ReportClaim, ReportEntity, ReportGraph, ReportRelationship
from graph.snapshot_model import (
    Snapshot,
    SnapshotClaim,
    SnapshotCommunity,
    SnapshotDocument,
    SnapshotEntity,
    SnapshotMeta,
    SnapshotRelationship,
    SnapshotReport,
    SnapshotTextUnit,
)

HISTORY_CAP = 50  # size-history points kept per community


@dataclass
class JobState:
    view: GraphView = field(default_factory=GraphView)
    offsets: dict[int, int] = field(default_factory=dict)
    version: int = 0
    hierarchy: Hierarchy | None = None
    communities: tuple[Community, ...] = ()
    human_ids: HumanIds = field(default_factory=HumanIds.empty)
    reports: dict[str, SnapshotReport] = field(default_factory=dict)
    bases: dict[str, ReportBasis] = field(default_factory=dict)
    summaries: dict[str, SummaryRecord] = field(default_factory=dict)
    size_history: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # "report:<community id>" or "summary:<slot>" -> why the LLM did not write it, and when
    # to try again
    failures: dict[str, ItemFailure] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """A description summary and what it was written from."""

    fingerprint: str  # description_fingerprint of the set it summarises
    text: str
    basis: frozenset[str]  # the descriptions it summarises
    written_at: float  # unix time
    by: str = "llm"  # "llm", or a free writer: "joined", "offline"


@dataclass(frozen=True, slots=True)
class ItemFailure:
    """A report or summary the LLM refused (an error other than a passing rate limit, or
    output that did not parse after retries). The previous text stays; a later run retries
    once ``next_retry_at`` has passed, with the wait doubling at every failure."""

    reason: str
    attempts: int
    first_failed_at: float  # unix time
    next_retry_at: float  # unix time


def record_failure(
    state: JobState, item: str, reason: str, now: float, *, base_s: float, max_s: float
) -> ItemFailure:
    previous = state.failures.get(item)
    attempts = 1 if previous is None else previous.attempts + 1
    wait = min(max_s, base_s * 2 ** (attempts - 1))
    failure = ItemFailure(
        reason[:500],
        attempts,
        now if previous is None else previous.first_failed_at,
        now + wait,
    )
    state.failures[item] = failure
    return failure


def retry_blocked(state: JobState, item: str, now: float) -> bool:
    """True while a failed item waits for its next retry."""
    failure = state.failures.get(item)
    return failure is not None and failure.next_retry_at > now


def upgrade_state(state: JobState) -> JobState:
    """Bring a checkpoint written by an earlier version to today's fields: summaries were
    ``(fingerprint, text)`` pairs (their basis is the current description set when the
    fingerprint still matches it, else unknown, which makes them due), and there was no
    failure record."""
    if not hasattr(state, "failures"):
        state.failures = {}
    current = _description_sets(state.view)
    for slot, value in list(state.summaries.items()):
        if isinstance(value, tuple):
            fp, text = value
            known = current.get(slot)
            basis = frozenset(known[1]) if known is not None and known[0] == fp else frozenset()
            state.summaries[slot] = SummaryRecord(fp, text, basis, 0.0)
    return state


@dataclass(frozen=True, slots=True)
class RunParams:
    max_cluster_size: int
    seed: int
    jaccard_threshold: float
    materiality_threshold: float
    report_max_tokens: int
    membership_tolerance: float = 0.0


# ---- summaries ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """An entity or relationship whose description set changed materially since its last
    summary."""

    slot: str  # "e:<key>" or "r:<key>"
    names: tuple[str, ...]  # entity name, or (source, target)
    descriptions: tuple[str, ...]
    fingerprint: str


@dataclass(frozen=True, slots=True)
class SummaryPolicy:
    """When a changed description set is worth another summary (an LLM call).

    ``new_share``: the descriptions the summary has not seen (added or gone) must reach this
    share of the ones it was written from; ``max_age_s``: a summary missing anything is
    redone once it is this old. ``None`` as a policy means every change (free writers).
    """

    new_share: float
    max_age_s: float


@dataclass(frozen=True, slots=True)
class SummaryPlan:
    requests: tuple[SummaryRequest, ...]  # sorted by slot
    deferred: int  # changed sets whose change is not material yet
    next_due_at: float | None  # unix time when a deferred or failed one becomes due


def _ranked(tally_items: Iterable[tuple[str, int]]) -> tuple[str, ...]:
    return tuple(d for d, _ in sorted(tally_items, key=lambda x: (-x[1], x[0])))


def _description_sets(view: GraphView) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """slot -> (fingerprint, ranked descriptions, names) of every entity and relationship."""
    out: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
    for key, ent in view.entities.items():
        out[f"e:{key}"] = (
            description_fingerprint(ent),
            _ranked(ent.descriptions.items),
            (ent.name,),
        )
    for key, rel in view.relationships.items():
        out[f"r:{key}"] = (
            description_fingerprint(rel),
            _ranked(rel.descriptions.items),
            (rel.source_name, rel.target_name),
        )
    return out


def _material(record: SummaryRecord, descriptions: tuple[str, ...], policy: SummaryPolicy) -> bool:
    changed = len(record.basis.symmetric_difference(descriptions))
    return changed >= policy.new_share * max(1, len(record.basis))


def summaries_needed(
    view: GraphView,
    state: JobState,
    policy: SummaryPolicy | None = None,
    now: float = 0.0,
) -> SummaryPlan:
    """The description sets to summarise in this run (see ``SummaryPolicy``).

    A set of fewer than two descriptions needs no writer and is always taken. A summary the
    LLM refused waits for its retry time. Summaries of rows that no longer exist are dropped.
    """
    out: list[SummaryRequest] = []
    deferred, due = 0, []
    for slot, (fp, descs, names) in _description_sets(view).items():
        record = state.summaries.get(slot)
        if record is not None and record.fingerprint == fp:
            continue
        if len(descs) >= 2 and retry_blocked(state, f"summary:{slot}", now):
            due.append(state.failures[f"summary:{slot}"].next_retry_at)
            continue
        if (
            policy is not None
            and record is not None
            and record.by == "llm"
            and len(descs) >= 2
            and now - record.written_at < policy.max_age_s
            and not _material(record, descs, policy)
        ):
            deferred += 1
            due.append(record.written_at + policy.max_age_s)
            continue
        out.append(SummaryRequest(slot, names, descs, fp))
    live = {f"e:{k}" for k in view.entities} | {f"r:{k}" for k in view.relationships}
    for slot in [s for s in state.summaries if s not in live]:
        del state.summaries[slot]
    for item in [i for i in state.failures if i.startswith("summary:") and i[8:] not in live]:
        del state.failures[item]
    return SummaryPlan(
        tuple(sorted(out, key=lambda r: r.slot)), deferred, min(due) if due else None
    )


def join_descriptions(descriptions: Sequence[str]) -> str:
    """A short description set shown as it is: each description once, as a sentence."""
    parts = []
    for d in descriptions:
        text = d.strip()
        if text:
            parts.append(text if text[-1] in ".!?" else f"{text}.")
    return " ".join(parts)


def summary(state: JobState, slot: str, fallback: str = "") -> str:
    record = state.summaries.get(slot)
    return (record.text if record is not None else "") or fallback


# ---- clustering, ids, lineage ------------------------------------------------------------


def cluster(
    view: GraphView, state: JobState, params: RunParams
) -> tuple[Hierarchy, tuple[Community, ...], HumanIds]:
    """The whole graph re-clustered, warm-started, with stable ids (entities without a
    relationship are not clustered: they have no evidence to be grouped by)."""
    edges = [
        (r.source_key, r.target_key, float(r.weight))
        for r in view.relationships.values()
        if r.source_key in view.entities
        and r.target_key in view.entities
        and r.source_key != r.target_key
    ]
    nodes = sorted({k for a, b, _ in edges for k in (a, b)})
    graph = build_graph(nodes, edges)
    hierarchy = hierarchical_leiden(
        graph,
        max_cluster_size=params.max_cluster_size,
        seed=params.seed,
        previous=state.hierarchy,
    )
    stable = assign_community_ids(
        hierarchy, state.communities, state.human_ids, threshold=params.jaccard_threshold
    )
    return hierarchy, stable.communities, stable.human_ids


def lineage(previous: tuple[Community, ...], current: tuple[Community, ...]) -> list[LineageEvent]:
    return classify(previous, current)


# ---- evidence and regeneration -----------------------------------------------------------


def evidence_graph(view: GraphView) -> EvidenceGraph:
    return EvidenceGraph.build(
        (EntityFacts(k, e.descriptions.values()) for k, e in view.entities.items()),
        (
            RelationshipFacts(r.source_key, r.target_key, r.descriptions.values())
            for r in view.relationships.values()
        ),
        _report_claims(view, HumanIds.empty()),
    )


def plan_reports(
    communities: Iterable[Community],
    evidence: Mapping[str, EvidenceSet],
    state: JobState,
    params: RunParams,
) -> RegenerationPlan:
    return decide_regeneration(
        communities,
        evidence,
        state.bases,
        threshold=params.materiality_threshold,
        membership_tolerance=params.membership_tolerance,
    )


def report_groups(
    context_tokens: Sequence[int], *, small: int, size: int, budget: int
) -> list[list[int]]:
    """Which reports share an LLM call: indexes of communities whose context has at most
    ``small`` tokens go together, in order, up to ``size`` per call and ``budget`` context
    tokens per call; every other community is a group of its own. Sharing a call saves the
    instructions and worked example each prompt repeats, which outweigh a small context."""
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, tokens in enumerate(context_tokens):
        if tokens > small:
            groups.append([i])
            continue
        if current and (len(current) >= size or used + tokens > budget):
            groups.append(current)
            current, used = [], 0
        current.append(i)
        used += tokens
    if current:
        groups.append(current)
    return groups


# ---- report graph ------------------------------------------------------------------------


def degrees(view: GraphView) -> Counter[str]:
    deg: Counter[str] = Counter()
    for r in view.relationships.values():
        deg[r.source_key] += 1
        deg[r.target_key] += 1
    return deg


def _report_claims(view: GraphView, ids: HumanIds) -> list[ReportClaim]:
    out = []
    for key, agg in view.claims.items():
        for fact in agg.facts:
            out.append(
                ReportClaim(
                    fact.id,
                    ids.get("claim", fact.id) or 0,
                    key,
                    fact.claim_type,
                    fact.status,
                    fact.description,
                )
            )
    return out


def report_graph(view: GraphView, state: JobState) -> ReportGraph:
    deg = degrees(view)
    ids = state.human_ids
    entities = [
        ReportEntity(
            k,
            ids.get("entity", k) or 0,
            e.name,
            e.type,
            summary(state, f"e:{k}", _first(e.descriptions.values())),
            deg[k],
        )
        for k, e in view.entities.items()
    ]
    relationships = [
        ReportRelationship(
            k,
            ids.get("relationship", k) or 0,
            r.source_key,
            r.target_key,
            summary(state, f"r:{k}", _first(r.descriptions.values())),
            float(r.weight),
            deg[r.source_key] + deg[r.target_key],
        )
        for k, r in view.relationships.items()
    ]
    return ReportGraph.build(entities, relationships, _report_claims(view, ids))


def _first(values: tuple[str, ...]) -> str:
    return values[0] if values else ""


def assign_record_ids(view: GraphView, ids: HumanIds) -> HumanIds:
    """Human-readable ids for new entities, relationships, text units, claims, documents
    (in a deterministic order: sorted keys)."""
    ids = ids.assign("entity", sorted(view.entities))
    ids = ids.assign("relationship", sorted(view.relationships))
    ids = ids.assign("text_unit", sorted(view.text_units))
    ids = ids.assign("document", sorted(view.documents))
    return ids.assign("claim", sorted(f.id for a in view.claims.values() for f in a.facts))


# ---- emerging ----------------------------------------------------------------------------


def community_daily(view: GraphView, members: Iterable[str]) -> dict[date, int]:
    daily: Counter[date] = Counter()
    for key in members:
        ent = view.entities.get(key)
        if ent is not None:
            for day, n in ent.days.per_day().items():
                daily[day] += n
    return dict(daily)


def emerging(view: GraphView, communities: Iterable[Community]) -> dict[str, float]:
    histories = {
        c.id: [
            (datetime.combine(d, time(12), tzinfo=UTC), n)
            for d, n in sorted(community_daily(view, c.entity_keys).items())
        ]
        for c in communities
    }
    histories = {k: v for k, v in histories.items() if v}
    if not histories:
        return {}
    return {k: s.score for k, s in emerging_scores(histories).items()}


# ---- snapshot assembly -------------------------------------------------------------------


def _iso(d: date | None) -> str:
    return d.isoformat() if d else ""


def _daily(d: Mapping[date, int]) -> tuple[tuple[str, int], ...]:
    return tuple((k.isoformat(), v) for k, v in sorted(d.items()))


def newest_time(view: GraphView) -> str:
    times = [c.published_at for c in view.text_units.values()]
    return max(times) if times else ""


def assemble(
    view: GraphView, state: JobState, communities: tuple[Community, ...], meta: SnapshotMeta
) -> Snapshot:
    """The snapshot tables from the view, the state's summaries, ids and reports."""
    ids, deg = state.human_ids, degrees(view)
    units_by_entity = view.entity_units
    units_by_rel = view.relationship_units
    ent_by_unit: dict[str, list[str]] = {}
    for k, units in units_by_entity.items():
        for u in units:
            ent_by_unit.setdefault(u, []).append(k)
    rel_by_unit: dict[str, list[str]] = {}
    for k, units in units_by_rel.items():
        for u in units:
            rel_by_unit.setdefault(u, []).append(k)
    entities = tuple(
        _entity(k, e, ids, deg, state, units_by_entity.get(k, set()))
        for k, e in sorted(view.entities.items())
    )
    relationships = tuple(
        _relationship(k, r, ids, deg, state, units_by_rel.get(k, set()))
        for k, r in sorted(view.relationships.items())
    )
    period = newest_time(view)[:10]
    scores = emerging(view, communities)
    by_id = {c.id: c for c in communities}
    rels_by_entity = _relationships_by_entity(view)
    snap_communities = tuple(
        _community(
            c,
            by_id,
            ids,
            view,
            rels_by_entity,
            period,
            scores.get(c.id, 0.0),
            state.reports[c.id].title if c.id in state.reports else "",
            state.size_history.get(c.id, ()),
        )
        for c in communities
    )
    reports = tuple(state.reports[c.id] for c in communities if c.id in state.reports)
    units_by_doc: dict[str, list[str]] = {}
    for unit in view.text_units.values():
        units_by_doc.setdefault(unit.document_id, []).append(unit.id)
    text_units = tuple(
        SnapshotTextUnit(
            u.id,
            ids.get("text_unit", u.id) or 0,
            u.text,
            u.n_tokens,
            u.document_id,
            tuple(sorted(ent_by_unit.get(u.id, []))),
            tuple(sorted(rel_by_unit.get(u.id, []))),
            (),
            u.published_at,
            u.title,
        )
        for u in sorted(view.text_units.values(), key=lambda u: u.id)
    )
    documents = tuple(
        SnapshotDocument(
            d_id,
            ids.get("document", d_id) or 0,
            str(d.get("title", "")),
            str(d.get("text", "")),
            tuple(sorted(units_by_doc.get(d_id, []))),
            str(d.get("published_at", "")),
            dict(d.get("metadata") or {}),
        )
        for d_id, d in sorted(view.documents.items())
    )
    claims = tuple(
        SnapshotClaim(
            f.id,
            ids.get("claim", f.id) or 0,
            "claim",
            f.claim_type,
            f.description,
            f.subject_name,
            f.object_name,
            f.status,
            f.start_date,
            f.end_date,
            f.source_text,
            "",
        )
        for _, agg in sorted(view.claims.items())
        for f in agg.facts
    )
    return Snapshot(
        meta, entities, relationships, snap_communities, reports, text_units, documents, claims
    )


def _entity(
    k: str, e: EntityAggregate, ids: HumanIds, deg: Counter[str], state: JobState, units: set[str]
) -> SnapshotEntity:
    return SnapshotEntity(
        k,
        ids.get("entity", k) or 0,
        e.name,
        e.type,
        summary(state, f"e:{k}", _first(e.descriptions.values())),
        tuple(sorted(units)),
        e.mention_count,
        deg[k],
        e.document_count,
        _iso(e.first_seen),
        _iso(e.last_seen),
        _daily(e.days.per_day()),
    )


def _relationship(
    k: str,
    r: RelationshipAggregate,
    ids: HumanIds,
    deg: Counter[str],
    state: JobState,
    units: set[str],
) -> SnapshotRelationship:
    return SnapshotRelationship(
        k,
        ids.get("relationship", k) or 0,
        r.source_name,
        r.target_name,
        summary(state, f"r:{k}", _first(r.descriptions.values())),
        float(r.weight),
        deg[r.source_key] + deg[r.target_key],
        tuple(sorted(units)),
        r.source_key,
        r.target_key,
        r.strength,
        _iso(r.first_seen),
        _iso(r.last_seen),
    )


def _relationships_by_entity(view: GraphView) -> dict[str, list[RelationshipAggregate]]:
    """Each entity's relationships, so a community finds its internal edges from its members
    instead of scanning every relationship of the graph once per community."""
    out: dict[str, list[RelationshipAggregate]] = {}
    for r in view.relationships.values():
        out.setdefault(r.source_key, []).append(r)
        out.setdefault(r.target_key, []).append(r)
    return out


def _community(
    c: Community,
    by_id: Mapping[str, Community],
    ids: HumanIds,
    view: GraphView,
    rels_by_entity: Mapping[str, list[RelationshipAggregate]],
    period: str,
    score: float,
    title: str,
    size_history: tuple[tuple[int, int], ...] = (),
) -> SnapshotCommunity:
    hrid = ids.get("community", c.id) or 0
    members = sorted(c.entity_keys)
    rels = sorted(
        {
            r.key
            for k in members
            for r in rels_by_entity.get(k, ())
            if r.source_key in c.entity_keys and r.target_key in c.entity_keys
        }
    )
    units = sorted({u for k in members for u in view.entity_units.get(k, ())})
    parent = ids.get("community", c.parent) if c.parent else None
    return SnapshotCommunity(
        c.id,
        hrid,
        hrid,
        c.level,
        parent if parent is not None else -1,
        tuple(ids.get("community", ch) or 0 for ch in c.children if ch in by_id),
        title,
        tuple(members),
        tuple(rels),
        tuple(units),
        period,
        len(members),
        _daily(community_daily(view, members)),
        score,
        size_history,
    )


def report_record(
    community: Community,
    content: Mapping[str, Any],
    *,
    ids: HumanIds,
    period: str,
    mode: str,
    version: int,
) -> SnapshotReport:
    """A snapshot report from a writer's JSON (title, summary, rating, findings…)."""
    hrid = ids.get("community", community.id) or 0
    parent = ids.get("community", community.parent) if community.parent else None
    findings = tuple(
        {"summary": str(f.get("summary", "")), "explanation": str(f.get("explanation", ""))}
        for f in content.get("findings", [])
        if isinstance(f, Mapping)
    )
    title, text = str(content.get("title", "")), str(content.get("summary", ""))
    body = "\n\n".join(
        [f"# {title}", text, *(f"## {f['summary']}\n\n{f['explanation']}" for f in findings)]
    )
    return SnapshotReport(
        community.id,
        hrid,
        hrid,
        community.level,
        parent if parent is not None else -1,
        tuple(ids.get("community", ch) or 0 for ch in community.children),
        title,
        text,
        body,
        float(content.get("rating", 0.0) or 0.0),
        str(content.get("rating_explanation", "")),
        findings,
        orjson.dumps(dict(content)).decode(),
        period,
        len(community.entity_keys),
        mode,
        0.0,
        version,
    )
