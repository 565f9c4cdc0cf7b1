"""The stall watchdog finds partitions faust stopped delivering, and only those."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

from core.settings import load_settings
from core.worker_status import (
    WatchdogStatus,
    describe_failures,
    forget_dead,
    read_watchdog_statuses,
    remove_watchdog_status,
    write_watchdog_status,
)
from streams.watchdog import StallWatch


class TP(NamedTuple):
    topic: str
    partition: int


def _offsets() -> dict[TP, int | None]:
    return defaultdict(lambda: None)


@dataclass(frozen=True)
class FakeMessage:
    tp: TP


class FakeCoordinator:
    def __init__(self, thread: FakeThread) -> None:
        self.thread = thread

    def request_rejoin(self) -> None:
        assert self.thread.inside, "request_rejoin must run on the consumer's thread"
        self.thread.rejoins += 1


class FakeThread:
    """faust's consumer thread: ``call_thread`` runs a coroutine function over there."""

    def __init__(self) -> None:
        self.rejoins = 0
        self.inside = False

    def _ensure_consumer(self) -> Any:
        return SimpleNamespace(_coordinator=FakeCoordinator(self))

    async def call_thread(self, fun: Callable[[], Awaitable[None]]) -> None:
        self.inside = True
        try:
            await fun()
        finally:
            self.inside = False


@dataclass
class FakeConsumer:
    ends: dict[TP, int]
    flow_active: bool = True
    _committed_offset: dict[TP, int | None] = field(default_factory=lambda: _offsets())
    _read_offset: dict[TP, int | None] = field(default_factory=lambda: _offsets())
    _unacked_messages: set[Any] = field(default_factory=set)
    _paused_partitions: set[TP] = field(default_factory=set)
    _active_partitions: set[TP] = field(default_factory=set)
    _buffered_partitions: set[TP] = field(default_factory=set)

    def assignment(self) -> set[TP]:
        return set(self.ends)

    def highwater(self, tp: TP) -> int:
        return self.ends[tp]

    _thread: FakeThread = field(default_factory=lambda: FakeThread())


@dataclass
class FakeApp:
    consumer: FakeConsumer
    rebalancing: bool = False
    in_recovery: bool = False


ITEMS, OTHER = TP("ns.entity-items", 3), TP("ns.other", 0)


def _watch(**consumer: Any) -> tuple[StallWatch, FakeConsumer]:
    c = FakeConsumer(ends={ITEMS: 100, OTHER: 100}, **consumer)
    c._committed_offset[ITEMS] = 60
    c._read_offset[ITEMS] = 99
    return StallWatch(FakeApp(c), frozenset({ITEMS.topic}), stall_s=30.0), c


def test_a_partition_behind_with_nothing_in_flight_is_stalled_after_the_grace_period() -> None:
    watch, _ = _watch()
    assert watch.stalled(0.0) == []  # first sight starts the clock
    assert watch.stalled(29.0) == []
    [(tp, facts)] = watch.stalled(31.0)
    assert tp == ITEMS and facts["committed"] == 60 and facts["end"] == 100


def test_only_watched_topics_count() -> None:
    watch, c = _watch()
    c._committed_offset[OTHER] = 0
    watch.stalled(0.0)
    assert [tp for tp, _ in watch.stalled(60.0)] == [ITEMS]


def test_a_partition_with_a_message_in_processing_is_not_stalled() -> None:
    watch, c = _watch()
    c._unacked_messages.add(FakeMessage(ITEMS))
    watch.stalled(0.0)
    assert watch.stalled(120.0) == []


def test_progress_restarts_the_clock() -> None:
    watch, c = _watch()
    watch.stalled(0.0)
    c._committed_offset[ITEMS] = 70
    assert watch.stalled(31.0) == []
    assert watch.stalled(60.0) == []
    assert len(watch.stalled(62.0)) == 1


def test_a_caught_up_partition_is_not_stalled() -> None:
    watch, c = _watch()
    c._committed_offset[ITEMS] = 100
    watch.stalled(0.0)
    assert watch.stalled(600.0) == []


def test_nothing_is_judged_during_a_rebalance_and_the_clock_restarts_after_it() -> None:
    watch, _ = _watch()
    watch.stalled(0.0)
    app: Any = watch.app
    app.rebalancing = True
    assert watch.stalled(40.0) == []
    app.rebalancing = False
    assert watch.stalled(41.0) == []  # clock restarted at 41
    assert len(watch.stalled(72.0)) == 1


def test_nothing_is_stalled_while_an_agent_is_behind_its_queue() -> None:
    """The embedders wait for Weaviate; their full queues hold up faust's delivery of every
    topic, so the merger's partitions stand still too. That is back-pressure, not a stall: a
    rebalance would stop the whole worker until the embedders finish their batch."""
    watch, consumer = _watch()
    behind = TP("ns.chunks", 1)
    consumer._buffered_partitions.add(behind)
    watch.stalled(0.0)
    assert watch.stalled(600.0) == []
    consumer._buffered_partitions.discard(behind)  # the pressure drops: a fresh clock
    assert watch.stalled(601.0) == []
    assert len(watch.stalled(632.0)) == 1


async def test_repair_asks_for_a_rebalance_on_the_consumer_thread() -> None:
    watch, c = _watch()
    watch.stalled(0.0)
    watch.stalled(31.0)
    await watch.repair([ITEMS])
    assert c._thread.rejoins == 1 and watch.figures.repairs == 1
    assert watch.stalled(32.0) == []  # watched afresh after the repair


def test_a_failing_check_is_counted_and_written_for_the_service(tmp_path: Path) -> None:
    """What the watchdog saw and its own failures reach the worker's status file."""
    settings = load_settings(data_dir=tmp_path, namespace="unit")
    watch, _ = _watch()
    watch.stalled(0.0)
    assert len(watch.stalled(31.0)) == 1
    watch.failed("check", AttributeError("'Consumer' object has no attribute '_read_offset'"))
    figures = watch.figures
    assert figures.failures == 1 and figures.last_failure is not None
    assert figures.last_failure.startswith("check: AttributeError:")
    assert figures.stalls == 0  # stalled() finds; check() counts and repairs
    status = WatchdogStatus("graph", "w1", 1, time.time(), time.time(), figures)
    write_watchdog_status(settings, status)
    [read] = read_watchdog_statuses(settings)
    assert read == status and read.failing()
    assert describe_failures([read])[0].startswith("the stall watchdog of the graph worker w1")
    remove_watchdog_status(settings, "graph", "w1")
    assert read_watchdog_statuses(settings) == []


def test_a_dead_workers_file_is_forgotten_after_a_day(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, namespace="unit")
    now = time.time()
    write_watchdog_status(settings, WatchdogStatus("graph", "old", 1, now - 2e5, now - 1e5))
    write_watchdog_status(settings, WatchdogStatus("graph", "new", 2, now - 60, now - 120))
    forget_dead(settings, now)
    assert [s.name for s in read_watchdog_statuses(settings)] == ["new"]
    assert not read_watchdog_statuses(settings)[0].alive(now)
