"""The context a community report is written from (GraphRAG's community report context).

A report can only cite what its context shows, so the context is a set of delimited tables whose
``id`` column holds human-readable ids (``[Data: Entities (3, 7); Relationships (12)]``).

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
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from graph.model import Community

Hrid = int | str
TokenCounter = Callable[[str], int]

_SPACE = re.compile(r"\s+")
_HEADERS = {
    "Reports": ("id", "title", "content"),
    "Entities": ("id", "entity", "description", "degree"),
    "Relationships": ("id", "source", "target", "description", "combined_degree"),
    "Claims": ("id", "entity", "type", "status", "description"),
}


class ReportContextError(ValueError):
    """The inputs cannot describe the community (e.g. a child id with no community record)."""


@dataclass(frozen=True, slots=True)
class ReportEntity:
    key: str  # entity key (graph.keys.entity_key)
    human_readable_id: Hrid
    name: str
    type: str
    description: str  # the current (summarised) description
    degree: int


@dataclass(frozen=True, slots=True)
class ReportRelationship:
    key: str  # relationship key (graph.keys.relationship_key)
    human_readable_id: Hrid
    source: str  # entity key
    target: str  # entity key
    description: str
    weight: float
    combined_degree: int  # degree(source) + degree(target)


@dataclass(frozen=True, slots=True)
class ReportClaim:
    key: str
    human_readable_id: Hrid
    subject: str  # entity key the claim is about
    type: str
    status: str  # TRUE, FALSE or SUSPECTED
    description: str


@dataclass(frozen=True, slots=True)
class ChildReport:
    """An existing report of a sub-community, usable in place of its element list."""

    community_id: str
    human_readable_id: Hrid
    title: str
    content: str  # full content (title, summary, findings); flattened to one row


@dataclass(frozen=True, slots=True)
class ReportGraph:
    """The merged graph indexed for context building; build once per run with :meth:`build`."""

    entities: Mapping[str, ReportEntity]
    edges_by_entity: Mapping[str, tuple[ReportRelationship, ...]]
    claims_by_entity: Mapping[str, tuple[ReportClaim, ...]]

    @classmethod
    def build(
        cls,
        entities: Iterable[ReportEntity],
        relationships: Iterable[ReportRelationship],
        claims: Iterable[ReportClaim] = (),
    ) -> ReportGraph:
        edges: dict[str, list[ReportRelationship]] = {}
        for rel in relationships:
            edges.setdefault(rel.source, []).append(rel)
            if rel.target != rel.source:
                edges.setdefault(rel.target, []).append(rel)
        by_subject: dict[str, list[ReportClaim]] = {}
        for claim in claims:
            by_subject.setdefault(claim.subject, []).append(claim)
        return cls(
            entities={e.key: e for e in entities},
            edges_by_entity={k: tuple(v) for k, v in edges.items()},
            claims_by_entity={
                k: tuple(sorted(v, key=lambda c: c.key)) for k, v in by_subject.items()
            },
        )

    def internal_edges(self, members: frozenset[str]) -> list[ReportRelationship]:
        """Edges with both endpoints in ``members``, by descending combined degree, then key."""
        seen: dict[str, ReportRelationship] = {}
        for key in members:
            for rel in self.edges_by_entity.get(key, ()):
                if rel.source in members and rel.target in members:
                    seen[rel.key] = rel
        return sorted(seen.values(), key=lambda r: (-r.combined_degree, r.key))


@dataclass(frozen=True, slots=True)
class ReportContext:
    text: str
    token_count: int
    entities: tuple[ReportEntity, ...]
    relationships: tuple[ReportRelationship, ...]
    claims: tuple[ReportClaim, ...]
    child_reports: tuple[ChildReport, ...]  # in substitution order (largest child first)
    truncated: bool  # something of the community did not fit, even after substitution

    @property
    def entity_hrids(self) -> tuple[Hrid, ...]:
        return tuple(e.human_readable_id for e in self.entities)

    @property
    def relationship_hrids(self) -> tuple[Hrid, ...]:
        return tuple(r.human_readable_id for r in self.relationships)

    @property
    def claim_hrids(self) -> tuple[Hrid, ...]:
        return tuple(c.human_readable_id for c in self.claims)

    @property
    def used_child_reports(self) -> tuple[str, ...]:
        """Community ids of the sub-communities whose reports replaced their elements."""
        return tuple(r.community_id for r in self.child_reports)


@dataclass(slots=True)
class _Selection:
    """What goes into a context; mutable only while it is being filled."""

    reports: list[ChildReport] = field(default_factory=list)
    entities: list[ReportEntity] = field(default_factory=list)
    relationships: list[ReportRelationship] = field(default_factory=list)
    claims: list[ReportClaim] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Group:
    """One step of filling: an edge with the endpoint rows and claims it brings in."""

    entities: tuple[ReportEntity, ...]
    claims: tuple[ReportClaim, ...]
    relationship: ReportRelationship | None
    cost: int


def _clean(value: object) -> str:
    return _SPACE.sub(" ", str(value)).strip()


def _row(values: Sequence[object]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([_clean(v) for v in values])
    return buf.getvalue()


class _Rows:
    """Renders rows and remembers each row's token cost (a row is counted once per context)."""

    def __init__(self, graph: ReportGraph, count_tokens: TokenCounter) -> None:
        self._graph = graph
        self._count = count_tokens
        self._costs: dict[tuple[str, str], int] = {}

    def name(self, key: str) -> str:
        entity = self._graph.entities.get(key)
        return entity.name if entity else key

    def entity(self, e: ReportEntity) -> str:
        return _row((e.human_readable_id, e.name, e.description, e.degree))

    def relationship(self, r: ReportRelationship) -> str:
        return _row(
            (
                r.human_readable_id,
                self.name(r.source),
                self.name(r.target),
                r.description,
                r.combined_degree,
            )
        )

    def claim(self, c: ReportClaim) -> str:
        return _row((c.human_readable_id, self.name(c.subject), c.type, c.status, c.description))

    def report(self, r: ChildReport) -> str:
        return _row((r.human_readable_id, r.title, r.content))

    def cost(self, kind: str, key: str, text: Callable[[], str]) -> int:
        """Tokens of one row plus one for its line break (an upper bound in practice)."""
        cached = self._costs.get((kind, key))
        if cached is None:
            cached = self._count(text()) + 1
            self._costs[(kind, key)] = cached
        return cached

    def entity_cost(self, e: ReportEntity) -> int:
        return self.cost("e", e.key, lambda: self.entity(e))

    def relationship_cost(self, r: ReportRelationship) -> int:
        return self.cost("r", r.key, lambda: self.relationship(r))

    def claim_cost(self, c: ReportClaim) -> int:
        return self.cost("c", c.key, lambda: self.claim(c))

    def report_cost(self, r: ChildReport) -> int:
        key = f"{r.community_id}\x00{r.human_readable_id}\x00{r.title}\x00{r.content}"
        return self.cost("p", key, lambda: self.report(r))

    def header_cost(self, section: str) -> int:
        return self.cost("h", section, lambda: _section_header(section)) + 1

    def render(self, sel: _Selection) -> str:
        sections: list[tuple[str, list[str]]] = [
            ("Reports", [self.report(r) for r in sel.reports]),
            ("Entities", [self.entity(e) for e in sel.entities]),
            ("Relationships", [self.relationship(r) for r in sel.relationships]),
            ("Claims", [self.claim(c) for c in sel.claims]),
        ]
        parts = ["\n".join([_section_header(name), *rows]) for name, rows in sections if rows]
        return "\n\n".join(parts)


