"""Consumer lag of a worker group: how many messages it has not committed yet, per topic.

One reader for the three places that need it: the query service's ``/metrics`` gauge, the
integration tests and the ingest benchmark (which wait for the group to catch up before they
call a run finished).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from core.settings import Settings

# Every topic the worker group consumes (settings names), for "has the group caught up?".
WORKER_TOPICS = (
    "documents",
    "chunks",
    "extractions",
    "entity_items",
    "relationship_items",
    "claim_items",
    "graph_changes",
)


async def consumer_lag(
    settings: Settings,
    *,
    topics: Sequence[str] | None = None,
    group_id: str | None = None,
    timeout_ms: int = 5000,
) -> dict[str, int]:
    """Per topic name: end offsets minus the group's committed offsets, over partitions.

    With ``topics`` (settings names, e.g. ``WORKER_TOPICS``) every partition of those topics
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


# Topics upstream of graph_changes: once the group has nothing left on them, no graph change
# for what was published so far is still to come.
UPSTREAM_TOPICS = tuple(t for t in WORKER_TOPICS if t != "graph_changes")


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
