"""One community's history: its lineage events read back from the community-events topic.

The topic is the record of what happened to every community (emerged, grew, split, merged,
report updated, headlines); the graph tables hold only what is true now. A community page
shows its history by reading the topic from the start up to its end at the time of asking,
keeping the events that name the community (as its id, a predecessor or a successor).
That read is bounded by ``timeout_s``: on a topic too long to read in time the answer says it
is ``partial`` and holds what was read, oldest first; the topic's retention bounds how far
back it reaches.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import TopicPartition

from core.settings import Settings
from query.sse import decode_event, start_reader


def names(payload: dict[str, Any], community_id: str, born_in: int | None = None) -> bool:
    """The event is about the community, or one it came from or went to; or it is the
    first run (``bootstrap``, one event for all) and the community was born in it."""
    if payload.get("kind") == "bootstrap":
        return born_in is not None and payload.get("snapshot_version") == born_in
    return (
        payload.get("community_id") == community_id
        or community_id in (payload.get("predecessors") or ())
        or community_id in (payload.get("successors") or ())
        or community_id in (payload.get("folded") or ())
    )


async def community_history(
    settings: Settings,
    community_id: str,
    *,
    born_in: int | None = None,
    timeout_s: float = 5.0,
    limit: int = 500,
) -> tuple[list[dict[str, Any]], bool]:
    """The community's events, oldest first (at most ``limit``, the newest kept), and whether
    the read stopped before the topic's end. ``born_in``: the graph version the community
    first appeared in (its size history's first), to find it in a ``bootstrap`` event."""
    topic = settings.topic("community_events")
    consumer = await start_reader(settings)
    found: list[tuple[float, int, int, dict[str, Any]]] = []
    try:
        parts = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
        consumer.assign(parts)
        ends = {tp: end for tp, end in (await consumer.end_offsets(parts)).items() if end > 0}
        await consumer.seek_to_beginning(*parts)
        deadline = time.monotonic() + timeout_s
        while ends and time.monotonic() < deadline:
            batch = await consumer.getmany(*ends, timeout_ms=200)
            for tp, messages in batch.items():
                for m in messages:
                    if m.offset >= ends.get(tp, 0):
                        continue
                    payload = decode_event(m.value)
                    if payload is not None and names(payload, community_id, born_in):
                        found.append((m.timestamp / 1000.0, tp.partition, m.offset, payload))
            for tp in list(ends):
                if await consumer.position(tp) >= ends[tp]:
                    del ends[tp]
        partial = bool(ends)
    finally:
        await asyncio.shield(consumer.stop())
    found.sort(key=lambda f: (f[3].get("snapshot_version", 0), f[0], f[1], f[2]))
    return [{**p, "at": ts} for ts, _, _, p in found[-limit:]], partial
