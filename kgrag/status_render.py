"""How ``kgrag status`` shows a ``StatusReport`` to people: one rich table per concern.

Index, pending work with the ETA, the community job, the items the LLM refused, then the
health verdict with its reasons; the ``--json`` form is ``StatusReport.to_json`` instead.
"""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

from core.health import describe_job, format_duration
from core.job_status import JobStatus
from kgrag.status_facts import GRAPH_CHANGES, VECTORS, Ingestion, SnapshotFacts, StatusReport

FAILED_SHOWN = 5  # refused items listed


def describe_ingestion(ingestion: Ingestion, mode: str) -> str:
    """One line: what extracting the documents spent (``SnapshotFacts.ingestion``)."""
    prompt, completion = ingestion.prompt_tokens, ingestion.completion_tokens
    if not prompt and not completion:
        if mode == "offline":
            return "no LLM used (offline mode): 0 tokens, $0"
        return (
            "0 tokens, $0 (answered from the LLM response cache, or extracted before tokens "
            "were counted)"
        )
    return (
        f"{prompt}+{completion} tokens, ${ingestion.cost_usd:.4f} for "
        f"{ingestion.documents} document(s), ${ingestion.cost_per_document_usd:.6f} per "
        "document"
    )


def _when(at: float | None, now: float) -> str:
    if at is None:
        return "-"
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    delta = now - at
    rel = f"{format_duration(delta)} ago" if delta >= 0 else f"in {format_duration(-delta)}"
    return f"{stamp} ({rel})"


def print_report(report: StatusReport, out: Console) -> None:
    now = report.checked_at
    out.print(_index_table(report.snapshot, now))
    out.print(_pending_table(report))
    out.print(_job_table(report.job, now))
    job = report.job
    if job is not None and job.failed_items:
        out.print(_failed_table(job, now))

    status, reasons = report.health()
    style = {"ok": "green", "degraded": "yellow", "no_snapshot": "yellow"}[status]
    out.print(f"health: [{style}]{status}[/]")
    for reason in reasons:
        if reason != report.kafka_error:  # said once, as the command's error line
            out.print(f"  - {reason}", highlight=False)
    for note in report.notes:
        out.print(f"[dim]note: {note}[/]", highlight=False)


def _index_table(snap: SnapshotFacts | None, now: float) -> Table:
    index = Table("index", "", show_header=False, title="Index", title_justify="left")
    if snap is None:
        index.add_row("latest version", "[yellow]none yet[/]")
        return index
    index.add_row("latest version", f"v{snap.version} ({snap.mode or '?'} mode)")
    index.add_row("written", f"{snap.created_at} ({format_duration(snap.age_s(now))} ago)")
    index.add_row("documents indexed", str(snap.counts.get("documents", "?")))
    for key in ("text_units", "entities", "relationships", "communities"):
        if key in snap.counts:
            index.add_row(key.replace("_", " "), str(snap.counts[key]))
    index.add_row("extraction cost", describe_ingestion(snap.ingestion(), snap.mode))
    return index


def _pending_table(report: StatusReport) -> Table:
    work = Table("stage", "pending", title="Pending work", title_justify="left")
    if report.pending is None:
        work.add_row("[red]unknown[/]", "Kafka unreachable")
        return work
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
    return work


def _failed_table(job: JobStatus, now: float) -> Table:
    failed = Table(
        "kind", "item", "attempts", "reason", "next retry",
        title=f"Refused by the LLM (first {min(FAILED_SHOWN, len(job.failed_items))} "
        f"of {job.failed_items_total})",
        title_justify="left",
    )  # fmt: skip
    for f in job.failed_items[:FAILED_SHOWN]:
        failed.add_row(f.kind, f.item, str(f.attempts), f.reason, _when(f.next_retry_at, now))
    return failed


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
    table.add_row(
        "changes buffered", f"{job.pending_changes}" + ("; a run is due" if job.run_due else "")
    )
    last = job.last_run
    if last is not None:
        table.add_row(
            "last run",
            f"v{last.version} in {last.duration_s:.1f} s, finished {_when(last.finished_at, now)}; "
            f"{last.changes} change(s), {last.reports_regenerated} report(s) regenerated"
            + (
                f" ({last.reports_deferred} put off to the next runs)"
                if last.reports_deferred
                else ""
            )
            + f", {last.failed_items} failed"
            + (
                f"; {sum(last.llm_calls.values())} LLM call(s), "
                f"{last.llm_tokens.get('prompt', 0)}+{last.llm_tokens.get('completion', 0)} "
                f"tokens, ${last.cost_usd:.4f}"
                if last.llm_calls
                else ""
            ),
        )
    if job.last_save_s is not None:
        table.add_row("last state save", f"{job.last_save_s:.2f} s (after the last run)")
    light = job.last_light_commit
    if light is not None:
        table.add_row(
            "light commits",
            f"{job.light_commits}; last v{light.version} ({light.changes} change(s) in "
            f"{light.seconds:.2f} s), {_when(light.committed_at, now)}",
        )
    table.add_row(
        "restarts",
        f"{job.restarts} (process {job.supervisor_restarts}, pool {job.pool_restarts})"
        + (
            f"; {job.child_recycles} child(ren) replaced for memory, "
            f"{job.child_handovers} handing their caches over"
            if job.child_recycles
            else ""
        ),
    )
    table.add_row("refused items", str(job.failed_items_total))
    if job.last_error:
        table.add_row("last error", f"[red]{job.last_error}[/] ({_when(job.last_error_at, now)})")
    return table
