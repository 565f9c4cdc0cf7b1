"""A rolling window of work in flight over a stream, results sent in input order.

Batches that wait for their slowest item leave a slow dependency (the LLM) idle at every batch
boundary; a window starts new work as soon as an item finishes, up to ``size`` in flight.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from typing import Any

from streams.batching import deliver


class Window:
    """A rolling window of chunks in flight, results sent in input order.

    Batches that wait for their slowest chunk leave the LLM idle at every batch boundary;
    here a new chunk starts as soon as one finishes, up to ``size`` in flight. Ordering and
    at-least-once still hold: results leave in input order, and an event is acked (its offset
    may be committed) only after its result is delivered. ``take_events`` acks each batch as
    soon as the loop asks for the next one, so every event gets an extra reference
    (``message.incref``) that only the drainer releases.
    """

    def __init__(self, stream: Any, size: int, send: Any) -> None:
        self.stream, self.send = stream, send
        self.slots = asyncio.Semaphore(size)
        self.inflight: deque[tuple[Any, asyncio.Future[Any]]] = deque()
        self.changed = asyncio.Event()

    async def admit(self, event: Any, work: Awaitable[Any], drainer: asyncio.Task[None]) -> None:
        while True:
            try:
                await asyncio.wait_for(self.slots.acquire(), timeout=1.0)
                break
            except TimeoutError:
                if drainer.done():
                    drainer.result()  # re-raise what stopped the drainer
        event.message.incref()
        self.inflight.append((event, asyncio.ensure_future(work)))
        self.changed.set()

    async def drain(self) -> None:
        while True:
            while not self.inflight:
                self.changed.clear()
                await self.changed.wait()
            await asyncio.wait([self.inflight[0][1]])
            ready: list[tuple[Any, asyncio.Future[Any]]] = []
            while self.inflight and self.inflight[0][1].done() and len(ready) < 256:
                ready.append(self.inflight.popleft())
            pending = [await self.send(event, fut.result()) for event, fut in ready]
            await deliver(pending)
            for event, _ in ready:
                await self.stream.ack(event)
                self.slots.release()
