"""The live pipeline for the end-to-end benches: processes, the scripted LLM server, Kafka waits.

On the local Kafka and Weaviate (``kgrag services up``; reused, never stopped):
``fresh_namespace`` makes a namespace of its own with its topics and drops its topics and
Weaviate collections on the way out; ``start_worker`` runs ``kgrag worker`` as a subprocess
against it and ``wait_ready`` waits until its group holds partitions; ``start_llm_server`` runs
``python -m kgrag.testing.scripted_llm`` in its own process; ``start_api`` runs ``kgrag api``
and ``api_ready`` waits until it serves a graph version; ``peak_rss_mb`` reads a process's
peak memory; ``stop`` ends the processes started here.

Every process started here is started with ``preexec_fn=dies_with_us()``: the kernel ends it
when the bench that started it dies, even by ``kill -9``, so a killed bench leaves no worker,
query service or scripted server running against the shared Kafka and Weaviate.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.results_io import ROOT
from core.settings import Settings
from streams.admin import delete_namespace_topics, ensure_topics

# ---- processes ----

_PR_SET_PDEATHSIG = 1


def dies_with_us() -> Callable[[], None]:
    """A ``preexec_fn`` that has the kernel send the child SIGTERM when this process dies
    (Linux ``PR_SET_PDEATHSIG``; elsewhere it does nothing).

    libc's ``prctl`` is looked up here, before the fork: the child must not ``dlopen`` while
    another thread of the bench may hold the loader's lock. The signal follows the *thread*
    that forks, so start children from the thread that lives as long as the bench (its main
    thread, where the asyncio loop runs). A child whose parent died before the request was in
    place exits at once."""
    try:
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return lambda: None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(0)

    return preexec


def peak_rss_mb(pid: int | None) -> dict[str, float] | None:
    """VmHWM (peak) and VmRSS (now) of a live process, in MiB."""
    if pid is None:
        return None
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    fields = {ln.split(":")[0]: ln.split()[1] for ln in lines if ln.startswith(("VmHWM", "VmRSS"))}
    return {k: round(int(v) / 1024, 1) for k, v in fields.items()}


def service_pids(settings: Settings) -> dict[str, int | None]:
    """The process ids of the local Kafka and Weaviate (None when not started here)."""
    from kgrag.services import kafka, weaviate

    out: dict[str, int | None] = {}
    for name, mod in (("kafka", kafka), ("weaviate", weaviate)):
        rec = mod.record(settings)
        out[name] = rec.pid if rec is not None else None
    return out


def log_path(settings: Settings, what: str) -> Path:
    """``<namespace>-<what>.log`` next to the namespace's data folder."""
    return settings.data_dir.parent / f"{settings.namespace}-{what}.log"


def worker_env(settings: Settings, extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "KGRAG_NAMESPACE": settings.namespace,
            "KGRAG_DATA_DIR": str(settings.data_dir),
            "KGRAG_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "KGRAG_KAFKA__PARTITIONS": str(settings.kafka.partitions),
            "KGRAG_WEAVIATE__URL": settings.weaviate.url,
            "KGRAG_WEAVIATE__GRPC_PORT": str(settings.weaviate.grpc_port),
        }
    )
    t = settings.tables
    if t.uri:  # graph tables in a bucket
        env.update(
            {
                "KGRAG_TABLES__URI": t.uri,
                "KGRAG_TABLES__ENDPOINT_URL": t.endpoint_url,
                "KGRAG_TABLES__ACCESS_KEY_ID": t.access_key_id,
            }
        )
        if t.secret_access_key is not None:
            env["KGRAG_TABLES__SECRET_ACCESS_KEY"] = t.secret_access_key.get_secret_value()
    env.update(extra)
    return env


def start_worker(
    settings: Settings, extra: dict[str, str], profile: Path | None = None
) -> subprocess.Popen[bytes]:
    """``kgrag worker`` on the namespace, logging to ``log_path(settings, "worker")``; under
    cProfile writing to ``profile`` when given."""
    argv = [sys.executable]
    if profile is not None:
        argv += ["-m", "cProfile", "-o", str(profile)]
    argv += ["-m", "kgrag.cli", "worker", "--loglevel", "warning"]
    with open(log_path(settings, "worker"), "ab") as log:
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env(settings, extra),
            cwd=ROOT,
            preexec_fn=dies_with_us(),
        )


def start_api(settings: Settings, port: int) -> subprocess.Popen[bytes]:
    """``kgrag api`` (the query service) on the namespace and ``port``, logging to
    ``log_path(settings, "api")``."""
    with open(log_path(settings, "api"), "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "kgrag.cli", "api", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env(settings, {}),
            cwd=ROOT,
            preexec_fn=dies_with_us(),
        )


