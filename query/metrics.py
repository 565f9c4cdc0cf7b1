"""Prometheus metrics of the query service, on a registry of its own per app.

A registry per app (not prometheus-client's global one) lets several apps live in one process
(tests, an embedded service) without "duplicated timeseries" errors. The LLM client is built
with the same registry, so its ``kgrag_llm_*`` counters (calls to the endpoint, cache hits,
tokens, retries) are scraped with ours.

Gauges that describe the outside world (snapshot age, consumer lag) are set when
``/metrics`` is scraped, not by a timer, so they are as fresh as the scrape. Consumer lag
costs two round trips to Kafka (the worker group's committed offsets and the topics' end
offsets); it is cached for ``lag_ttl_s`` so a fast scraper cannot turn into load on the
broker, and a failure leaves the last figure in place and counts an error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from kgrag.lag import consumer_lag
from kgrag.settings import Settings
from query.results import QueryResult

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


@dataclass
class QueryMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        reg = self.registry
        self.latency = Histogram(
            "kgrag_query_latency_seconds",
            "Time to answer a request, per method",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.requests = Counter(
            "kgrag_query_requests",
            "Answered requests per method and outcome",
            ["method", "outcome"],
            registry=reg,
        )
        self.llm_calls = Counter(
            "kgrag_query_llm_calls",
            "LLM calls made by queries, per method",
            ["method"],
            registry=reg,
        )
        self.llm_tokens = Counter(
            "kgrag_query_llm_tokens",
            "LLM tokens spent by queries, per method and kind",
            ["method", "kind"],
            registry=reg,
        )
        self.removed_citations = Counter(
            "kgrag_query_removed_citations",
            "Cited ids removed because the model was not shown them",
            ["method"],
            registry=reg,
        )
        self.documents_published = Counter(
            "kgrag_documents_published", "Documents accepted by POST /v1/documents", registry=reg
        )
        self.documents_indexed = Gauge(
            "kgrag_documents_indexed", "Documents in the snapshot being served", registry=reg
        )
        self.text_units_indexed = Gauge(
            "kgrag_text_units_indexed", "Text units in the snapshot being served", registry=reg
        )
        self.entities_indexed = Gauge(
            "kgrag_entities_indexed", "Entities in the snapshot being served", registry=reg
        )
        self.snapshot_version = Gauge(
            "kgrag_snapshot_version", "Version of the snapshot being served (0: none)", registry=reg
        )
        self.snapshot_age = Gauge(
            "kgrag_snapshot_age_seconds",
            "Wall-clock age of the snapshot being served",
            registry=reg,
        )
        self.snapshot_swaps = Counter(
            "kgrag_snapshot_swaps", "Times a newer snapshot was put in service", registry=reg
        )
        self.consumer_lag = Gauge(
            "kgrag_consumer_lag",
            "Messages the worker group has not committed yet, per topic",
            ["topic"],
            registry=reg,
        )
        self.consumer_lag_errors = Counter(
            "kgrag_consumer_lag_errors",
            "Failed attempts to read the worker group's lag",
            registry=reg,
        )

    def observe(self, method: str, seconds: float, outcome: str = "ok") -> None:
        self.latency.labels(method).observe(seconds)
        self.requests.labels(method, outcome).inc()

    def record_result(self, result: QueryResult) -> None:
        method = result.method or "unknown"
        self.llm_calls.labels(method).inc(result.llm_calls)
        self.llm_tokens.labels(method, "prompt").inc(result.prompt_tokens)
        self.llm_tokens.labels(method, "completion").inc(result.completion_tokens)
        self.removed_citations.labels(method).inc(result.removed_citations)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class LagProbe:
    """Consumer lag, cached for ``ttl_s``; a failed probe keeps the last figures."""

    def __init__(self, settings: Settings, metrics: QueryMetrics, ttl_s: float = 15.0) -> None:
        self._settings = settings
        self._metrics = metrics
        self._ttl_s = ttl_s
        self._checked = float("-inf")
        self._lock = asyncio.Lock()
        self.last: dict[str, int] = {}

    async def refresh(self, timeout_s: float = 5.0) -> dict[str, int]:
        async with self._lock:
            if time.monotonic() - self._checked < self._ttl_s:
                return self.last
            self._checked = time.monotonic()
            try:
                self.last = await asyncio.wait_for(consumer_lag(self._settings), timeout_s)
            except Exception as e:  # any Kafka failure only costs the figure
                log.warning("consumer lag not available: %s", e)
                self._metrics.consumer_lag_errors.inc()
                return self.last
            for topic, n in self.last.items():
                self._metrics.consumer_lag.labels(topic).set(n)
            return self.last
