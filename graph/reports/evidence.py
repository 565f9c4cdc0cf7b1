"""Materiality: which community reports must be regenerated, and how stale the others are.

Evidence is what a report could be written from: the distinct descriptions of the community's
members, the distinct descriptions of its internal relationships and the claims about its
members. Each item is reduced to a fingerprint, a 64-bit BLAKE2b hash of
``kind | owner | normalised text`` (case, Unicode form, whitespace and trailing punctuation do
not matter). Another mention of a known fact yields the same fingerprint and adds nothing; the
same sentence about another entity is another fact. Only extracted inputs are fingerprinted,
never LLM summaries: a paraphrase is not news.

A report remembers the basis it was written from (:class:`ReportBasis`): the members, the
evidence set of the whole community at that time (even when its context had to be truncated,
otherwise a large community would look stale forever) and the child reports its context used.

``unreflected(current, reflected) = |current − reflected| / max(1, |current|)``: the share of
today's evidence the report has not seen. A report is regenerated when

1. there is none, or its members differ from the members it was written for by more than the
   membership tolerance (Jaccard distance; default 0, any change — the job uses
   ``community.membership_tolerance``). Within the tolerance a drifted community is judged on
   its evidence alone: a new member's facts are unreflected evidence like any other, so a
   member that brings real news still passes the threshold. Measured on 4,000 Reuters articles
   + 1%: 72% of the regenerations a zero tolerance causes move at most 2 members;
2. its unreflected share exceeds the materiality threshold; or
3. child reports its context used are regenerated in this run, and their communities hold
   more than the materiality threshold of its members: a parent that summarised three
   hundred child reports is not rewritten because one of them was, which would otherwise
   rewrite every ancestor of every change, the largest communities at every run.

Levels are decided from the leaves up so (3) sees the children's decisions. After the run a
regenerated report reflects everything (0.0) and every other one is at most the threshold.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Literal

from graph.model import Community
from graph.pickling import by_fields
from graph.protocols import peek
from graph.reports.context import ReportClaim

EvidenceSet = frozenset[str]  # fingerprints, 16 hex characters each
# a community's current evidence as ``evidence_of`` gives it: valid until the next update
# (a large community's is the remembered set, carried over in place run after run)
LiveEvidence = AbstractSet[str]
Reason = Literal["no_report", "membership_changed", "new_evidence", "child_report_regenerated"]

_FP_BYTES = 8
_NO_EDGES: Mapping[str, frozenset[str]] = {}  # read only: an entity with no edge
_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.;,:!]+$")


# communities with at least this many members have their evidence remembered between runs
# (``EvidenceIndex.evidence_of``); smaller ones cost less to count afresh than to keep
MEMO_MIN_MEMBERS = 200
# the entities whose edges an update holds once read (``EvidenceIndex._edges``)
EDGES_HELD = 20_000


class EvidenceError(ValueError):
    """Evidence inputs or settings that cannot be used (e.g. a threshold outside (0, 1])."""


def normalise_fact(text: str) -> str:
    """The form two mentions of the same fact share."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _TRAILING.sub("", _SPACE.sub(" ", folded).strip())


@functools.lru_cache(maxsize=1 << 18)
def fingerprint(kind: str, owner: str, text: str) -> str:
    """Short, stable hash of one fact about one owner (entity key or sorted key pair).
    Memoised (bounded): a run fingerprints the facts of every community it plans, and most of
    them are the same facts as in the run before."""
    payload = "\x00".join((kind, owner, normalise_fact(text))).encode("utf-8")
    return hashlib.blake2b(payload, digest_size=_FP_BYTES).hexdigest()


@dataclass(frozen=True, slots=True)
class EntityFacts:
    key: str  # entity key
    descriptions: tuple[str, ...]  # the distinct extracted descriptions, not the summary


@dataclass(frozen=True, slots=True)
class RelationshipFacts:
    source: str  # entity key
    target: str  # entity key
    descriptions: tuple[str, ...]  # extracted descriptions, not the summary
    key: str = ""  # relationship key; "" stands for the pair (one relationship per pair)


