"""Materiality: new facts make a report stale, repeated facts do not; parents follow children."""

from __future__ import annotations

import pickle
import random
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

import pytest

import graph.reports.evidence as evidence_module
from graph.job.run import ScopeEvidence
from graph.model import Community
from graph.reports.context import ReportClaim
from graph.reports.evidence import (
    EntityFacts,
    EvidenceError,
    EvidenceIndex,
    RegenerationPlan,
    RelationshipFacts,
    ReportBasis,
    decide_regeneration,
    fingerprint,
    unreflected,
)

THRESHOLD = 0.2


def graph_of(
    descriptions: dict[str, list[str]],
    edges: dict[tuple[str, str], list[str]] | None = None,
    claims: Sequence[ReportClaim] = (),
) -> EvidenceIndex:
    return EvidenceIndex.build(
        [EntityFacts(k, tuple(v)) for k, v in descriptions.items()],
        [RelationshipFacts(a, b, tuple(v)) for (a, b), v in (edges or {}).items()],
        claims,
    )


BASE = {
    "acme": ["Acme is a steel maker.", "Acme is based in Ohio."],
    "bolt": ["Bolt is a rail operator."],
    "crane": ["Crane is a bank."],
}
BASE_EDGES = {("acme", "bolt"): ["Acme supplies rails to Bolt."]}
MEMBERS = frozenset({"acme", "bolt", "crane"})


def community(cid: str = "c1", members: frozenset[str] = MEMBERS, level: int = 0) -> Community:
    return Community(cid, level, None, (), members)


def decide_one(
    graph: EvidenceIndex, basis: ReportBasis | None, c: Community | None = None
) -> tuple[bool, str | None, float]:
    c = c or community()
    plan = decide_regeneration(
        [c],
        {c.id: graph.community_evidence(c.entity_keys)},
        {c.id: basis} if basis else {},
        threshold=THRESHOLD,
    )
    (d,) = plan.decisions
    return d.regenerate, d.reason, d.unreflected_after


def basis_now(graph: EvidenceIndex, members: frozenset[str] = MEMBERS) -> ReportBasis:
    return ReportBasis(members, graph.community_evidence(members))


class TestFingerprints:
    def test_another_mention_of_a_known_fact_is_not_new(self) -> None:
        a = fingerprint("entity", "acme", "Acme is a steel maker.")
        assert a == fingerprint("entity", "acme", "  ACME is a   steel maker ")
        assert a != fingerprint("entity", "bolt", "Acme is a steel maker.")
        assert a != fingerprint("entity", "acme", "Acme is a steel trader.")

    def test_evidence_covers_members_internal_edges_and_claims(self) -> None:
        claim = ReportClaim("k1", 1, "crane", "fraud", "SUSPECTED", "Crane hid losses.")
        graph = graph_of(BASE, {**BASE_EDGES, ("crane", "zed"): ["Crane lends to Zed."]}, [claim])
        facts = graph.community_evidence(MEMBERS)
        assert len(facts) == 4 + 1 + 1  # descriptions, the internal edge, the claim
        assert len(graph.community_evidence(MEMBERS | {"zed"})) == 7


class TestUnreflected:
    def test_share_of_current_missing_from_report(self) -> None:
        assert unreflected(frozenset("abcd"), frozenset("ab")) == 0.5
        assert unreflected(frozenset("ab"), frozenset("abxyz")) == 0.0
        assert unreflected(frozenset(), frozenset()) == 0.0


