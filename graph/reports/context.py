"""The context a community report is written from (GraphRAG's community report context), and
the records it is made of.

A report can only cite what its context shows, so the context is a set of delimited tables whose
``id`` column holds human-readable ids (``[Data: Entities (3, 7); Relationships (12)]``).

This module holds the data only: the entity, relationship, claim and child-report rows, the
merged graph indexed for building (``ReportGraph``) and the finished ``ReportContext``. The
community job, the report writers and materiality read these without needing the builder,
which is ``graph.reports.context_builder`` (what goes in, within the budget) over
``graph.reports.rows`` (how rows are rendered and what they cost).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Hrid = int | str


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
            edges_by_entity={k: tuple(sorted(v, key=lambda r: r.key)) for k, v in edges.items()},
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
