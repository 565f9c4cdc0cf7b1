"""What the graph tables cost to write and read: bytes of all current rows, bytes one +40-article
community run commits, and the time to commit and to load a version.

Usage: ``.venv/bin/python bench/graph_tables.py [--store s3] [--full] [--out PATH]``

``--store s3`` puts the tables in a bucket of the launcher's S3-compatible object store
(versitygw on loopback, started when it is not running) instead of the local disk, and records
the run as ``graph_tables_s3`` (``bench/results/graph_tables_s3.json``): the same figures where
every read and commit is S3 requests, as a query service on another machine sees them.

In process and offline, from the warm states of ``bench/change_cost.py`` (the folded graph
and the community job's state after a first run, cached under ``bench/.cache``): the job
commits the whole warm graph into empty graph tables (``full_bytes``: every file of every
table after that commit; ``commit_s_full`` and ``first_run_s`` one sample each), then 40 more
articles are folded and one run commits what changed (``bytes_plus40``: the bytes that commit
added). ``json_snapshot_bytes`` is what the same graph took as one JSON-lines snapshot of
earlier releases, for comparison. ``load_s`` reads and indexes that first version, repeated.

Swaps: ten consecutive +40-article versions are committed (``commit_s_plus40``: their commit
times), then the query index follows them one by one through the query service's reader
(``open_graph_store(…, for_queries=True)``, which leaves out the columns queries never use;
``GraphTables.changes`` then ``query.index_update.follow``, the version listing read before,
as the service's refresh does), in several rounds from the same first index (the old index is
never mutated), so ``swap_ms`` has its percentiles from 100 swaps in a full run over the same
ten versions. The bench raises the store's ``keep_snapshots`` above the versions it follows, so
retention never collects one mid-measure. ``full_reload_ms`` reads and indexes the last version
whole, repeated; the followed index is checked equal to a fresh one. In process, so without
the HTTP service around it.

Memory: a real ``kgrag api`` process (Kafka and Weaviate pointed at closed ports: loading the
index needs neither) serves an empty namespace, then the corpus's latest version; its peak RSS
(VmHWM, the whole process: the service has no child processes) once the version is served is
``query_rss_empty_mib`` and ``query_rss_mib``, and its RSS a second later ``*_settled_mib``.

Context: local search's context build on the followed index (``context_ms``, see
``context_times``): the rows in memory, the bulk text read from the mapped segments. The
Weaviate searches that pick entities and order sources beside it are bench/query.py's.

``maintain_s``: one maintenance of every table (what the job does every
``community.compact_every`` versions) at the default retention, one sample.

The quick run takes the 2,000-article corpus and two rounds of swaps; ``--full`` the 2,000-,
8,000- and (local disk only) ~100,000-article corpora of bench/change_cost.py (its warm state
takes about 17 minutes to build when the cache does not hold it) and ten rounds. Targets are
judged on the full run.
"""

from __future__ import annotations

import argparse
import asyncio
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

from bench.change_cost import DEFAULT_CORPORA, LARGE_CORPUS, QUICK_CORPUS, job_run, warm_state
from bench.incremental import DATA, load_documents, settings_for
from bench.live import free_port, log_path, peak_rss_mb, stop, worker_env
from bench.record import Target, mode_argument, percentiles, record, timing
from bench.results_io import ROOT
from bench.synthetic import Corpus
from bench.warm_state import Warm
from core.settings import Settings
from core.settings.store import TablesSettings
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from core.tables.versions import VersionInfo
from graph.communities.leiden_graph import gc_paused
from graph.versions.legacy_format import snapshot_to_tables
from query.context import LocalContextConfig, build_local_context, named_in_window
from query.deps import token_counter
from query.index import QueryIndex
from query.index_update import follow
from query.text_store import BULK
from query.time_window import TimeWindow

SWAP_STEPS = 10  # consecutive +40-article versions followed by the query index
SWAP_ROUNDS = {"full": 10, "quick": 2}  # the ten swaps followed again from the first index
READ_REPEATS = 3  # whole-version reads (load_s, full_reload_ms)
KEEP_SNAPSHOTS = SWAP_STEPS + 2  # retention above the versions followed, so none is collected
CONTEXT_QUESTIONS = 200
# the bench code its figures also depend on, besides the product packages
MEASURES = (
    "bench/change_cost.py",
    "bench/incremental.py",
    "bench/synthetic.py",
    "bench/warm_state.py",
    "bench/live.py",
)

