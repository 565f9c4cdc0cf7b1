"""Streaming ingestion end to end on Reuters articles: throughput, LLM busyness, memory.

Usage: ``.venv/bin/python bench/ingest.py [--full] [--n N] [--llm-n N] [--repeat R]
[--modes offline,llm] [--concurrency 16] [--latency-ms 200] [--profile DIR] [--out PATH]``

Each run gets a fresh namespace on the local Kafka and Weaviate (``kgrag services up``; the
services are reused, never stopped), starts ``kgrag worker`` as a subprocess, waits until it
has its partitions, publishes the first N articles of the Reuters dev set and measures until
they are absorbed: every published document in the view folded from ``graph-changes``, the
worker group caught up on every topic it consumes, and ``graph-changes`` quiet. Times come
from Kafka record timestamps (CreateTime), so the settle period of the detection does not
count: the run ends at the last ``graph-changes`` record.

Each mode runs ``--repeat`` times, each time in a fresh namespace with a fresh worker. Figures
per mode, as the median of the repeats with min and max: docs/s and chunks/s end to end
(first ``documents`` record to last ``graph-changes`` record), the elapsed, publish and
detection seconds, and in LLM mode ``busy_fraction`` (below). The last repeat's run in full
under ``last_repeat``: per topic the first and last record times relative to the start,
which shows where the time goes stage by stage; LLM calls per chunk and how busy the
configured concurrency was, from the scripted server (its ``/_stats`` max in flight,
``/_stats`` sampled every 50 ms, and the call log integrated over time with each call lasting
the configured latency); peak RSS (VmHWM) of the worker, the scripted server, Kafka and
Weaviate. Kafka's and Weaviate's VmHWM are their peaks since they started, which may include
earlier work.

LLM mode runs against ``python -m kgrag.testing.scripted_llm`` in its own process with a fixed
latency per call and no faults, with a fresh response cache so every call reaches the server.
``--profile DIR`` runs the worker under cProfile (``python -m cProfile``) and writes the top
functions by cumulative time next to the results.

Targets (judged on the full run): offline at least 200 docs/s; in LLM mode the configured
concurrency at least 90% busy (``busy_fraction`` of the call log). The quick run takes 300
articles offline and 100 in LLM mode, once; ``--full`` 2,000 and 600, three times each, both
modes. Skips cleanly (exit 0) when the data file is absent. Writes its run into
``bench/results/ingest.json`` (``bench.record``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pstats
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.live import (
    LLMServer,
    fresh_namespace,
    from_start,
    log_path,
    peak_rss_mb,
    service_pids,
    start_llm_server,
    start_worker,
    stop,
    wait_ready,
)
from bench.record import Target, mode_argument, record, timing
from bench.results_io import REUTERS_DEV
from core.lag import pipeline_lag
from core.publish import publish
from core.settings import Settings, load_settings
from core.tokenizer import ensure_offline_bpe
from graph.merge.view import GraphView
from streams.codecs import decode_graph_change

DATA = REUTERS_DEV
MODES = ("offline", "llm")
# articles offline, articles in LLM mode, repeats of each
SIZES = {"quick": (300, 100, 1), "full": (2000, 600, 3)}
MEASURES = ("bench/live.py",)

# the limits this bench has always named: offline throughput, and how busy the configured LLM
# concurrency is kept while extracting
TARGETS = {
    "offline_docs_per_s": Target("/runs/offline/docs_per_s/median", ">=", 200),
    "llm_busy_fraction": Target("/runs/llm/busy_fraction/median", ">=", 0.9),
}
STAGES = (
    "documents",
    "chunks",
    "extractions",
    "entity_items",
    "relationship_items",
    "graph_changes",
    "extractions_dlq",
)


# ---- Kafka reads ----


async def consumer_lag(settings: Settings) -> int:
    return sum((await pipeline_lag(settings)).values())


async def absorbed(settings: Settings, sent: int, timeout: float, settle: float = 3.0) -> GraphView:
    """Fold graph-changes until every sent document is in, quiet for ``settle`` s, lag 0."""
    view = GraphView()
    consumer = from_start(settings, "graph_changes")
    await consumer.start()
    deadline = time.monotonic() + timeout
    quiet = time.monotonic()
    try:
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500, max_records=5000)
            for msgs in batch.values():
                for m in msgs:
                    view.apply(decode_graph_change(m.value))
                quiet = time.monotonic() if msgs else quiet
            if len(view.documents) >= sent and time.monotonic() - quiet >= settle:
                if await consumer_lag(settings) == 0:
                    return view
                quiet = time.monotonic()
    finally:
        await consumer.stop()
    raise RuntimeError(f"not absorbed after {timeout:.0f}s: {len(view.documents)}/{sent} documents")


@dataclass
class TopicSpan:
    count: int = 0
    first_ms: int | None = None
    last_ms: int | None = None


async def topic_spans(settings: Settings) -> dict[str, TopicSpan]:
    """Record count and first/last CreateTime of each stage's topic."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka.bootstrap_servers)
    await consumer.start()
    spans: dict[str, TopicSpan] = {}
    try:
        for stage in STAGES:
            parts = [
                TopicPartition(settings.topic(stage), p) for p in range(settings.kafka.partitions)
            ]
            ends = await consumer.end_offsets(parts)
            wanted = [tp for tp in parts if ends[tp] > 0]
            span = spans.setdefault(stage, TopicSpan())
            if not wanted:
                continue
            consumer.assign(wanted)
            await consumer.seek_to_beginning(*wanted)
            reached = dict.fromkeys(wanted, 0)
            while any(reached[tp] < ends[tp] for tp in wanted):
                batch = await consumer.getmany(*wanted, timeout_ms=1000, max_records=10000)
                for tp, msgs in batch.items():
                    for m in msgs:
                        reached[tp] = m.offset + 1
                        span.count += 1
                        span.first_ms = min(span.first_ms or m.timestamp, m.timestamp)
                        span.last_ms = max(span.last_ms or m.timestamp, m.timestamp)
    finally:
        await consumer.stop()
    return spans


