"""More than one machine: the graph tables in a real S3-compatible bucket (versitygw from the
launcher), a real ``kgrag worker`` writing them, and two ``kgrag api`` processes with data
directories of their own that share nothing with the worker but the bucket (and Kafka and
Weaviate, which scale out by themselves), offline mode.

- Delta commits on the bucket are atomic: two writers racing for one log entry, one wins.
- Both query services serve each new graph version within seconds of its commit (the 0.5 s
  swap target itself is measured by ``bench/graph_tables.py --store s3``).
- A 30 s outage of the object store: both keep answering from the last good version with
  ``/healthz`` degraded and saying why, then catch up with what was indexed meanwhile.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pydantic import SecretStr

from core.object_store import delta_storage_options
from core.settings import Settings
from core.settings.llm import LLMSettings
from core.settings.store import TablesSettings
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from kgrag.services import objectstore
from kgrag.services.process import stop_pid
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings, settings_env
from tests.integration.helpers import TunedWorker
from tests.integration.test_query_api import drop_vectors, free_port

# the target (0.5 s from commit to being served) is measured by bench/graph_tables.py --store
# s3 on a quiet machine; here, beside a worker, its community job and its vector worker on the
# same 2 cores, the test bounds what "follows" means rather than timing the target
FOLLOW_P50_S = 1.5
OUTAGE_S = 30.0
WAIT_S = 120.0  # generous for a loaded CI machine


def bucket_tables(endpoints: dict[str, object], prefix: str) -> TablesSettings:
    return TablesSettings(
        uri=f"s3://{endpoints['object_store.bucket']}/{prefix}",
        endpoint_url=str(endpoints["object_store.url"]),
        access_key_id=str(endpoints["object_store.access_key"]),
        secret_access_key=SecretStr(str(endpoints["object_store.secret_key"])),
        timeout_s=3.0,
        max_retries=1,
        retry_timeout_s=5.0,
    )


class ApiProcess:
    """``kgrag api`` as a real subprocess with a data directory of its own."""

    def __init__(self, settings: Settings, name: str, log_dir: Path) -> None:
        self.settings = settings
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ApiProcess:
        argv = [sys.executable, "-m", "kgrag.cli", "api", "--port", str(self.port)]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=settings_env(self.settings)
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"the query service did not start\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def log_tail(self, n: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])


@dataclass
class Shared:
    settings: Settings  # the worker's
    worker: TunedWorker
    apis: list[ApiProcess]
    # per service, when it first served each version (time.time())
    seen: list[dict[int, float]] = field(default_factory=list)

    def store(self) -> GraphTables:
        return open_graph_store(self.settings)


@pytest.fixture(scope="module")
def shared(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Shared]:
    tmp: Path = tmp_path_factory.mktemp("object-store")
    namespace = f"{session_namespace}-s3"
    tables = bucket_tables(service_endpoints, f"tests/{uuid.uuid4().hex[:8]}")

    def settings_for(data_dir: Path) -> Settings:
        return make_settings(
            service_endpoints, namespace, data_dir, llm=LLMSettings(base_url=None), tables=tables
        )

    settings = settings_for(tmp / "worker")
    asyncio.run(ensure_topics(settings))
    env = {"KGRAG_COMMUNITY__DEBOUNCE_S": "2", "KGRAG_COMMUNITY__MAX_WAIT_S": "10"}
    worker = TunedWorker(settings, tmp / "worker.log", env).start()
    apis = [ApiProcess(settings_for(tmp / f"api{i}"), f"api{i}", tmp) for i in (1, 2)]
    try:
        for api in apis:
            api.start()
        yield Shared(settings, worker, apis, [{} for _ in apis])
    finally:
        for api in apis:
            api.stop()
        worker.stop()
        asyncio.run(drop_vectors(settings))
        asyncio.run(delete_namespace_topics(settings))


def article(i: int) -> dict[str, Any]:
    person = f"Ottilie Brackwater{i}"
    return {
        "id": f"s3-{i}",
        "title": f"Port authority report {i}",
        "text": (
            f"{person} told the Northgate Port Authority on Monday that cargo volumes rose. "
            f"The Northgate Port Authority said {person} would present the figures to the "
            "Harbour Board. The Harbour Board meets in Rotterdam next week."
        ),
        "published_at": f"1987-04-{1 + i % 28:02d}T09:00:00Z",
    }


async def healthz(c: httpx.AsyncClient, api: ApiProcess) -> dict[str, Any]:
    r = await c.get(f"{api.url}/healthz", timeout=10)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def watch_versions(shared: Shared, stop: asyncio.Event) -> None:
    """Record when each service began to serve each version it served (its own clock: the
    services run on this machine, so it is the writer's clock too)."""
    async with httpx.AsyncClient() as c:
        while not stop.is_set():
            served = await asyncio.gather(*(healthz(c, api) for api in shared.apis))
            for health, seen in zip(served, shared.seen, strict=True):
                snapshot = health["snapshot"]
                if snapshot is not None and snapshot["served_since"] is not None:
                    seen.setdefault(int(snapshot["version"]), snapshot["served_since"])
            await asyncio.sleep(0.05)


async def publish(shared: Shared, docs: list[dict[str, Any]]) -> None:
    async with httpx.AsyncClient(base_url=shared.apis[0].url, timeout=30) as c:
        for doc in docs:
            r = await c.post("/v1/documents", json=doc)
            assert r.status_code == 202, r.text


async def until_documents(shared: Shared, count: int, *, kind: str | None = None) -> int:
    """Wait until both services serve a version with ``count`` documents; its number."""
    deadline = time.monotonic() + WAIT_S
    async with httpx.AsyncClient() as c:
        while time.monotonic() < deadline:
            served = [(await healthz(c, api))["snapshot"] for api in shared.apis]
            if all(
                s is not None
                and s["counts"]["documents"] >= count
                and (kind is None or s["kind"] == kind)
                for s in served
            ):
                return min(int(s["version"]) for s in served)
            assert shared.worker.proc is not None and shared.worker.proc.poll() is None, (
                shared.worker.log_tail()
            )
            await asyncio.sleep(0.25)
    raise AssertionError(
        f"not every service reached {count} documents in {WAIT_S:.0f}s\n"
        + "\n".join(api.log_tail(10) for api in shared.apis)
        + "\n"
        + shared.worker.log_tail()
    )


def test_delta_commits_on_the_bucket_are_atomic(service_endpoints: dict[str, object]) -> None:
    """Two writers that both read version 1 race to commit version 2: the store refuses the
    second creation of the same log entry (conditional put), so exactly one succeeds."""
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import CommitFailedError

    tables = bucket_tables(service_endpoints, f"tests/race-{uuid.uuid4().hex[:8]}")
    uri, options = f"{tables.uri}/t", delta_storage_options(tables)
    write_deltalake(uri, pa.table({"a": [1, 2, 3]}), storage_options=options)
    write_deltalake(uri, pa.table({"a": [4]}), mode="append", storage_options=options)
    first, second = (DeltaTable(uri, storage_options=options) for _ in range(2))
    first.delete("a = 1")
    with pytest.raises(CommitFailedError):
        second.delete("a = 2")  # its version-2 log entry exists already: refused
    after = DeltaTable(uri, storage_options=options)
    assert after.version() == 2
    assert sorted(after.to_pyarrow_table().column("a").to_pylist()) == [2, 3, 4]


async def test_two_query_services_follow_the_bucket_within_seconds(
    shared: Shared,
) -> None:
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_versions(shared, stop))
    try:
        await publish(shared, [article(i) for i in range(6)])
        await until_documents(shared, 6, kind="run")
        for i in range(6, 12):  # one at a time: each becomes a light commit of its own
            await publish(shared, [article(i)])
            await until_documents(shared, i + 1)
    finally:
        stop.set()
        await watcher
    infos = {v.version: v for v in shared.store().version_infos_all()}
    delays: list[float] = []
    for seen in shared.seen:
        for version, info in infos.items():
            served = [t for v, t in seen.items() if v >= version]
            if served and version >= min(seen):
                committed = datetime.fromisoformat(info.committed_at).timestamp()
                delays.append(max(0.0, min(served) - committed))
    assert len(delays) >= 10, (infos.keys(), shared.seen)
    delays.sort()
    p50 = statistics.median(delays)
    p95 = delays[min(len(delays) - 1, int(0.95 * len(delays)))]
    print(f"versions served by both services: {len(delays)} delays, p50 {p50:.3f}s p95 {p95:.3f}s")
    # single slow polls on a loaded 2-core machine are allowed up to a few times the median
    assert p50 <= FOLLOW_P50_S, delays
    assert p95 <= 4 * FOLLOW_P50_S, delays


