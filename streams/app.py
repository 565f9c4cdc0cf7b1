"""The faust application: one builder that declares topics once and registers the agents.

Agents are plain factories in ``agents/`` that receive this Topology, so the same code runs
in a worker process, in ``agent.test_context()`` and in tests with another namespace.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faust

from kgrag.settings import Settings
from kgrag.tokenizer import ensure_offline_bpe
from streams.records import ChunkRecord, DeadLetter

log = logging.getLogger(__name__)


@dataclass
class Topology:
    settings: Settings
    app: faust.App
    documents: Any  # faust.TopicT of raw bytes
    documents_dlq: Any
    chunks: Any
    extractions_dlq: Any
    extras: dict[str, Any] = field(default_factory=dict)


def create_app(settings: Settings) -> faust.App:
    datadir = Path(settings.data_dir) / settings.namespace / "faust"
    datadir.mkdir(parents=True, exist_ok=True)
    return faust.App(
        settings.app_id,
        broker=f"kafka://{settings.kafka.bootstrap_servers}",
        store="rocksdb://",
        datadir=str(datadir),
        topic_partitions=settings.kafka.partitions,
        topic_replication_factor=settings.kafka.replication_factor,
        processing_guarantee=settings.kafka.processing_guarantee,
        producer_max_request_size=settings.kafka.max_message_bytes,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=100,
        broker_commit_interval=1.0,
        web_enabled=False,
        autodiscover=False,
    )


def build(settings: Settings) -> Topology:
    """Create the app, declare topics and register every agent."""
    ensure_offline_bpe()  # before any tokenizer use in this process
    app = create_app(settings)
    topo = Topology(
        settings=settings,
        app=app,
        documents=app.topic(
            settings.topic("documents"),
            value_type=bytes,
            value_serializer="raw",
            key_serializer="raw",
        ),
        documents_dlq=app.topic(
            settings.topic("documents_dlq"), value_type=DeadLetter, key_serializer="raw"
        ),
        chunks=app.topic(settings.topic("chunks"), value_type=ChunkRecord, key_serializer="raw"),
        extractions_dlq=app.topic(
            settings.topic("extractions_dlq"), value_type=DeadLetter, key_serializer="raw"
        ),
    )
    from agents import chunker, embedder

    chunker.register(topo)
    embedder.register(topo)
    return topo