def claim_text(claim: ReportClaim) -> str:
    return f"{claim.type} {claim.status} {claim.description}"


class EvidenceIndex:
    """Fingerprints per entity and per undirected edge, kept up to date element by element,
    with the adjacency and degree of every entity.

    The community job keeps one in its state and updates only the entities and relationships
    a run's changes touched, so planning (and building the rows of the few reports it
    rewrites) costs what changed, not the size of the graph. A fingerprint names its owner, so
    the evidence of two elements never overlaps: a community's evidence is the disjoint union
    of its members' facts and its internal edges' facts.
    """

    def __init__(self) -> None:
        self.entity_facts: dict[str, frozenset[str]] = {}
        # key -> neighbour -> facts of the relationships between them (possibly none)
        self.edge_facts: dict[str, dict[str, frozenset[str]]] = {}
        self.degree: Counter[str] = Counter()  # relationships at each entity (a loop counts 2)
        # relationship key -> (sorted pair, its facts); several keys may share a pair (A->B, B->A)
        self._relationships: dict[str, tuple[tuple[str, str], frozenset[str]]] = {}
        # pair_key(pair) -> the relationship keys of that pair
        self._by_pair: dict[str, set[str]] = {}
        # community id -> (members, evidence) when last counted (``evidence_of``); the set is
        # updated in place, so carrying a hub's evidence over costs what moved
        self.memo: dict[str, tuple[frozenset[str], set[str]]] = {}
        # before this run's update: touched entity -> its facts, rewritten pair -> its facts
        self._before: (
            tuple[dict[str, frozenset[str]], dict[tuple[str, str], frozenset[str]]] | None
        ) = None
        self._pairs_index: (
            tuple[dict[tuple[str, str], frozenset[str]], dict[str, list[tuple[str, str]]], int]
            | None
        ) = None
        # during a run's update: the edges read of each entity, most recent last (a member is
        # read for its community at each level; the map unpickles a hub's edges at each read)
        self._edges_read: dict[str, Mapping[str, frozenset[str]]] | None = None

    @classmethod
    def build(
        cls,
        entities: Iterable[EntityFacts],
        relationships: Iterable[RelationshipFacts],
        claims: Iterable[ReportClaim] = (),
    ) -> EvidenceIndex:
        index = cls()
        about: dict[str, list[str]] = {}
        for claim in claims:
            about.setdefault(claim.subject, []).append(claim_text(claim))
        for ent in entities:
            index.set_entity(ent.key, ent.descriptions, about.pop(ent.key, ()))
        for subject, texts in about.items():  # claims about an entity not (yet) in the graph
            index.set_entity(subject, (), texts)
        for rel in relationships:
            index.set_relationship(rel.key, rel.source, rel.target, rel.descriptions)
        return index

    def set_entity(self, key: str, descriptions: Iterable[str], claims: Iterable[str]) -> None:
        prints = {fingerprint("entity", key, d) for d in descriptions}
        prints.update(fingerprint("claim", key, text) for text in claims)
        if prints:
            self.entity_facts[key] = frozenset(prints)
        else:
            self.entity_facts.pop(key, None)

    def set_relationship(
        self, key: str, source: str, target: str, descriptions: Iterable[str]
    ) -> None:
        pair = (source, target) if source <= target else (target, source)
        key = key or "\x00".join(pair)
        self.drop_relationship(key)
        owner = "\x00".join(pair)
        prints = frozenset(fingerprint("relationship", owner, d) for d in descriptions)
        self._relationships[key] = (pair, prints)
        self._by_pair.setdefault(pair_key(pair), set()).add(key)
        self.degree.update(pair)
        self._set_pair(pair)

    def drop_relationship(self, key: str) -> None:
        gone = self._relationships.pop(key, None)
        if gone is None:
            return
        pair = gone[0]
        self.degree.subtract(pair)
        for end in pair:
            if self.degree[end] <= 0:
                del self.degree[end]
        keys = self._by_pair[pair_key(pair)]
        keys.discard(key)
        if not keys:
            del self._by_pair[pair_key(pair)]
        self._set_pair(pair)

    def _set_pair(self, pair: tuple[str, str]) -> None:
        a, b = pair
        if self._before is not None and pair not in self._before[1]:
            self._before[1][pair] = self.edge_facts.get(a, {}).get(b, frozenset())
        if self._edges_read is not None:
            self._edges_read.pop(a, None)
            self._edges_read.pop(b, None)
        prints: set[str] = set()
        keys = self._by_pair.get(pair_key(pair))
        for key in keys or ():
            prints.update(self._relationships[key][1])
        for one, other in ((a, b), (b, a)):
            if keys is not None:
                self.edge_facts.setdefault(one, {})[other] = frozenset(prints)
            elif (edges := self.edge_facts.get(one)) is not None:
                edges.pop(other, None)
                if not edges:
                    del self.edge_facts[one]

    def begin_update(self, touched: Iterable[str]) -> None:
        """Note what the entities a run's changes touched hold before the run updates them
        (their facts; the pairs the update rewrites note their facts as they go), so
        ``evidence_of`` can carry a large community's evidence over from the last time
        instead of counting it afresh. Every change to an entity's or a relationship's facts
        touches the entities it names."""
        self._before = ({k: self.entity_facts.get(k, frozenset()) for k in touched}, {})
        self._edges_read = {}

    def evidence_of(self, community_id: str, members: frozenset[str]) -> LiveEvidence:
        """``community_evidence`` of a community, carried over from the last time it was
        asked for (remembered for communities of at least ``MEMO_MIN_MEMBERS`` members):
        the facts of members that left or were touched taken out as they were, those of
        members that came or were touched put in as they are. Exactly the evidence counted
        afresh (fingerprints have one owner each, so the evidence is a disjoint union), at
        the cost of what changed rather than the size of the community. The remembered set
        is updated in place: copy what must outlive the next update (a report's basis)."""
        memo, before = self.memo, self._before
        known = memo.get(community_id)
        if known is None or before is None:
            fresh = self.community_evidence(members)
            if len(members) < MEMO_MIN_MEMBERS:
                memo.pop(community_id, None)
                return fresh
            evidence = set(fresh)
        else:
            evidence = known[1]
            self._carry(known[0], evidence, members, before)
        if len(members) >= MEMO_MIN_MEMBERS:
            memo[community_id] = (members, evidence)
        else:
            memo.pop(community_id, None)
        return evidence

    def end_update(self, community_ids: Collection[str]) -> None:
        """The run's evidence is counted: drop what ``begin_update`` noted, and the
        remembered evidence of communities that are gone."""
        self._before, self._pairs_index, self._edges_read = None, None, None
        for gone in [cid for cid in self.memo if cid not in community_ids]:
            del self.memo[gone]

    def __setstate__(self, data: dict[str, object]) -> None:
        # an index from a checkpoint written before evidence was remembered, or when it was
        # remembered as frozensets (now carried over in place)
        vars(self).update(
            {"memo": {}, **data, "_before": None, "_pairs_index": None, "_edges_read": None}
        )
        by_pair: Any = self._by_pair  # keyed by (a, b) tuples before
        if isinstance(by_pair, dict) and any(isinstance(k, tuple) for k in by_pair):
            self._by_pair = {pair_key(k): v for k, v in by_pair.items()}
        for cid, (members, evidence) in list(self.memo.items()):
            if not isinstance(evidence, set):
                self.memo[cid] = (members, set(evidence))

    def _carry(
        self,
        was: frozenset[str],
        evidence: set[str],
        members: frozenset[str],
        before: tuple[dict[str, frozenset[str]], dict[tuple[str, str], frozenset[str]]],
    ) -> None:
        """``evidence`` (of ``was``, before the update) turned in place into that of
        ``members`` now: out go the facts of members that left (with their edges inside
        ``was``), the old facts of touched members and of rewritten pairs inside ``was``; in
        come those of members that came (with their edges inside ``members``), the facts of
        touched members and of rewritten pairs inside ``members`` as they are now. Facts
        have one owner each, so taking out and putting back is exact, and a touched hub
        costs its rewritten pairs, not all its edges."""
        old_facts, old_pairs = before
        touched_was, touched_now = _common(old_facts, was), _common(old_facts, members)
        left, came = ((), ()) if was is members else (was - members, members - was)
        pairs_at = self._pairs_at(old_pairs) if old_pairs else {}
        for v in left:
            evidence.difference_update(old_facts.get(v, self.entity_facts.get(v, ())))
            for prints in _within(self._edges(v), was):
                evidence.difference_update(prints)  # a rewritten pair's old facts: below
        for v in touched_was:
            evidence.difference_update(old_facts[v])
            for a, b in pairs_at.get(v, ()):
                if a in was and b in was:
                    evidence.difference_update(old_pairs[(a, b)])
        for v in came:
            evidence.update(self.entity_facts.get(v, ()))
            for prints in _within(self._edges(v), members):
                evidence.update(prints)
        for v in touched_now:
            evidence.update(self.entity_facts.get(v, ()))
            for a, b in pairs_at.get(v, ()):
                if a in members and b in members:
                    evidence.update(self._edges(a).get(b, ()))

    def _pairs_at(
        self, old_pairs: dict[tuple[str, str], frozenset[str]]
    ) -> dict[str, list[tuple[str, str]]]:
        """The rewritten pairs by end (computed again only when the update rewrote more:
        pairs are only ever added to ``old_pairs`` within one update)."""
        index = self._pairs_index
        if index is None or index[0] is not old_pairs or index[2] != len(old_pairs):
            by_end: dict[str, list[tuple[str, str]]] = {}
            for pair in old_pairs:
                by_end.setdefault(pair[0], []).append(pair)
                if pair[1] != pair[0]:
                    by_end.setdefault(pair[1], []).append(pair)
            index = self._pairs_index = (old_pairs, by_end, len(old_pairs))
        return index[1]

    def _edges(self, key: str) -> Mapping[str, frozenset[str]]:
        """``key``'s edges (neighbour -> facts), read only; during an update, read from the
        map once (at most ``EDGES_HELD`` entities' held, the oldest let go first)."""
        held = self._edges_read
        if held is None:
            edges: Mapping[str, frozenset[str]] = peek(self.edge_facts, key, _NO_EDGES)
            return edges
        edges = held.pop(key) if key in held else peek(self.edge_facts, key, _NO_EDGES)
        held[key] = edges
        if len(held) > EDGES_HELD:
            del held[next(iter(held))]
        return edges

    def community_evidence(self, members: frozenset[str]) -> EvidenceSet:
        """Facts of the members and of the edges between them."""
        out: set[str] = set()
        for key in members:
            out.update(self.entity_facts.get(key, ()))
            for prints in _within(self._edges(key), members):
                out.update(prints)
        return frozenset(out)

    def relationships_within(self, keys: Collection[str]) -> list[str]:
        """The keys of the relationships with both ends in ``keys``, sorted."""
        out: list[str] = []
        for key in keys:
            for neighbour in self._edges(key):
                if key <= neighbour and neighbour in keys:
                    out.extend(peek(self._by_pair, pair_key((key, neighbour)), ()))
        return sorted(out)


