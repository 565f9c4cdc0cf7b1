"""One run of the community job, as pure steps over the job's state.

A run: summarise the descriptions that changed → re-cluster warm-started from the last
hierarchy, only the frontier free to move (now and then checked against a fresh clustering,
and re-balanced when it drifted) → give communities stable ids → classify lineage → for the
communities a change touched, fingerprint their evidence and decide which reports are stale →
(the caller writes those reports, leaves first) → assemble the snapshot tables. Writing
reports and summaries needs an LLM or the offline writers, so those two steps are left to the
caller (``agents.community.runner``); everything else is here and deterministic.

The state carried between runs is ``graph.job.state``; which description sets to summarise is
``graph.job.summaries``; the snapshot tables are assembled by ``graph.job.version_tables``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from graph.communities.cluster_input import ClusterInput, glue_edges
from graph.communities.human_ids import HumanIds
from graph.communities.ids import Delta, StableCommunities, assign_community_ids
from graph.communities.leiden import Hierarchy, hierarchical_leiden, scratch_modularity
from graph.communities.leiden_graph import WeightedGraph, build_graph
from graph.communities.leiden_local import maintain
from graph.communities.leiden_volumes import with_volumes
from graph.communities.lineage import LineageEvent, classify, classify_changes, same_members
from graph.job.state import JobState
from graph.job.summaries import summary
from graph.job.version_tables import degrees
from graph.merge.aggregates import ClaimAggregate
from graph.merge.view import GraphView, Touched
from graph.model import Community
from graph.reports.context import ReportClaim, ReportEntity, ReportGraph, ReportRelationship
from graph.reports.evidence import (
    EntityFacts,
    EvidenceIndex,
    LiveEvidence,
    RegenerationPlan,
    RelationshipFacts,
    claim_text,
    decide_regeneration,
)


@dataclass(frozen=True, slots=True)
class RunParams:
    max_cluster_size: int
    seed: int
    jaccard_threshold: float
    materiality_threshold: float
    report_max_tokens: int
    membership_tolerance: float = 0.0
    frontier_tolerance: float = 0.0
    drift_check_every: int = 0  # runs; 0: never compare with a fresh clustering
    rebalance_gap: float = 0.01
    reports_per_run: int = 0  # 0: no limit


@dataclass(frozen=True, slots=True)
class DriftCheck:
    """A run's comparison of the maintained level 0 with a fresh clustering of the graph."""

    maintained: float  # level-0 modularity of the maintained hierarchy, before any re-balance
    scratch: float  # of a fresh Leiden run on the same graph
    gap: float  # (scratch - maintained) / scratch
    # the gap passed ``rebalance_gap`` and the clustering with every node freed scored
    # higher than the maintained one, so the run took it
    rebalanced: bool


# ---- clustering, ids, lineage ------------------------------------------------------------


def clustering_graph(view: GraphView, aliases: Mapping[str, str] | None = None) -> WeightedGraph:
    """The graph Leiden partitions: relationships between two known, distinct entities,
    weighted by their mention count, and the alias glue of whole merges (alias key ->
    canonical key; ``graph.communities.cluster_input``). Entities without a relationship are left
    out: they have no evidence to be grouped by."""
    edges = [
        *((r.source_key, r.target_key, float(r.weight)) for r in view.relationships.values()),
        *glue_edges(view, aliases or {}).values(),
    ]
    edges = [(a, b, w) for a, b, w in edges if a in view.entities and b in view.entities and a != b]
    return build_graph(sorted({k for a, b, _ in edges for k in (a, b)}), edges)


def whole_aliases(state: JobState) -> dict[str, str]:
    """Alias key -> canonical key of the keys the job's alias resolution merged whole."""
    resolution = state.names_resolved()
    if resolution is None:
        return {}
    return {alias: m.canonical for alias, m in resolution.merges.items()}


def clustering_input(view: GraphView, state: JobState, touched: Touched | None) -> ClusterInput:
    """The clustering graph kept in ``state``, refreshed for what ``touched`` names and the
    alias glue of ``state.resolution`` (built from the whole view when either is unknown)."""
    kept = getattr(state, "cluster_input", None)
    glue = glue_edges(view, whole_aliases(state))
    if kept is None or touched is None:
        kept = ClusterInput.build(view, glue)
    else:
        kept.refresh(view, (s[2:] for s in touched.slots if s.startswith("r:")), touched.entities)
        kept.set_glue(view, glue)
    state.cluster_input = kept
    return kept


