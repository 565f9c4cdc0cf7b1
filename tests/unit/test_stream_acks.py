"""Which acks may move a committed offset (``streams.acks``), and when a batch is acked
(``streams.batching.finished_batches``).

The consumer is faust's real aiokafka consumer object (never started: no broker is needed to
exercise its ack and commit bookkeeping); messages are faust ``ConsumerMessage`` objects.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from faust.types.tuples import TP, ConsumerMessage, Message

from streams.app import WorkerApp
from streams.batching import finished_batches

TOPIC = "ns.chunks"
TP0 = TP(TOPIC, 0)


def _app(cls: type[faust.App]) -> Any:
    app = cls("acks-test", broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False)
    app.topics._acking_topics.add(TOPIC)
    app.flow_control.resume()  # as after a completed rebalance
    app.consumer_generation_id = 3
    return app


def _message(app: Any, offset: int, generation: int | None = None) -> ConsumerMessage:
    gen = app.consumer_generation_id if generation is None else generation
    message = ConsumerMessage(TOPIC, 0, offset, 0.0, 0, None, b"k", b"v", None, generation_id=gen)
    app.consumer.track_message(message)
    return message


def _revoke(app: Any) -> None:
    """What faust does first in a rebalance: forget the partition's acked and committed
    offsets (``Consumer.on_partitions_revoked``), then stop the flow."""
    consumer = app.consumer
    for bookkeeping in (consumer._acked, consumer._acked_index, consumer._committed_offset):
        bookkeeping.pop(TP0, None)
    app.flow_control.suspend()


@pytest.fixture
async def app() -> AsyncIterator[Any]:
    app = _app(WorkerApp)
    yield app
    app.consumer._thread.thread_loop.close()  # the never-started consumer thread's own loop


async def test_acks_in_a_running_flow_are_committed(app: Any) -> None:
    for offset in range(5):
        assert app.consumer.ack(_message(app, offset))
    assert app.consumer._new_offset(TP0) == 5


async def test_a_message_skipped_during_a_rebalance_does_not_move_the_commit(app: Any) -> None:
    """Offsets 0-9 fetched; the rebalance clears 0-9 from the agents' buffers, then 10 slips
    in, is skipped by the stream and acked: committing 11 would lose 0-9."""
    _revoke(app)
    skipped = _message(app, 10)
    assert not app.consumer.ack(skipped)
    assert app.consumer._new_offset(TP0) is None
    assert skipped not in app.consumer._unacked_messages  # wait_empty does not wait for it


async def test_without_the_guard_faust_would_commit_past_the_cleared_messages() -> None:
    """The loss the guard exists for, shown on faust's consumer as it comes."""
    app = _app(faust.App)
    _revoke(app)
    assert app.consumer.ack(_message(app, 10))
    assert app.consumer._new_offset(TP0) == 11
    app.consumer._thread.thread_loop.close()


async def test_a_message_of_an_older_generation_is_not_committed(app: Any) -> None:
    stale = _message(app, 0, generation=2)
    assert not app.consumer.ack(stale)
    assert app.consumer._new_offset(TP0) is None
    fresh = _message(app, 0)  # fetched again after the seek to the committed offset
    assert app.consumer.ack(fresh)
    assert app.consumer._new_offset(TP0) == 1


async def test_a_withheld_message_is_not_acked_twice(app: Any) -> None:
    message = _message(app, 0)
    message.incref(2)  # two streams read the topic
    _revoke(app)
    assert not message.ack(app.consumer)  # the first stream skips it
    assert not message.ack(app.consumer)  # the second finishes it: still withheld
    app.flow_control.resume()
    assert not message.ack(app.consumer)  # a late third ack changes nothing either
    assert app.consumer._new_offset(TP0) is None


# ---- finished_batches --------------------------------------------------------------------


class TakeEventsStream:
    """The part of a faust Stream that ``finished_batches`` uses, with ``take_events``
    shaped like faust's: a batch is acked in a ``finally``, however the agent left it."""

    def __init__(self, batches: list[list[Any]]) -> None:
        self.batches = batches

    async def take_events(self, size: int, within: float) -> AsyncIterator[list[Any]]:
        for batch in self.batches:
            try:
                yield list(batch)
            finally:
                for event in batch:
                    await self.ack(event)

    async def ack(self, event: Any) -> bool:
        return bool(event.message.ack(None))


def _events(offsets: range) -> list[Any]:
    events = []
    for offset in offsets:
        message = Message(TOPIC, 0, offset, 0.0, 0, None, b"k", b"v", None)
        message.incref()  # delivered to one stream
        events.append(SimpleNamespace(message=message, value=b"v"))
    return events


async def _finalize() -> None:
    """Let asyncio close abandoned async generators (their ``finally`` blocks run then)."""
    gc.collect()
    for _ in range(5):
        await asyncio.sleep(0)


async def _agent(source: Any, batches: list[list[Any]], stop_after: int) -> list[int]:
    done: list[int] = []
    async for batch in source(TakeEventsStream(batches)):
        if len(done) == stop_after * 2:
            return done  # shutting down: leave this batch unwritten
        done.extend(e.message.offset for e in batch)
    return done


async def test_finished_batches_are_acked() -> None:
    batches = [_events(range(0, 2)), _events(range(2, 4))]
    done = await _agent(lambda s: finished_batches(s, 2, 0.1), batches, stop_after=99)
    await _finalize()
    assert done == [0, 1, 2, 3]
    assert all(e.message.acked for batch in batches for e in batch)


async def test_a_batch_left_unfinished_stays_unacked() -> None:
    batches = [_events(range(0, 2)), _events(range(2, 4))]
    await _agent(lambda s: finished_batches(s, 2, 0.1), batches, stop_after=1)
    await _finalize()
    assert [e.message.acked for e in batches[0]] == [True, True]
    assert [e.message.acked for e in batches[1]] == [False, False]


async def test_take_events_alone_acks_the_unfinished_batch() -> None:
    """Why the wrapper exists: faust's own loop acks the batch the agent walked away from."""
    batches = [_events(range(0, 2)), _events(range(2, 4))]
    await _agent(lambda s: s.take_events(2, 0.1), batches, stop_after=1)
    await _finalize()
    assert [e.message.acked for e in batches[1]] == [True, True]


async def test_a_batch_whose_agent_crashed_stays_unacked() -> None:
    batches = [_events(range(0, 2))]

    async def crashing() -> None:
        async for _batch in finished_batches(TakeEventsStream(batches), 2, 0.1):
            raise RuntimeError("Kafka went away while sending")

    with pytest.raises(RuntimeError):
        await crashing()
    await _finalize()
    assert [e.message.acked for e in batches[0]] == [False, False]