class TestDecisions:
    def test_new_fact_makes_the_report_stale(self) -> None:
        pair = frozenset({"bolt", "crane"})
        basis = basis_now(graph_of(BASE, BASE_EDGES), pair)
        news = {**BASE, "crane": ["Crane is a bank.", "Crane was fined in May."]}
        regenerate, reason, left = decide_one(
            graph_of(news, BASE_EDGES), basis, community(members=pair)
        )
        assert (regenerate, reason, left) == (True, "new_evidence", 0.0)

    def test_repeated_fact_does_not(self) -> None:
        basis = basis_now(graph_of(BASE, BASE_EDGES))
        again = {**BASE, "crane": ["Crane is a bank.", "CRANE is a bank"]}
        regenerate, reason, left = decide_one(graph_of(again, BASE_EDGES), basis)
        assert (regenerate, reason, left) == (False, None, 0.0)

    def test_small_news_below_threshold_is_recorded_not_regenerated(self) -> None:
        big = {f"e{i}": [f"E{i} is firm number {i}."] for i in range(9)}
        members = frozenset(big)
        basis = basis_now(graph_of(big), members)
        big["e0"] = [*big["e0"], "E0 opened a plant."]
        regenerate, _, left = decide_one(graph_of(big), basis, community(members=members))
        assert not regenerate
        assert left == pytest.approx(0.1)

    def test_membership_change_triggers_even_without_new_facts(self) -> None:
        graph = graph_of({**BASE, "dory": []}, BASE_EDGES)
        basis = basis_now(graph)
        moved = community(members=MEMBERS | {"dory"})
        assert decide_one(graph, basis, moved)[:2] == (True, "membership_changed")

    def test_community_without_report_is_generated(self) -> None:
        assert decide_one(graph_of(BASE), None)[:2] == (True, "no_report")


DORY = [f"Dory handled cargo {i}." for i in range(10)]


def hierarchy() -> tuple[list[Community], dict[str, frozenset[str]]]:
    members = {
        "leaf-a": frozenset({"acme", "bolt"}),
        "leaf-b": frozenset({"crane"}),
        "mid": frozenset({"acme", "bolt", "crane"}),
        "top": frozenset({"acme", "bolt", "crane", "dory"}),
    }
    comms = [
        Community("leaf-a", 2, "mid", (), members["leaf-a"]),
        Community("leaf-b", 2, "mid", (), members["leaf-b"]),
        Community("mid", 1, "top", ("leaf-a", "leaf-b"), members["mid"]),
        Community("top", 0, None, ("mid",), members["top"]),
    ]
    return comms, members


class TestHierarchy:
    def plan(
        self, used: dict[str, tuple[str, ...]], descriptions: dict[str, list[str]]
    ) -> RegenerationPlan:
        comms, members = hierarchy()
        old = graph_of({**BASE, "dory": DORY}, BASE_EDGES)
        reports = {
            cid: ReportBasis(m, old.community_evidence(m), used.get(cid, ()))
            for cid, m in members.items()
        }
        new = graph_of(descriptions, BASE_EDGES)
        evidence = {cid: new.community_evidence(m) for cid, m in members.items()}
        return decide_regeneration(reversed(comms), evidence, reports, threshold=THRESHOLD)

    NEWS = {**BASE, "dory": DORY, "crane": ["Crane is a bank.", "Crane failed."]}

    def test_parent_follows_a_used_child_report_up_the_tree(self) -> None:
        plan = self.plan({"mid": ("leaf-b",), "top": ("mid",)}, self.NEWS)
        reasons = {d.community_id: d.reason for d in plan.decisions}
        assert reasons["leaf-b"] == "new_evidence"
        assert reasons["leaf-a"] is None
        assert reasons["mid"] == "child_report_regenerated"  # 1/6 new: below the threshold
        assert reasons["top"] == "child_report_regenerated"
        assert plan.to_regenerate == ("leaf-b", "mid", "top")

    def test_parent_that_used_elements_only_is_kept_when_news_is_diluted(self) -> None:
        plan = self.plan({}, self.NEWS)
        assert plan.to_regenerate == ("leaf-b",)
        kept = {d.community_id: d.unreflected_after for d in plan.decisions if not d.regenerate}
        assert kept["mid"] == pytest.approx(1 / 6)
        assert kept["top"] == pytest.approx(1 / 16)

    def test_children_are_decided_before_parents(self) -> None:
        levels = [d.level for d in self.plan({}, self.NEWS).decisions]
        assert levels == sorted(levels, reverse=True)

    def test_nothing_stays_above_the_threshold_after_a_run(self) -> None:
        rng = random.Random(3)
        for _ in range(30):
            descriptions = {
                k: [f"{k} fact {rng.randrange(4)}" for _ in range(rng.randrange(1, 4))]
                for k in ("acme", "bolt", "crane", "dory")
            }
            plan = self.plan({"top": ("mid",)}, descriptions)
            assert all(0.0 <= v <= THRESHOLD for v in plan.unreflected_after.values())

    def test_threshold_outside_range_is_rejected(self) -> None:
        with pytest.raises(EvidenceError, match="threshold"):
            decide_regeneration([], {}, {}, threshold=0.0)

    def test_kept_holds_the_evidence_of_the_reports_to_write_and_no_other(self) -> None:
        graph = graph_of(BASE, BASE_EDGES)
        stale, fresh = community("stale"), community("fresh", frozenset({"acme", "bolt"}))
        reports = {"fresh": basis_now(graph, fresh.entity_keys)}  # "stale" has no report
        evidence = {c.id: graph.community_evidence(c.entity_keys) for c in (stale, fresh)}
        kept: dict[str, AbstractSet[str]] = {}
        plan = decide_regeneration(
            [stale, fresh], evidence, reports, threshold=THRESHOLD, kept=kept
        )
        assert plan.to_regenerate == ("stale",)
        assert kept == {"stale": evidence["stale"]}