def cluster(
    view: GraphView, state: JobState, params: RunParams, touched: Touched | None = None
) -> tuple[Hierarchy, StableCommunities, DriftCheck | None]:
    """The graph re-clustered around what changed (the frontier), with stable ids.

    When the kept clustering input knows what changed since the last hierarchy, only that
    region is visited (``graph.communities.leiden_local``); otherwise (the first run, a checkpoint
    from before changes were kept, a rebuilt input) the whole graph is re-clustered, still
    warm-started with only the frontier free (``graph.communities.leiden``).
    Every ``drift_check_every``-th run also clusters the graph afresh (level 0 only) and
    compares modularity: when the maintained hierarchy has fallen more than ``rebalance_gap``
    behind, the run re-clusters with every node free (warm-started from where they are) and
    takes that clustering if it scores higher than the maintained one (a fresh clustering's
    modularity varies by about as much as the gap from one run to the next, and a re-balance
    regenerates the reports of every community it moves); reports are then regenerated only
    where communities changed materially, as in any run.
    ``touched``: what changed since the last run (every key the view folded since, at least),
    to bring the kept clustering graph up to date; None rebuilds it from the whole view.
    """
    kept = clustering_input(view, state, touched)
    changes = kept.take_changes()
    maintained = None
    if state.hierarchy is not None and changes is not None:
        maintained = maintain(
            kept,
            state.hierarchy,
            changes,
            max_cluster_size=params.max_cluster_size,
            seed=params.seed,
            frontier_tolerance=params.frontier_tolerance,
        )
    hierarchy = _whole_graph(kept, state, params, False) if maintained is None else maintained
    drift = None
    every = params.drift_check_every
    if state.hierarchy is not None and every and (state.version + 1) % every == 0:
        scratch = scratch_modularity(kept.graph()[0], seed=params.seed)
        gap = (scratch - hierarchy.modularity) / scratch if scratch > 0 else 0.0
        rebalanced = None
        if gap > params.rebalance_gap:
            rebalanced = _whole_graph(kept, state, params, True)
            if rebalanced.modularity <= hierarchy.modularity:
                rebalanced = None  # no better: keep the maintained one and every report on it
        drift = DriftCheck(hierarchy.modularity, scratch, gap, rebalanced is not None)
        hierarchy = hierarchy if rebalanced is None else rebalanced
    # the previous run's communities by label, when this hierarchy was made from theirs
    since = state.labelled if hierarchy is maintained else None
    if since is not None and not since.indexes(state.hierarchy, state.communities):
        since = None
    stable = assign_community_ids(
        hierarchy,
        state.communities,
        state.human_ids,
        threshold=params.jaccard_threshold,
        since=since,
    )
    return hierarchy, stable, drift


def _whole_graph(
    kept: ClusterInput, state: JobState, params: RunParams, rebalance: bool
) -> Hierarchy:
    """The whole graph re-clustered, warm-started from the state's hierarchy (every node
    free when ``rebalance``), with its level-0 volumes counted."""
    graph, digests, strengths = kept.graph()
    whole = hierarchical_leiden(
        graph,
        max_cluster_size=params.max_cluster_size,
        seed=params.seed,
        previous=state.hierarchy,
        frontier_tolerance=params.frontier_tolerance,
        rebalance=rebalance,
        node_stats=(digests, strengths),
    )
    return with_volumes(kept, whole)


def lineage(
    previous: tuple[Community, ...], current: tuple[Community, ...], delta: Delta
) -> list[LineageEvent]:
    """The run's lineage events, ``unchanged`` left out (the job publishes changes only),
    counted from what the run changed (``delta``) once there were communities before."""
    if not previous:
        return classify(previous, current, unchanged=False)
    return classify_changes(delta.before, delta.after)


# ---- evidence and regeneration -----------------------------------------------------------


