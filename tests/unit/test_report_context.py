"""Community report context: budget, order by combined degree, real sub-report substitution."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import pytest

from graph.model import Community
from graph.reports.context import (
    ChildReport,
    ReportClaim,
    ReportContextError,
    ReportEntity,
    ReportGraph,
    ReportRelationship,
)
from graph.reports.context_builder import ReportContextBuilder, build_report_context
from graph.reports.rows import RowCosts


def count_tokens(text: str) -> int:
    """Words and punctuation marks: close enough to BPE for budgets, and deterministic."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def make_graph(
    edges: Sequence[tuple[str, str]],
    *,
    isolated: Iterable[str] = (),
    claims: Iterable[tuple[str, str]] = (),
    words: int = 6,
) -> ReportGraph:
    """Entities named by their keys; every description has ``words`` words."""
    degree = Counter(k for edge in edges for k in edge)
    keys = sorted({*degree, *isolated})
    hrid = {k: i for i, k in enumerate(keys)}
    entities = [
        ReportEntity(k, hrid[k], k.upper(), "organization", f"{k} " + "fact " * words, degree[k])
        for k in keys
    ]
    rels = [
        ReportRelationship(
            f"{a}|{b}", 100 + i, a, b, f"{a} works with {b}", 1.0, degree[a] + degree[b]
        )
        for i, (a, b) in enumerate(edges)
    ]
    claim_records = [
        ReportClaim(f"claim-{i}", 500 + i, subject, "fraud", "SUSPECTED", text)
        for i, (subject, text) in enumerate(claims)
    ]
    return ReportGraph.build(entities, rels, claim_records)


def leaf(members: Iterable[str], cid: str = "c1", level: int = 1) -> Community:
    return Community(cid, level, None, (), frozenset(members))


def full_size(community: Community, graph: ReportGraph) -> int:
    return build_report_context(
        community, graph, max_tokens=10**9, count_tokens=count_tokens
    ).token_count


# A hub (h) with spokes, a chain, and one edge leaving the community (to "out").
STAR = [("h", "a"), ("h", "b"), ("h", "c"), ("a", "b"), ("c", "d"), ("d", "e"), ("e", "out")]
STAR_MEMBERS = ("h", "a", "b", "c", "d", "e")