class TestMembershipTolerance:
    """Within the tolerance a drifted community is judged on its evidence alone."""

    @staticmethod
    def _plan(
        facts: dict[str, list[str]], before: frozenset[str], after: frozenset[str], tol: float
    ) -> tuple[bool, str | None, float]:
        graph = graph_of(facts)
        c = community(members=after)
        plan = decide_regeneration(
            [c],
            {c.id: graph.community_evidence(after)},
            {c.id: basis_now(graph_of(facts), before)},
            threshold=THRESHOLD,
            membership_tolerance=tol,
        )
        (d,) = plan.decisions
        return d.regenerate, d.reason, d.unreflected_after

    FIRMS = {f"e{i}": [f"E{i} is firm number {i}."] for i in range(12)}

    def test_one_quiet_newcomer_among_eleven_is_tolerated_and_recorded(self) -> None:
        before = frozenset(f"e{i}" for i in range(11))
        regenerate, reason, left = self._plan(self.FIRMS, before, frozenset(self.FIRMS), 0.1)
        assert (regenerate, reason) == (False, None)
        assert left == pytest.approx(1 / 12)  # the newcomer's fact is unreflected evidence

    def test_the_same_drift_counts_with_zero_tolerance(self) -> None:
        before = frozenset(f"e{i}" for i in range(11))
        regenerate, reason, _ = self._plan(self.FIRMS, before, frozenset(self.FIRMS), 0.0)
        assert (regenerate, reason) == (True, "membership_changed")

    def test_drift_beyond_the_tolerance_regenerates(self) -> None:
        before = frozenset(f"e{i}" for i in range(6))
        regenerate, reason, _ = self._plan(self.FIRMS, before, frozenset(self.FIRMS), 0.1)
        assert (regenerate, reason) == (True, "membership_changed")

    def test_a_newcomer_with_news_passes_the_threshold_on_evidence(self) -> None:
        facts = {
            "a": ["A is a bank."],
            "b": ["B is a bank."],
            "c": ["C is a bank."],
            "d": ["D was raided.", "D's chief resigned.", "D lost its licence."],
        }
        regenerate, reason, _ = self._plan(facts, frozenset("abc"), frozenset("abcd"), 0.3)
        assert (regenerate, reason) == (True, "new_evidence")