def pair_key(pair: tuple[str, str]) -> str:
    """The string key of a sorted pair of entity keys (the tables the job keeps take strings)."""
    return "\x00".join(pair)


def _common(touched: Collection[str], members: Collection[str]) -> list[str]:
    """The touched keys among ``members``, walking the smaller side."""
    if len(touched) <= len(members):
        return [v for v in touched if v in members]
    return [v for v in members if v in touched]


def _within(edges: Mapping[str, frozenset[str]], members: Collection[str]) -> list[frozenset[str]]:
    """The facts of the edges (neighbour -> facts) that lead into ``members``, walking the
    smaller side: a hub in a small community has thousands of edges and few members."""
    if len(edges) <= len(members):
        return [prints for u, prints in edges.items() if u in members]
    return [prints for u in members if (prints := edges.get(u)) is not None]


def unreflected(current: AbstractSet[str], reflected: AbstractSet[str]) -> float:
    """Share of ``current`` evidence missing from ``reflected``: |current − reflected| / max(1,
    |current|). Facts that disappeared since do not count; 0.0 means fully reflected."""
    return len(current - reflected) / max(1, len(current))


@by_fields
@dataclass(frozen=True, slots=True)
class ReportBasis:
    """What an existing report was written from."""

    members: frozenset[str]
    evidence: EvidenceSet
    used_child_reports: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    community_id: str
    level: int
    regenerate: bool
    reason: Reason | None  # None when the report is kept
    unreflected_before: float  # against the existing report (1.0 when there is none)
    unreflected_after: float  # what the snapshot records once regenerated reports are written


