"""What ``kgrag status`` reads: the latest version's meta, the backlog in Kafka, the job's status.

It reads only what other processes already publish, so it needs neither a running worker nor
the query service: the latest snapshot's ``meta.json`` (not the whole snapshot), the community
job's status file (``core.job_status``), the workers' watchdog statuses and, from Kafka, the
worker group's lag and the end offsets of ``graph_changes``. Kafka is the only part that can be
away; then the report still holds the rest and says Kafka was unreachable.

The verdict, the pending arithmetic and the ETA come from ``core.health``, the same functions
behind the query service's ``/healthz``, so both say the same thing about the same state.
``StatusReport.to_json`` is the command's ``--json`` output; ``kgrag.status_render`` prints
the same report for people.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from core.errors import KgragError
from core.health import Eta, assess, eta, format_duration, pending_changes
from core.job_status import JobStatus, read_status
from core.lag import VECTOR_TOPICS, consumer_lag
from core.settings import Settings
from core.tables.errors import SnapshotStoreError
from core.tables.opening import open_graph_store
from core.worker_status import WatchdogStatus, describe_failures, read_watchdog_statuses

log = logging.getLogger(__name__)


# Worker-group topics (settings names) in pipeline order; graph_changes is counted against the
# latest snapshot instead, since the community job (not the group's commits) is what folds it in.
STAGES = (
    "documents",
    "chunks",
    "extractions",
    "entity_items",
    "relationship_items",
    "claim_items",
)
GRAPH_CHANGES = "graph_changes"
VECTORS = "vectors"  # the vector worker's group: chunks and graph changes not yet in Weaviate


@dataclass(frozen=True, slots=True)
class Ingestion:
    """What extracting a version's documents spent at the LLM, in all and per document."""

    documents: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cost_per_document_usd: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SnapshotFacts:
    """What ``kgrag status`` needs from the latest snapshot: its ``meta.json`` only."""

    version: int
    created_at: str
    mode: str
    counts: dict[str, int]
    consumed_offsets: dict[str, int]
    ingest_tokens: dict[str, int] = field(default_factory=dict)  # "prompt", "completion"
    ingest_cost_usd: float = 0.0

    def ingestion(self) -> Ingestion:
        """What extracting the version's documents spent at the LLM, in all and per document.
        From the version's meta: the community job sums the documents' rows, each text unit
        counted once, so the figure survives worker restarts and holds for any number of
        workers (``agents.community.commit.ingest_cost``)."""
        documents = self.counts.get("documents", 0)
        return Ingestion(
            documents=documents,
            prompt_tokens=self.ingest_tokens.get("prompt", 0),
            completion_tokens=self.ingest_tokens.get("completion", 0),
            cost_usd=self.ingest_cost_usd,
            cost_per_document_usd=self.ingest_cost_usd / documents if documents else 0.0,
        )

    def age_s(self, now: float) -> float | None:
        try:
            at = datetime.fromisoformat(self.created_at.replace("Z", "+00:00"))
        except ValueError:
            return None
        at = at if at.tzinfo else at.replace(tzinfo=UTC)
        return max(0.0, now - at.timestamp())


def latest_snapshot(settings: Settings) -> SnapshotFacts | None:
    """The latest graph version's meta, or None before the first one. Reads the small
    versions table (and creates nothing)."""
    store = open_graph_store(settings)
    try:
        infos = store.version_infos()
    except SnapshotStoreError as e:
        raise KgragError(
            f"the graph tables in {store.root} cannot be read ({e}); the community job's next "
            "run writes a new version"
        ) from e
    if not infos:
        return None
    meta = infos[-1].meta
    return SnapshotFacts(
        version=meta.version,
        created_at=meta.created_at,
        mode=meta.mode,
        counts=dict(meta.counts),
        consumed_offsets=dict(meta.consumed_offsets),
        ingest_tokens=dict(meta.ingest_tokens),
        ingest_cost_usd=meta.ingest_cost_usd,
    )


@dataclass(frozen=True, slots=True)
class KafkaSample:
    """One reading of the backlog: graph-worker lag per stage, graph_changes end offsets, and
    the vector worker's lag (its chunks and graph changes not yet embedded)."""

    at: float  # monotonic
    stage_lag: dict[str, int]
    graph_ends: dict[int, int]
    vector_lag: int = 0

    def pending(self, snapshot: SnapshotFacts | None) -> dict[str, int]:
        out = {name: self.stage_lag.get(name, 0) for name in STAGES}
        consumed = None if snapshot is None else snapshot.consumed_offsets
        out[GRAPH_CHANGES] = pending_changes(self.graph_ends, consumed)
        out[VECTORS] = self.vector_lag
        return out


async def sample_kafka(settings: Settings, timeout_s: float) -> KafkaSample:
    """Read the backlog once; raises whatever the Kafka client raises when it cannot."""
    from core.lag import graph_end_offsets

    async def read() -> KafkaSample:
        ends = await graph_end_offsets(settings, timeout_s)
        if not ends:  # topics not created yet: nothing can be pending
            return KafkaSample(time.monotonic(), {}, {})
        timeout_ms = int(timeout_s * 1000)
        lag = await consumer_lag(settings, topics=STAGES, timeout_ms=timeout_ms)
        by_name = {settings.topic(name): name for name in STAGES}
        stage_lag = {by_name[t]: n for t, n in lag.items() if t in by_name}
        vectors = await consumer_lag(
            settings, topics=VECTOR_TOPICS, group_id=settings.vector_app_id, timeout_ms=timeout_ms
        )
        return KafkaSample(time.monotonic(), stage_lag, ends, sum(vectors.values()))

    return await asyncio.wait_for(read(), 2 * timeout_s + 1)