def _section_header(name: str) -> str:
    return f"-----{name}-----\n" + ",".join(_HEADERS[name])


def _groups(
    graph: ReportGraph,
    rows: _Rows,
    members: frozenset[str],
    edges: Sequence[ReportRelationship],
) -> list[_Group]:
    """Edges in order, each with the member rows it introduces; then edge-less members."""
    seen: set[str] = set()
    out: list[_Group] = []

    def new_members(keys: Iterable[str]) -> tuple[list[ReportEntity], list[ReportClaim]]:
        ents: list[ReportEntity] = []
        claims: list[ReportClaim] = []
        for key in keys:
            if key in members and key not in seen and key in graph.entities:
                seen.add(key)
                ents.append(graph.entities[key])
                claims.extend(graph.claims_by_entity.get(key, ()))
        return ents, claims

    for rel in edges:
        ents, claims = new_members((rel.source, rel.target))
        cost = rows.relationship_cost(rel) + _members_cost(rows, ents, claims)
        out.append(_Group(tuple(ents), tuple(claims), rel, cost))
    rest = sorted(
        (graph.entities[k] for k in members - seen if k in graph.entities),
        key=lambda e: (-e.degree, e.key),
    )
    for entity in rest:
        ents, claims = new_members((entity.key,))
        out.append(_Group(tuple(ents), tuple(claims), None, _members_cost(rows, ents, claims)))
    return out


