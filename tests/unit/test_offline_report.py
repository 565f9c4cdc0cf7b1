"""Offline extractive community reports: labelled, cite only their context, deterministic."""

from __future__ import annotations

import random
import re
from collections import Counter

import orjson

from graph.model import Community
from graph.reports.context import (
    ChildReport,
    ReportContext,
    ReportEntity,
    ReportGraph,
    ReportRelationship,
)
from graph.reports.context_builder import build_report_context
from offline.report import format_citation, write_offline_report

CITATION = re.compile(r"\[Data: ([^\]]+)\]")
DATASET = re.compile(r"(\w+) \(([^)]*)\)")

# hub "opec" with 7 partners, plus a pair of outsiders that never reach the context
EDGES = [("opec", f"member{i}") for i in range(7)] + [("member0", "member1"), ("far1", "far2")]


def count_tokens(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


def make_graph(edges: list[tuple[str, str]]) -> ReportGraph:
    degree = Counter(k for e in edges for k in e)
    keys = sorted(degree)
    entities = [
        ReportEntity(
            k,
            10 + i,
            k.upper(),
            "geo" if k.startswith("member") else "organization",
            f"{k.upper()} is a party to the 1987 oil accord. {k.upper()} cut output by {i}%.",
            degree[k],
        )
        for i, k in enumerate(keys)
    ]
    rel_hrid = {pair: 200 + i for i, pair in enumerate(sorted(edges))}  # ids follow the pair
    rels = [
        ReportRelationship(
            f"{a}|{b}",
            rel_hrid[(a, b)],
            a,
            b,
            f"{a.upper()} sets quotas with {b.upper()}.",
            2.0,
            degree[a] + degree[b],
        )
        for a, b in edges
    ]
    return ReportGraph.build(entities, rels)


MEMBERS = frozenset({"opec", *(f"member{i}" for i in range(7))})


def context(budget: int = 10_000, edges: list[tuple[str, str]] = EDGES) -> ReportContext:
    community = Community("c-1", 1, None, (), MEMBERS)
    return build_report_context(
        community, make_graph(edges), max_tokens=budget, count_tokens=count_tokens
    )


def cited(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for body in CITATION.findall(text):
        for name, ids in DATASET.findall(body):
            out.setdefault(name, []).extend(i.strip() for i in ids.split(","))
    return out


class TestOfflineReport:
    def test_json_shape_and_offline_label(self) -> None:
        report = write_offline_report(Community("c-1", 1, None, (), MEMBERS), context())
        data = orjson.loads(orjson.dumps(report.as_dict()))
        assert set(data) == {"title", "summary", "rating", "rating_explanation", "findings", "mode"}
        assert data["mode"] == "offline"
        assert data["title"].endswith("(offline)")
        assert data["title"].startswith("OPEC")  # the top entity by degree
        assert data["summary"].startswith("Offline extractive report:")
        assert 0 <= data["rating"] <= 10
        assert all(set(f) == {"summary", "explanation"} for f in data["findings"])

    def test_findings_cite_only_ids_in_the_context_at_most_five(self) -> None:
        for budget in (60, 150, 10_000):
            ctx = context(budget)
            report = write_offline_report(Community("c-1", 1, None, (), MEMBERS), ctx)
            allowed = {
                "Entities": {str(i) for i in ctx.entity_hrids},
                "Relationships": {str(i) for i in ctx.relationship_hrids},
            }
            for finding in report.findings:
                for dataset, ids in cited(finding.explanation).items():
                    real = [i for i in ids if i != "+more"]
                    assert len(real) <= 5
                    assert set(real) <= allowed[dataset], (budget, dataset, real)
        hub = write_offline_report(Community("c-1", 1, None, (), MEMBERS), context()).findings[0]
        assert "+more" in hub.explanation  # OPEC has 7 relationships in the context

    def test_deterministic_whatever_the_input_order(self) -> None:
        shuffled = list(EDGES)
        random.Random(5).shuffle(shuffled)
        community = Community("c-1", 1, None, (), MEMBERS)
        a = write_offline_report(community, context(edges=EDGES))
        b = write_offline_report(community, context(edges=shuffled))
        assert a == b

    def test_bigger_community_rates_higher(self) -> None:
        small = Community("c-s", 1, None, (), frozenset({"opec", "member0"}))
        g = make_graph(EDGES)
        small_ctx = build_report_context(small, g, max_tokens=10_000, count_tokens=count_tokens)
        big = write_offline_report(Community("c-1", 1, None, (), MEMBERS), context())
        assert write_offline_report(small, small_ctx).rating < big.rating

    def test_substituted_sub_reports_are_cited_as_reports(self) -> None:
        child = Community("c-child", 2, "c-1", (), MEMBERS - {"opec"})
        parent = Community("c-1", 1, None, ("c-child",), MEMBERS)
        report_of_child = ChildReport("c-child", 77, "Gulf producers", "Gulf producers agreed.")
        ctx = build_report_context(
            parent,
            make_graph(EDGES),
            max_tokens=120,
            count_tokens=count_tokens,
            sub_communities={"c-child": child},
            child_reports={"c-child": report_of_child},
        )
        assert ctx.used_child_reports == ("c-child",)
        report = write_offline_report(parent, ctx)
        assert "Gulf producers" in report.summary
        assert cited(report.findings[0].explanation) == {"Reports": ["77"]}


class TestCitation:
    def test_format(self) -> None:
        assert format_citation([("Entities", [1, 2]), ("Relationships", [])]) == (
            "[Data: Entities (1, 2)]"
        )
        assert format_citation([("Relationships", list(range(7)))]) == (
            "[Data: Relationships (0, 1, 2, 3, 4, +more)]"
        )
        assert format_citation([("Entities", [])]) == ""


def test_a_parent_titled_after_its_children_carries_one_offline_mark() -> None:
    from graph.reports.context import ChildReport, ReportContext
    from offline.report import _title

    ctx = ReportContext(
        text="",
        token_count=0,
        entities=(),
        relationships=(),
        claims=(),
        child_reports=(
            ChildReport("c-1", 1, "Japan and Tokyo (offline)", "x"),
            ChildReport("c-2", 2, "Ford and Detroit (offline)", "y"),
        ),
        truncated=False,
    )
    title = _title(ctx, Community("c-3", 0, None, ("c-1", "c-2"), frozenset({"a", "b"})))
    assert title.count("(offline)") == 1
    assert "Japan and Tokyo" in title and "Ford and Detroit" in title