def kafka_error_message(settings: Settings, err: BaseException, timeout_s: float) -> str:
    servers = settings.kafka.bootstrap_servers
    if isinstance(err, TimeoutError):
        why = f"no answer within {timeout_s:g} s"
    elif type(err).__name__ == "KafkaConnectionError":
        why = "connection failed"
    else:
        why = f"{type(err).__name__}: {err}"
    return (
        f"Kafka at {servers} is unreachable ({why}); start it with `kgrag services up` or "
        "point KGRAG_KAFKA__BOOTSTRAP_SERVERS at it. Pending work and ETA are unknown"
    )


@dataclass
class StatusReport:
    """Everything ``kgrag status`` shows; ``to_json()`` is the ``--json`` output."""

    settings: Settings
    checked_at: float  # unix time
    snapshot: SnapshotFacts | None
    job: JobStatus | None
    pending: dict[str, int] | None  # None: Kafka unreachable
    eta: Eta | None
    sample_s: float
    kafka_error: str | None = None
    notes: list[str] = field(default_factory=list)
    workers: list[WatchdogStatus] = field(default_factory=list)

    @property
    def pending_total(self) -> int | None:
        return None if self.pending is None else sum(self.pending.values())

    def health(self) -> tuple[str, tuple[str, ...]]:
        h = assess(
            snapshot_version=None if self.snapshot is None else self.snapshot.version,
            snapshot_age_s=self._snapshot_age(),
            pending=None if self.pending is None else self.pending[GRAPH_CHANGES],
            stale_after_s=self.settings.community.stale_after_s,
            job=self.job,
            unreachable=[self.kafka_error] if self.kafka_error else [],
            problems=describe_failures(self.workers, self.checked_at),
            now=self.checked_at,
        )
        return h.status, h.reasons

    def _snapshot_age(self) -> float | None:
        return None if self.snapshot is None else self.snapshot.age_s(self.checked_at)

    def to_json(self) -> dict[str, Any]:
        snap = self.snapshot
        status, reasons = self.health()
        job = self.job
        return {
            "namespace": self.settings.namespace,
            "checked_at": self.checked_at,
            "documents_indexed": None if snap is None else snap.counts.get("documents"),
            "ingestion": None if snap is None else snap.ingestion().to_json(),
            "snapshot": None
            if snap is None
            else {
                "version": snap.version,
                "created_at": snap.created_at,
                "age_s": self._snapshot_age(),
                "mode": snap.mode,
                "counts": snap.counts,
                "consumed_offsets": snap.consumed_offsets,
            },
            "kafka": {
                "bootstrap_servers": self.settings.kafka.bootstrap_servers,
                "reachable": self.kafka_error is None,
                "error": self.kafka_error,
            },
            "pending": self.pending,
            "pending_total": self.pending_total,
            "eta": {
                "seconds": None if self.eta is None else self.eta.seconds,
                "drained_per_s": None if self.eta is None else self.eta.drained_per_s,
                "sample_s": self.sample_s,
                "text": format_duration(None if self.eta is None else self.eta.seconds),
            },
            "community_job": None if job is None else job.to_json(),
            "community_job_heard_s_ago": None if job is None else job.age_s(self.checked_at),
            "workers": [w.to_json(self.checked_at) for w in self.workers],
            "health": {"status": status, "reasons": list(reasons)},
            "notes": self.notes,
        }


async def collect(settings: Settings, *, sample_s: float, timeout_s: float) -> StatusReport:
    """Read everything once, and the backlog a second time ``sample_s`` later for the ETA."""
    notes: list[str] = []
    kafka_error: str | None = None
    first: KafkaSample | None = None
    second: KafkaSample | None = None
    first_snapshot = await asyncio.to_thread(latest_snapshot, settings)
    try:
        first = await sample_kafka(settings, timeout_s)
    except Exception as e:  # aiokafka raises its own types; every one means "no figures"
        log.debug("Kafka not readable", exc_info=e)
        kafka_error = kafka_error_message(settings, e, timeout_s)
    if first is not None and sample_s > 0:
        await asyncio.sleep(sample_s)
        try:
            second = await sample_kafka(settings, timeout_s)
        except Exception as e:
            log.debug("second Kafka sample failed", exc_info=e)
            notes.append("the second Kafka sample failed, so the ETA is unknown")
    snapshot = await asyncio.to_thread(latest_snapshot, settings)
    job = await asyncio.to_thread(read_status, settings)
    workers = await asyncio.to_thread(read_watchdog_statuses, settings)
    pending: dict[str, int] | None = None
    backlog: Eta | None = None
    if first is not None:
        last = second or first
        pending = last.pending(snapshot)
        total = sum(pending.values())
        if second is not None:
            before = sum(first.pending(first_snapshot).values())
            backlog = eta(before, total, second.at - first.at)
        else:
            backlog = eta(total, total, 0.0)
        if not first.graph_ends:
            notes.append(
                f"no {settings.topic(GRAPH_CHANGES)} topic yet: run `kgrag worker` "
                "(it creates the topics) and publish documents"
            )
    return StatusReport(
        settings=settings,
        checked_at=time.time(),
        snapshot=snapshot,
        job=job,
        pending=pending,
        eta=backlog,
        sample_s=sample_s,
        kafka_error=kafka_error,
        notes=notes,
        workers=workers,
    )
