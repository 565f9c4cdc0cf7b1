"""``kgrag demo``: the whole flow on the sample news, from nothing to answers.

Services up (reused when running), a fresh ``demo`` namespace (its old topics, collections
and state are removed first, so an earlier run never leaks in), a worker subprocess with its
community job, the sample articles published, indexed and clustered; then the communities
and their lineage events, what extracting the articles cost (none offline), a local
question, a "main themes" global question and a trend question (each with its cost), and the
emerging communities, printed readably. It ends by leaving the worker and the query service
running, and prints the dashboard's address; ``kgrag demo --stop`` (``make demo-stop``) stops
them, by the process ids it wrote to ``<data_dir>/demo-processes.json``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer
from rich.console import Console
from rich.table import Table

from core.errors import KgragError
from core.publish import publish
from core.settings import Settings
from core.tables.opening import open_graph_store
from core.vector_store import WeaviateStore
from kgrag.services import launcher
from streams.admin import delete_namespace_topics, ensure_topics

LOCAL_QUESTION = "What did Finance Minister Elena Vasquez say about interest rates?"
GLOBAL_QUESTION = "What are the main themes of these articles?"
TREND_WINDOW = "last 4 days"


def _worker_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "KGRAG_NAMESPACE": settings.namespace,
            "KGRAG_DATA_DIR": str(settings.data_dir),
            "KGRAG_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "KGRAG_WEAVIATE__URL": settings.weaviate.url,
            "KGRAG_WEAVIATE__GRPC_PORT": str(settings.weaviate.grpc_port),
            "KGRAG_COMMUNITY__DEBOUNCE_S": str(settings.community.debounce_s),
            "KGRAG_COMMUNITY__MAX_WAIT_S": str(settings.community.max_wait_s),
        }
    )
    return env


async def _reset(settings: Settings) -> None:
    await delete_namespace_topics(settings)
    async with WeaviateStore(settings) as store:
        await store.drop_namespace()
    shutil.rmtree(settings.data_dir / settings.namespace, ignore_errors=True)
    # Kafka deletes topics asynchronously; wait until they are gone before re-creating.
    for _ in range(30):
        try:
            await ensure_topics(settings)
            return
        except Exception:
            await asyncio.sleep(1)
    await ensure_topics(settings)


def _wait_for_snapshot(settings: Settings, documents: int, timeout: float) -> int:
    """The community run's graph version holding every document, once no newer one follows
    soon (read from the versions table; the graph itself is not loaded)."""
    store = open_graph_store(settings)
    deadline = time.monotonic() + timeout
    settle = settings.community.debounce_s * 2 + 2
    seen, since = None, time.monotonic()
    while time.monotonic() < deadline:
        version = store.latest_version()
        if version != seen:
            seen, since = version, time.monotonic()
        elif (
            version is not None
            and time.monotonic() - since > settle
            and (meta := store.resolve(version).meta).kind == "run"  # communities and reports too
            and meta.counts.get("documents", 0) >= documents
        ):
            return version
        time.sleep(1)
    raise KgragError(f"no complete snapshot within {timeout:.0f}s (latest: {seen})")


async def _events(settings: Settings) -> list[dict[str, Any]]:
    consumer = AIOKafkaConsumer(
        settings.topics.community_events,
        bootstrap_servers=settings.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    out: list[dict[str, Any]] = []
    try:
        for _ in range(3):
            batch = await consumer.getmany(timeout_ms=1000)
            out += [orjson.loads(m.value) for msgs in batch.values() for m in msgs]
    finally:
        await consumer.stop()
    return out


def _show_communities(console: Console, settings: Settings) -> None:
    from query.index import QueryIndex

    store = open_graph_store(settings)
    snap = store.load()
    index = QueryIndex.from_snapshot(snap)
    console.print(
        f"snapshot v{snap.meta.version}: {snap.meta.counts.get('entities', 0)} entities, "
        f"{snap.meta.counts.get('relationships', 0)} relationships, "
        f"{len(snap.communities)} communities on {snap.meta.counts.get('levels', 0)} levels, "
        f"{len(snap.community_reports)} reports ({snap.meta.mode})"
    )
    table = Table("id", "size", "title", "top entities", title="Top-level communities")
    for c in sorted(snap.communities, key=lambda c: -c.size):
        if c.level != 0:
            continue
        names = sorted(
            c.entity_ids, key=lambda k: -(index.entities[k].frequency if k in index.entities else 0)
        )
        top = [index.entities[k].title for k in names[:4] if k in index.entities]
        table.add_row(str(c.community), str(c.size), c.title, ", ".join(top))
    console.print(table)


def _show_events(console: Console, events: list[dict[str, Any]]) -> None:
    from kgrag.cli_query import format_event

    headlines = [e for e in events if e.get("kind") == "headline"]
    console.print(
        f"[bold]Headlines[/] ({len(headlines)}, what `kgrag watch` shows), the best five:"
    )
    for e in sorted(headlines, key=lambda e: int(e.get("rank") or 0))[:5]:
        console.print(format_event(e))
    lineage = [e for e in events if e.get("kind") != "headline"]
    console.print(f"[bold]Community events[/] ({len(lineage)}, `kgrag watch --raw`), the last few:")
    for e in lineage[-6:]:
        console.print(format_event(e))


def _show_ingest_cost(console: Console, settings: Settings) -> None:
    """What extracting the articles spent at the LLM, before the answers that say their own."""
    from kgrag.status_facts import latest_snapshot
    from kgrag.status_render import describe_ingestion

    facts = latest_snapshot(settings)
    if facts is not None:
        mode = "offline" if settings.llm.offline else "llm"
        console.print(f"ingest cost: {describe_ingestion(facts.ingestion(), mode)}")


def _ask(console: Console, settings: Settings) -> None:
    from kgrag.cli_query import print_answer
    from query.deps import open_deps
    from query.engine import QueryOptions, run_query
    from query.index import QueryIndex

    store = open_graph_store(settings)
    index = QueryIndex.from_snapshot(store.load())

    async def ask(method: Any, question: str, opts: QueryOptions) -> Any:
        async with open_deps(settings) as deps:
            return await run_query(method, question, index, deps, opts)

    for method, question, opts in (
        ("local", LOCAL_QUESTION, QueryOptions()),
        ("global", GLOBAL_QUESTION, QueryOptions(level=0)),
        ("global", "What is emerging in the news?", QueryOptions(level=1, since=TREND_WINDOW)),
    ):
        window = f" (since {opts.since})" if opts.since else ""
        console.rule(f"{method} search: {question}{window}")
        print_answer(asyncio.run(ask(method, question, opts)), index, console)


def _show_trends(console: Console, settings: Settings) -> None:
    from query.index import QueryIndex
    from query.time_window import parse_time_window
    from query.trends import trends

    store = open_graph_store(settings)
    index = QueryIndex.from_snapshot(store.load())
    result = trends(index, parse_time_window(TREND_WINDOW, None, newest=index.newest), limit=5)
    console.rule(f"Emerging storylines, {result.since} .. {result.until} (document time)")
    table = Table("#", "level", "storyline", "score", "articles", "expected", "top article")
    for i, c in enumerate(result.communities, 1):
        top = c.top_documents[0] if c.top_documents else None
        table.add_row(
            str(i),
            str(c.level),
            c.title,
            f"{c.score:.2f}",
            str(c.documents),
            f"{c.expected_documents:.1f}",
            f"{top.day} {top.title}" if top else "",
        )
    console.print(table)


def run_demo(settings: Settings, path: Path, question: str, console: Console) -> None:
    if not path.exists():
        raise KgragError(f"{path} does not exist; run the demo from the repository root")
    settings = _demo_settings(settings)
    console.rule("kafka-graphrag demo")
    with console.status("starting Kafka and Weaviate (the first run downloads and builds them)…"):
        for rec in launcher.up(settings):
            console.print(f"[green]✔[/] {rec.name} {rec.version} (pid {rec.pid})")
    mode = "offline (no LLM endpoint configured)" if settings.llm.offline else "LLM"
    console.print(f"mode: [bold]{mode}[/]; namespace [bold]{settings.namespace}[/]")
    asyncio.run(_reset(settings))
    log_path = settings.data_dir / f"{settings.namespace}-worker.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "kgrag.cli", "worker", "--loglevel", "warning"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_worker_env(settings),
            start_new_session=True,  # left running for the dashboard: not stopped by Ctrl-C
        )
    left_running = False
    try:
        started = time.monotonic()
        summary = asyncio.run(publish(settings, path))
        console.print(f"published {summary.sent} articles ({len(summary.bad)} bad lines)")
        with console.status("indexing, clustering, writing reports…"):
            version = _wait_for_snapshot(settings, summary.sent, timeout=600)
        console.print(
            f"snapshot v{version} ready {time.monotonic() - started:.1f}s after "
            f"publishing (worker log: {log_path})"
        )
        _show_communities(console, settings)
        _show_events(console, asyncio.run(_events(settings)))
        _show_ingest_cost(console, settings)
        _ask(console, settings)
        _show_trends(console, settings)
        if question:
            _basic_search(console, settings, question)
        _leave_dashboard_running(settings, worker, console)
        left_running = True
    finally:
        if not left_running:
            _terminate(worker)


def _demo_settings(settings: Settings) -> Settings:
    """The demo's own namespace and a quicker community job, unless the environment sets them."""
    if "KGRAG_NAMESPACE" not in os.environ:
        settings = settings.model_copy(update={"namespace": "demo"})
    if "KGRAG_COMMUNITY__DEBOUNCE_S" not in os.environ:
        community = settings.community.model_copy(update={"debounce_s": 3.0, "max_wait_s": 30.0})
        settings = settings.model_copy(update={"community": community})
    return settings


