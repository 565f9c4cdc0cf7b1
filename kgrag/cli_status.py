"""``kgrag status``: is the index keeping up, and if not, where is the work stuck?

One command answers what an operator asks first: how much is indexed, how much work waits at
each stage, whether the community job is alive and what it last did, which reports the LLM
refused, how old the newest version is, and when the backlog will be gone. It reads only
what other processes already publish, so it needs neither a running worker nor the query
service: the latest snapshot's ``meta.json`` (not the whole snapshot), the community job's
status file (``core.job_status``) and, from Kafka, the worker group's lag and the end offsets
of ``graph_changes``. Kafka is the only part that can be away; then the command still shows
the rest and says Kafka was unreachable, so it is useful precisely when something is down.

The verdict, the pending arithmetic and the ETA come from ``core.health``, the same functions
behind the query service's ``/healthz``, so both say the same thing about the same state.
``--json`` prints one object with stable keys (listed in the command's help) for scripts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.table import Table

from core.errors import KgragError
from core.health import Eta, assess, describe_job, eta, format_duration, pending_changes
from core.job_status import JobStatus, read_status
from core.lag import VECTOR_TOPICS, consumer_lag
from core.settings import Settings, get_settings
from core.tables.errors import SnapshotStoreError
from core.tables.opening import open_graph_store
from core.worker_status import WatchdogStatus, describe_failures, read_watchdog_statuses

log = logging.getLogger(__name__)

console = Console()
err_console = Console(stderr=True)

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
FAILED_SHOWN = 5  # refused items listed in the human form


class KafkaUnreachableError(KgragError):
    """Kafka could not be read; the rest of the status was still shown."""


# ---- gathering -----------------------------------------------------------------------------


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

    def ingestion(self) -> dict[str, Any]:
        """What extracting the version's documents spent at the LLM, in all and per document.
        From the version's meta: the community job sums the documents' rows, each text unit
        counted once, so the figure survives worker restarts and holds for any number of
        workers (``agents.community.runner.ingest_cost``)."""
        documents = self.counts.get("documents", 0)
        return {
            "documents": documents,
            "prompt_tokens": self.ingest_tokens.get("prompt", 0),
            "completion_tokens": self.ingest_tokens.get("completion", 0),
            "cost_usd": self.ingest_cost_usd,
            "cost_per_document_usd": self.ingest_cost_usd / documents if documents else 0.0,
        }

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


def describe_ingestion(ingestion: dict[str, Any], mode: str) -> str:
    """One line: what extracting the documents spent (``SnapshotFacts.ingestion``)."""
    prompt, completion = ingestion["prompt_tokens"], ingestion["completion_tokens"]
    if not prompt and not completion:
        if mode == "offline":
            return "no LLM used (offline mode): 0 tokens, $0"
        return (
            "0 tokens, $0 (answered from the LLM response cache, or extracted before tokens "
            "were counted)"
        )
    return (
        f"{prompt}+{completion} tokens, ${ingestion['cost_usd']:.4f} for "
        f"{ingestion['documents']} document(s), ${ingestion['cost_per_document_usd']:.6f} per "
        "document"
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
            "ingestion": None if snap is None else snap.ingestion(),
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


# ---- printing ------------------------------------------------------------------------------


def _when(at: float | None, now: float) -> str:
    if at is None:
        return "-"
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    delta = now - at
    rel = f"{format_duration(delta)} ago" if delta >= 0 else f"in {format_duration(-delta)}"
    return f"{stamp} ({rel})"


def print_report(report: StatusReport, out: Console) -> None:
    now = report.checked_at
    snap = report.snapshot
    index = Table("index", "", show_header=False, title="Index", title_justify="left")
    if snap is None:
        index.add_row("latest version", "[yellow]none yet[/]")
    else:
        index.add_row("latest version", f"v{snap.version} ({snap.mode or '?'} mode)")
        index.add_row("written", f"{snap.created_at} ({format_duration(snap.age_s(now))} ago)")
        index.add_row("documents indexed", str(snap.counts.get("documents", "?")))
        for key in ("text_units", "entities", "relationships", "communities"):
            if key in snap.counts:
                index.add_row(key.replace("_", " "), str(snap.counts[key]))
        index.add_row("extraction cost", describe_ingestion(snap.ingestion(), snap.mode))
    out.print(index)

    work = Table("stage", "pending", title="Pending work", title_justify="left")
    if report.pending is None:
        work.add_row("[red]unknown[/]", "Kafka unreachable")
    else:
        for name, n in report.pending.items():
            label = {GRAPH_CHANGES: f"{name} (community job)", VECTORS: "vectors (Weaviate)"}.get(
                name, name
            )
            work.add_row(label, str(n) if n == 0 else f"[yellow]{n}[/]")
        work.add_row("[bold]total[/]", f"[bold]{report.pending_total}[/]")
        backlog = report.eta
        rate = ""
        if backlog is not None and backlog.drained_per_s is not None:
            rate = f" (draining {backlog.drained_per_s:.1f}/s)"
        eta_text = format_duration(None if backlog is None else backlog.seconds)
        work.add_row("ETA", f"{eta_text}{rate}")
    out.print(work)

    out.print(_job_table(report.job, now))
    job = report.job
    if job is not None and job.failed_items:
        failed = Table(
            "kind", "item", "attempts", "reason", "next retry",
            title=f"Refused by the LLM (first {min(FAILED_SHOWN, len(job.failed_items))} "
            f"of {job.failed_items_total})",
            title_justify="left",
        )  # fmt: skip
        for f in job.failed_items[:FAILED_SHOWN]:
            failed.add_row(f.kind, f.item, str(f.attempts), f.reason, _when(f.next_retry_at, now))
        out.print(failed)

    status, reasons = report.health()
    style = {"ok": "green", "degraded": "yellow", "no_snapshot": "yellow"}[status]
    out.print(f"health: [{style}]{status}[/]")
    for reason in reasons:
        if reason != report.kafka_error:  # said once, as the command's error line
            out.print(f"  - {reason}", highlight=False)
    for note in report.notes:
        out.print(f"[dim]note: {note}[/]", highlight=False)


def _job_table(job: JobStatus | None, now: float) -> Table:
    table = Table("job", "", show_header=False, title="Community job", title_justify="left")
    if job is None:
        table.add_row("state", f"[yellow]{describe_job(None, now)}[/]")
        return table
    alive = job.alive(now)
    heard = f"heard from {format_duration(job.age_s(now))} ago"
    verdict = "[green]alive[/]" if alive else "[red]not alive[/]"
    table.add_row("state", f"{job.state}, {verdict} ({heard})")
    table.add_row("pid", str(job.pid))
    table.add_row("started", _when(job.started_at, now))
    table.add_row("runs", str(job.runs))
    table.add_row("changes buffered", str(job.pending_changes))
    last = job.last_run
    if last is not None:
        table.add_row(
            "last run",
            f"v{last.version} in {last.duration_s:.1f} s, finished {_when(last.finished_at, now)}; "
            f"{last.changes} change(s), {last.reports_regenerated} report(s) regenerated, "
            f"{last.failed_items} failed"
            + (
                f"; {sum(last.llm_calls.values())} LLM call(s), "
                f"{last.llm_tokens.get('prompt', 0)}+{last.llm_tokens.get('completion', 0)} "
                f"tokens, ${last.cost_usd:.4f}"
                if last.llm_calls
                else ""
            ),
        )
    light = job.last_light_commit
    if light is not None:
        table.add_row(
            "light commits",
            f"{job.light_commits}; last v{light.version} ({light.changes} change(s) in "
            f"{light.seconds:.2f} s), {_when(light.committed_at, now)}",
        )
    table.add_row(
        "restarts",
        f"{job.restarts} (process {job.supervisor_restarts}, pool {job.pool_restarts})",
    )
    table.add_row("refused items", str(job.failed_items_total))
    if job.last_error:
        table.add_row("last error", f"[red]{job.last_error}[/] ({_when(job.last_error_at, now)})")
    return table


@contextlib.contextmanager
def _quiet_kafka_client() -> Iterator[None]:
    """aiokafka logs each refused connection as an error; the command says it once itself."""
    logger = logging.getLogger("aiokafka")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def status_cmd(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (keys above) instead")
    ] = False,
    sample_s: Annotated[
        float,
        typer.Option(
            "--sample-s", min=0.0, help="Seconds between the two backlog samples for the ETA"
        ),
    ] = 2.0,
    timeout_s: Annotated[
        float, typer.Option("--timeout-s", min=0.1, help="Give up on Kafka after this long")
    ] = 5.0,
) -> None:
    """Indexed documents, pending work per stage, the community job, the ETA.

    Reads the latest snapshot, the community job's status file and Kafka
    (worker-group lag, graph_changes end offsets), sampling the backlog twice
    --sample-s apart for the ETA. When Kafka is unreachable the rest is still
    shown, and the command exits with 1 (also with --json).

    --json prints one object with these stable keys:
      namespace; checked_at (unix s); documents_indexed (int or null);
      ingestion: what extracting the indexed documents spent at the LLM:
        documents, prompt_tokens, completion_tokens, cost_usd,
        cost_per_document_usd (null before the first version);
      snapshot: version, created_at, age_s, mode, counts,
        consumed_offsets (null before the first version);
      kafka: bootstrap_servers, reachable, error (str or null);
      pending: documents, chunks, extractions, entity_items,
        relationship_items, claim_items, graph_changes, vectors
        (null: no Kafka);
      pending_total (int or null);
      eta: seconds (null: unknown), drained_per_s, sample_s, text;
      community_job: the job's status file with alive and restarts
        (null when no job has run in this namespace);
      community_job_heard_s_ago (float or null);
      workers: each stream worker's stall watchdog (group, name, alive,
        checks, stalls, repairs, failures, last_failure);
      health: status (ok, degraded, no_snapshot), reasons (strings);
      notes (strings).
    """
    settings = get_settings()
    with _quiet_kafka_client():
        report = asyncio.run(collect(settings, sample_s=sample_s, timeout_s=timeout_s))
    if as_json:
        sys.stdout.write(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
        sys.stdout.write("\n")
        if report.kafka_error:
            raise typer.Exit(1)
        return
    print_report(report, console)
    if report.kafka_error:
        raise KafkaUnreachableError(report.kafka_error)
