"""``kgrag demo``: the whole flow on the sample news, from nothing to answers.

Services up (reused when running), a fresh ``demo`` namespace (its old topics, collections
and state are removed first, so an earlier run never leaks in), a worker subprocess, the
sample articles published and indexed, then questions asked and answered.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.panel import Panel

from graph.hashing_embedding import HashingEmbedder
from kgrag.errors import KgragError
from kgrag.publish import publish
from kgrag.services import launcher
from kgrag.settings import Settings
from kgrag.vector_store import WeaviateStore
from query.basic import search_text_units
from streams.admin import delete_namespace_topics, ensure_topics


def _worker_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "KGRAG_NAMESPACE": settings.namespace,
            "KGRAG_DATA_DIR": str(settings.data_dir),
            "KGRAG_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "KGRAG_WEAVIATE__URL": settings.weaviate.url,
            "KGRAG_WEAVIATE__GRPC_PORT": str(settings.weaviate.grpc_port),
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


async def _wait_indexed(settings: Settings, expected_docs: int, timeout: float) -> int:
    """Wait until every document has text units and the count has been stable for 3 s."""
    deadline = time.monotonic() + timeout
    last, stable_since = -1, time.monotonic()
    async with WeaviateStore(settings) as store:
        while time.monotonic() < deadline:
            n = await store.count("text_unit")
            if n != last:
                last, stable_since = n, time.monotonic()
            elif n >= expected_docs and time.monotonic() - stable_since > 3:
                return n
            await asyncio.sleep(1)
    raise KgragError(f"indexing did not finish within {timeout:.0f}s ({last} text units so far)")


async def _ask(settings: Settings, question: str) -> list[str]:
    async with WeaviateStore(settings) as store:
        hits = await search_text_units(
            question,
            embedder=HashingEmbedder(settings.embeddings.dimensions),
            store=store,
            limit=3,
        )
    return [
        f"[bold]{h.title}[/] [dim]({h.document_id})[/]\n  {' '.join(h.text.split())[:260]}…"
        for h in hits
    ]


def run_demo(settings: Settings, path: Path, question: str, console: Console) -> None:
    if not path.exists():
        raise KgragError(f"{path} does not exist; run the demo from the repository root")
    if "KGRAG_NAMESPACE" not in os.environ:
        settings = settings.model_copy(update={"namespace": "demo"})
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
        )
    try:
        started = time.monotonic()
        summary = asyncio.run(publish(settings, path))
        console.print(f"published {summary.sent} articles ({len(summary.bad)} bad lines)")
        with console.status("indexing…"):
            n = asyncio.run(_wait_indexed(settings, summary.sent, timeout=300))
        console.print(
            f"indexed {n} text units in {time.monotonic() - started:.1f}s (worker log: {log_path})"
        )
        console.print(
            Panel(
                "\n".join(asyncio.run(_ask(settings, question))), title=f"basic search: {question}"
            )
        )
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
