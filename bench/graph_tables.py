"""What the graph tables cost to write and read: bytes of all current rows, bytes one +40-article
community run commits, and the time to commit and to load a version.

Usage: ``.venv/bin/python bench/graph_tables.py [--store s3] [--corpora 8000] [--large]``

``--store s3`` puts the tables in a bucket of the launcher's S3-compatible object store
(versitygw on loopback, started when it is not running) instead of the local disk, and writes
``bench/results/graph_tables_s3.json``: the same figures where every read and commit is S3
requests, as a query service on another machine sees them.

In process and offline, from the warm states of ``bench/change_cost.py`` (the folded graph
and the community job's state after a first run, cached under ``bench/.cache``): the job
commits the whole warm graph into empty graph tables (``full_bytes``: every file of every
table after that commit), then 40 more articles are folded and one run commits what changed
(``bytes_plus40``: the bytes that commit added). ``json_snapshot_bytes`` is what the same
graph took as one JSON-lines snapshot of earlier releases, for comparison.

Swaps: ten consecutive +40-article versions, each followed by the query index row by row
through the query service's reader (``open_graph_store(…, for_queries=True)``, which leaves
out the columns queries never use; ``GraphTables.changes`` then ``query.index_update.follow``),
timed (``swap_ms``,
``swap_p95_ms``) against reading and indexing the whole version (``full_reload_ms``); the
followed index is checked equal to a fresh one at the end. In process, so without the HTTP
service around it.

Memory: a real ``kgrag api`` process (Kafka and Weaviate pointed at closed ports: loading the
index needs neither) serves an empty namespace, then the corpus's latest version; its peak RSS
(VmHWM, the whole process: the service has no child processes) once the version is served is
``query_rss_empty_mib`` and ``query_rss_mib``, and its RSS a second later ``*_settled_mib``.

Context: local search's context build on the followed index (``context_p95_ms``, see
``context_times``): the rows in memory, the bulk text read from the mapped segments. The
Weaviate searches that pick entities and order sources beside it are bench/query.py's.

``--large`` adds the ~100,000-article synthetic corpus of bench/change_cost.py (its warm state
takes about 17 minutes to build when the cache does not hold it).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.change_cost import DEFAULT_CORPORA, LARGE_CORPUS, job_run, warm_state
from bench.incremental import DATA, load_documents, settings_for
from bench.live import free_port, log_path, peak_rss_mb, stop, worker_env
from bench.results_io import (
    CLUSTERING_MACHINE,
    RESULTS,
    ROOT,
    machine,
    now_iso,
    print_targets,
    target,
    write_result,
)
from bench.synthetic import Corpus
from core.tables.opening import open_graph_store
from core.settings import Settings
from core.settings.store import TablesSettings
from graph.leiden_graph import gc_paused
from graph.snapshots import snapshot_to_tables
from query.context import LocalContextConfig, build_local_context, named_in_window
from query.deps import token_counter
from query.index import QueryIndex
from query.index_update import follow
from query.text_store import BULK
from query.time_window import TimeWindow

RESULT = RESULTS / "graph_tables.json"
RESULT_S3 = RESULTS / "graph_tables_s3.json"
SWAP_STEPS = 10  # consecutive +40-article versions followed by the query index
CONTEXT_QUESTIONS = 200
TARGET_CORPUS = 8000


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def on_store(settings: Settings, where: str) -> tuple[Settings, Path]:
    """``settings`` with the tables ``where`` (``local`` or ``s3``), and the directory that
    holds their files on this machine (for s3: inside versitygw's own directory)."""
    if where == "local":
        return settings, Path(settings.tables_uri)
    from kgrag.services import objectstore

    objectstore.up(settings)
    s = settings.services
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    tables = TablesSettings(
        uri=f"s3://{s.object_store_bucket}/{prefix}",
        endpoint_url=objectstore.endpoint_url(settings),
        access_key_id=s.object_store_access_key,
        secret_access_key=s.object_store_secret_key,
    )
    on_s3 = settings.model_copy(update={"tables": tables})
    files = objectstore.data_dir(settings) / s.object_store_bucket / prefix / on_s3.namespace
    return on_s3, files / "tables"


def service_memory(settings: Settings, version: int | None) -> dict[str, float]:
    """Peak and settled RSS (MiB) of ``kgrag api`` once it serves ``version`` (None: nothing,
    an empty namespace)."""
    port = free_port()
    closed = {
        "KGRAG_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:9",
        "KGRAG_WEAVIATE__URL": "http://127.0.0.1:9",
    }
    with open(log_path(settings, "api"), "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kgrag.cli", "api", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=worker_env(settings, closed),
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=60).json()
            except httpx.HTTPError:
                body = None
            if body is not None and (
                version is None or (body.get("snapshot") or {}).get("version") == version
            ):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the query service never served version {version}")
            time.sleep(0.2)
        peak = peak_rss_mb(proc.pid) or {}
        time.sleep(1.0)
        settled = peak_rss_mb(proc.pid) or {}
    finally:
        stop(proc)
    return {"peak": peak.get("VmHWM", 0.0), "settled": settled.get("VmRSS", 0.0)}


def percentile(samples: list[float], q: float) -> float:
    return sorted(samples)[max(0, math.ceil(q * len(samples)) - 1)]


def context_times(index: QueryIndex, settings: Settings) -> tuple[list[float], list[int]]:
    """Local search's context build (``query.context.build_local_context``: entities,
    relationships, claims, reports and sources within the token budget, the bulk text read
    from the mapped segments) for ``CONTEXT_QUESTIONS`` questions naming an entity each,
    in ms, and each context's tokens. The entities are those the question names
    (``named_in_window``); the vector searches that add to them in the service run in
    Weaviate and are timed by bench/query.py, not here."""
    config = LocalContextConfig()
    count = token_counter(settings.chunking.encoding)
    named = sorted(k for k, e in index.entities.items() if e.frequency >= 2)
    picked = random.Random(7).sample(named, min(CONTEXT_QUESTIONS, len(named)))
    times, tokens = [], []
    for key in picked:
        question = f"What did {index.entities[key].title} say or do?"
        window = TimeWindow()
        keys = named_in_window(question, index=index, config=config, window=window)
        keys = (keys or [key])[: config.top_k_entities]
        t = time.perf_counter()
        ctx = build_local_context(index, keys, config=config, count_tokens=count, window=window)
        times.append((time.perf_counter() - t) * 1000)
        tokens.append(sum(ctx.tokens.values()))
    return times, tokens


def measure(n: int, corpus: Corpus, where: str = "local") -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"kgrag-bench-tables-{n}-"))
    warm = warm_state(corpus, n, work).copy()
    warm.state.tables_known = None  # commit the whole graph into empty tables
    settings, root = on_store(settings_for(work / "tables"), where)
    result, full_s = asyncio.run(job_run(settings, warm.state))
    commit_s_full = result.timings.get("snapshot", 0.0)
    full_bytes = tree_bytes(root)
    store = open_graph_store(settings)
    json_bytes = sum(len(b) for b in snapshot_to_tables(store.load()).values())
    reader = open_graph_store(settings, for_queries=True)  # what the query service reads
    text_dir = work / "query-text"
    text_dir.mkdir()
    t = time.monotonic()
    index = QueryIndex.read(reader, None, text_dir)  # rows, and the bulk text mapped
    load_s = time.monotonic() - t
    for doc in corpus.articles(n, 40):
        warm.folder.add(doc)
    result, _ = asyncio.run(job_run(settings, warm.state))
    plus40 = tree_bytes(root) - full_bytes
    info = store.version_infos()[-1]
    swaps = []  # a new version visible to queries: read what changed, follow it
    for step in range(SWAP_STEPS):
        if step:
            for doc in corpus.articles(n + 40 * step, 40):
                warm.folder.add(doc)
            asyncio.run(job_run(settings, warm.state))
        latest = store.version_infos()[-1]
        t = time.monotonic()
        with gc_paused():  # as the query service does (query.api.state)
            changes = reader.changes(index.version, latest.version, split=BULK)
            index = follow(index, latest.meta, changes, lean=True)
        swaps.append(time.monotonic() - t)
    t = time.monotonic()
    fresh = QueryIndex.read(reader, None, text_dir)
    full_swap_s = time.monotonic() - t
    assert fresh == index, "the followed index differs from a fresh one"
    del fresh
    context_ms, context_tokens = context_times(index, settings)
    empty = service_memory(settings.model_copy(update={"namespace": "bench-empty"}), None)
    served = service_memory(settings, index.version)
    files_before = sum(1 for _ in root.rglob("*.parquet"))
    t = time.monotonic()
    store.maintain()  # what the job does every community.compact_every versions
    maintain_s = time.monotonic() - t
    row = {
        "articles": n,
        "full_bytes": full_bytes,
        "json_snapshot_bytes": json_bytes,
        "bytes_plus40": plus40,
        "share_plus40": round(plus40 / full_bytes, 4),
        "rows_plus40": info.changed,
        "commit_s_full": round(commit_s_full, 3),
        "commit_s_plus40": round(result.timings.get("snapshot", 0.0), 3),
        "first_run_s": round(full_s, 2),
        "load_s": round(load_s, 2),
        "swap_ms": [round(s * 1000) for s in swaps],
        "swap_p95_ms": round(percentile(swaps, 0.95) * 1000),
        "full_reload_ms": round(full_swap_s * 1000),
        "context_questions": len(context_ms),
        "context_p50_ms": round(percentile(context_ms, 0.5), 2),
        "context_p95_ms": round(percentile(context_ms, 0.95), 2),
        "context_tokens_mean": round(sum(context_tokens) / max(1, len(context_tokens))),
        "query_rss_empty_mib": empty["peak"],
        "query_rss_mib": served["peak"],
        "query_rss_empty_settled_mib": empty["settled"],
        "query_rss_settled_mib": served["settled"],
        "query_growth_mib": round(served["peak"] - empty["peak"], 1),
        "maintain_s": round(maintain_s, 2),
        "live_files_before_maintain": files_before,
        "reports_regenerated_plus40": result.regenerated,
    }
    print(f"[{n}] {row}", flush=True)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--store", choices=("local", "s3"), default="local")
    parser.add_argument("--corpora", type=int, nargs="+", default=list(DEFAULT_CORPORA))
    parser.add_argument("--large", action="store_true", help="add the ~100,000-article corpus")
    args = parser.parse_args(argv)
    if args.large and LARGE_CORPUS not in args.corpora:
        args.corpora.append(LARGE_CORPUS)
    out = args.out or (RESULT if args.store == "local" else RESULT_S3)
    if not DATA.exists():
        print(f"skipped: {DATA} is not there (see ../shared/data/README.md)")
        return
    at_start = machine(*CLUSTERING_MACHINE)
    corpus = Corpus(load_documents(DATA, 10**9))
    corpora = {str(n): measure(n, corpus, args.store) for n in args.corpora}
    big = corpora[str(TARGET_CORPUS)]
    share = big["share_plus40"]
    result: dict[str, Any] = {
        "bench": "graph_tables",
        "date": now_iso(),
        "machine": at_start,
        "data": f"{DATA.name} (bench/change_cost.py warm states)",
        "mode": "offline, in process; Delta Lake tables "
        + (
            "on the local disk"
            if args.store == "local"
            else "in a bucket of versitygw on loopback (S3 API)"
        ),
        "corpora": corpora,
        "targets": {
            "bytes_plus40_share_8000": target(share, 0.05, "<="),
            "swap_p95_ms_8000": target(big["swap_p95_ms"], 500, "<="),
            "query_growth_mib_8000": target(big["query_growth_mib"], 150, "<="),
            "context_p95_ms_8000": target(big["context_p95_ms"], 100, "<="),
        },
    }
    large = corpora.get(str(LARGE_CORPUS))
    if large is not None:
        result["targets"] |= {
            "query_growth_mib_100000": target(large["query_growth_mib"], 1.2 * 1024, "<="),
            "context_p95_ms_100000": target(large["context_p95_ms"], 100, "<="),
        }
    write_result(out, result)
    print_targets(result, out)


if __name__ == "__main__":
    main()
