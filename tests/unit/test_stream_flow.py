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
