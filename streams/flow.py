"""Resuming the flow after a rebalance without dropping messages that are already flowing.

In faust-streaming 0.15.3 table recovery resumes the flow twice:

1. When the changelogs are read ("Resuming flow..."), ``app.flow_control.resume()`` and
   ``consumer.resume_flow()``: messages are fetched from the committed offsets and put into
   the agents' queues, and the agents start on them.
2. In ``Recovery.on_recovery_completed``: ``consumer.perform_seek()`` and then
   ``app.flow_control.resume()`` again, while the flow is running.

``FlowControlEvent.resume`` clears every agent queue, which is meant for the messages of the
old assignment; the second call therefore drops messages delivered a moment earlier. The
``perform_seek`` before it sets the consumer's read offset back to the committed offset, so
the next message fetched before the seek looks, to the consumer's gap check, like a jump over
offsets that do not exist: they are recorded as a gap, a gap counts as acked, and the commit
walks past messages that were never processed. The same reset also puts offsets into the
acked list twice (acked and gap), after which the commit advances one offset per interval.

``GuardedFlowControl`` (the worker app's ``flow_control``) and ``guard_seeks`` (on its
consumer) close both:

- ``resume()`` of a flow that is already running changes nothing: no queue is cleared.
- Resuming a suspended flow clears the queues as before. The consumer's read offsets, which
  may still name messages of the previous assignment, are forgotten, so the first message
  fetched for each partition is taken as it comes.
- ``perform_seek()`` while the flow runs keeps the read offsets of the messages already
  delivered, including those delivered while it waited for the committed offsets. Messages
  fetched again after the seek are dropped as duplicates of ones already on their way, instead
  of the messages in between being taken for a gap.

Clearing the queues (when a rebalance starts, and when a suspended flow resumes) drops
events whose messages other agents may hold too: a message on a topic that two agents consume
(``chunks``: the extractor and the text embedder) counts one reference per agent, and faust's
clear neither releases the dropped agent's reference nor lets a delivery that waits for room
in a full queue finish (it cancels it). When one agent is behind (the text embedder while
Weaviate is down) and the other already finished the message, the message stays half-acked
for good; ``wait_empty`` then waits for it forever and the rebalance never ends. Here a clear
releases each dropped event's reference (a message whose last reference goes is withheld:
done, not committed, fetched again from the committed offset) and wakes the waiting
deliveries instead of cancelling them: their events arrive after the clear and are skipped
and released by the stream, as events of a stopped flow or an old generation always are.

These read faust-streaming 0.15 and mode internals (``_read_offset``, ``flow_active``, a
queue's ``_queue`` and ``_putters``), hence the pins in ``pyproject.toml``.
"""

from __future__ import annotations

import logging
from typing import Any

from faust.transport.consumer import ensure_TP
from mode.utils.queues import FlowControlEvent

from streams.acks import withhold

log = logging.getLogger(__name__)


class GuardedFlowControl(FlowControlEvent):
    """faust's flow control, except that resuming a running flow clears no queue, resuming
    a suspended one also forgets the consumer's read offsets, and clearing the queues
    releases what it drops and lets waiting deliveries finish (see the module docstring)."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._app = app

    def resume(self) -> None:
        if self.is_active():
            log.debug("flow already running: resume() leaves the agents' queues alone")
            return
        consumer = self._app._consumer  # None until the app builds its consumer
        if consumer is not None:
            consumer._read_offset.clear()
        super().resume()

    def clear(self) -> None:
        consumer = self._app._consumer
        queues: list[Any] = list(self._queues)  # asyncio.Queue internals below
        for queue in queues:
            dropped = list(queue._queue)
            waiting = list(getattr(queue, "_putters", ()))
            queue._putters.clear()  # so that faust's clear cancels none of them
            queue.clear()
            for putter in waiting:
                if not putter.done():
                    putter.set_result(None)  # the delivery goes on into the emptied queue
            if consumer is not None:
                for item in dropped:
                    release(consumer, item)


def release(consumer: Any, item: Any) -> None:
    """Give up one agent's reference to a dropped event's message; when it was the last,
    the message is withheld (see ``streams.acks``), never acked for a commit."""
    message = getattr(item, "message", None)
    if message is None or message.acked:
        return
    if not message.decref():
        withhold(consumer, message)


def guard_seeks(consumer: Any) -> None:
    """``consumer.perform_seek()`` while the flow runs keeps the read offsets of messages
    already delivered (see the module docstring).

    faust's version awaits the committed offsets and then sets every read offset to them;
    messages keep arriving during that await, so their read offsets must be looked at after
    it, not before. This one records the committed offsets as faust does and sets a read
    offset only for a partition that has delivered nothing since the flow resumed."""
    perform_seek = consumer.perform_seek

    async def guarded_perform_seek() -> None:
        if not consumer.flow_active:
            await perform_seek()
            return
        committed = await consumer.seek_to_committed()
        for raw_tp, offset in committed.items():
            tp = ensure_TP(raw_tp)
            if offset is not None:
                consumer._committed_offset[tp] = offset or None  # as faust records it
            if consumer._read_offset.get(tp) is None:  # nothing delivered since the resume
                consumer._read_offset[tp] = offset if offset is not None and offset >= 0 else None

    consumer.perform_seek = guarded_perform_seek
