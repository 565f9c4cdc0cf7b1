"""The merge rules applied in memory, feeding a GraphView: the stream's result without Kafka.

Benchmarks and tests that need a merged graph of thousands of articles fast use this instead
of a worker. It applies exactly the rules the streaming mergers apply (``graph.merge.rules``), with
plain dicts where the worker has faust tables, and folds the resulting ``GraphChange`` rows
into a ``GraphView`` as the community job would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graph.extraction.documents import document_to_obj
from graph.merge.aggregates import EntityAggregate, RelationshipAggregate
from graph.merge.changes import entity_changed, relationship_changed, text_unit_added
from graph.merge.contributions import (
    EntityContribution,
    RelationshipContribution,
    chunk_contributions,
    contribution_key,
    document_key,
)
from graph.merge.rules import EntityRows, RelationshipRows, absorb_entity, absorb_relationship
from graph.merge.view import GraphView
from graph.model import ChunkExtraction, Document


@dataclass
class LocalMerger:
    max_descriptions: int = 12
    view: GraphView = field(default_factory=GraphView)
    entities: dict[str, EntityAggregate] = field(default_factory=dict)
    entity_rows: dict[str, EntityContribution] = field(default_factory=dict)
    doc_chunks: dict[str, int] = field(default_factory=dict)
    relationships: dict[str, RelationshipAggregate] = field(default_factory=dict)
    relationship_rows: dict[str, RelationshipContribution] = field(default_factory=dict)

    def add_document(self, doc: Document) -> None:
        self.view.apply(document_to_obj(doc))

    def absorb(self, extraction: ChunkExtraction) -> None:
        """One chunk's extraction, as the re-keyer and the mergers would apply it."""
        self.view.apply(text_unit_added(extraction))
        contributions = chunk_contributions(extraction)
        for c in contributions.entities:
            self._entity(c)
        for r in contributions.relationships:
            self._relationship(r)

    def _entity(self, c: EntityContribution) -> None:
        row, doc = contribution_key(c.key, c.chunk_id), document_key(c.key, c.document_id)
        rows = EntityRows(
            self.entities.get(c.key), self.entity_rows.get(row), self.doc_chunks.get(doc)
        )
        step = absorb_entity(rows, c, max_descriptions=self.max_descriptions)
        if not step.changed or step.rows.aggregate is None or step.rows.contribution is None:
            return
        self.entities[c.key] = step.rows.aggregate
        self.entity_rows[row] = step.rows.contribution
        self.doc_chunks[doc] = step.rows.document_chunks or 0
        self.view.apply(
            entity_changed(
                c.key,
                step.rows.aggregate,
                chunk_id=c.chunk_id,
                document_id=c.document_id,
                retraction=False,
            )
        )

    def _relationship(self, c: RelationshipContribution) -> None:
        row = contribution_key(c.key, c.chunk_id)
        rows = RelationshipRows(self.relationships.get(c.key), self.relationship_rows.get(row))
        step = absorb_relationship(rows, c, max_descriptions=self.max_descriptions)
        if not step.changed or step.rows.aggregate is None or step.rows.contribution is None:
            return
        self.relationships[c.key] = step.rows.aggregate
        self.relationship_rows[row] = step.rows.contribution
        self.view.apply(
            relationship_changed(
                c.key,
                step.rows.aggregate,
                chunk_id=c.chunk_id,
                document_id=c.document_id,
                retraction=False,
            )
        )