class TestEvidenceIndex:
    """The index the job keeps between runs, updated element by element."""

    def test_updates_equal_a_fresh_build(self) -> None:
        index = graph_of(BASE, BASE_EDGES)
        index.set_entity("crane", ["Crane is a bank.", "Crane lent Acme money."], ["fraud TRUE x"])
        index.set_relationship("", "crane", "acme", ["Crane lent Acme money."])
        claim = ReportClaim("k1", 1, "crane", "fraud", "TRUE", "x")
        fresh = graph_of(
            {**BASE, "crane": ["Crane is a bank.", "Crane lent Acme money."]},
            {**BASE_EDGES, ("acme", "crane"): ["Crane lent Acme money."]},
            [claim],
        )
        assert index.entity_facts == fresh.entity_facts
        assert index.edge_facts == fresh.edge_facts

    def test_two_relationships_of_one_pair_share_an_edge_until_both_are_gone(self) -> None:
        index = graph_of(BASE)
        index.set_relationship("r1", "acme", "bolt", ["Acme supplies Bolt."])
        index.set_relationship("r2", "bolt", "acme", ["Bolt pays Acme."])
        assert len(index.edge_facts["acme"]["bolt"]) == 2
        assert index.edge_facts["bolt"]["acme"] == index.edge_facts["acme"]["bolt"]
        index.drop_relationship("r1")
        assert index.edge_facts["acme"]["bolt"] == {
            fingerprint("relationship", "acme\x00bolt", "Bolt pays Acme.")
        }
        index.drop_relationship("r2")
        index.drop_relationship("r2")  # dropping twice is harmless
        assert "acme" not in index.edge_facts and "bolt" not in index.edge_facts
        assert index.community_evidence(MEMBERS) == graph_of(BASE).community_evidence(MEMBERS)

    def test_an_entity_left_with_no_facts_leaves_the_index(self) -> None:
        index = graph_of(BASE)
        index.set_entity("bolt", [], [])
        assert "bolt" not in index.entity_facts


