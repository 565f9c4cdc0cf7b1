"""Building community report contexts within a token budget (see ``graph.reports.context``).

Leaf community: its internal edges are taken in descending combined degree (source degree +
target degree; ties broken by relationship key so the result never depends on input order).
Each edge brings its endpoints' rows (first time only), their claims and the edge row; the
next edge is added while the whole context stays within ``max_tokens``. Members without an
internal edge follow, by degree. Nothing is cut mid-row.

Higher community: if every element fits, the context is built exactly as for a leaf. Otherwise
sub-communities' element lists (their members, the claims about them and their internal
edges) are replaced by their existing reports, the largest sub-community first, until the rest
fits. Edges *between* sub-communities belong to the parent, not to a child's element list, so
they stay. Microsoft's ``build_mixed_context`` is meant to do this but never substitutes; here
the substitution is real and ``ReportContext.used_child_reports`` says which reports were used,
because a parent must be regenerated when one of those reports is.

The choice of what goes in lives here; rendering rows, counting their tokens and filling the
budget with them are ``graph.reports.rows``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from graph.model import Community
from graph.reports.context import (
    ChildReport,
    ReportContext,
    ReportContextError,
    ReportGraph,
    ReportRelationship,
)
from graph.reports.rows import (
    Group,
    RowCosts,
    Rows,
    Selection,
    TokenCounter,
    element_groups,
    fill,
    finish,
    headers_cost,
    members_cost,
    total_cost,
)


def _substitutable(
    community: Community,
    sub_communities: Mapping[str, Community],
    child_reports: Mapping[str, ChildReport],
) -> list[Community]:
    """Children that have a report, largest first (ties by id, for determinism)."""
    children: list[Community] = []
    for child_id in community.children:
        child = sub_communities.get(child_id)
        if child is None:
            raise ReportContextError(
                f"community {community.id} lists child {child_id}, which was not given"
            )
        if child_id in child_reports:
            children.append(child)
    return sorted(children, key=lambda c: (-len(c.entity_keys), c.id))


def _without_children(
    graph: ReportGraph,
    rows: Rows,
    community: Community,
    edges: Sequence[ReportRelationship],
    substituted: Sequence[Community],
) -> list[Group]:
    """The parent's elements once the substituted children's element lists are removed."""
    owner = {key: child.id for child in substituted for key in child.entity_keys}
    kept = [r for r in edges if not (r.source in owner and owner[r.source] == owner.get(r.target))]
    return element_groups(graph, rows, community.entity_keys - owner.keys(), kept)


def _savings(
    graph: ReportGraph,
    rows: Rows,
    edges: Sequence[ReportRelationship],
    children: Sequence[Community],
) -> list[int]:
    """Tokens each child's element list takes in the parent's context (rows it would drop).

    Computed once, so finding how many children to substitute is one pass, not one context
    build per candidate: a level-0 community can have hundreds of children.
    """
    index = {child.id: i for i, child in enumerate(children)}
    owner = {key: child.id for child in children for key in child.entity_keys}
    saved = [0] * len(children)
    for i, child in enumerate(children):
        ents = [graph.entities[k] for k in child.entity_keys if k in graph.entities]
        claims = [c for e in ents for c in graph.claims_by_entity.get(e.key, ())]
        saved[i] = members_cost(rows, ents, claims)
    for rel in edges:
        child_id = owner.get(rel.source)
        if child_id is not None and child_id == owner.get(rel.target):
            saved[index[child_id]] += rows.relationship_cost(rel)
    return saved


def _substitution_count(
    rows: Rows,
    full_cost: int,
    saved: Sequence[int],
    reports: Sequence[ChildReport],
    max_tokens: int,
) -> int | None:
    """Smallest k such that the first k children's reports in place of their elements fit."""
    cost = full_cost + rows.header_cost("Reports")
    for k, (saving, report) in enumerate(zip(saved, reports, strict=True), start=1):
        cost += rows.report_cost(report) - saving
        if cost <= max_tokens:
            return k
    return None


class ReportContextBuilder:
    """Builds the contexts of one run's communities over one graph.

    Row token counts are remembered across communities: every level shows the same entity and
    relationship rows, so each row is counted once per run instead of once per level, and
    across runs when the caller keeps ``costs`` (a row is counted again when its cells change).
    """

    def __init__(
        self, graph: ReportGraph, count_tokens: TokenCounter, costs: RowCosts | None = None
    ) -> None:
        self.graph = graph
        self._count = count_tokens
        self._rows = Rows(graph, count_tokens, costs)

    def build(
        self,
        community: Community,
        *,
        max_tokens: int,
        sub_communities: Mapping[str, Community] | None = None,
        child_reports: Mapping[str, ChildReport] | None = None,
    ) -> ReportContext:
        """The report context of ``community`` within ``max_tokens`` (see the module docstring).

        ``sub_communities`` must hold the records of the community's children when it has
        any; ``child_reports`` holds the reports available for substitution (children without
        a report keep their elements).
        """
        if max_tokens <= 0:
            raise ReportContextError(f"max_tokens must be positive, got {max_tokens}")
        graph, rows, count = self.graph, self._rows, self._count
        edges = graph.internal_edges(community.entity_keys)
        groups = element_groups(graph, rows, community.entity_keys, edges)
        headers = headers_cost(rows, groups, ())
        if not community.children or total_cost(groups) + headers <= max_tokens:
            sel = Selection()
            complete = fill(groups, sel, max_tokens - headers)
            return finish(rows, sel, not complete, count, max_tokens)
        children = _substitutable(community, sub_communities or {}, child_reports or {})
        reports = [(child_reports or {})[c.id] for c in children]
        saved = _savings(graph, rows, edges, children)
        k = _substitution_count(rows, total_cost(groups) + headers, saved, reports, max_tokens)
        if k is None:
            return _overflow(graph, rows, community, edges, children, reports, count, max_tokens)
        rest = _without_children(graph, rows, community, edges, children[:k])
        sel = Selection(reports=list(reports[:k]))
        complete = fill(rest, sel, max_tokens - headers_cost(rows, rest, reports[:k]))
        return finish(rows, sel, not complete, count, max_tokens)


def build_report_context(
    community: Community,
    graph: ReportGraph,
    *,
    max_tokens: int,
    count_tokens: TokenCounter,
    sub_communities: Mapping[str, Community] | None = None,
    child_reports: Mapping[str, ChildReport] | None = None,
) -> ReportContext:
    """One context, no shared row counts; a run should use :class:`ReportContextBuilder`."""
    return ReportContextBuilder(graph, count_tokens).build(
        community,
        max_tokens=max_tokens,
        sub_communities=sub_communities,
        child_reports=child_reports,
    )


def _overflow(
    graph: ReportGraph,
    rows: Rows,
    community: Community,
    edges: Sequence[ReportRelationship],
    children: Sequence[Community],
    reports: Sequence[ChildReport],
    count_tokens: TokenCounter,
    max_tokens: int,
) -> ReportContext:
    """Even every report plus the rest does not fit: reports first, largest child first,
    then as many remaining elements as the budget allows."""
    rest = _without_children(graph, rows, community, edges, children)
    budget = max_tokens - headers_cost(rows, rest, reports)
    sel = Selection()
    for report in reports:
        cost = rows.report_cost(report)
        if cost > budget:
            break
        sel.reports.append(report)
        budget -= cost
    fill(rest, sel, budget)
    return finish(rows, sel, True, count_tokens, max_tokens)