class TestLeafContext:
    def test_edges_come_in_descending_combined_degree(self) -> None:
        graph = make_graph(STAR)
        ctx = build_report_context(
            leaf(STAR_MEMBERS), graph, max_tokens=10_000, count_tokens=count_tokens
        )
        degrees = [r.combined_degree for r in ctx.relationships]
        assert degrees == sorted(degrees, reverse=True)
        assert ctx.relationships[0].key in {"h|a", "h|b", "h|c"}
        assert not ctx.truncated

    def test_edges_leaving_the_community_are_left_out(self) -> None:
        graph = make_graph(STAR)
        ctx = build_report_context(
            leaf(STAR_MEMBERS), graph, max_tokens=10_000, count_tokens=count_tokens
        )
        assert "e|out" not in {r.key for r in ctx.relationships}
        assert "OUT" not in ctx.text
        assert set(ctx.entity_hrids) == {graph.entities[k].human_readable_id for k in STAR_MEMBERS}

    def test_every_budget_is_respected_and_keeps_a_prefix_of_the_order(self) -> None:
        graph = make_graph(STAR)
        community = leaf(STAR_MEMBERS)
        full = build_report_context(community, graph, max_tokens=10_000, count_tokens=count_tokens)
        for budget in range(10, full.token_count + 5, 7):
            ctx = build_report_context(
                community, graph, max_tokens=budget, count_tokens=count_tokens
            )
            assert ctx.token_count <= budget
            assert ctx.token_count == count_tokens(ctx.text)
            assert ctx.relationships == full.relationships[: len(ctx.relationships)]
            assert ctx.truncated == (len(ctx.relationships) < len(full.relationships))

    def test_each_included_edge_brings_both_endpoint_descriptions(self) -> None:
        graph = make_graph(STAR)
        ctx = build_report_context(
            leaf(STAR_MEMBERS),
            graph,
            max_tokens=full_size(leaf(STAR_MEMBERS), graph) // 2,
            count_tokens=count_tokens,
        )
        assert ctx.truncated and ctx.relationships
        keys = {e.key for e in ctx.entities}
        for rel in ctx.relationships:
            assert {rel.source, rel.target} <= keys

    def test_same_context_whatever_the_input_order(self) -> None:
        shuffled = list(STAR)
        random.Random(7).shuffle(shuffled)
        a = make_graph(STAR)
        b = make_graph(shuffled)
        community = leaf(reversed(STAR_MEMBERS))
        ctx_a = build_report_context(
            leaf(STAR_MEMBERS), a, max_tokens=90, count_tokens=count_tokens
        )
        ctx_b = build_report_context(community, b, max_tokens=90, count_tokens=count_tokens)
        assert [r.key for r in ctx_a.relationships] == [r.key for r in ctx_b.relationships]

    def test_tables_carry_human_readable_ids_and_claims(self) -> None:
        graph = make_graph(STAR, claims=[("h", "H hid losses")])
        ctx = build_report_context(
            leaf(STAR_MEMBERS), graph, max_tokens=10_000, count_tokens=count_tokens
        )
        assert "-----Entities-----\nid,entity,description,degree" in ctx.text
        assert "-----Relationships-----\nid,source,target,description,combined_degree" in ctx.text
        assert (
            "-----Claims-----\nid,entity,type,status,description\n500,H,fraud,SUSPECTED" in ctx.text
        )
        assert ctx.claim_hrids == (500,)
        h_id = graph.entities["h"].human_readable_id
        assert f"\n{h_id},H,h fact fact" in ctx.text

    def test_members_without_internal_edges_still_appear(self) -> None:
        graph = make_graph([("a", "b")], isolated=["lonely"])
        ctx = build_report_context(
            leaf(["a", "b", "lonely"]), graph, max_tokens=1000, count_tokens=count_tokens
        )
        assert "lonely" in {e.key for e in ctx.entities}

    # bpe_openai uses importlib.resources.open_binary on import (its own deprecation)
    @pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")
    def test_real_tokenizer_budget(self) -> None:
        from core.tokenizer import get_encoding

        enc = get_encoding("o200k_base")

        def bpe(text: str) -> int:
            return len(enc.encode(text))

        graph = make_graph(STAR, claims=[("a", "A, it is said, moved funds")], words=20)
        for budget in (150, 300, 600):
            ctx = build_report_context(
                leaf(STAR_MEMBERS), graph, max_tokens=budget, count_tokens=bpe
            )
            assert ctx.token_count == bpe(ctx.text) <= budget
            assert ctx.relationships


def clique(prefix: str, n: int) -> list[tuple[str, str]]:
    names = [f"{prefix}{i}" for i in range(n)]
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]


BIG = [f"big{i}" for i in range(6)]
SMALL = [f"small{i}" for i in range(3)]
PARENT_EDGES = [*clique("big", 6), *clique("small", 3), ("big0", "small0")]


def family() -> tuple[Community, dict[str, Community], dict[str, ChildReport]]:
    big = Community("c-big", 1, "c-p", (), frozenset(BIG))
    small = Community("c-small", 1, "c-p", (), frozenset(SMALL))
    parent = Community("c-p", 0, None, ("c-small", "c-big"), frozenset(BIG + SMALL))
    reports = {
        "c-big": ChildReport("c-big", 41, "Big cartel", "Big cartel: six firms fix prices."),
        "c-small": ChildReport("c-small", 42, "Small trio", "Small trio: three banks lend."),
    }
    return parent, {"c-big": big, "c-small": small}, reports


