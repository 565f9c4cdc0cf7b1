"""Stall watchdog: re-fetch a partition that faust stopped delivering after a rebalance.

faust commits a partition only up to its first offset that was never acked. During a
rebalance it clears the agents' buffers of fetched but unprocessed messages and relies on a
seek back to the committed offsets to fetch them again. That seek can fail mid-rebalance
("exception performing seek when flow not active IllegalStateError: No current assignment for
partition …", seen in the scale-out test) and the cleared messages are then never delivered
again: the partition's committed offset stops for good while everything around it looks
idle. The group's lag never reaches 0 and the documents behind those messages never arrive.

Every ``interval_s`` the watchdog looks at each assigned partition of the topics the agents
consume. A partition is stalled when it has messages beyond its committed offset, none of its
messages is being processed (no unacked message of it), and neither its read position nor its
committed offset has moved for ``stall_s`` while no rebalance or recovery was under way. For
a stalled partition it logs a warning with what faust believes about it, then seeks every
partition back to its committed offset (faust's own ``perform_seek``, what a rebalance does)
and resumes any paused partition. Messages already processed may be delivered again; every
agent here is idempotent, so they change nothing.

The checks read faust's consumer bookkeeping (``_committed_offset``, ``_read_offset``,
``_unacked_messages``, ``_paused_partitions``, ``_active_partitions``): private attributes of
faust-streaming 0.11, read only, never written except through ``perform_seek`` and
``resume_partitions``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class _Seen:
    position: tuple[int | None, int | None]  # (read offset, committed offset)
    since: float


@dataclass
class StallWatch:
    """Finds stalled partitions; ``check`` is called by a faust timer."""

    app: Any
    topics: frozenset[str]
    stall_s: float = 30.0
    seen: dict[Any, _Seen] = field(default_factory=dict)
    repairs: int = 0

    def _busy(self) -> bool:
        app = self.app
        return bool(app.rebalancing or app.in_recovery or not app.consumer.flow_active)

    def stalled(self, now: float) -> list[tuple[Any, dict[str, Any]]]:
        """Partitions stalled for ``stall_s`` (with what faust knows of each)."""
        consumer = self.app.consumer
        if self._busy():
            self.seen.clear()  # a rebalance moves things: start the clocks again after it
            return []
        unacked = {m.tp for m in list(consumer._unacked_messages)}
        out: list[tuple[Any, dict[str, Any]]] = []
        assigned = {tp for tp in consumer.assignment() if tp.topic in self.topics}
        for tp in list(self.seen):
            if tp not in assigned:
                del self.seen[tp]
        for tp in assigned:
            end = consumer.highwater(tp)
            committed = consumer._committed_offset.get(tp)
            position = (consumer._read_offset.get(tp), committed)
            behind = end is not None and end > (committed if committed is not None else 0)
            if not behind or tp in unacked:
                self.seen.pop(tp, None)
                continue
            seen = self.seen.get(tp)
            if seen is None or seen.position != position:
                self.seen[tp] = _Seen(position, now)
                continue
            if now - seen.since >= self.stall_s:
                out.append(
                    (
                        tp,
                        {
                            "end": end,
                            "committed": committed,
                            "read": position[0],
                            "paused": tp in consumer._paused_partitions,
                            "active": tp in (consumer._active_partitions or ()),
                            "stalled_s": round(now - seen.since),
                        },
                    )
                )
        return out

    async def check(self) -> None:
        stalled = self.stalled(time.monotonic())
        if not stalled:
            return
        for tp, facts in stalled:
            log.warning("partition %s/%d stalled: %s", tp.topic, tp.partition, facts)
        await self.repair(tp for tp, _ in stalled)

    async def repair(self, tps: Iterable[Any]) -> None:
        consumer = self.app.consumer
        stalled = set(tps)
        # back into faust's active set (a paused partition, or one dropped from the set by a
        # full buffer and never put back, is not fetched), then fetch from the commit again
        consumer.resume_partitions(stalled)
        await consumer.perform_seek()
        self.repairs += 1
        for tp in stalled:
            self.seen.pop(tp, None)
        log.warning(
            "sought every partition back to its committed offset to re-fetch %d stalled "
            "partition(s) (repair %d)",
            len(stalled),
            self.repairs,
        )


def register(app: Any, topics: Iterable[str], *, interval_s: float = 10.0) -> StallWatch:
    watch = StallWatch(app, frozenset(topics))

    @app.timer(interval=interval_s)
    async def stall_watchdog() -> None:
        try:
            await watch.check()
        except Exception:  # the watchdog must never take the worker down
            log.exception("stall watchdog failed")

    return watch
