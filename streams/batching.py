"""Batch processing that keeps faust's per-partition table semantics.

faust routes a table read or write to the partition of ``current_event()``. Inside
``stream.take_events`` the current event is whichever came last, so a batch touching rows of
several partitions must re-enter each event's context before using a table: ``as_current``
does that (faust keeps the context in ``faust.streams._current_event``).

Outputs of a batch are sent first and their delivery awaited (``deliver``); only then are the
table rows written. A crash in between re-delivers the batch, and the idempotent merge rules
make the replay change nothing, so the tables never record work whose outputs were lost.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from typing import Any

from faust.streams import _current_event


@contextmanager
def as_current(event: Any) -> Iterator[None]:
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


async def deliver(pending: list[Awaitable[Any]]) -> None:
    """Wait until every message sent for this batch is acknowledged by the broker."""
    if pending:
        await asyncio.gather(*pending)
    pending.clear()


def key_text(key: Any) -> str | None:
    if key is None:
        return None
    if isinstance(key, bytes):
        return key.decode("utf-8", errors="replace")
    return str(key)