async def test_an_object_store_outage_keeps_the_last_good_version(
    shared: Shared, service_endpoints: dict[str, object]
) -> None:
    await publish(shared, [article(99)])
    await until_documents(shared, 1)
    settings = shared.settings
    record = objectstore.record(settings)
    assert record is not None, "the launcher's object store is not running"
    async with httpx.AsyncClient(timeout=30) as c:
        served = [(await healthz(c, api))["snapshot"] for api in shared.apis]
        before = [s["version"] for s in served]
        documents = max(s["counts"]["documents"] for s in served)
        stop_pid(record.pid)
        started = time.monotonic()
        await publish(shared, [article(100), article(101)])  # indexed while the store is down
        degraded: list[list[str]] = []
        while time.monotonic() - started < OUTAGE_S:
            for api, version in zip(shared.apis, before, strict=True):
                health = await healthz(c, api)
                if not health["graph_tables"]["reachable"]:
                    degraded.append(health["reasons"])
                    assert health["status"] == "degraded"
                assert health["snapshot"]["version"] >= version
                r = await c.post(
                    f"{api.url}/v1/query/local",
                    json={"question": "What did Ottilie Brackwater3 tell the port authority?"},
                )
                assert r.status_code == 200, r.text
            await asyncio.sleep(1.0)
        objectstore.up(settings)
    assert degraded, "no service reported the object store unreachable during the outage"
    assert all(any("graph tables" in reason for reason in reasons) for reasons in degraded)
    await until_documents(shared, documents + 2)
    async with httpx.AsyncClient(timeout=30) as c:
        for api in shared.apis:
            health = await healthz(c, api)
            assert health["graph_tables"]["reachable"], health