def planning_scope(
    communities: Sequence[Community],
    touched: set[str] | None,
    state: JobState,
    delta: Delta,
    waiting: Iterable[str] = (),
) -> list[Community]:
    """The communities whose report decision can differ from the last run's: new ones, those
    whose members changed (``delta``: what the run changed against the previous
    communities) or hold a touched entity, those without a report basis (none yet, or
    refused) or with a report failure to retry, those ``waiting`` (put off by earlier
    runs: ``waiting_to_plan``), and their ancestors (a parent must see a
    child's regeneration). Every other community has the members and evidence it had, so
    its report stays as it was: a run visits what changed, not the whole graph. ``touched``
    None (unknown) plans every community."""
    if touched is None:
        return list(communities)
    by_id = {c.id: c for c in communities}
    had = {c.id: c.entity_keys for c in delta.before}
    seeds = [c.id for c in delta.after if not same_members(had.get(c.id), c.entity_keys)]
    seeds.extend(by_id.keys() - state.bases.keys())
    seeds.extend({item[7:] for item in state.failures if item.startswith("report:")} & by_id.keys())
    seeds.extend(k for k in waiting if k in by_id)
    seeds.extend(_holding(communities, by_id, touched))
    scope: set[str] = set()
    for cid in seeds:
        node: Community | None = by_id[cid]
        while node is not None and node.id not in scope:
            scope.add(node.id)
            node = by_id.get(node.parent) if node.parent is not None else None
    return [c for c in communities if c.id in scope]


def _holding(
    communities: Sequence[Community], by_id: Mapping[str, Community], keys: set[str]
) -> list[str]:
    """Ids of the communities holding any of ``keys``, found from the top level down: a
    child's members are among its parent's, so only the children of a community that holds
    one can."""
    if not keys:
        return []
    stack = [c for c in communities if c.level == 0 and not keys.isdisjoint(c.entity_keys)]
    out: list[str] = []
    while stack:
        c = stack.pop()
        out.append(c.id)
        kids = map(by_id.__getitem__, c.children)
        stack.extend(kid for kid in kids if not keys.isdisjoint(kid.entity_keys))
    return out


def evidence_index(view: GraphView, state: JobState, touched: Touched | None) -> EvidenceIndex:
    """The fingerprints of every entity, relationship and claim, brought up to date: the index
    kept in ``state`` updated for what ``touched`` names (relationship slots, and entities
    whose descriptions or claims changed), or built afresh when either is unknown."""
    index = state.evidence
    if index is None or touched is None:
        index = EvidenceIndex.build(
            (EntityFacts(k, tuple(e.descriptions.values())) for k, e in view.entities.items()),
            (
                RelationshipFacts(r.source_key, r.target_key, tuple(r.descriptions.values()), k)
                for k, r in view.relationships.items()
            ),
            _report_claims(view, HumanIds.empty()),
        )
    else:
        index.begin_update(touched.entities)
        for slot in touched.slots:
            if slot.startswith("r:"):
                key = slot[2:]
                rel = view.relationships.get(key)
                if rel is None:
                    index.drop_relationship(key)
                else:
                    index.set_relationship(
                        key, rel.source_key, rel.target_key, rel.descriptions.values()
                    )
        for key in touched.entities:
            entity = view.entities.get(key)
            index.set_entity(
                key,
                () if entity is None else entity.descriptions.values(),
                [claim_text(c) for c in _report_claims(view, HumanIds.empty(), {key})],
            )
    state.evidence = index
    return index


def waiting_to_plan(state: JobState, limit: int) -> list[str]:
    """The communities whose regeneration earlier runs put off, oldest first, that this run
    plans again: at most twice ``limit`` (all when there is no limit), so a long queue costs
    each run a bounded share of its evidence."""
    waiting = state.reports_deferred
    return list(waiting) if not limit else list(itertools.islice(waiting, 2 * limit))


def budgeted(plan: RegenerationPlan, limit: int) -> tuple[RegenerationPlan, list[str]]:
    """``plan`` with at most ``limit`` reports to regenerate (0: no limit), and the ids of
    those put off to a later run. Communities without a report go first, then the ones whose
    report leaves out the most; a report put off is kept as it is (and says what it leaves
    out)."""
    wanted = [d for d in plan.decisions if d.regenerate]
    if not limit or len(wanted) <= limit:
        return plan, []
    ranked = sorted(wanted, key=lambda d: (-d.unreflected_before, d.community_id))
    now = {d.community_id for d in ranked[:limit]}
    decisions = tuple(
        d
        if not d.regenerate or d.community_id in now
        else replace(d, regenerate=False, reason=None, unreflected_after=d.unreflected_before)
        for d in plan.decisions
    )
    return RegenerationPlan(decisions), [d.community_id for d in ranked[limit:]]


