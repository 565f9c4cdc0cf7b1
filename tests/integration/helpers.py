"""Helpers for integration tests: a real worker subprocess, raw produce, topic reads."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from core.lag import pipeline_lag
from core.settings import Settings
from graph.versions.model import Snapshot
from tests.conftest import settings_env


class WorkerProcess:
    """``kgrag worker`` as a real subprocess, logging to a file the test can show."""

    def __init__(self, settings: Settings, log_path: Path) -> None:
        self.settings = settings
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        with open(self.log_path, "ab") as log:  # the child keeps its own copy of the fd
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kgrag.cli", "worker", "--loglevel", "info"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=settings_env(self.settings),
            )
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def dump_tasks(self) -> None:
        """Ask the worker to log the stack of every thread and asyncio task (mode's SIGUSR1
        handler), so a stalled run's log shows where each agent is waiting."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR1)

    def child_pid(self, command: str, timeout: float = 60.0) -> int:
        """The pid of the worker's supervised child running ``kgrag <command>`` (e.g.
        ``vector-worker``), read from /proc once it has started."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for task in Path(f"/proc/{self.proc.pid}/task").glob("*/children"):
                for pid in task.read_text().split():
                    try:
                        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    except OSError:
                        continue  # ended meanwhile
                    if command.encode() in argv:
                        return int(pid)
            time.sleep(0.2)
        raise AssertionError(f"no `kgrag {command}` child of the worker\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


async def produce_raw(
    settings: Settings, topic: str, messages: list[tuple[bytes | None, bytes | None]]
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers)
    await producer.start()
    try:
        for key, value in messages:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


async def read_topic(
    settings: Settings, topic: str, *, expect: int, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Read JSON values from the start of a topic until ``expect`` arrived or time ran out."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expect and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            for msgs in batch.values():
                out.extend(orjson.loads(m.value) for m in msgs)
    finally:
        await consumer.stop()
    return out


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float, what: str, interval: float = 1.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def graph_summary(view: Any) -> dict[str, tuple[int, int]]:
    """Entity key -> (mention count, document count): what two runs must agree on."""
    return {k: (a.mention_count, a.document_count) for k, a in view.entities.items()}


# ---- robustness tests (crash, scale-out, outages, LLM faults) ---------------------------------

PEOPLE = (
    "Amira Haddad",
    "Tomas Lindqvist",
    "Karin Berg",
    "Marta Kowalczyk",
    "Jonas Ekholm",
    "Priya Raman",
    "Diego Alvarado",
    "Hana Sato",
    "Oleg Petrenko",
    "Fatima Benali",
    "Lars Nygaard",
    "Elena Rossi",
)
ORGANISATIONS = (
    "Meridian Capital",
    "Nordic Reserve Bank",
    "Zorblax Shipping",
    "Quintessa Lines",
    "Halvard Steel",
    "Orinoco Petroleum",
    "Castellan Motors",
    "Vantor Telecom",
    "Bluefin Airways",
    "Kestrel Mining",
)
PLACES = ("Vienna", "Stockholm", "Rotterdam", "Caracas", "Osaka", "Lagos", "Oslo", "Lisbon")


def synthetic_documents(n: int, *, seed: int = 7, prefix: str = "doc") -> list[dict[str, Any]]:
    """``n`` short news items naming people, companies and places from small pools, so the
    same entities recur across documents (mention and document counts above one) and
    relationships get weights above one. Deterministic for a given seed."""
    import random

    rng = random.Random(seed)
    docs = []
    for i in range(n):
        sentences = []
        for _ in range(rng.randint(2, 4)):
            person, other = rng.sample(PEOPLE, 2)
            org = rng.choice(ORGANISATIONS)
            place = rng.choice(PLACES)
            sentences.append(
                rng.choice(
                    (
                        f"Chief executive {person} of {org} met {other} in {place} on Monday.",
                        f"Analysts said {org} will open an office in {place}, {person} said.",
                        f"Minister {person} told reporters in {place} that {org} had agreed.",
                        f"Investor {other} bought shares of {org}, according to {person}.",
                    )
                )
            )
        docs.append(
            {
                "id": f"{prefix}-{i:04d}",
                "title": f"Business brief {i}",
                "text": " ".join(sentences),
                "published_at": f"1987-03-{(i % 28) + 1:02d}T09:00:00Z",
                "source": "synthetic",
            }
        )
    return docs


def write_jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    with open(path, "wb") as fh:
        for d in docs:
            fh.write(orjson.dumps(d) + b"\n")
    return path


async def topic_size(settings: Settings, topic: str) -> int:
    """Messages written to a topic so far (sum of the partitions' end offsets); the topic has
    ``kafka.partitions`` partitions, as ``ensure_topics`` created it."""
    from aiokafka import TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False
    )
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
        ends = await consumer.end_offsets(parts)
        return sum(ends.values())
    finally:
        await consumer.stop()


async def consumer_lag(settings: Settings) -> int:
    """Messages of the namespace's consumed topics the worker groups (graph and vectors)
    have not committed yet."""
    return sum((await pipeline_lag(settings)).values())


async def fold_until(
    settings: Settings,
    done: Callable[[Any], bool],
    *,
    settle: float = 5.0,
    timeout: float = 300.0,
    what: str = "the graph",
    caught_up: bool = True,
) -> Any:
    """Fold ``graph-changes`` from the start until ``done(view)`` holds, no change has arrived
    for ``settle`` seconds and (with ``caught_up``) the worker group has committed every
    message of every topic it consumes, so a worker that is idle only
    because it is waiting (for a dead member's session to time out, a rebalance, a table
    recovery) is not mistaken for a finished one."""
    from graph.merge.view import GraphView
    from streams.codecs import decode_graph_change

    view = GraphView()
    consumer = AIOKafkaConsumer(
        settings.topic("graph_changes"),
        bootstrap_servers=settings.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    lag = -1
    try:
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for msgs in batch.values():
                for m in msgs:
                    view.apply(decode_graph_change(m.value))
                if msgs:
                    quiet_since = time.monotonic()
            if done(view) and time.monotonic() - quiet_since >= settle:
                lag = await consumer_lag(settings) if caught_up else 0
                if lag == 0:
                    return view
                quiet_since = time.monotonic()  # look again after another quiet spell
    finally:
        await consumer.stop()
    raise AssertionError(
        f"timed out after {timeout:.0f}s waiting for {what}: {len(view.documents)} documents, "
        f"{len(view.text_units)} text units, {len(view.entities)} entities folded, "
        f"consumer lag {lag}"
    )


async def run_caught_up(
    settings: Settings,
    store: Any,
    done: Callable[[Any], bool],
    *,
    timeout: float,
    log_tail: Callable[[], str],
    idle_pipeline: bool = False,
) -> Any:
    """The latest snapshot of ``store`` once ``done(snapshot)`` holds and a community run (not a
    light commit, which holds the new rows but not yet their communities and reports) has
    consumed every graph change written so far, the job owes no run (changes folded by light
    commits during that run are still to be taken in by the next: ``run_due``) and no newer
    version followed for a few seconds. ``idle_pipeline``: also wait until the worker has
    committed every message it consumes (a retraction still on its way through the extractor
    is not in graph-changes)."""
    from core.job_status import read_status
    from core.tables.errors import SnapshotNotFoundError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(2)
        try:
            snap = store.load()
        except SnapshotNotFoundError:
            continue
        written = await topic_size(settings, settings.topic("graph_changes"))
        consumed = sum(snap.meta.consumed_offsets.values())
        if not (done(snap) and consumed == written and snap.meta.kind == "run"):
            continue
        job = read_status(settings)
        if job is not None and (job.run_due or job.state == "running"):
            continue
        if idle_pipeline and await consumer_lag(settings):
            continue
        await asyncio.sleep(3)
        if store.latest_version() == snap.meta.version:
            return snap
    raise AssertionError(
        f"{settings.namespace}: the job did not catch up in {timeout:.0f}s\n{log_tail()}"
    )


def relationship_summary(view: Any) -> dict[str, int]:
    """Relationship key -> weight (distinct chunks asserting it)."""
    return {k: r.weight for k, r in view.relationships.items()}


def summary_diff(a: dict[str, Any], b: dict[str, Any], limit: int = 10) -> str:
    """The first keys where two summaries disagree, for an assertion message."""
    keys = sorted(set(a) | set(b))
    bad = [f"{k}: {a.get(k)} != {b.get(k)}" for k in keys if a.get(k) != b.get(k)]
    return f"{len(bad)} differences: " + "; ".join(bad[:limit])


class TunedWorker(WorkerProcess):
    """A worker subprocess with extra settings in its environment (``KGRAG_LLM__...``)."""

    def __init__(self, settings: Settings, log_path: Path, extra_env: dict[str, str]) -> None:
        super().__init__(settings, log_path)
        self.extra_env = extra_env

    def start(self) -> TunedWorker:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kgrag.cli", "worker", "--loglevel", "info"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**settings_env(self.settings), **self.extra_env},
            )
        return self


def vector_keys(settings: Settings, kind: str) -> list[str]:
    """Every object's ``key`` in a kind's collection, duplicates kept (a list, not a set)."""
    import weaviate

    w = settings.weaviate
    client = weaviate.connect_to_local(
        host=w.host, port=w.http_port, grpc_port=w.grpc_port, skip_init_checks=True
    )
    try:
        name = settings.collection(kind)
        if not client.collections.exists(name):
            return []
        col = client.collections.get(name)
        try:
            return [str(o.properties["key"]) for o in col.iterator(return_properties=["key"])]
        except Exception as err:
            if "non-existing index" in str(err):
                # created moments ago and its shard not loaded yet (as core.vector_store
                # reads it): nothing in it so far
                return []
            raise
    finally:
        client.close()


async def read_all(settings: Settings, topic: str) -> list[tuple[bytes | None, bytes]]:
    """Every (key, value) of a topic from the start up to its end offsets at call time."""
    from aiokafka import TopicPartition

    parts = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False
    )
    await consumer.start()
    out: list[tuple[bytes | None, bytes]] = []
    try:
        ends = await consumer.end_offsets(parts)
        wanted = [tp for tp in parts if ends[tp] > 0]
        if not wanted:
            return out
        consumer.assign(wanted)
        await consumer.seek_to_beginning(*wanted)
        reached = dict.fromkeys(wanted, 0)
        while any(reached[tp] < ends[tp] for tp in wanted):
            batch = await consumer.getmany(*wanted, timeout_ms=1000)
            for tp, msgs in batch.items():
                for m in msgs:
                    if m.offset < ends[tp]:
                        out.append((m.key, m.value))
                    reached[tp] = m.offset + 1
    finally:
        await consumer.stop()
    return out


@contextmanager
def running_worker(settings: Settings, log_dir: Path) -> Iterator[WorkerProcess]:
    """A worker for one test module's namespace: topics created first, removed after."""
    from streams.admin import delete_namespace_topics, ensure_topics

    asyncio.run(ensure_topics(settings))
    worker = WorkerProcess(settings, log_dir / "worker.log").start()
    try:
        yield worker
    finally:
        worker.stop()
        asyncio.run(delete_namespace_topics(settings))


def complete_llm_version(settings: Settings, wanted: set[str]) -> Snapshot | None:
    """The latest version once a run wrote it with every wanted document, LLM reports for
    every community and every article's changes folded in, and Weaviate holds a vector for
    each of its entities, text units and reports; else None."""
    from core.lag import reflects_everything
    from core.tables.errors import SnapshotStoreError
    from core.tables.opening import open_graph_store

    try:
        snap = open_graph_store(settings).load()
    except SnapshotStoreError:
        return None
    if snap.meta.kind != "run" or not wanted <= {d.id for d in snap.documents}:
        return None
    if any(r.mode != "llm" for r in snap.community_reports):
        return None
    if len(snap.community_reports) != len(snap.communities):
        return None
    if not asyncio.run(reflects_everything(settings, snap.meta.consumed_offsets)):
        return None
    for kind, rows in (("entity", snap.entities), ("text_unit", snap.text_units),
                       ("report", snap.community_reports)):  # fmt: skip
        if not {r.id for r in rows} <= set(vector_keys(settings, kind)):
            return None
    return snap


def wait_complete_llm_version(
    settings: Settings, wanted: set[str], worker: WorkerProcess, timeout_s: float
) -> Snapshot:
    """``complete_llm_version`` once it is there; fails with the worker's log after
    ``timeout_s`` or when the worker exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert worker.proc is not None and worker.proc.poll() is None, worker.log_tail()
        snap = complete_llm_version(settings, wanted)
        if snap is not None:
            return snap
        time.sleep(2)
    raise AssertionError(f"no complete version in {timeout_s:.0f}s\n{worker.log_tail(60)}")