TARGETS = {
    "bytes_plus40_share_8000": Target("/corpora/8000/share_plus40", "<=", 0.05),
    "swap_p95_ms_8000": Target("/corpora/8000/swap_ms/p95", "<=", 500),
    "query_growth_mib_8000": Target("/corpora/8000/query_growth_mib", "<=", 150),
    "context_p95_ms_8000": Target("/corpora/8000/context_ms/p95", "<=", 100),
}
# the ~100,000-article corpus: measured on the local disk only
LARGE_TARGETS = {
    f"query_growth_mib_{LARGE_CORPUS}": Target(
        f"/corpora/{LARGE_CORPUS}/query_growth_mib", "<=", 1.2 * 1024
    ),
    f"context_p95_ms_{LARGE_CORPUS}": Target(f"/corpora/{LARGE_CORPUS}/context_ms/p95", "<=", 100),
}


def corpora_for(mode: str, where: str) -> tuple[int, ...]:
    """The corpus sizes a run measures: the large one only in a full run on the local disk."""
    if mode == "quick":
        return (QUICK_CORPUS,)
    return (*DEFAULT_CORPORA, LARGE_CORPUS) if where == "local" else DEFAULT_CORPORA


def targets_for(where: str) -> dict[str, Target]:
    """The targets of a run on ``where`` (``local`` or ``s3``)."""
    return TARGETS | LARGE_TARGETS if where == "local" else dict(TARGETS)


def result_name(where: str) -> str:
    return "graph_tables" if where == "local" else "graph_tables_s3"


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


def with_keep(settings: Settings, keep: int) -> Settings:
    """``settings`` whose graph tables keep the versions of ``keep`` community runs."""
    community = settings.community.model_copy(update={"keep_snapshots": keep})
    return settings.model_copy(update={"community": community})


def read_index(reader: GraphTables, text_dir: Path) -> tuple[QueryIndex, list[float]]:
    """The latest version read and indexed whole, ``READ_REPEATS`` times: the last index and
    each read's seconds."""
    seconds = []
    for _ in range(READ_REPEATS):
        t = time.perf_counter()
        index = QueryIndex.read(reader, None, text_dir)  # rows, and the bulk text mapped
        seconds.append(time.perf_counter() - t)
    return index, seconds


def commit_versions(
    warm: Warm, corpus: Corpus, n: int, settings: Settings, root: Path
) -> dict[str, Any]:
    """``SWAP_STEPS`` consecutive +40-article runs, each committing one version: the first
    run's bytes, rows and regenerated reports, and every run's commit seconds."""
    full_bytes = tree_bytes(root)
    store = open_graph_store(settings)
    out: dict[str, Any] = {"commit_s": []}
    for step in range(SWAP_STEPS):
        for doc in corpus.articles(n + 40 * step, 40):
            warm.folder.add(doc)
        result, _ = asyncio.run(job_run(settings, warm.state))
        out["commit_s"].append(result.timings.get("snapshot", 0.0))
        if step == 0:
            out["bytes_plus40"] = tree_bytes(root) - full_bytes
            out["rows_plus40"] = store.version_infos_all()[-1].changed
            out["reports_regenerated_plus40"] = result.regenerated
    return out


def swap_times(
    reader: GraphTables, base: QueryIndex, versions: list[VersionInfo], rounds: int
) -> tuple[list[float], QueryIndex]:
    """Each version made visible to queries, as the query service's refresh does: what
    changed since the index's version read, then followed (ms); ``rounds`` times from
    ``base``. Returns the times and the index of the last version."""
    times, index = [], base
    for _ in range(rounds):
        index = base
        for info in versions:
            t = time.perf_counter()
            with gc_paused():  # as the query service does (query.api.state)
                changes = reader.changes(index.version, info.version, split=BULK)
                index = follow(index, info.meta, changes, lean=True)
            times.append((time.perf_counter() - t) * 1000)
    return times, index