async def api_ready(url: str, timeout: float = 300) -> None:
    """Until the query service at ``url`` answers a basic search (it serves a graph version)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                r = await c.post("/v1/query/basic", json={"question": "oil prices"})
                if r.status_code == 200:
                    return
            await asyncio.sleep(1)
    raise RuntimeError("the query service did not serve a graph version in time")


def stop(*procs: subprocess.Popen[bytes] | None) -> None:
    """Terminate each process (None skipped), killing it when it outlives 60 s."""
    for proc in procs:
        if proc is None or proc.poll() is not None:
            continue
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- the namespace and Kafka waits ----


def from_start(settings: Settings, *names: str) -> Any:
    """An (unstarted) consumer of the namespace's topics ``names`` (settings names) from their
    first offset, in no group: for reading a run's output without moving any offsets."""
    from aiokafka import AIOKafkaConsumer

    return AIOKafkaConsumer(
        *(settings.topic(n) for n in names),
        bootstrap_servers=settings.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )


async def drop_collections(settings: Settings) -> None:
    from core.vector_store import WeaviateStore

    with contextlib.suppress(Exception):
        async with WeaviateStore(settings) as store:
            await store.drop_namespace()


@contextlib.asynccontextmanager
async def fresh_namespace(
    base: Settings, prefix: str, workdir: Path, *, keep: bool = False, reuse: str | None = None
) -> AsyncIterator[Settings]:
    """Settings for a new namespace ``<prefix>-<6 hex digits>`` (or the namespace ``reuse``,
    kept by an earlier run) with its topics made and its data under ``workdir``; its topics
    and Weaviate collections are dropped on the way out unless ``keep``."""
    namespace = reuse or f"{prefix}-{uuid.uuid4().hex[:6]}"
    settings = base.model_copy(update={"namespace": namespace, "data_dir": workdir / namespace})
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    await ensure_topics(settings)
    try:
        yield settings
    finally:
        if not keep:
            await delete_namespace_topics(settings)
            await drop_collections(settings)


async def wait_ready(settings: Settings, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Until the worker's group has members with partitions (faust joined and assigned)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import GroupCoordinatorNotAvailableError

    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}")
            try:
                groups = await admin.describe_consumer_groups([settings.app_id])
            except GroupCoordinatorNotAvailableError:  # a new broker's offsets topic is coming
                await asyncio.sleep(0.5)
                continue
            state = groups[0].groups[0] if groups and groups[0].groups else None
            if state is not None and state[2] == "Stable" and state[5]:
                return
            await asyncio.sleep(0.5)
    finally:
        await admin.close()
    raise RuntimeError("worker did not join its group in time")


# ---- the scripted LLM server ----


@dataclass
class LLMServer:
    proc: subprocess.Popen[bytes]
    port: int
    samples: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, concurrency: int, data_dir: Path) -> dict[str, str]:
        """The worker's settings to use this server, with a fresh response cache."""
        return {
            "KGRAG_LLM__BASE_URL": f"{self.url}/v1",
            "KGRAG_LLM__CONCURRENCY": str(concurrency),
            "KGRAG_LLM__CACHE_DIR": str(data_dir / "llm-cache"),
        }

    def stats(self) -> dict[str, Any]:
        return dict(httpx.get(f"{self.url}/_stats", timeout=10).json())

    def calls(self) -> list[dict[str, Any]]:
        return list(httpx.get(f"{self.url}/_calls", timeout=60).json())

    def clear_calls(self) -> None:
        httpx.delete(f"{self.url}/_calls", timeout=30)

    def set_faults(self, faults: dict[str, Any]) -> None:
        httpx.post(f"{self.url}/_faults", json=faults, timeout=10)

    def sample_in_flight(self, period: float = 0.05) -> threading.Thread:
        def run() -> None:
            with httpx.Client(timeout=2) as client:
                while not self._stop.is_set():
                    with contextlib.suppress(httpx.HTTPError):
                        self.samples.append(
                            int(client.get(f"{self.url}/_stats").json()["in_flight"])
                        )
                    time.sleep(period)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def stop_sampling(self) -> None:
        self._stop.set()


def start_llm_server(latency_ms: float, log: Path) -> LLMServer:
    port = free_port()
    argv = [sys.executable, "-m", "kgrag.testing.scripted_llm", "--port", str(port)]
    argv += ["--latency-ms", str(latency_ms)]
    with open(log, "ab") as fh:
        proc = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, preexec_fn=dies_with_us()
        )
    server = LLMServer(proc, port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/_stats", timeout=1).status_code == 200:
                return server
        time.sleep(0.2)
    stop(proc)
    raise RuntimeError("scripted LLM server did not start")