def _basic_search(console: Console, settings: Settings, question: str) -> None:
    """The user's own question (``--question``), answered by basic search over the snapshot."""
    console.rule(f"basic search: {question}")
    from kgrag.cli_query import print_answer
    from query.deps import open_deps
    from query.engine import QueryOptions, run_query
    from query.index import QueryIndex

    store = open_graph_store(settings)
    index = QueryIndex.from_snapshot(store.load())

    async def basic() -> Any:
        async with open_deps(settings) as deps:
            return await run_query("basic", question, index, deps, QueryOptions(k=3))

    print_answer(asyncio.run(basic()), index, console)


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _pid_file(settings: Settings) -> Path:
    return settings.data_dir / "demo-processes.json"


def _free_port(host: str, wanted: int) -> int:
    """``wanted`` when nothing listens there, else a port the system picks."""
    with socket.socket() as s:
        try:
            s.bind((host, wanted))
            return wanted
        except OSError:
            s.bind((host, 0))
            return int(s.getsockname()[1])


def _leave_dashboard_running(
    settings: Settings, worker: subprocess.Popen[bytes], console: Console
) -> None:
    """Start the query service beside the worker, both left running, and say where the
    dashboard is and how to stop them."""
    import httpx  # the demo's last step only

    host = settings.api.host
    port = _free_port(host, settings.api.port)
    log_path = settings.data_dir / f"{settings.namespace}-api.log"
    env = {**_worker_env(settings), "KGRAG_API__HOST": host, "KGRAG_API__PORT": str(port)}
    with open(log_path, "wb") as log:
        api = subprocess.Popen(
            [sys.executable, "-m", "kgrag.cli", "api"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    url = f"http://{host}:{port}/"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if api.poll() is not None or time.monotonic() > deadline:
            _terminate(worker)
            raise KgragError(f"the query service did not start; see {log_path}")
        time.sleep(0.5)
    _pid_file(settings).write_bytes(orjson.dumps({"worker": worker.pid, "api": api.pid}))
    # both are meant to outlive this process: not a leak to warn about when it exits
    warnings.filterwarnings("ignore", "subprocess .* is still running", ResourceWarning)
    console.rule("dashboard")
    console.print(f"Open [bold]{url}[/] in a browser: storylines, reports, the graph, questions.")
    console.print(
        "The worker and the query service keep running (publish more with "
        f"`KGRAG_NAMESPACE={settings.namespace} kgrag publish FILE`). Stop them with "
        "[bold]make demo-stop[/] (`kgrag demo --stop`; then `kgrag services down` for Kafka "
        "and Weaviate)."
    )


def stop_demo(settings: Settings, console: Console) -> None:
    """Stop the worker and query service an earlier ``kgrag demo`` left running."""
    path = _pid_file(settings)
    if not path.exists():
        console.print("no demo processes are recorded as running")
        return
    for name, pid in orjson.loads(path.read_bytes()).items():
        if not _is_kgrag(int(pid)):
            console.print(f"{name} (pid {pid}) is not running")
            continue
        os.killpg(int(pid), signal.SIGTERM)  # its own session: the process and its children
        for _ in range(60):
            if not _is_kgrag(int(pid)):
                break
            time.sleep(0.5)
        else:
            os.killpg(int(pid), signal.SIGKILL)
        console.print(f"stopped the demo's {name} (pid {pid})")
    path.unlink()


def _is_kgrag(pid: int) -> bool:
    """The pid runs a kgrag command (not a process that reused the number)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"kgrag.cli" in cmdline and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
