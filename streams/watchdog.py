"""Stall watchdog: a partition faust stopped delivering makes the worker rejoin its group.

faust commits a partition only up to its first offset that was never acked. During a
rebalance it clears the agents' buffers of fetched but unprocessed messages and relies on a
seek back to the committed offsets to fetch them again. When that goes wrong ("exception
performing seek when flow not active IllegalStateError: No current assignment for partition
…", seen in the scale-out test), messages are never delivered again: the partition's
committed offset stops for good while every agent waits, idle. The group's lag never reaches
0 and the documents behind those messages never arrive.

Every ``interval_s`` the watchdog looks at each assigned partition of the topics the agents
consume. A partition is stalled when it has messages beyond its committed offset, none of its
messages is being processed (no unacked message of it), and neither its read position nor its
committed offset has moved for ``stall_s`` while no rebalance or recovery was under way and no
agent was behind. An agent that is behind (the embedders while Weaviate is down) fills its
queue, and faust's delivery of every topic then waits for room in it: partitions of other
topics stand still too, but nothing is lost, and a rebalance would only stop the whole worker
until the slow agent finishes its batch. For
a stalled partition it logs a warning with what faust believes about it and asks the consumer
group for a rebalance (``repair``): faust's own hand-over path then seeks every partition it
keeps back to its committed offset. Messages already processed are delivered again; every
agent here is idempotent, so they change nothing. ``kill -HUP <worker pid>`` forces a repair.

The checks read faust's consumer bookkeeping (``_committed_offset``, ``_read_offset``,
``_unacked_messages``, ``_paused_partitions``, ``_active_partitions``,
``_buffered_partitions``) and the repair calls
aiokafka's ``request_rejoin`` on the consumer's thread: private parts of faust-streaming 0.15
and aiokafka 0.14, read only apart from that one call.

What the watchdog saw and did (checks, stalls, repairs, its own failures) goes to the worker's
status file after every check (``core.worker_status``), which ``/healthz``, ``/metrics`` and
``kgrag status`` read: a watchdog that fails (say, after an upgrade moved what it reads) makes
the service degraded instead of only filling the log.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from core.settings import Settings
from core.worker_status import (
    WatchdogFigures,
    WatchdogStatus,
    forget_dead,
    remove_watchdog_status,
    worker_name,
    write_watchdog_status,
)

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
    figures: WatchdogFigures = field(default_factory=WatchdogFigures)

    def failed(self, what: str, error: BaseException) -> None:
        f = self.figures
        f.failures += 1
        f.last_failure = f"{what}: {type(error).__name__}: {error}"[:500]
        f.last_failure_at = time.time()

    def _busy(self) -> bool:
        """A rebalance or recovery is under way, or an agent is behind: its queue is under
        pressure (faust took its partition out of the active ones), so deliveries wait."""
        app = self.app
        return bool(
            app.rebalancing
            or app.in_recovery
            or not app.consumer.flow_active
            or app.consumer._buffered_partitions
        )

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
        self.figures.checks += 1
        stalled = self.stalled(time.monotonic())
        if not stalled:
            return
        for tp, facts in stalled:
            log.warning("partition %s/%d stalled: %s", tp.topic, tp.partition, facts)
        self.figures.stalls += len(stalled)
        tp, facts = stalled[-1]
        self.figures.last_stall = f"{tp.topic}/{tp.partition}: {facts}"
        self.figures.last_stall_at = time.time()
        await self.repair(tp for tp, _ in stalled)

    async def repair(self, tps: Iterable[Any]) -> None:
        """Make the worker rejoin its consumer group.

        The rebalance that follows runs faust's whole hand-over path on every partition this
        worker keeps: flow stopped, buffers cleared, in-flight events finished, tables
        recovered from their changelogs, every partition sought back to its committed offset,
        flow resumed. Seeking by hand while the flow runs is not enough: in a test it left
        other partitions with events fetched that were never delivered (and so never acked).
        """
        stalled = list(tps)
        thread = self.app.consumer._thread

        async def rejoin() -> None:  # runs on the consumer's own thread and loop
            thread._ensure_consumer()._coordinator.request_rejoin()

        await thread.call_thread(rejoin)
        self.figures.repairs += 1
        self.seen.clear()
        log.warning(
            "asked the consumer group for a rebalance to re-fetch %d partition(s) (repair %d)",
            len(stalled),
            self.figures.repairs,
        )


def register(
    app: Any,
    topics: Iterable[str],
    *,
    settings: Settings,
    group: str,
    interval_s: float = 10.0,
) -> StallWatch:
    """The watchdog as a faust timer; ``kill -HUP <worker pid>`` runs its repair on demand
    (every assigned partition re-fetched from its committed offset). After every check the
    worker's status file (``core.worker_status``, ``group`` "graph" or "vectors") is written;
    a clean exit removes it."""
    watch = StallWatch(app, frozenset(topics))
    repairs: set[asyncio.Future[None]] = set()
    name, started_at = worker_name(settings), time.time()

    def publish_status() -> None:
        figures = replace(watch.figures)  # a copy: the status is written as of now
        status = WatchdogStatus(group, name, os.getpid(), started_at, time.time(), figures)
        try:
            write_watchdog_status(settings, status)
        except OSError as e:  # the status is for readers; the worker goes on without it
            log.warning("worker status not written: %s", e)

    async def guarded(what: str, work: Callable[[], Awaitable[None]]) -> None:
        try:
            await work()
        except Exception as e:  # the watchdog must never take the worker down
            log.exception("stall watchdog: %s failed", what)
            watch.failed(what, e)

    def on_hangup() -> None:
        assigned = [tp for tp in app.consumer.assignment() if tp.topic in watch.topics]
        log.warning("SIGHUP: re-fetching %d partition(s) from their commits", len(assigned))
        task = asyncio.ensure_future(guarded("repair", partial(watch.repair, assigned)))
        repairs.add(task)  # keep a reference until it is done
        task.add_done_callback(repairs.discard)

    @app.task
    async def hangup_handler() -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals here
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, on_hangup)
        with contextlib.suppress(OSError):
            forget_dead(settings)
        publish_status()

    @app.timer(interval=interval_s)
    async def stall_watchdog() -> None:
        await guarded("check", watch.check)
        publish_status()

    atexit.register(remove_watchdog_status, settings, group, name)
    return watch
