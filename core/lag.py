"""Consumer lag of a worker group: how many messages it has not committed yet, per topic.

One reader for the three places that need it: the query service's ``/metrics`` gauge, the
integration tests and the ingest benchmark (which wait for the group to catch up before they
call a run finished).
"""

from __future__ import annotations

from collections.abc import Sequence

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
