"""The arithmetic behind "is the index keeping up?", shared by ``kgrag status`` and the service.

Two readers answer that question: ``kgrag status`` (a person or a script at the command line)
and the query service's ``/healthz`` and ``/metrics`` (a load balancer, Prometheus). Both
gather the same facts (Kafka end offsets, the served snapshot's ``consumed_offsets``, the
community job's status file) in their own way, then hand them to the pure functions here, so
"how many graph changes pend", "when will the backlog be gone" and "is this degraded, and
why" get one definition and one set of unit tests. Nothing here does I/O or reads the clock
unless a ``now`` is left out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from core.job_status import JobStatus

HealthStatus = Literal["ok", "degraded", "no_snapshot"]

FAILED_REASONS_SHOWN = 3  # refused items quoted in a health reason


def partition_of(key: str | int) -> int | None:
    """The partition number of a ``consumed_offsets`` key: ``"3"``, ``3`` or ``"topic:3"``."""
    if isinstance(key, int):
        return key
    tail = key.rpartition(":")[2]
    try:
        return int(tail)
    except ValueError:
        return None


def pending_changes(end_offsets: Mapping[int, int], consumed: Mapping[str, int] | None) -> int:
    """Graph changes written but not yet reflected in a snapshot: per partition of the
    ``graph_changes`` topic, its end offset minus the next offset the snapshot consumed (0 for
    a partition the snapshot never read), never negative, summed. ``consumed`` is a snapshot
    meta's ``consumed_offsets`` (None or empty before the first snapshot: everything pends)."""
    done: dict[int, int] = {}
    for key, offset in (consumed or {}).items():
        partition = partition_of(key)
        if partition is not None:
            done[partition] = max(done.get(partition, 0), int(offset))
    return sum(max(0, end - done.get(p, 0)) for p, end in end_offsets.items())


@dataclass(frozen=True, slots=True)
class Eta:
    """How fast the backlog drained between two samples and when it will be gone.

    ``seconds`` is None ("unknown") when the backlog did not shrink between the samples
    (stalled, growing, or only one sample); 0.0 when nothing pends."""

    pending: int  # at the second sample
    drained_per_s: float | None
    seconds: float | None


def eta(first: int, second: int, interval_s: float) -> Eta:
    """The backlog's ETA from two totals taken ``interval_s`` apart (the second is current)."""
    if second <= 0:
        rate = (first - second) / interval_s if interval_s > 0 and first > second else None
        return Eta(pending=0, drained_per_s=rate, seconds=0.0)
    if interval_s <= 0 or first <= second:
        return Eta(pending=second, drained_per_s=None, seconds=None)
    rate = (first - second) / interval_s
    return Eta(pending=second, drained_per_s=rate, seconds=second / rate)


def format_duration(seconds: float | None) -> str:
    """``45 s``, ``12 min``, ``3.5 h``, ``2.0 d``; ``unknown`` for None."""
    if seconds is None:
        return "unknown"
    s = max(0.0, seconds)
    if s < 120:
        return f"{s:.0f} s"
    if s < 2 * 3600:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def describe_job(job: JobStatus | None, now: float | None = None) -> str:
    """The community job's state in a few words, for a health reason or a status line."""
    if job is None:
        return (
            "no community job has written a status in this namespace (is `kgrag worker` "
            "running with its community job?)"
        )
    now = time.time() if now is None else now
    if job.state == "stopped":
        words = f"community job stopped {format_duration(job.age_s(now))} ago"
    elif not job.alive(now):
        words = f"community job not heard from for {format_duration(job.age_s(now))}"
    else:
        words = f"community job is {job.state}"
        if job.pending_changes:
            words += f" with {job.pending_changes} change(s) buffered"
    if job.last_error:
        words += f"; community job last error: {job.last_error}"
    return words


def describe_failed(job: JobStatus, now: float | None = None) -> str:
    """``3 report(s)/summary(ies) refused by the LLM, retrying (…)``, quoting the first few."""
    now = time.time() if now is None else now
    shown = []
    for f in job.failed_items[:FAILED_REASONS_SHOWN]:
        retry = f.next_retry_at - now
        when = "now" if retry <= 0 else f"in {format_duration(retry)}"
        shown.append(f"{f.kind} {f.item}: {f.reason} (retry {when})")
    detail = f": {'; '.join(shown)}" if shown else ""
    return f"{job.failed_items_total} report(s)/summary(ies) refused by the LLM, retrying{detail}"


def stale_reason(
    *,
    pending: int | None,
    snapshot_version: int | None,
    snapshot_age_s: float | None,
    stale_after_s: float,
    job: JobStatus | None,
    now: float | None = None,
) -> str | None:
    """Why the index is falling behind, or None when it is not.

    Stale means graph changes pend and the newest version is older than ``stale_after_s``
    (a healthy job folds changes in well within that). Before the first snapshot there is no
    age; pending changes then count as stale only when no live job is there to fold them in.
    ``pending`` None (Kafka could not be read) is never stale: unreachability is its own
    reason."""
    if not pending:
        return None
    now = time.time() if now is None else now
    if snapshot_age_s is None:
        if job is not None and job.alive(now):
            return None
        return f"{pending} graph change(s) pending and no version written yet; " + describe_job(
            job, now
        )
    if snapshot_age_s <= stale_after_s:
        return None
    return (
        f"{pending} graph change(s) pending and the newest version (v{snapshot_version}) is "
        f"{format_duration(snapshot_age_s)} old (stale after {format_duration(stale_after_s)}); "
        + describe_job(job, now)
    )


@dataclass(frozen=True, slots=True)
class Health:
    status: HealthStatus
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"status": self.status, "reasons": list(self.reasons)}


def assess(
    *,
    snapshot_version: int | None,
    snapshot_age_s: float | None,
    pending: int | None,
    stale_after_s: float,
    job: JobStatus | None,
    unreachable: Iterable[str] = (),
    problems: Iterable[str] = (),
    now: float | None = None,
) -> Health:
    """The verdict: ``no_snapshot`` before the first version, else ``degraded`` with one reason
    per problem (each of ``unreachable``, e.g. "Kafka is not reachable: …"; the index falling
    behind; items the LLM refused; each of ``problems``, e.g. a failing stall watchdog), else
    ``ok``. Reasons are listed before the first snapshot
    too, so a stuck first run says why."""
    now = time.time() if now is None else now
    reasons = list(unreachable)
    stale = stale_reason(
        pending=pending,
        snapshot_version=snapshot_version,
        snapshot_age_s=snapshot_age_s,
        stale_after_s=stale_after_s,
        job=job,
        now=now,
    )
    if stale:
        reasons.append(stale)
    if job is not None and job.failed_items_total > 0:
        reasons.append(describe_failed(job, now))
    reasons.extend(problems)
    if snapshot_version is None:
        return Health("no_snapshot", tuple(reasons))
    return Health("degraded" if reasons else "ok", tuple(reasons))