class TestHigherLevelContext:
    def test_everything_fits_uses_the_elements(self) -> None:
        graph = make_graph(PARENT_EDGES)
        parent, subs, reports = family()
        ctx = build_report_context(
            parent,
            graph,
            max_tokens=10_000,
            count_tokens=count_tokens,
            sub_communities=subs,
            child_reports=reports,
        )
        assert ctx.used_child_reports == ()
        assert {e.key for e in ctx.entities} == set(BIG + SMALL)
        assert "-----Reports-----" not in ctx.text
        assert not ctx.truncated

    def test_over_budget_substitutes_the_largest_child_first(self) -> None:
        graph = make_graph(PARENT_EDGES)
        parent, subs, reports = family()
        everything = full_size(parent, graph)
        only_small = full_size(subs["c-small"], graph)
        budget = only_small + 60  # room for the small child's elements + the big child's report
        assert budget < everything
        ctx = build_report_context(
            parent,
            graph,
            max_tokens=budget,
            count_tokens=count_tokens,
            sub_communities=subs,
            child_reports=reports,
        )
        assert ctx.used_child_reports == ("c-big",)
        assert not ctx.truncated
        assert ctx.token_count <= budget
        assert {e.key for e in ctx.entities} == set(SMALL)
        assert "-----Reports-----\nid,title,content\n41,Big cartel," in ctx.text
        # the edge between the two children belongs to the parent and stays
        assert "big0|small0" in {r.key for r in ctx.relationships}
        assert not any(r.source in BIG and r.target in BIG for r in ctx.relationships)

    def test_tighter_budget_substitutes_both_largest_first(self) -> None:
        graph = make_graph(PARENT_EDGES)
        parent, subs, reports = family()
        only_big = build_report_context(
            parent,
            graph,
            max_tokens=full_size(subs["c-small"], graph) + 60,
            count_tokens=count_tokens,
            sub_communities=subs,
            child_reports=reports,
        )
        budget = only_big.token_count - 1  # the small child's elements no longer fit
        ctx = build_report_context(
            parent,
            graph,
            max_tokens=budget,
            count_tokens=count_tokens,
            sub_communities=subs,
            child_reports=reports,
        )
        assert ctx.used_child_reports == ("c-big", "c-small")
        assert not ctx.truncated
        assert ctx.token_count <= budget
        assert ctx.entities == ()
        assert [r.key for r in ctx.relationships] == ["big0|small0"]

    def test_child_without_a_report_keeps_its_elements(self) -> None:
        graph = make_graph(PARENT_EDGES)
        parent, subs, reports = family()
        del reports["c-big"]
        ctx = build_report_context(
            parent,
            graph,
            max_tokens=full_size(parent, graph) - 20,
            count_tokens=count_tokens,
            sub_communities=subs,
            child_reports=reports,
        )
        assert "c-big" not in ctx.used_child_reports
        assert ctx.token_count <= full_size(parent, graph) - 20

    def test_budget_too_small_for_every_report_is_still_respected(self) -> None:
        graph = make_graph(PARENT_EDGES)
        parent, subs, reports = family()
        ctx = build_report_context(
            parent,
            graph,
            max_tokens=25,
            count_tokens=count_tokens,
            sub_communities=subs,
            child_reports=reports,
        )
        assert ctx.truncated
        assert ctx.token_count <= 25
        assert ctx.used_child_reports in {(), ("c-big",)}

    def test_one_builder_for_a_whole_run_gives_the_same_contexts(self) -> None:
        graph = make_graph(PARENT_EDGES)
        parent, subs, reports = family()
        builder = ReportContextBuilder(graph, count_tokens)
        for budget in (60, 120, 10_000):
            for c in (subs["c-big"], subs["c-small"], parent):
                fresh = build_report_context(
                    c,
                    graph,
                    max_tokens=budget,
                    count_tokens=count_tokens,
                    sub_communities=subs,
                    child_reports=reports,
                )
                reused = builder.build(
                    c, max_tokens=budget, sub_communities=subs, child_reports=reports
                )
                assert reused == fresh

    def test_costs_kept_across_runs_are_recounted_when_a_row_changes(self) -> None:
        """A later run's builder shares the first one's costs: a row whose cells changed (a
        longer description) is counted again, so its context is what a fresh build gives."""
        parent, subs, reports = family()
        costs: RowCosts = {}
        for words in (6, 40, 6):
            graph = make_graph(PARENT_EDGES, words=words)
            kept = ReportContextBuilder(graph, count_tokens, costs)
            for c in (subs["c-big"], parent):
                fresh = build_report_context(
                    c,
                    graph,
                    max_tokens=120,
                    count_tokens=count_tokens,
                    sub_communities=subs,
                    child_reports=reports,
                )
                assert (
                    kept.build(c, max_tokens=120, sub_communities=subs, child_reports=reports)
                    == fresh
                ), words
        assert costs

    def test_unknown_child_is_a_typed_error(self) -> None:
        graph = make_graph(PARENT_EDGES)
        parent, _, reports = family()
        with pytest.raises(ReportContextError, match=r"c-p lists child c-(small|big)"):
            build_report_context(
                parent,
                graph,
                max_tokens=40,
                count_tokens=count_tokens,
                sub_communities={},
                child_reports=reports,
            )
