"""No offset is committed for a message that was not processed in the current assignment.

faust-streaming's stream loop *skips* a message when the flow is stopped (a rebalance is under
way) or when the message was fetched in an older consumer-group generation, and then acks it
("otherwise the lag would increase"). A skipped message was never processed, yet its ack puts
its offset among those the consumer may commit. During a rebalance that is a loss:

1. ``Consumer.on_partitions_revoked`` forgets the acked and committed offsets of every revoked
   partition, then the app stops the flow and clears the agents' buffers of fetched messages
   (say offsets 200-230 of a partition), relying on a seek back to the committed offset.
2. A message fetched a moment later (231) slips into a buffer, is skipped, and acked.
3. ``wait_empty`` commits while in-flight batches finish. With the committed offset forgotten
   there is no gap check, so 232 is committed: 200-231 are never delivered again.

The unit tests show this path on faust's own consumer; the related loss at table recovery is
the one ``streams.flow`` closes.

``guard_acks`` wraps the consumer's ``ack``: an ack that arrives while the flow is stopped, or
for a message of an older generation, marks the message done (it leaves the consumer's unacked
set, so ``wait_empty`` does not wait for it) but does not record its offset. The partition is
sought back to its committed offset when the rebalance ends, so the message is fetched and
processed again; work that genuinely finished during the rebalance is redone, which every
agent here tolerates (they are idempotent).

The wrapper touches faust-streaming 0.15 internals (``_unacked_messages``,
``_waiting_for_ack``, ``ack_lock``), hence the pin in ``pyproject.toml``.
"""

from __future__ import annotations

import logging
from typing import Any

from faust.types.tuples import ack_lock
from mode.utils.futures import notify

log = logging.getLogger(__name__)


def committable(app: Any, message: Any) -> bool:
    """Whether an ack of ``message`` may count towards a commit now: the flow runs and the
    message was fetched in the consumer group's current generation."""
    return bool(
        app.flow_control.is_active() and message.generation_id == app.consumer_generation_id
    )


def withhold(consumer: Any, message: Any) -> bool:
    """Mark ``message`` done without recording its offset for a commit: it leaves the
    consumer's unacked set (so ``wait_empty`` stops waiting for it) and is fetched again from
    the committed offset. False if it was already acked."""
    with ack_lock:
        if message.acked:
            return False
        message.acked = True
        consumer._unacked_messages.discard(message)
        notify(consumer._waiting_for_ack)
    return True


def guard_acks(app: Any, consumer: Any) -> None:
    """Make ``consumer.ack`` ignore, for commits, messages that are not ``committable``."""
    ack = consumer.ack
    stats = {"withheld": 0, "skipped": 0}

    def guarded_ack(message: Any) -> bool:
        if committable(app, message):
            return bool(ack(message))
        if not withhold(consumer, message):
            return False
        stats["withheld"] += 1
        stats["skipped"] += not message.tracked  # no stream ever started on it
        if stats["withheld"] in (1, 10, 100) or not stats["withheld"] % 1000:
            log.info(
                "withheld the ack of %d message(s) finished or skipped (%d) during a "
                "rebalance: they are fetched again from the committed offset",
                stats["withheld"],
                stats["skipped"],
            )
        return False

    consumer.ack = guarded_ack
