"""Prometheus metrics of the query service, on a registry of its own per app.

A registry per app (not prometheus-client's global one) lets several apps live in one process
(tests, an embedded service) without "duplicated timeseries" errors. The LLM client is built
with the same registry, so its ``kgrag_llm_*`` counters (calls to the endpoint, cache hits,
tokens, retries) are scraped with ours.

Gauges that describe the outside world (version age, consumer lag) are set when
``/metrics`` is scraped, not by a timer, so they are as fresh as the scrape; the Kafka
figures come from ``query.kafka_probes``. The community job's gauges (alive, restarts,
failed items, last run, pending graph changes) come from its status file
(``core.job_status``) and from the pending-changes probe.

The metrics are declared as data (``METRICS``) and built in one loop; the class annotations
give each attribute its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from core.job_status import JobStatus
from core.worker_status import WatchdogStatus
from query.results import QueryResult

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


MetricKind = type[Counter] | type[Gauge] | type[Histogram]


@dataclass(frozen=True)
class MetricSpec:
    """One metric as data: the ``QueryMetrics`` attribute it lands on, its kind, Prometheus
    name, help text and label names (and a histogram's buckets)."""

    attr: str
    kind: MetricKind
    name: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None

    def build(self, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
        if self.kind is Histogram:
            buckets = self.buckets or Histogram.DEFAULT_BUCKETS
            return Histogram(self.name, self.help, self.labels, registry=registry, buckets=buckets)
        return self.kind(self.name, self.help, self.labels, registry=registry)


_WORKER = ("group", "worker")

# In the order they are scraped; names and labels are the service's public interface.
METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("latency", Histogram, "kgrag_query_latency_seconds",
               "Time to answer a request, per method", ("method",), LATENCY_BUCKETS),
    MetricSpec("requests", Counter, "kgrag_query_requests",
               "Answered requests per method and outcome", ("method", "outcome")),
    MetricSpec("llm_calls", Counter, "kgrag_query_llm_calls",
               "LLM calls made by queries, per method", ("method",)),
    MetricSpec("llm_tokens", Counter, "kgrag_query_llm_tokens",
               "LLM tokens spent by queries, per method and kind", ("method", "kind")),
    MetricSpec("llm_cost", Counter, "kgrag_query_llm_cost_usd",
               "What queries' LLM tokens cost at the model's price (llm.prices), per method",
               ("method",)),
    MetricSpec("removed_citations", Counter, "kgrag_query_removed_citations",
               "Cited ids removed because the model was not shown them", ("method",)),
    MetricSpec("documents_published", Counter, "kgrag_documents_published",
               "Documents accepted by POST /v1/documents"),
    MetricSpec("documents_deleted", Counter, "kgrag_documents_deleted",
               "Deletions sent by DELETE /v1/documents/{id}"),
    MetricSpec("documents_indexed", Gauge, "kgrag_documents_indexed",
               "Documents in the snapshot being served"),
    MetricSpec("text_units_indexed", Gauge, "kgrag_text_units_indexed",
               "Text units in the snapshot being served"),
    MetricSpec("entities_indexed", Gauge, "kgrag_entities_indexed",
               "Entities in the snapshot being served"),
    MetricSpec("ingest_tokens", Gauge, "kgrag_ingest_llm_tokens",
               "Tokens extracting the served snapshot's documents spent (kind: prompt, "
               "completion)", ("kind",)),
    MetricSpec("ingest_cost", Gauge, "kgrag_ingest_llm_cost_usd",
               "What extracting the served snapshot's documents cost at the chat model's price"),
    MetricSpec("ingest_cost_per_document", Gauge, "kgrag_ingest_llm_cost_per_document_usd",
               "kgrag_ingest_llm_cost_usd per document of the served snapshot"),
    MetricSpec("served_version", Gauge, "kgrag_snapshot_version",
               "Version of the snapshot being served (0: none)"),
    MetricSpec("version_age", Gauge, "kgrag_snapshot_age_seconds",
               "Wall-clock age of the snapshot being served"),
    MetricSpec("reports_age", Gauge, "kgrag_reports_age_seconds",
               "Wall-clock age of the community run whose reports the served version carries "
               "(light commits between runs make the graph newer than its reports; 0: none yet)"),
    MetricSpec("version_swaps", Counter, "kgrag_snapshot_swaps",
               "Times a newer snapshot was put in service"),
    MetricSpec("swap_seconds", Histogram, "kgrag_version_swap_seconds",
               "Time to put a newer graph version in service: followed row by row from the one "
               "in service, or read whole", ("how",),
               (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)),
    MetricSpec("consumer_lag", Gauge, "kgrag_consumer_lag",
               "Messages a worker group has not committed yet, per topic: group graph (chunker, "
               "extractor, mergers) or vectors (the embedders)", ("group", "topic")),
    MetricSpec("consumer_lag_errors", Counter, "kgrag_consumer_lag_errors",
               "Failed attempts to read the worker groups' lag"),
    MetricSpec("worker_alive", Gauge, "kgrag_worker_alive",
               "1 while a stream worker's stall watchdog writes its status, else 0", _WORKER),
    MetricSpec("watchdog_repairs", Gauge, "kgrag_watchdog_repairs",
               "Rebalances a stream worker's stall watchdog asked for since the worker started",
               _WORKER),
    MetricSpec("watchdog_failures", Gauge, "kgrag_watchdog_failures",
               "Checks or repairs of a stream worker's stall watchdog that failed since it "
               "started", _WORKER),
    MetricSpec("community_job_alive", Gauge, "kgrag_community_job_alive",
               "1 while the community job writes its status (heartbeat), else 0"),
    MetricSpec("community_job_restarts", Gauge, "kgrag_community_job_restarts",
               "Restarts of the community job process and of its child pool (current leader)"),
    MetricSpec("community_failed_items", Gauge, "kgrag_community_failed_items",
               "Reports and summaries the LLM refused, waiting for a retry"),
    MetricSpec("community_last_run", Gauge, "kgrag_community_last_run_timestamp_seconds",
               "Unix time the community job finished its last run (0: none yet)"),
    MetricSpec("community_last_run_cost", Gauge, "kgrag_community_last_run_cost_usd",
               "What the community job's last run spent on the LLM (reports, summaries, "
               "aliases) at the chat model's price"),
    MetricSpec("community_last_light_commit", Gauge,
               "kgrag_community_last_light_commit_timestamp_seconds",
               "Unix time the community job last committed the rows of new articles between "
               "runs (0: none yet)"),
    MetricSpec("community_pending_changes", Gauge, "kgrag_community_pending_changes",
               "Graph changes written to Kafka but not yet in the snapshot being served"),
)  # fmt: skip


class QueryMetrics:
    """The service's metrics, one attribute per ``METRICS`` row (the annotations below give
    them their types; a unit test keeps both lists the same)."""

    latency: Histogram
    requests: Counter
    llm_calls: Counter
    llm_tokens: Counter
    llm_cost: Counter
    removed_citations: Counter
    documents_published: Counter
    documents_deleted: Counter
    documents_indexed: Gauge
    text_units_indexed: Gauge
    entities_indexed: Gauge
    ingest_tokens: Gauge
    ingest_cost: Gauge
    ingest_cost_per_document: Gauge
    served_version: Gauge
    version_age: Gauge
    reports_age: Gauge
    version_swaps: Counter
    swap_seconds: Histogram
    consumer_lag: Gauge
    consumer_lag_errors: Counter
    worker_alive: Gauge
    watchdog_repairs: Gauge
    watchdog_failures: Gauge
    community_job_alive: Gauge
    community_job_restarts: Gauge
    community_failed_items: Gauge
    community_last_run: Gauge
    community_last_run_cost: Gauge
    community_last_light_commit: Gauge
    community_pending_changes: Gauge

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = CollectorRegistry() if registry is None else registry
        for spec in METRICS:
            setattr(self, spec.attr, spec.build(self.registry))

    def observe(self, method: str, seconds: float, outcome: str = "ok") -> None:
        self.latency.labels(method).observe(seconds)
        self.requests.labels(method, outcome).inc()

    def record_result(self, result: QueryResult) -> None:
        method = result.method or "unknown"
        self.llm_calls.labels(method).inc(result.llm_calls)
        self.llm_tokens.labels(method, "prompt").inc(result.prompt_tokens)
        self.llm_tokens.labels(method, "completion").inc(result.completion_tokens)
        self.removed_citations.labels(method).inc(result.removed_citations)
        self.llm_cost.labels(method).inc(result.cost_usd)

    def set_community(
        self, job: JobStatus | None, pending: int | None, now: float | None = None
    ) -> None:
        """The community job's gauges from its status (None: never ran) and the pending
        graph changes (None: unknown, the last figure stays)."""
        self.community_job_alive.set(1 if job is not None and job.alive(now) else 0)
        self.community_job_restarts.set(0 if job is None else job.restarts)
        self.community_failed_items.set(0 if job is None else job.failed_items_total)
        last = None if job is None else job.last_run
        self.community_last_run.set(0 if last is None else last.finished_at)
        self.community_last_run_cost.set(0 if last is None else last.cost_usd)
        light = None if job is None else job.last_light_commit
        self.community_last_light_commit.set(0 if light is None else light.committed_at)
        if pending is not None:
            self.community_pending_changes.set(pending)

    def set_workers(self, workers: list[WatchdogStatus], now: float | None = None) -> None:
        """Each stream worker's watchdog figures (from its status file)."""
        for gauge in (self.worker_alive, self.watchdog_repairs, self.watchdog_failures):
            gauge.clear()  # a forgotten worker's series goes with it
        for w in workers:
            labels = (w.group, w.name)
            self.worker_alive.labels(*labels).set(1 if w.alive(now) else 0)
            self.watchdog_repairs.labels(*labels).set(w.figures.repairs)
            self.watchdog_failures.labels(*labels).set(w.figures.failures)

    def render(self) -> bytes:
        return generate_latest(self.registry)
