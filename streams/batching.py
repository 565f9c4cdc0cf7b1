"""Batch processing that keeps faust's per-partition table semantics.

faust routes a table read or write to the partition of ``current_event()``. Inside
``stream.take_events`` the current event is whichever came last, so a batch touching rows of
several partitions must re-enter each event's context before using a table: ``as_current``
does that (faust keeps the context in ``faust.streams._current_event``).

Outputs of a batch are sent first and their delivery awaited (``deliver``); only then are the
table rows written. A crash in between re-delivers the batch, and the idempotent merge rules
make the replay change nothing, so the tables never record work whose outputs were lost.

Then the batch waits until the broker has acknowledged the changelog records of those row
writes (``changelog_writes`` + ``deliver``) before it asks for the next batch. faust acks a
batch's events, and its periodic commit moves the offsets past them, only once the agent asks
for more; its own commit does not wait for the changelog (table writes go through a producer
buffer). Without this wait an offset could be committed while the rows it produced were still
in that buffer: a worker that then stops or dies hands its partitions to a member that
recovers the table from the changelog without those rows and never sees the events again,
so contributions are lost.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import faust
from faust.streams import _current_event

_changelog_writes: ContextVar[list[Any] | None] = ContextVar("kgrag_changelog_writes", default=None)


@contextmanager
def as_current(event: Any) -> Iterator[None]:
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


class DurableTable(faust.Table):
    """A faust Table whose changelog sends can be collected (``changelog_writes``) and
    awaited, so an agent moves on only once its row writes are durable in Kafka."""

    def send_changelog(self, *args: Any, **kwargs: Any) -> Any:
        future = super().send_changelog(*args, **kwargs)
        writes = _changelog_writes.get()
        if writes is not None:
            writes.append(future)
        return future

    def prefix_items(self, prefix: str) -> Iterator[tuple[str, Any]]:
        """The rows whose key starts with ``prefix`` in the current event's partition, in key
        order, read by a RocksDB seek: the rows one key's items wrote under its own key
        prefix (``graph.merge.contributions.contribution_key``) all live in the partition those
        items arrive on. faust offers no ranged read, so this opens the store's partition
        database (``Store._db_for_partition``, checked by ``streams.internals``)."""
        ref = _current_event.get()
        event = ref() if ref is not None else None
        if event is None:
            raise RuntimeError("prefix_items needs the event whose partition it reads")
        store: Any = self.data
        db = store._db_for_partition(event.message.partition)
        serializers = self.app.serializers
        raw = serializers.dumps_key(self.key_type, prefix, serializer=self.key_serializer)
        assert raw is not None
        if self.key_serializer == "json":  # a JSON string's prefix is its text less the quote
            raw = raw[:-1]
        it = db.iter()
        it.seek(raw)
        while it.valid() and (key := it.key()).startswith(raw):
            decoded = serializers.loads_key(self.key_type, key, serializer=self.key_serializer)
            value = serializers.loads_value(
                self.value_type, it.value(), serializer=self.value_serializer
            )
            yield str(decoded), value
            it.next()


async def finished_batches(stream: Any, size: int, within: float) -> AsyncIterator[list[Any]]:
    """``stream.take_events(size, within)``, except that a batch's events are acked only once
    the agent has finished it, that is, asked for the next batch.

    faust's ``take_events`` acks a batch in a ``finally``: also when the agent leaves the loop
    (a shutdown, see ``stopping``), crashes, or is cancelled half-way through. A commit after
    that moves the offsets past events whose rows were never written, and nobody sees them
    again. Here every event gets one extra reference (``message.incref``) when its batch is
    handed out, released only when the agent comes back for more; an agent that leaves the
    loop keeps the batch unacked, so its offsets are never committed and the partition's next
    owner (or this worker after a rejoin) gets the events again."""
    async for batch in stream.take_events(size, within=within):  # a fresh list per batch
        for event in batch:
            event.message.incref()
        yield batch
        for event in batch:  # reached only when the agent asks for the next batch
            event.message.decref()  # take_events' own ack is then the final one


def stopping(app: Any) -> bool:
    """True once the worker has begun to shut down: an agent must then leave its batch
    unwritten and the loop of ``finished_batches`` (its events stay unacked and are delivered
    again to the partition's next owner).

    faust's shutdown does not wait for agents (``wait_empty`` skips waiting when stopping),
    closes the tables, flushes the producer and leaves the consumer group, and only then stops
    the producer. Rows an agent wrote after the flush would reach the changelog after the group
    had moved on: a later recovery of that partition would replay them over newer rows.
    """
    return bool(app.should_stop)


@contextmanager
def changelog_writes() -> Iterator[list[Any]]:
    """Collect the changelog futures of the ``DurableTable`` writes made inside the block (in
    this task only: each agent waits for its own writes, never clears another's)."""
    writes: list[Any] = []
    token = _changelog_writes.set(writes)
    try:
        yield writes
    finally:
        _changelog_writes.reset(token)


async def write_rows(app: Any, write: Callable[[], None]) -> bool:
    """A batch's table writes, made durable: ``write()`` unless the worker is stopping, then
    wait until the broker has acknowledged their changelog records. False when nothing was
    written because the worker is stopping: the agent must then end without acking."""
    if stopping(app):
        return False
    with changelog_writes() as written:
        write()
    await deliver(written)
    return True


async def deliver(pending: list[Awaitable[Any]]) -> None:
    """Wait until every message sent for this batch (outputs, or changelog records collected
    by ``changelog_writes``) is acknowledged by the broker."""
    if pending:
        await asyncio.gather(*pending)
    pending.clear()


def key_text(key: Any) -> str | None:
    if key is None:
        return None
    if isinstance(key, bytes):
        return key.decode("utf-8", errors="replace")
    return str(key)
