"""The worker's typed topology: every topic and table it uses, declared once, as fields.

Agents receive a :class:`Topology` and take what they consume and produce from its fields
(``topo.topics.chunks``, ``topo.tables.manifests``), so the flow from a document to the graph
is visible from the agents' signatures and a renamed topic is a type error, not a lookup
that fails at run time. Topic names come from settings (``Settings.topic``); internal topics
carry raw bytes encoded by ``streams.codecs``; dead letters are faust Records
(``streams.records.DeadLetter``). Tables are ``DurableTable``s (``streams.batching``): keys
are UTF-8 strings, values JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import faust

from core.settings import Settings
from streams.batching import DurableTable
from streams.records import DeadLetter


@dataclass(frozen=True, slots=True)
class Topics:
    documents: Any  # document id -> a document (JSON), as published
    documents_dlq: Any  # documents that could not be processed, with the reason
    chunks: Any  # document id -> a chunk added or retracted
    extractions: Any  # chunk id -> a chunk's extraction, or its retraction
    extractions_dlq: Any  # extractions and items that could not be processed
    entity_items: Any  # entity key -> one chunk's contribution (or its retraction)
    relationship_items: Any  # relationship key -> ditto
    claim_items: Any  # subject entity key -> ditto
    graph_changes: Any  # merged rows and text units, for the community job and embedders
    community_events: Any  # lineage events published by the community job

    def items(self, kind: str) -> Any:
        """The items topic of a merge kind ("entity", "relationship", "claim")."""
        return {
            "entity": self.entity_items,
            "relationship": self.relationship_items,
            "claim": self.claim_items,
        }[kind]


@dataclass(frozen=True, slots=True)
class Tables:
    documents: Any  # document id -> {"hash", "chunks": [chunk ids]}
    manifests: Any  # chunk id -> ChunkManifest dict
    entities: Any  # entity key -> EntityAggregate dict
    entity_contributions: Any  # "key|chunk" -> EntityContribution dict
    entity_documents: Any  # "key|document" -> live chunk count
    relationships: Any  # relationship key -> RelationshipAggregate dict
    relationship_contributions: Any  # "key|chunk" -> RelationshipContribution dict
    claims: Any  # subject key -> ClaimAggregate dict
    claim_contributions: Any  # "key|chunk" -> ClaimContribution dict

    def named(self, name: str) -> Any:
        """A table by field name, for code that is generic over the merge kinds (whose specs
        name their aggregate and contribution tables)."""
        if name not in _TABLE_NAMES:
            raise KeyError(f"no table {name!r}; tables: {', '.join(_TABLE_NAMES)}")
        return getattr(self, name)


_TABLE_NAMES = tuple(f.name for f in fields(Tables))


def changelog_topics(settings: Settings) -> list[str]:
    """The graph worker's table changelogs, as faust names them (``<app id>-<table>-changelog``):
    created up front with the other topics (``streams.admin.ensure_topics``). Left to faust,
    a worker starting on a fresh broker could see one it had just created with no partitions
    yet, and the agent of that table then crashed on "PartitionsMismatch" and never ran."""
    return [f"{settings.app_id}-{name}-changelog" for name in _TABLE_NAMES]


@dataclass(frozen=True, slots=True)
class Topology:
    settings: Settings
    app: faust.App
    topics: Topics
    tables: Tables


def declare_topics(settings: Settings, app: faust.App) -> Topics:
    """Declare every topic on ``app`` (creating nothing on the broker): all an app without
    tables needs (the embedders')."""

    def raw(name: str) -> Any:
        return app.topic(
            settings.topic(name), key_serializer="raw", value_serializer="raw", value_type=bytes
        )

    def dead_letters(name: str) -> Any:
        return app.topic(settings.topic(name), value_type=DeadLetter, key_serializer="raw")

    return Topics(
        **{
            f.name: dead_letters(f.name) if f.name.endswith("_dlq") else raw(f.name)
            for f in fields(Topics)
        }
    )


def declare(settings: Settings, app: faust.App) -> Topology:
    """Declare every topic and table on ``app`` (creating nothing on the broker)."""

    def table(name: str) -> Any:
        # app.Table would build a plain faust.Table: the durable one is built and added alike
        durable = DurableTable(
            app,
            name=name,
            default=None,
            partitions=settings.kafka.partitions,
            beacon=app.tables.beacon,
        )
        return app.tables.add(durable)

    topics = declare_topics(settings, app)
    return Topology(settings, app, topics, Tables(**{n: table(n) for n in _TABLE_NAMES}))
