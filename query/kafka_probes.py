"""What the query service reads from Kafka for ``/healthz`` and ``/metrics``: the worker
groups' consumer lag (``LagProbe``) and the end offsets of ``graph_changes`` (``PendingProbe``).

Consumer lag costs two round trips to Kafka (the worker group's committed offsets and the
topics' end offsets); it is cached for ``lag_ttl_s`` so a fast scraper cannot turn into load
on the broker, and a failure leaves the last figure in place and counts an error.

``PendingProbe`` caches the end offsets for a few seconds for the same reason, remembers a
failure for as long (so a broker that is away does not slow every probe down by a timeout),
and takes its reader as a parameter so tests can hand it figures without a broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from core import lag
from core.lag import consumer_lag
from core.settings import Settings
from query.metrics import QueryMetrics

log = logging.getLogger(__name__)


class LagProbe:
    """Consumer lag of both worker groups (``{group: {topic: n}}``), cached for ``ttl_s``; a
    failed probe keeps the last figures."""

    def __init__(self, settings: Settings, metrics: QueryMetrics, ttl_s: float = 15.0) -> None:
        self._settings = settings
        self._metrics = metrics
        self._ttl_s = ttl_s
        self._checked = float("-inf")
        self._lock = asyncio.Lock()
        self.last: dict[str, dict[str, int]] = {}

    async def _read(self) -> dict[str, dict[str, int]]:
        settings = self._settings
        graph = await consumer_lag(settings)
        vectors = await consumer_lag(settings, group_id=settings.vector_app_id)
        return {"graph": graph, "vectors": vectors}

    async def refresh(self, timeout_s: float = 5.0) -> dict[str, dict[str, int]]:
        async with self._lock:
            if time.monotonic() - self._checked < self._ttl_s:
                return self.last
            self._checked = time.monotonic()
            try:
                self.last = await asyncio.wait_for(self._read(), timeout_s)
            except Exception as e:  # any Kafka failure only costs the figure
                log.warning("consumer lag not available: %s", e)
                self._metrics.consumer_lag_errors.inc()
                return self.last
            for group, lag in self.last.items():
                for topic, n in lag.items():
                    self._metrics.consumer_lag.labels(group, topic).set(n)
            return self.last


EndOffsetsReader = Callable[[Settings, float], Awaitable[dict[int, int]]]


class PendingProbe:
    """End offsets of ``graph_changes``, cached for ``ttl_s``; a failure is cached as long.

    ``refresh()`` returns the offsets, or None when they could not be read (``error`` then
    says why). ``read`` replaces the Kafka reader (tests); by default ``graph_end_offsets``
    is looked up when called (``core.lag.graph_end_offsets``), so patching the module attribute
    reaches every probe."""

    def __init__(
        self, settings: Settings, ttl_s: float = 5.0, read: EndOffsetsReader | None = None
    ) -> None:
        self._settings = settings
        self._ttl_s = ttl_s
        self._read = read
        self._checked = float("-inf")
        self._lock = asyncio.Lock()
        self.last: dict[int, int] | None = None
        self.error: str | None = None

    async def refresh(self, timeout_s: float = 2.0) -> dict[int, int] | None:
        async with self._lock:
            if time.monotonic() - self._checked < self._ttl_s:
                return self.last
            read = self._read or lag.graph_end_offsets
            try:
                self.last = await asyncio.wait_for(read(self._settings, timeout_s), timeout_s + 1)
                self.error = None
            except Exception as e:  # any Kafka failure only costs the figure
                log.warning("graph_changes end offsets not available: %s", e)
                self.last, self.error = None, f"{type(e).__name__}: {e}"
            self._checked = time.monotonic()
            return self.last
