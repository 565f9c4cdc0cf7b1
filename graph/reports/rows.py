"""Rendering and costing the rows of a report context, and filling a token budget with them.

Rows are CSV lines under ``-----Section-----`` headers; whitespace inside a value is collapsed
so one row is one line. Filling works in groups (an edge with the endpoint rows and claims it
brings in, or one edge-less member) and stops at the first group that does not fit: nothing is
cut mid-row. Each row's token count is remembered by ``Rows``, so a builder that keeps one
``Rows`` counts each row once per run however many contexts show it. Which elements a context
offers, and which sub-communities' reports replace theirs, is ``graph.reports.context_builder``'s
choice.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from graph.reports.context import (
    ChildReport,
    ReportClaim,
    ReportContext,
    ReportEntity,
    ReportGraph,
    ReportRelationship,
)

TokenCounter = Callable[[str], int]

_SPACE = re.compile(r"\s+")
_HEADERS = {
    "Reports": ("id", "title", "content"),
    "Entities": ("id", "entity", "description", "degree"),
    "Relationships": ("id", "source", "target", "description", "combined_degree"),
    "Claims": ("id", "entity", "type", "status", "description"),
}


@dataclass(slots=True)
class Selection:
    """What goes into a context; mutable only while it is being filled."""

    reports: list[ChildReport] = field(default_factory=list)
    entities: list[ReportEntity] = field(default_factory=list)
    relationships: list[ReportRelationship] = field(default_factory=list)
    claims: list[ReportClaim] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Group:
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


RowCosts = dict[str, tuple[tuple[object, ...], int]]  # "<kind>:<key>" -> (cells, cost)


class Rows:
    """Renders rows and remembers each row's token cost with the cells it was counted from,
    so a row is counted once while its cells stay the same. ``costs`` may outlive one run
    (the community job keeps it): most rows a run's contexts show are the rows of the run
    before, and rendering and counting the members of a large community is most of the time
    its context takes."""

    def __init__(
        self, graph: ReportGraph, count_tokens: TokenCounter, costs: RowCosts | None = None
    ) -> None:
        self._graph = graph
        self._count = count_tokens
        self._costs: RowCosts = {} if costs is None else costs

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

    def cost(
        self, kind: str, key: str, text: Callable[[], str], cells: tuple[object, ...] = ()
    ) -> int:
        """Tokens of one row plus one for its line break (an upper bound in practice)."""
        slot = f"{kind}:{key}"
        cached = self._costs.get(slot)
        if cached is not None and cached[0] == cells:
            return cached[1]
        cost = self._count(text()) + 1
        self._costs[slot] = (cells, cost)
        return cost

    def entity_cost(self, e: ReportEntity) -> int:
        cells = (e.human_readable_id, e.name, e.description, e.degree)
        return self.cost("e", e.key, lambda: self.entity(e), cells)

    def relationship_cost(self, r: ReportRelationship) -> int:
        cells = (
            r.human_readable_id,
            self.name(r.source),
            self.name(r.target),
            r.description,
            r.combined_degree,
        )
        return self.cost("r", r.key, lambda: self.relationship(r), cells)

    def claim_cost(self, c: ReportClaim) -> int:
        cells = (c.human_readable_id, self.name(c.subject), c.type, c.status, c.description)
        return self.cost("c", c.key, lambda: self.claim(c), cells)

    def report_cost(self, r: ChildReport) -> int:
        key = f"{r.community_id}\x00{r.human_readable_id}\x00{r.title}\x00{r.content}"
        return self.cost("p", key, lambda: self.report(r))

    def header_cost(self, section: str) -> int:
        return self.cost("h", section, lambda: _section_header(section)) + 1

    def render(self, sel: Selection) -> str:
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


def element_groups(
    graph: ReportGraph,
    rows: Rows,
    members: frozenset[str],
    edges: Sequence[ReportRelationship],
) -> list[Group]:
    """Edges in order, each with the member rows it introduces; then edge-less members."""
    seen: set[str] = set()
    out: list[Group] = []

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
        cost = rows.relationship_cost(rel) + members_cost(rows, ents, claims)
        out.append(Group(tuple(ents), tuple(claims), rel, cost))
    rest = sorted(
        (graph.entities[k] for k in members - seen if k in graph.entities),
        key=lambda e: (-e.degree, e.key),
    )
    for entity in rest:
        ents, claims = new_members((entity.key,))
        out.append(Group(tuple(ents), tuple(claims), None, members_cost(rows, ents, claims)))
    return out


def members_cost(rows: Rows, ents: Sequence[ReportEntity], claims: Sequence[ReportClaim]) -> int:
    return sum(rows.entity_cost(e) for e in ents) + sum(rows.claim_cost(c) for c in claims)


def headers_cost(rows: Rows, groups: Sequence[Group], reports: Sequence[ChildReport]) -> int:
    """Headers of the sections that could appear (a slight over-estimate is harmless)."""
    total = rows.header_cost("Reports") if reports else 0
    if any(g.entities for g in groups):
        total += rows.header_cost("Entities")
    if any(g.relationship for g in groups):
        total += rows.header_cost("Relationships")
    if any(g.claims for g in groups):
        total += rows.header_cost("Claims")
    return total


def fill(groups: Sequence[Group], sel: Selection, budget: int) -> bool:
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


def finish(
    rows: Rows, sel: Selection, truncated: bool, count: TokenCounter, max_tokens: int
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


def total_cost(groups: Sequence[Group]) -> int:
    return sum(g.cost for g in groups)