def _members_cost(rows: _Rows, ents: Sequence[ReportEntity], claims: Sequence[ReportClaim]) -> int:
    return sum(rows.entity_cost(e) for e in ents) + sum(rows.claim_cost(c) for c in claims)


def _headers_cost(rows: _Rows, groups: Sequence[_Group], reports: Sequence[ChildReport]) -> int:
    """Headers of the sections that could appear (a slight over-estimate is harmless)."""
    total = rows.header_cost("Reports") if reports else 0
    if any(g.entities for g in groups):
        total += rows.header_cost("Entities")
    if any(g.relationship for g in groups):
        total += rows.header_cost("Relationships")
    if any(g.claims for g in groups):
        total += rows.header_cost("Claims")
    return total


def _fill(groups: Sequence[_Group], sel: _Selection, budget: int) -> bool:
    """Add groups in order while they fit; True when every group was added."""
    used = 0
    for group in groups:
        if used + group.cost > budget:
            return False
        used += group.cost
        sel.entities.extend(group.entities)
        sel.claims.extend(group.claims)
        if group.relationship is not None:
            sel.relationships.append(group.relationship)
    return True


def _finish(
    rows: _Rows, sel: _Selection, truncated: bool, count: TokenCounter, max_tokens: int
) -> ReportContext:
    """Render, and drop trailing rows in the rare case row costs under-estimated the whole."""
    text = rows.render(sel)
    tokens = count(text)
    while tokens > max_tokens and (sel.relationships or sel.entities or sel.reports):
        truncated = True
        if sel.relationships:
            sel.relationships.pop()
        elif sel.entities:
            dropped = sel.entities.pop()
            sel.claims = [c for c in sel.claims if c.subject != dropped.key]
        else:
            sel.reports.pop()
        text = rows.render(sel)
        tokens = count(text)
    return ReportContext(
        text=text,
        token_count=tokens,
        entities=tuple(sel.entities),
        relationships=tuple(sel.relationships),
        claims=tuple(sel.claims),
        child_reports=tuple(sel.reports),
        truncated=truncated,
    )


def _total(groups: Sequence[_Group]) -> int:
    return sum(g.cost for g in groups)


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
    rows: _Rows,
    community: Community,
    edges: Sequence[ReportRelationship],
    substituted: Sequence[Community],
) -> list[_Group]:
    """The parent's elements once the substituted children's element lists are removed."""
    owner = {key: child.id for child in substituted for key in child.entity_keys}
    kept = [r for r in edges if not (r.source in owner and owner[r.source] == owner.get(r.target))]
    return _groups(graph, rows, community.entity_keys - owner.keys(), kept)


def _savings(
    graph: ReportGraph,
    rows: _Rows,
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
        saved[i] = _members_cost(rows, ents, claims)
    for rel in edges:
        child_id = owner.get(rel.source)
        if child_id is not None and child_id == owner.get(rel.target):
            saved[index[child_id]] += rows.relationship_cost(rel)
    return saved


def _substitution_count(
    rows: _Rows,
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
    relationship rows, so each row is counted once per run instead of once per level.
    """

    def __init__(self, graph: ReportGraph, count_tokens: TokenCounter) -> None:
        self.graph = graph
        self._count = count_tokens
        self._rows = _Rows(graph, count_tokens)

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
        groups = _groups(graph, rows, community.entity_keys, edges)
        headers = _headers_cost(rows, groups, ())
        if not community.children or _total(groups) + headers <= max_tokens:
            sel = _Selection()
            complete = _fill(groups, sel, max_tokens - headers)
            return _finish(rows, sel, not complete, count, max_tokens)
        children = _substitutable(community, sub_communities or {}, child_reports or {})
        reports = [(child_reports or {})[c.id] for c in children]
        saved = _savings(graph, rows, edges, children)
        k = _substitution_count(rows, _total(groups) + headers, saved, reports, max_tokens)
        if k is None:
            return _overflow(graph, rows, community, edges, children, reports, count, max_tokens)
        rest = _without_children(graph, rows, community, edges, children[:k])
        sel = _Selection(reports=list(reports[:k]))
        complete = _fill(rest, sel, max_tokens - _headers_cost(rows, rest, reports[:k]))
        return _finish(rows, sel, not complete, count, max_tokens)


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
    rows: _Rows,
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
    budget = max_tokens - _headers_cost(rows, rest, reports)
    sel = _Selection()
    for report in reports:
        cost = rows.report_cost(report)
        if cost > budget:
            break
        sel.reports.append(report)
        budget -= cost
    _fill(rest, sel, budget)
    return _finish(rows, sel, True, count_tokens, max_tokens)
