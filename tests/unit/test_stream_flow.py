"""Resuming the flow after table recovery (``streams.flow``): messages already in the agents'
queues stay there, and the consumer's read offsets keep naming what was delivered.

The app and consumer are faust's own (``WorkerApp`` and, for the control cases, a plain
``faust.App``); the consumer is never started, so no broker is needed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import faust
import pytest
from faust.types.tuples import TP

from streams.app import WorkerApp

TP0 = TP("ns.entity-items", 3)


def _app(cls: type[faust.App]) -> Any:
    app = cls("flow-test", broker="kafka://127.0.0.1:1", autodiscover=False, web_enabled=False)
    app.flow_control.resume()  # running, as after the first resume of a recovery
    return app


@pytest.fixture
async def app() -> AsyncIterator[Any]:
    app = _app(WorkerApp)
    yield app
    app.consumer._thread.thread_loop.close()  # the never-started consumer thread's own loop


def _queue_with(app: Any, *items: int) -> Any:
    queue = app.FlowControlQueue(maxsize=100, clear_on_resume=True)  # as an agent's channel
    for item in items:
        queue.put_nowait(item)
    return queue


def _seek_to(app: Any, committed: int, delivered_meanwhile: int | None = None) -> None:
    """Stand in for the broker: the committed offset ``perform_seek`` seeks to, and (as the
    consumer's fetch loop would) messages delivered while it waits for the answer."""

    async def seek_to_committed() -> Mapping[TP, int]:
        if delivered_meanwhile is not None:
            app.consumer._read_offset[TP0] = delivered_meanwhile
        return {TP0: committed}

    app.consumer.seek_to_committed = seek_to_committed


async def test_resuming_a_running_flow_keeps_the_messages_queued_for_the_agents(
    app: Any,
) -> None:
    queue = _queue_with(app, 380, 381, 382)
    app.flow_control.resume()  # the second resume of a table recovery
    assert queue.qsize() == 3


async def test_faust_alone_drops_them() -> None:
    """The loss, on faust's flow control as it comes: the queue is emptied while running."""
    app = _app(faust.App)
    queue = _queue_with(app, 380, 381, 382)
    app.flow_control.resume()
    assert queue.qsize() == 0
    app.consumer._thread.thread_loop.close()


async def test_resuming_a_suspended_flow_clears_the_queues_and_forgets_read_offsets(
    app: Any,
) -> None:
    """After a rebalance, what sat in the queues belongs to the old assignment, and a read
    offset may name a message of it: the first message fetched is taken as it comes."""
    queue = _queue_with(app, 200, 201)
    app.flow_control.suspend()
    app.consumer._read_offset[TP0] = 231
    app.flow_control.resume()
    assert queue.qsize() == 0
    assert app.consumer._read_offset[TP0] is None
    assert app.flow_control.is_active()


async def test_a_seek_while_messages_flow_keeps_the_read_offset_of_what_was_delivered(
    app: Any,
) -> None:
    """Offsets 347-386 delivered since the flow resumed; a seek to the committed 347 must
    not make the next message (387) look like a jump over 348-386."""
    app.consumer.resume_flow()
    app.consumer._read_offset[TP0] = 386
    _seek_to(app, 347)
    await app.consumer.perform_seek()
    assert app.consumer._read_offset[TP0] == 386
    assert app.consumer._committed_offset[TP0] == 347  # faust's own bookkeeping still runs


async def test_messages_delivered_while_the_seek_waits_keep_their_read_offset(
    app: Any,
) -> None:
    """The audited run: nothing delivered yet when the seek started, 482-534 delivered while
    it waited for the committed offset (482); the next message is 535, no gap."""
    app.consumer.resume_flow()
    _seek_to(app, 482, delivered_meanwhile=534)
    await app.consumer.perform_seek()
    assert app.consumer._read_offset[TP0] == 534
    assert app.consumer._committed_offset[TP0] == 482


async def test_a_partition_with_nothing_delivered_reads_from_the_committed_offset(
    app: Any,
) -> None:
    app.consumer.resume_flow()
    _seek_to(app, 482)
    await app.consumer.perform_seek()
    assert app.consumer._read_offset[TP0] == 482


async def test_a_seek_while_the_flow_is_stopped_resets_the_read_offset(app: Any) -> None:
    """faust's behaviour, kept: during a rebalance the seek defines where reading restarts."""
    app.consumer.stop_flow()
    app.consumer._read_offset[TP0] = 386
    _seek_to(app, 347)
    await app.consumer.perform_seek()
    assert app.consumer._read_offset[TP0] == 347


async def test_faust_alone_resets_it_while_messages_flow() -> None:
    app = _app(faust.App)
    app.consumer.resume_flow()
    app.consumer._read_offset[TP0] = 386
    _seek_to(app, 347)
    await app.consumer.perform_seek()
    assert app.consumer._read_offset[TP0] == 347
    app.consumer._thread.thread_loop.close()


# Clearing the queues when a rebalance starts: a message that two agents consume (``chunks``:
# the extractor and the text embedder) is dropped from the queue of the one that is behind.


class _Event:
    """What a channel's queue holds: an event pointing at its message."""

    def __init__(self, message: Any) -> None:
        self.message = message


def _message(offset: int, *, references: int) -> Any:
    from faust.types.tuples import Message

    msg = Message(TP0.topic, TP0.partition, offset, 0.0, 0, None, None, b"v", None, tp=TP0)
    msg.incref(references)  # one per agent it was delivered to, as faust's conductor does
    return msg


def _tracked(app: Any, msg: Any) -> None:
    msg.tracked = True  # an agent's stream has started on it
    app.consumer._unacked_messages.add(msg)


async def test_a_dropped_event_whose_other_agent_finished_it_is_done_but_not_committed(
    app: Any,
) -> None:
    """The extractor finished offset 38; the text embedder (behind, Weaviate down) still had
    it queued. Without the release it stays unacked and ``wait_empty`` waits for ever."""
    msg = _message(38, references=2)
    _tracked(app, msg)
    msg.ack(app.consumer)  # the extractor's reference
    queue = _queue_with(app)
    queue.put_nowait(_Event(msg))
    app.flow_control.suspend()
    app.flow_control.clear()
    assert queue.qsize() == 0
    assert msg.acked and msg.refcount == 0
    assert msg not in app.consumer._unacked_messages
    assert not app.consumer._acked.get(TP0), "a withheld message must not count for a commit"


async def test_a_dropped_event_another_agent_still_holds_keeps_that_reference(
    app: Any,
) -> None:
    msg = _message(39, references=2)
    _tracked(app, msg)
    queue = _queue_with(app)
    queue.put_nowait(_Event(msg))
    app.flow_control.suspend()
    app.flow_control.clear()
    assert msg.refcount == 1 and not msg.acked
    assert msg in app.consumer._unacked_messages


async def _blocked_delivery(app: Any) -> tuple[Any, Any]:
    """A delivery waiting for room in a full queue, as faust's conductor waits."""
    import asyncio

    queue = app.FlowControlQueue(maxsize=1, clear_on_resume=True)
    queue.put_nowait(_Event(_message(40, references=1)))
    task = asyncio.ensure_future(queue.put(_Event(_message(41, references=1))))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not task.done() and queue._putters, "the delivery should wait for room"
    return queue, task


async def test_a_delivery_waiting_for_room_goes_on_into_the_cleared_queue(app: Any) -> None:
    """faust cancels it, losing the event's reference; here it finishes, and the stream then
    skips and releases the event as one of a stopped flow."""
    queue, task = await _blocked_delivery(app)
    app.flow_control.suspend()
    app.flow_control.clear()
    await task
    assert queue.qsize() == 1
    assert queue.get_nowait().message.offset == 41


async def test_faust_alone_cancels_that_delivery() -> None:
    app = _app(faust.App)
    queue, task = await _blocked_delivery(app)
    app.flow_control.suspend()
    app.flow_control.clear()
    with pytest.raises(BaseException) as caught:
        await task
    assert type(caught.value).__name__ == "CancelledError"
    assert queue.qsize() == 0
    app.consumer._thread.thread_loop.close()
