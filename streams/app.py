"""The faust application: one builder that declares topics and tables once and registers the
agents.

Agents are factories in ``agents/`` that receive this Topology, so the same code runs in a
worker process and in tests with another namespace. Internal topics carry raw bytes encoded
by ``streams.codecs``; dead letters are faust Records (``streams.records.DeadLetter``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faust
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlEvent

from kgrag.lag import WORKER_TOPICS
from kgrag.settings import Settings
from kgrag.tokenizer import ensure_offline_bpe
from streams import watchdog
from streams.acks import guard_acks
from streams.batching import DurableTable
from streams.flow import GuardedFlowControl, guard_seeks
from streams.records import DeadLetter

log = logging.getLogger(__name__)


@dataclass
class Topology:
    settings: Settings
    app: faust.App
    topics: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=dict)

    def topic(self, name: str) -> Any:
        return self.topics[name]

    def table(self, name: str) -> Any:
        return self.tables[name]


class WorkerApp(faust.App):
    """faust's App with two guards around its at-least-once bookkeeping:

    - acks (``streams.acks``): no offset is committed for a message skipped or finished
      while a rebalance hands partitions over;
    - flow (``streams.flow``): resuming a running flow after table recovery neither drops
      the messages already in the agents' queues nor lets the commit skip them.
    """

    def _new_consumer(self) -> Any:
        consumer = super()._new_consumer()
        guard_acks(self, consumer)
        guard_seeks(consumer)
        return consumer

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        return GuardedFlowControl(self, loop=self.loop)


def create_app(settings: Settings) -> faust.App:
    datadir = Path(settings.data_dir) / settings.namespace / "faust"
    datadir.mkdir(parents=True, exist_ok=True)
    return WorkerApp(
        settings.app_id,
        broker=f"kafka://{settings.kafka.bootstrap_servers}",
        store="rocksdb://",
        datadir=str(datadir),
        topic_partitions=settings.kafka.partitions,
        topic_replication_factor=settings.kafka.replication_factor,
        processing_guarantee=settings.kafka.processing_guarantee,
        producer_max_request_size=settings.kafka.max_message_bytes,
        producer_linger_ms=5,
        consumer_auto_offset_reset="earliest",
        broker_commit_every=500,
        broker_commit_interval=1.0,
        table_standby_replicas=0,
        web_enabled=False,
        autodiscover=False,
    )


_TABLES = (
    "documents",  # document id -> {"hash", "chunks": [chunk ids]}
    "manifests",  # chunk id -> ChunkManifest dict
    "entities",  # entity key -> EntityAggregate dict
    "entity_contributions",  # "key|chunk" -> EntityContribution dict
    "entity_documents",  # "key|document" -> live chunk count
    "relationships",
    "relationship_contributions",
    "claims",
    "claim_contributions",
)


def build(settings: Settings, *, agents: bool = True) -> Topology:
    """Create the app, declare topics and tables, register every agent."""
    ensure_offline_bpe()  # before any tokenizer use in this process
    app = create_app(settings)
    topo = Topology(settings=settings, app=app)
    for name in (*WORKER_TOPICS, "community_events"):
        topo.topics[name] = app.topic(
            settings.topic(name), key_serializer="raw", value_serializer="raw", value_type=bytes
        )
    for name in ("documents_dlq", "extractions_dlq"):
        topo.topics[name] = app.topic(
            settings.topic(name), value_type=DeadLetter, key_serializer="raw"
        )
    for name in _TABLES:
        # keys: raw UTF-8 strings; values: JSON (the app's default serializers); app.Table
        # would build a plain faust.Table, so the durable one is built and added the same way
        table = DurableTable(
            app,
            name=name,
            default=None,
            partitions=settings.kafka.partitions,
            beacon=app.tables.beacon,
        )
        topo.tables[name] = app.tables.add(table)
    if agents:
        from agents import chunker, embedder, extractor, merger

        chunker.register(topo)
        extractor.register(topo)
        merger.register(topo)
        embedder.register(topo)
        watchdog.register(app, [settings.topic(name) for name in WORKER_TOPICS])
    return topo