@dataclass(frozen=True, slots=True)
class RegenerationPlan:
    decisions: tuple[Decision, ...]  # deepest level first: regenerate in this order

    @property
    def to_regenerate(self) -> tuple[str, ...]:
        return tuple(d.community_id for d in self.decisions if d.regenerate)

    @property
    def unreflected_after(self) -> dict[str, float]:
        return {d.community_id: d.unreflected_after for d in self.decisions}


def membership_distance(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard distance of two member sets (0.0 identical, 1.0 disjoint)."""
    union = len(a | b)
    return 1.0 - len(a & b) / union if union else 0.0


def _own_reason(
    community: Community,
    basis: ReportBasis | None,
    share: float,
    threshold: float,
    tolerance: float,
) -> Reason | None:
    if basis is None:
        return "no_report"
    if (
        basis.members is not community.entity_keys
        and membership_distance(basis.members, community.entity_keys) > tolerance
    ):
        return "membership_changed"
    if share > threshold:
        return "new_evidence"
    return None


def decide_regeneration(
    communities: Iterable[Community],
    evidence: Mapping[str, LiveEvidence],
    reports: Mapping[str, ReportBasis],
    *,
    threshold: float,
    membership_tolerance: float = 0.0,
    sizes: Mapping[str, int] | None = None,
    kept: dict[str, LiveEvidence] | None = None,
) -> RegenerationPlan:
    """Decide, leaves first, which reports to regenerate and why (see the module docstring).

    ``evidence`` holds each community's current evidence (missing means none); ``reports``
    the basis of each existing report by community id; ``threshold`` is
    ``settings.community.materiality_threshold``. ``sizes``: the member count of each of
    ``communities`` (the only ones it can regenerate); with it, rule 3 weighs the
    regenerated child reports a context used by their members' share of the parent's, else
    any one of them counts. ``kept`` gets the evidence of each community to regenerate (what
    its report is written from); from an ``evidence`` that counts on demand, the rest is let
    go once decided, so a run over many communities holds few evidence sets at a time.
    """
    if not 0 < threshold <= 1:
        raise EvidenceError(f"materiality threshold must be in (0, 1], got {threshold}")
    ordered = sorted(communities, key=lambda c: (-c.level, c.id))
    regenerated: set[str] = set()
    decisions: list[Decision] = []
    for community in ordered:
        basis = reports.get(community.id)
        current = evidence.get(community.id, frozenset())
        share = 1.0 if basis is None else unreflected(current, basis.evidence)
        reason = _own_reason(community, basis, share, threshold, membership_tolerance)
        if reason is None and basis is not None:
            rewritten = regenerated.intersection(basis.used_child_reports)
            if rewritten and _rewritten_share(rewritten, community, sizes) > threshold:
                reason = "child_report_regenerated"
        if reason is not None:
            regenerated.add(community.id)
            if kept is not None:
                kept[community.id] = current
        after = 0.0 if reason is not None else share
        decisions.append(
            Decision(community.id, community.level, reason is not None, reason, share, after)
        )
    return RegenerationPlan(tuple(decisions))


def _rewritten_share(
    rewritten: set[str], parent: Community, sizes: Mapping[str, int] | None
) -> float:
    """The share of a parent's members whose child reports in its context were rewritten;
    1.0 (any rewrite counts) without sizes."""
    if sizes is None:
        return 1.0
    members = sum(sizes.get(cid, 0) for cid in rewritten)
    return members / max(1, len(parent.entity_keys))