def measure(n: int, corpus: Corpus, where: str, rounds: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"kgrag-bench-tables-{n}-"))
    warm = warm_state(corpus, n, work).copy()
    warm.state.tables_known = None  # commit the whole graph into empty tables
    as_configured, root = on_store(settings_for(work / "tables"), where)
    settings = with_keep(as_configured, KEEP_SNAPSHOTS)
    result, first_run_s = asyncio.run(job_run(settings, warm.state))
    full_bytes = tree_bytes(root)
    store = open_graph_store(settings)
    json_bytes = sum(len(b) for b in snapshot_to_tables(store.load()).values())
    reader = open_graph_store(settings, for_queries=True)  # what the query service reads
    text_dir = work / "query-text"
    text_dir.mkdir()
    base, load_s = read_index(reader, text_dir)
    commits = commit_versions(warm, corpus, n, settings, root)
    versions = [v for v in store.version_infos_all() if v.version > base.version]
    swaps, index = swap_times(reader, base, versions, rounds)
    del base
    fresh, reload_s = read_index(reader, text_dir)
    assert fresh == index, "the followed index differs from a fresh one"
    del fresh
    context_ms, context_tokens = context_times(index, settings)
    empty = service_memory(settings.model_copy(update={"namespace": "bench-empty"}), None)
    served = service_memory(settings, index.version)
    files_before = sum(1 for _ in root.rglob("*.parquet"))
    t = time.monotonic()
    open_graph_store(as_configured).maintain()  # at the default retention, as the job does
    maintain_s = time.monotonic() - t
    row = {
        "articles": n,
        "full_bytes": full_bytes,
        "json_snapshot_bytes": json_bytes,
        "bytes_plus40": commits["bytes_plus40"],
        "share_plus40": round(commits["bytes_plus40"] / full_bytes, 4),
        "rows_plus40": commits["rows_plus40"],
        "commit_s_full": round(result.timings.get("snapshot", 0.0), 3),
        "commit_s_plus40": timing(commits["commit_s"], 3),
        "first_run_s": round(first_run_s, 2),
        "load_s": timing(load_s, 2),
        "swap_ms": percentiles(swaps, (50, 95), 1),
        "full_reload_ms": timing([s * 1000 for s in reload_s], 0),
        "context_ms": percentiles(context_ms, (50, 95), 2),
        "context_tokens_mean": round(sum(context_tokens) / max(1, len(context_tokens))),
        "query_rss_empty_mib": empty["peak"],
        "query_rss_mib": served["peak"],
        "query_rss_empty_settled_mib": empty["settled"],
        "query_rss_settled_mib": served["settled"],
        "query_growth_mib": round(served["peak"] - empty["peak"], 1),
        "maintain_s": round(maintain_s, 2),
        "live_files_before_maintain": files_before,
        "reports_regenerated_plus40": commits["reports_regenerated_plus40"],
    }
    print(f"[{n}] {row}", flush=True)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode_argument(parser)
    parser.add_argument("--store", choices=("local", "s3"), default="local")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} is not there (see ../shared/data/README.md)")
        return
    mode = "full" if args.full else "quick"
    sizes = corpora_for(mode, args.store)
    rounds = SWAP_ROUNDS[mode]
    corpus = Corpus(load_documents(DATA, 10**9))
    corpora = {str(n): measure(n, corpus, args.store, rounds) for n in sizes}
    community = settings_for(Path(tempfile.mkdtemp())).community
    settings = {
        "data": f"{DATA.name} (bench/change_cost.py warm states)",
        "how": "offline, in process; Delta Lake tables "
        + ("on the local disk" if args.store == "local" else "in a bucket of versitygw (S3 API)"),
        "store": args.store,
        "corpora": list(sizes),
        "swap_steps": SWAP_STEPS,
        "swap_rounds": rounds,
        "read_repeats": READ_REPEATS,
        "context_questions": CONTEXT_QUESTIONS,
        "keep_snapshots_while_measuring": KEEP_SNAPSHOTS,
        "keep_snapshots": community.keep_snapshots,
        "compact_every": community.compact_every,
    }
    record(
        result_name(args.store),
        mode,
        {"corpora": corpora},
        targets_for(args.store),
        settings,
        MEASURES,
        path=args.out,
        script="bench/graph_tables.py",
    )


if __name__ == "__main__":
    main()
