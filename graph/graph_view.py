"""The community job's own view of the graph, folded from ``graph-changes`` alone.

Changes carry whole rows as they are after each write, so folding keeps the last row per key;
changes for one key share a partition, so their order holds. The view also collects which
text units back each entity and relationship (added unless the change is a retraction), the
text units themselves and the documents. What a run must re-summarise or re-report is not
tracked here: a run compares the view's descriptions and evidence with the fingerprints of
what it last wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph.aggregates import ClaimAggregate, EntityAggregate, RelationshipAggregate
from graph.graph_changes import GraphChange
from graph.model import Chunk


@dataclass
class GraphView:
    entities: dict[str, EntityAggregate] = field(default_factory=dict)
    relationships: dict[str, RelationshipAggregate] = field(default_factory=dict)
    claims: dict[str, ClaimAggregate] = field(default_factory=dict)
    text_units: dict[str, Chunk] = field(default_factory=dict)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    entity_units: dict[str, set[str]] = field(default_factory=dict)
    relationship_units: dict[str, set[str]] = field(default_factory=dict)
    changes_applied: int = 0

    def apply(self, change: GraphChange | dict[str, Any]) -> None:
        """Fold one record of ``graph-changes`` (a change, or a document object)."""
        self.changes_applied += 1
        if isinstance(change, dict):
            self.documents[str(change["id"])] = change
            return
        if change.text_unit is not None:
            self.text_units[change.chunk_id] = change.text_unit
        elif change.retraction and not (
            change.entities
            or change.deleted_entities
            or change.relationships
            or change.deleted_relationships
            or change.claims
            or change.deleted_claims
        ):
            self.text_units.pop(change.chunk_id, None)
        self._rows(
            change,
            self.entities,
            self.entity_units,
            change.entities,
            change.deleted_entities,
        )
        self._rows(
            change,
            self.relationships,
            self.relationship_units,
            change.relationships,
            change.deleted_relationships,
        )
        for agg in change.claims:
            self.claims[agg.key] = agg
        for key in change.deleted_claims:
            self.claims.pop(key, None)

    @staticmethod
    def _rows(
        change: GraphChange,
        rows: dict[str, Any],
        units: dict[str, set[str]],
        upserted: tuple[Any, ...],
        deleted: tuple[str, ...],
    ) -> None:
        for agg in upserted:
            rows[agg.key] = agg
            backing = units.setdefault(agg.key, set())
            if change.retraction:
                backing.discard(change.chunk_id)
            else:
                backing.add(change.chunk_id)
        for key in deleted:
            rows.pop(key, None)
            units.pop(key, None)