# ---- LLM busyness ----


EXTRACTION_KINDS = frozenset({"extract_graph", "glean_continue", "glean_loop", "extract_claims"})


def busy_from_calls(calls: list[dict[str, Any]], latency_s: float, capacity: int) -> dict[str, Any]:
    """Extraction calls only (the community job's summaries run later, in the same worker),
    over the extraction window (first call's arrival to last call's end), divided by the
    capacity:

    - ``busy_fraction``: each call occupies its service time at the server, from the request's
      arrival to its response being ready (parsing, the server's checks, the latency and the
      answer's computation). A call holds a slot of the client's concurrency at least that
      long, so this is a lower bound of how busy the configured concurrency was.
    - ``busy_fraction_latency_only``: each call counted as the configured latency alone, as
      if the server cost nothing (the figure reported before the service time was recorded).

    ``while_active`` divides by the time at least one call was in flight instead (the gaps
    between batches left out)."""
    spans = sorted(
        (float(c["timestamp"]), float(c.get("service_s") or latency_s))
        for c in calls
        if c["kind"] in EXTRACTION_KINDS and c["path"].endswith("completions")
    )
    if not spans:
        return {}
    start = spans[0][0]
    finish = max(s + d for s, d in spans)
    window = finish - start
    area = sum(d for _, d in spans)
    busy_time, end = 0.0, start
    for s, d in spans:
        busy_time += max(0.0, s + d - max(s, end))
        end = max(end, s + d)
    latency_window = spans[-1][0] + latency_s - start
    return {
        "extraction_calls": len(spans),
        "window_s": round(window, 2),
        "mean_service_s": round(area / len(spans), 4),
        "mean_in_flight": round(area / window, 2),
        "busy_fraction": round(area / (window * capacity), 3),
        "busy_fraction_latency_only": round(
            len(spans) * latency_s / (latency_window * capacity), 3
        ),
        "idle_s_between_batches": round(window - busy_time, 2),
        "busy_fraction_while_active": round(area / (busy_time * capacity), 3),
    }


