"""The probes: ``/healthz`` and ``/metrics``, open without an API key.

Both say how current the served snapshot is against the graph changes waiting in Kafka, and
how the community job is doing (its status file). Reachability is probed cheaply (a TCP
connect to Kafka, Weaviate's ready endpoint) so a probe never waits on a client's retries.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from fastapi import APIRouter
from fastapi.responses import Response

from core.health import assess, pending_changes
from core.job_status import read_status
from core.settings import Settings
from core.worker_status import describe_failures, read_watchdog_statuses
from query.api.state import Service, ServiceState
from query.api.views import version_age_s, version_view
from query.index import QueryIndex
from query.metrics import QueryMetrics
from query.results import graph_basis

router = APIRouter(tags=["operations"])


@router.get(
    "/healthz",
    summary="Snapshot version and age, Kafka and Weaviate reachability, community job",
    description="`status` is `ok`, `degraded` (with one sentence per problem in "
    "`reasons`: Kafka, Weaviate or the graph tables unreachable, graph changes pending "
    "while the newest version is older than `community.stale_after_s`, items the LLM "
    "refused, a stream worker's stall watchdog failing) or `no_snapshot`. "
    "`community_job` is the job's status (null before it ever ran); `workers` what each "
    "stream worker's stall watchdog saw and did (checks, stalls, repairs, failures); "
    "`snapshot.served_since` when this service began serving that version (unix time); "
    "`graph_tables` whether the tables could be read at the last look; "
    "`pending_changes` the graph changes not yet in the served snapshot (null when "
    "Kafka could not be read).",
)
async def healthz(state: Service) -> Any:
    kafka, weaviate, ends = await asyncio.gather(
        kafka_reachable(state.settings),
        weaviate_reachable(state.settings),
        state.pending.refresh(),
    )
    index = await state.holder.get()
    job = await asyncio.to_thread(read_status, state.settings)
    workers = await asyncio.to_thread(read_watchdog_statuses, state.settings)
    pending = pending_in(index, ends)
    unreachable = [
        f"{name} is not reachable: {detail}"
        for name, (ok, detail) in (("Kafka", kafka), ("Weaviate", weaviate))
        if not ok
    ]
    tables = tables_health(state, index)
    if not tables["reachable"]:
        unreachable.append(tables["detail"])
    health = assess(
        snapshot_version=None if index is None else index.version,
        snapshot_age_s=None if index is None else version_age_s(index),
        pending=pending,
        stale_after_s=state.settings.community.stale_after_s,
        job=job,
        unreachable=unreachable,
        problems=describe_failures(workers),
    )
    return {
        "status": health.status,
        "reasons": list(health.reasons),
        "snapshot": None
        if index is None
        else {**version_view(index), "served_since": state.holder.swapped_at},
        "kafka": {"reachable": kafka[0], "detail": kafka[1]},
        "weaviate": {"reachable": weaviate[0], "detail": weaviate[1]},
        "graph_tables": tables,
        "mode": "offline" if state.deps is None or state.deps.llm is None else "llm",
        "pending_changes": pending,
        "community_job": None if job is None else job.to_json(),
        "workers": [w.to_json() for w in workers],
    }


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(state: Service) -> Response:
    index = await state.holder.get()
    _set_version_gauges(state.metrics, index)
    _, ends = await asyncio.gather(state.lag.refresh(), state.pending.refresh())
    job = await asyncio.to_thread(read_status, state.settings)
    state.metrics.set_community(job, pending_in(index, ends))
    state.metrics.set_workers(await asyncio.to_thread(read_watchdog_statuses, state.settings))
    return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")


def tables_health(state: ServiceState, index: QueryIndex | None) -> dict[str, Any]:
    """Whether the graph tables could be read at the last look (no I/O here: the refresher
    looks every ``refresh_interval_s``), and since when they could not."""
    holder = state.holder
    error = holder.unreachable
    if error is None:
        return {"uri": holder.store.root, "reachable": True, "detail": "readable", "since": None}
    serving = "no version yet" if index is None else f"serving version {index.version} until then"
    return {
        "uri": holder.store.root,
        "reachable": False,
        "detail": f"{error}; {serving}",
        "since": holder.failing_since,
    }


def pending_in(index: QueryIndex | None, ends: dict[int, int] | None) -> int | None:
    """Graph changes beyond the served snapshot (None when the end offsets are unknown)."""
    if ends is None:
        return None
    return pending_changes(ends, None if index is None else index.meta.consumed_offsets)


def _set_version_gauges(metrics: QueryMetrics, index: QueryIndex | None) -> None:
    if index is None:
        metrics.served_version.set(0)
        return
    metrics.served_version.set(index.version)
    metrics.version_age.set(version_age_s(index) or 0.0)
    metrics.reports_age.set(graph_basis(index.meta)["reports_age_s"] or 0.0)
    metrics.documents_indexed.set(len(index.documents))
    metrics.text_units_indexed.set(len(index.text_units))
    metrics.entities_indexed.set(len(index.entities))
    meta = index.meta
    for kind in ("prompt", "completion"):
        metrics.ingest_tokens.labels(kind).set(meta.ingest_tokens.get(kind, 0))
    metrics.ingest_cost.set(meta.ingest_cost_usd)
    metrics.ingest_cost_per_document.set(meta.ingest_cost_usd / max(len(index.documents), 1))


async def kafka_reachable(settings: Settings, timeout_s: float = 2.0) -> tuple[bool, str]:
    """Whether a TCP connection to a bootstrap server opens (cheap; no client state)."""
    errors = []
    for server in settings.kafka.bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout_s)
        except (OSError, TimeoutError) as e:
            errors.append(f"{server}: {e or type(e).__name__}")
            continue
        writer.close()
        await writer.wait_closed()
        return True, server
    return False, "; ".join(errors)


async def weaviate_reachable(settings: Settings, timeout_s: float = 2.0) -> tuple[bool, str]:
    url = f"{settings.weaviate.url}/v1/.well-known/ready"
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            response = await client.get(url)
    except httpx.HTTPError as e:
        return False, f"{url}: {e or type(e).__name__}"
    return response.status_code == 200, f"{url}: HTTP {response.status_code}"