# ---- evidence carried over between runs -------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_evidence_carried_over_between_runs_is_the_evidence_counted_afresh(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of random changes (facts rewritten, relationships added and dropped, entities
    emptied) with communities that gain and lose members: what ``evidence_of`` carries over
    is exactly what counting afresh gives, run after run, also for a community that a run
    skipped (nothing in it changed)."""
    monkeypatch.setattr(evidence_module, "MEMO_MIN_MEMBERS", 1)
    rng = random.Random(seed)
    keys = [f"e{i:02d}" for i in range(24)]
    index = EvidenceIndex.build([EntityFacts(k, (f"{k} is known.",)) for k in keys], [])
    rels: dict[str, tuple[str, str]] = {}
    communities = {f"c{i}": frozenset(rng.sample(keys, 8)) for i in range(4)}
    for run in range(25):
        touched: set[str] = set()
        changes: list[tuple[str, object]] = []
        for step in range(rng.randint(0, 5)):
            roll = rng.random()
            if roll < 0.35:
                key = rng.choice(keys)
                texts = tuple(f"{key} fact {rng.randint(0, 3)}." for _ in range(rng.randint(0, 2)))
                changes.append(("entity", (key, texts)))
                touched.add(key)
            elif roll < 0.75 or not rels:
                a, b = rng.sample(keys, 2)
                key = f"r{run}-{step}"
                rels[key] = (a, b)
                changes.append(("rel", (key, a, b, (f"{a} deals with {b} {run}.",))))
                touched.update((a, b))
            else:
                key = rng.choice(sorted(rels))
                changes.append(("drop", key))
                touched.update(rels.pop(key))
        index.begin_update(touched)
        for kind, arg in changes:
            if kind == "entity":
                key, texts = arg  # type: ignore[misc]
                index.set_entity(key, texts, ())
            elif kind == "rel":
                key, a, b, texts = arg  # type: ignore[misc]
                index.set_relationship(key, a, b, texts)
            else:
                index.drop_relationship(arg)  # type: ignore[arg-type]
        for cid, members in list(communities.items()):
            if rng.random() < 0.3:  # members come and go
                members = frozenset(
                    {k for k in members if rng.random() > 0.2} | set(rng.sample(keys, 2))
                )
                communities[cid] = members
            elif rng.random() < 0.3 and touched.isdisjoint(members):
                continue  # not planned this run: nothing in it changed
            assert index.evidence_of(cid, members) == index.community_evidence(members), (
                f"run {run}, {cid}"
            )
        index.end_update(communities)


class _CountedEdges(dict[str, dict[str, frozenset[str]]]):
    """An index's edges that count their reads (as the job's on-disk map unpickles each)."""

    reads = 0

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        self.reads += 1
        return super().get(key, default)


def test_an_update_reads_each_members_edges_once_and_again_once_rewritten() -> None:
    index = graph_of(BASE, BASE_EDGES)
    index.edge_facts = _CountedEdges(index.edge_facts)
    index.begin_update({"acme"})
    index.edge_facts.reads = 0
    first = index.community_evidence(MEMBERS)
    assert index.community_evidence(MEMBERS) == first  # a parent's count reads them again
    assert index.edge_facts.reads == len(MEMBERS)  # once each
    index.set_relationship("r9", "bolt", "crane", ["Bolt hauls for Crane."])
    edges = {**BASE_EDGES, ("bolt", "crane"): ["Bolt hauls for Crane."]}
    assert index.community_evidence(MEMBERS) == graph_of(BASE, edges).community_evidence(MEMBERS)
    index.end_update({"c1"})
    index.edge_facts.reads = 0
    index.community_evidence(MEMBERS)
    assert index.edge_facts.reads == len(MEMBERS)  # after the update: nothing held
    assert index.community_evidence(MEMBERS) != first


def test_a_parent_follows_its_rewritten_child_reports_by_their_share_of_its_members() -> None:
    """A parent whose context is ten child reports: one small child rewritten leaves it as it
    is; children holding more than the threshold of its members rewrite it; without sizes
    any rewritten child report does (the rule before sizes were known)."""
    kids = [
        Community(f"k{i}", 1, "top", (), frozenset(f"e{i}-{j}" for j in range(10)))
        for i in range(10)
    ]
    top = Community(
        "top", 0, None, tuple(k.id for k in kids), frozenset().union(*(k.entity_keys for k in kids))
    )
    facts = {k.id: frozenset({f"fact-{k.id}"}) for k in kids} | {"top": frozenset({"fact-top"})}
    bases = {
        cid: ReportBasis(
            c.entity_keys, facts[cid], tuple(k.id for k in kids) if cid == "top" else ()
        )
        for cid, c in [(k.id, k) for k in kids] + [("top", top)]
    }
    sizes = {c.id: len(c.entity_keys) for c in [*kids, top]}

    def plan(news: set[str], with_sizes: bool) -> set[str]:
        evidence = dict(facts)
        for cid in news:  # new facts: a child's report is stale
            evidence[cid] = facts[cid] | {f"new-{cid}-{n}" for n in range(3)}
        made = decide_regeneration(
            [*kids, top], evidence, bases, threshold=0.2, sizes=sizes if with_sizes else None
        )
        return set(made.to_regenerate)

    assert plan({"k0"}, with_sizes=True) == {"k0"}  # 10% of its members
    assert plan({"k0", "k1"}, with_sizes=True) == {"k0", "k1"}  # 20%: not more than it
    assert plan({"k0", "k1", "k2"}, with_sizes=True) == {"k0", "k1", "k2", "top"}  # 30%
    assert plan({"k0"}, with_sizes=False) == {"k0", "top"}


def test_an_index_from_a_checkpoint_before_evidence_was_remembered_counts_afresh() -> None:
    index = EvidenceIndex.build([EntityFacts("a", ("A is known.",))], [])
    state = dict(vars(index))
    del state["memo"], state["_before"]
    old = EvidenceIndex.__new__(EvidenceIndex)
    old.__setstate__(state)
    members = frozenset({"a"})
    assert old.evidence_of("c-1", members) == index.community_evidence(members)
    assert pickle.loads(pickle.dumps(old)).memo == old.memo


def test_scope_evidence_counts_each_community_when_asked() -> None:
    graph = graph_of(BASE, BASE_EDGES)
    scope = [community("all"), community("pair", frozenset({"acme", "bolt"}))]
    lazy = ScopeEvidence(graph, scope)
    assert list(lazy) == ["all", "pair"] and len(lazy) == 2
    assert lazy["pair"] == graph.community_evidence(frozenset({"acme", "bolt"}))
    assert lazy.get("all") == graph.community_evidence(MEMBERS)
    assert lazy.get("elsewhere") is None