def plan_reports(
    communities: Iterable[Community],
    evidence: Mapping[str, LiveEvidence],
    state: JobState,
    params: RunParams,
    sizes: Mapping[str, int] | None = None,
    kept: dict[str, LiveEvidence] | None = None,
) -> RegenerationPlan:
    return decide_regeneration(
        communities,
        evidence,
        state.bases,
        threshold=params.materiality_threshold,
        membership_tolerance=params.membership_tolerance,
        sizes=sizes,
        kept=kept,
    )


class ScopeEvidence(Mapping[str, LiveEvidence]):
    """The current evidence of each community in a run's planning scope, counted when asked
    for (``EvidenceIndex.evidence_of``) and not held: planning reads each once, and keeps
    only the evidence of the reports it will write (``plan_reports``'s ``kept``)."""

    def __init__(self, index: EvidenceIndex, scope: Iterable[Community]) -> None:
        self._index = index
        self._members = {c.id: c.entity_keys for c in scope}

    def __getitem__(self, community_id: str) -> LiveEvidence:
        return self._index.evidence_of(community_id, self._members[community_id])

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)


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


def _report_claims(
    view: GraphView, ids: HumanIds, keys: set[str] | None = None
) -> list[ReportClaim]:
    out = []
    rows: Iterable[tuple[str, ClaimAggregate]]
    if keys is None:
        rows = view.claims.items()
    else:  # claims are grouped by subject downstream: the order of the subjects is free
        rows = ((k, agg) for k in sorted(keys) if (agg := view.claims.get(k)) is not None)
    for key, agg in rows:
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


def report_graph(view: GraphView, state: JobState, keys: set[str] | None = None) -> ReportGraph:
    """The rows report contexts are built from, for the entities ``keys`` (all when None):
    a context reads only its community's members, the edges between them and claims about
    them, so a run that regenerates a few reports builds rows for their members alone,
    found through the run's up-to-date evidence index when there is one."""
    ids, index = state.human_ids, state.evidence
    if keys is None or index is None:
        deg: Mapping[str, int] = degrees(view)
        entity_keys: Iterable[str] = view.entities
        relationship_keys: Iterable[str] = (
            k
            for k, r in view.relationships.items()
            if keys is None or (r.source_key in keys and r.target_key in keys)
        )
    else:
        deg, entity_keys, relationship_keys = (
            index.degree,
            sorted(keys),
            index.relationships_within(keys),
        )
    entities = [
        ReportEntity(
            k,
            ids.get("entity", k) or 0,
            e.name,
            e.type,
            summary(state, f"e:{k}") or e.descriptions.first(),
            deg.get(k, 0),
        )
        for k in entity_keys
        if (keys is None or k in keys) and (e := view.entities.get(k)) is not None
    ]
    relationships = [
        ReportRelationship(
            k,
            ids.get("relationship", k) or 0,
            r.source_key,
            r.target_key,
            summary(state, f"r:{k}") or r.descriptions.first(),
            float(r.weight),
            deg.get(r.source_key, 0) + deg.get(r.target_key, 0),
        )
        for k in relationship_keys
        if (r := view.relationships.get(k)) is not None
    ]
    return ReportGraph.build(entities, relationships, _report_claims(view, ids, keys))


def assign_record_ids(view: GraphView, ids: HumanIds) -> HumanIds:
    """Human-readable ids for new entities, relationships, text units, claims, documents
    (in a deterministic order: sorted keys)."""

    def new(kind: str, keys: Iterable[str]) -> list[str]:
        known = ids.assigned.get(kind, {})
        return sorted(set(keys).difference(known))  # sort the new keys, not all of them

    ids = ids.assign("entity", new("entity", view.entities))
    ids = ids.assign("relationship", new("relationship", view.relationships))
    ids = ids.assign("text_unit", new("text_unit", view.text_units))
    ids = ids.assign("document", new("document", view.documents))
    return ids.assign("claim", new("claim", (f.id for a in view.claims.values() for f in a.facts)))