# ---- one run ----


def stage_table(spans: dict[str, TopicSpan], t0_ms: int) -> dict[str, dict[str, Any]]:
    return {
        stage: {
            "records": s.count,
            "first_s": None if s.first_ms is None else round((s.first_ms - t0_ms) / 1000, 2),
            "last_s": None if s.last_ms is None else round((s.last_ms - t0_ms) / 1000, 2),
        }
        for stage, s in spans.items()
    }


def top_functions(profile: Path, n: int = 25) -> list[str]:
    stats = pstats.Stats(str(profile))
    stats.sort_stats("cumulative")
    out = []
    for func, (_cc, nc, tt, ct, _callers) in sorted(
        stats.stats.items(),  # type: ignore[attr-defined]
        key=lambda kv: -kv[1][3],
    )[:n]:
        out.append(f"{ct:8.2f}s cum {tt:8.2f}s own {nc:>9} calls  {func[0]}:{func[1]}({func[2]})")
    return out


async def run_mode(
    base: Settings, mode: str, n: int, args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    async with fresh_namespace(base, f"bench-{mode}", workdir) as settings:
        server: LLMServer | None = None
        extra: dict[str, str] = {}
        if mode == "llm":
            server = start_llm_server(args.latency_ms, log_path(settings, "llm"))
            extra = server.env(args.concurrency, settings.data_dir)
        extra.update(dict(kv.split("=", 1) for kv in args.worker_env))
        profile = args.profile / f"{workdir.name}.prof" if args.profile else None
        worker = start_worker(settings, extra, profile)
        try:
            await wait_ready(settings, worker, timeout=180)
            sampler = server.sample_in_flight() if server else None
            started = time.monotonic()
            summary = await publish(settings, DATA, limit=n)
            published_s = time.monotonic() - started
            view = await absorbed(settings, summary.sent, timeout=args.timeout)
            detected_s = time.monotonic() - started
            if server is not None:
                server.stop_sampling()
            if sampler is not None:
                sampler.join(5)
            memory = {
                "worker": peak_rss_mb(worker.pid),
                **{k: peak_rss_mb(v) for k, v in service_pids(settings).items()},
            }
            llm = collect_llm(server, args) if server else None
            if server is not None:
                memory["scripted_llm"] = peak_rss_mb(server.proc.pid)
            spans = await topic_spans(settings)
        finally:
            stop(worker, server.proc if server else None)
    return report(
        mode,
        n,
        summary.sent,
        len(summary.bad),
        view,
        spans,
        published_s,
        detected_s,
        memory,
        llm,
        profile,
    )


def collect_llm(server: LLMServer, args: argparse.Namespace) -> dict[str, Any]:
    stats = server.stats()
    calls = server.calls()
    active = [s for s in server.samples if s > 0]
    return {
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "stats": stats,
        "call_log": busy_from_calls(calls, args.latency_ms / 1000, args.concurrency),
        "sampled_mean_in_flight_while_active": (
            round(sum(active) / len(active), 2) if active else None
        ),
        "sampled_busy_fraction_while_active": (
            round(sum(active) / len(active) / args.concurrency, 3) if active else None
        ),
        "samples": len(server.samples),
    }


def report(
    mode: str,
    n: int,
    sent: int,
    bad: int,
    view: GraphView,
    spans: dict[str, TopicSpan],
    published_s: float,
    detected_s: float,
    memory: dict[str, Any],
    llm: dict[str, Any] | None,
    profile: Path | None,
) -> dict[str, Any]:
    t0 = spans["documents"].first_ms or 0
    end = spans["graph_changes"].last_ms or t0
    elapsed = (end - t0) / 1000
    chunks = len(view.text_units) + spans["extractions_dlq"].count
    out: dict[str, Any] = {
        "mode": mode,
        "requested": n,
        "documents": sent,
        "bad_lines": bad,
        "chunks": chunks,
        "chunks_dead_lettered": spans["extractions_dlq"].count,
        "entities": len(view.entities),
        "relationships": len(view.relationships),
        "elapsed_s": round(elapsed, 2),
        "docs_per_s": round(sent / elapsed, 1) if elapsed else None,
        "chunks_per_s": round(chunks / elapsed, 1) if elapsed else None,
        "publish_s": round(published_s, 2),
        "absorbed_detected_s": round(detected_s, 2),
        "stages": stage_table(spans, t0),
        "peak_rss_mib": memory,
    }
    if llm is not None:
        chat = sum(v for k, v in llm["stats"]["by_kind"].items() if k != "embeddings")
        llm["calls_per_chunk"] = round(chat / chunks, 2) if chunks else None
        out["llm"] = llm
    if profile is not None and profile.exists():
        out["profile_top"] = top_functions(profile)
    return out


# ---- the repeats ----


def summary(repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's figures over its repeats: the timed ones as median, min and max, and the
    last repeat's run in full."""
    out: dict[str, Any] = {"repeats": len(repeats)}
    for key, digits in (
        ("docs_per_s", 1),
        ("chunks_per_s", 1),
        ("elapsed_s", 2),
        ("publish_s", 2),
        ("absorbed_detected_s", 2),
    ):
        out[key] = timing([r[key] for r in repeats if r[key] is not None], digits)
    logs = [r["llm"]["call_log"] for r in repeats if r.get("llm", {}).get("call_log")]
    if logs:
        out["busy_fraction"] = timing([c["busy_fraction"] for c in logs], 3)
        out["busy_fraction_latency_only"] = timing(
            [c["busy_fraction_latency_only"] for c in logs], 3
        )
    out["last_repeat"] = repeats[-1]
    return out


# ---- main ----


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode_argument(p)
    p.add_argument("--n", type=int, default=None, help="offline articles (300 quick, 2000 full)")
    p.add_argument("--llm-n", type=int, default=None, help="LLM articles (100 quick, 600 full)")
    p.add_argument("--repeat", type=int, default=None, help="runs of each mode (1 quick, 3 full)")
    p.add_argument("--modes", default=",".join(MODES), help="a quick run may take one")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--profile", type=Path, default=None, help="run the worker under cProfile")
    p.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra setting for the worker, e.g. KGRAG_EXTRACTION__BATCH_SIZE=128",
    )
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    args.mode = "full" if args.full else "quick"
    n, llm_n, repeat = SIZES[args.mode]
    args.n = n if args.n is None else args.n
    args.llm_n = llm_n if args.llm_n is None else args.llm_n
    args.repeat = repeat if args.repeat is None else args.repeat
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown := set(args.modes) - set(MODES):
        p.error(f"unknown modes {sorted(unknown)}; choose from {MODES}")
    if args.full and set(args.modes) != set(MODES):
        p.error("a full run takes both modes: each has a target")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if not DATA.exists():
        print(f"skipping: {DATA} is absent (the Reuters dev set is not in the repository)")
        return 0
    ensure_offline_bpe()
    from kgrag.services import launcher

    base = load_settings()
    launcher.up(base)  # reuses running services; never stops them
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        for mode in args.modes:
            n = args.n if mode == "offline" else args.llm_n
            repeats = []
            for i in range(args.repeat):
                print(f"{mode}: {n} articles, run {i + 1} of {args.repeat} …", flush=True)
                res = asyncio.run(run_mode(base, mode, n, args, Path(tmp) / f"{mode}-{i}"))
                print(json.dumps({k: v for k, v in res.items() if k != "profile_top"}, indent=2))
                for line in res.get("profile_top", []):
                    print("  ", line)
                repeats.append(res)
            runs[mode] = summary(repeats)
    settings = {
        "data": DATA.name,
        "offline_articles": args.n,
        "llm_articles": args.llm_n,
        "repeats": args.repeat,
        "modes": args.modes,
        "llm_concurrency": args.concurrency,
        "llm_latency_ms": args.latency_ms,
        "worker_env": args.worker_env,
        "profiled": args.profile is not None,
    }
    record("ingest", args.mode, {"runs": runs}, TARGETS, settings, MEASURES, path=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
