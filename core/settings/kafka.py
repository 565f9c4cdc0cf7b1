"""Kafka settings: the brokers, partitioning, batching and the base topic names."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator


class TopicNames(BaseModel):
    """Base topic names; the namespace is prepended to each (see ``Settings.topic``)."""

    documents: str = Field("documents", description="Incoming articles, keyed by document id")
    documents_dlq: str = Field("documents.dlq", description="Documents that could not be processed")
    chunks: str = Field("chunks", description="Text units cut from documents")
    extractions: str = Field("extractions", description="Per-chunk extraction results")
    extractions_dlq: str = Field("extractions.dlq", description="Chunks whose extraction failed")
    entity_items: str = Field("entity-items", description="Extraction items keyed by entity")
    relationship_items: str = Field(
        "relationship-items", description="Extraction items keyed by relationship"
    )
    claim_items: str = Field("claim-items", description="Claims keyed by subject entity")
    graph_changes: str = Field("graph-changes", description="Merged graph deltas for the job")
    community_events: str = Field("community-events", description="Community lineage events")


class KafkaSettings(BaseModel):
    bootstrap_servers: str = Field(
        "127.0.0.1:19092", description="Comma-separated host:port list of Kafka brokers"
    )
    partitions: int = Field(
        8,
        ge=1,
        le=1024,
        description="Partitions per topic; faust tables cannot be repartitioned, so choose "
        "room for as many workers as you will ever run",
    )
    replication_factor: int = Field(1, ge=1, description="Replication factor for new topics")
    topics: TopicNames = Field(default_factory=lambda: TopicNames())
    max_message_bytes: int = Field(1_000_000, ge=1024, description="Largest message accepted")
    processing_guarantee: Literal["at_least_once", "exactly_once"] = Field(
        "at_least_once", description="faust processing guarantee"
    )
    batch_within_s: float = Field(
        0.1,
        gt=0,
        le=10,
        description="Longest a stream agent waits to fill a batch before processing what it "
        "has: each stage adds up to this to an article's way to search; under load batches "
        "fill to their size first",
    )
    instance_id: str | None = Field(
        None,
        description="This worker's static group membership id (Kafka group.instance.id), "
        "unique per worker and stable across its restarts (e.g. a StatefulSet pod name): a "
        "worker restarted after a crash takes its partitions back at once instead of after "
        "the dead member's session times out. Unset: dynamic membership",
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _check_servers(cls, v: str) -> str:
        for part in v.split(","):
            host, sep, port = part.strip().rpartition(":")
            if not sep or not host or not (port.isascii() and port.isdigit()):
                raise ValueError(f"expected host:port[,host:port...], got {part!r}")
        return v
