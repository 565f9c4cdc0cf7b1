"""Consumer lag of the worker groups: how many messages they have not committed yet, per topic.

Two groups consume the pipeline's topics: the graph worker's (``Settings.app_id``: chunker,
extractor, mergers) and the vector worker's (``Settings.vector_app_id``: the embedders), apart
so that a Weaviate outage holds back only the vectors (``kgrag.worker``). One reader for the
places that need it: the query service's ``/metrics`` gauges, ``kgrag status``, the
integration tests and the benchmarks (which wait for both groups to catch up before they call
a run finished: ``pipeline_lag``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from core.settings import Settings

# Every topic each group consumes (settings names), for "has the group caught up?".
GRAPH_TOPICS = (
    "documents",
    "chunks",
    "extractions",
    "entity_items",
    "relationship_items",
    "claim_items",
)
VECTOR_TOPICS = ("chunks", "graph_changes")


async def consumer_lag(
    settings: Settings,
    *,
    topics: Sequence[str] | None = None,
    group_id: str | None = None,
    timeout_ms: int = 5000,
) -> dict[str, int]:
    """Per topic name: end offsets minus the group's committed offsets, over partitions.

    With ``topics`` (settings names, e.g. ``GRAPH_TOPICS``) every partition of those topics
    counts, one the group never committed from offset 0, so a worker still waiting for its
    partitions is not taken for one that is done. Without, only the partitions the group
    has committed count (a topic it never consumed has no figure). End offsets are read
    first, so a message written after them does not count.
    """
    servers = settings.kafka.bootstrap_servers
    consumer = AIOKafkaConsumer(
        bootstrap_servers=servers, enable_auto_commit=False, request_timeout_ms=timeout_ms
    )
    admin = AIOKafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=timeout_ms)
    try:
        await consumer.start()
        await admin.start()
        if topics is not None:
            parts = [
                TopicPartition(settings.topic(name), p)
                for name in topics
                for p in range(settings.kafka.partitions)
            ]
            ends: dict[TopicPartition, int] = await consumer.end_offsets(parts)
            committed = await admin.list_consumer_group_offsets(group_id or settings.app_id)
        else:
            committed = await admin.list_consumer_group_offsets(group_id or settings.app_id)
            parts = [tp for tp, m in committed.items() if m is not None and m.offset >= 0]
            ends = await consumer.end_offsets(parts) if parts else {}
    finally:
        await consumer.stop()
        await admin.close()
    done = {tp: max(0, m.offset) for tp, m in committed.items() if m is not None}
    lag: dict[str, int] = {}
    for tp in parts:
        lag[tp.topic] = lag.get(tp.topic, 0) + max(0, ends.get(tp, 0) - done.get(tp, 0))
    return lag


async def pipeline_lag(settings: Settings, *, timeout_ms: int = 5000) -> dict[str, int]:
    """Messages each worker group has not committed yet, over every topic it consumes:
    ``{"graph": n, "vectors": m}``; both 0 when everything published is in the graph and in
    Weaviate (the community job's versions are counted elsewhere: ``pending_changes``)."""
    graph = await consumer_lag(settings, topics=GRAPH_TOPICS, timeout_ms=timeout_ms)
    vectors = await consumer_lag(
        settings, topics=VECTOR_TOPICS, group_id=settings.vector_app_id, timeout_ms=timeout_ms
    )
    return {"graph": sum(graph.values()), "vectors": sum(vectors.values())}


async def graph_end_offsets(settings: Settings, timeout_s: float = 5.0) -> dict[int, int]:
    """Partition -> end offset (the next offset to be written) of the ``graph_changes``
    topic; empty when the topic does not exist yet (no worker has run in this namespace)."""
    topic = settings.topics.graph_changes
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        enable_auto_commit=False,
        request_timeout_ms=max(1, int(timeout_s * 1000)),
    )
    try:
        await consumer.start()
        if topic not in await consumer.topics():
            return {}
        parts = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
        ends: dict[TopicPartition, int] = await consumer.end_offsets(parts)
    finally:
        await consumer.stop()
    return {tp.partition: offset for tp, offset in ends.items()}


# Topics upstream of graph_changes: once the graph worker's group has nothing left on them, no
# graph change for what was published so far is still to come.
UPSTREAM_TOPICS = GRAPH_TOPICS


async def reflects_everything(settings: Settings, consumed_offsets: Mapping[str, int]) -> bool:
    """Whether a version that consumed ``consumed_offsets`` of graph_changes (a snapshot's
    ``meta.consumed_offsets``) holds everything published so far: the worker group has nothing
    left upstream of graph_changes, and the version consumed every graph change written.
    A document is listed as soon as it is chunked, so "holds every document" alone says
    nothing about its extractions."""
    if any((await consumer_lag(settings, topics=UPSTREAM_TOPICS)).values()):
        return False
    ends = await graph_end_offsets(settings)
    return all(consumed_offsets.get(str(p), 0) >= end for p, end in ends.items())
