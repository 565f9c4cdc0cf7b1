"""LLM mode end to end on the workload of Microsoft GraphRAG's own measurement.

Usage: ``.venv/bin/python bench/llm_mode.py [--n 300] [--update 3] [--latency-ms 50]
[--skip-faulted] [--timeout 900]``

The first N Reuters dev articles, then the next ``--update`` ones, go through the live
pipeline: real Kafka and Weaviate (``kgrag services up``; reused, never stopped), ``kgrag
worker`` with its community job as a subprocess, and the scripted OpenAI-compatible server in
its own process answering every chat call after a fixed latency. GraphRAG's figures for the
same articles on this kind of machine (graphrag 3.3.0, default settings, a fake LLM at 50 ms):
300 articles in 774.7 s with 1,070 chat calls; ``graphrag update`` with 3 more in 235 s with
27 calls.

``publish_to_visible_s`` runs from the start of publishing to the first snapshot version that
holds every published document and an LLM-written report for every community (offline
stand-ins written for a refused report do not count); versions are polled every 0.1 s.
Chat calls are counted at the scripted server, by kind, every request that reached it
(refused ones included); tokens are the server's usage figures of the answered ones.

A separate ``faulted`` run indexes the same N articles in a fresh namespace while 5% of report
and summary calls are answered 400 (as a content filter does) and 5% with malformed output:
``completed`` when it becomes visible as above, ``failed_items`` from the community job's
status file, ``job_restarts`` the job processes and pools that had to be replaced.

Settings (recorded under ``settings``): GraphRAG's defaults where they matter (max_gleanings
1, claims off), LLM concurrency 8, ``debounce_s`` 1.0, chunking as shipped, the offline
embedder, a fresh LLM response cache per run. Skips cleanly (exit 0) without the data file.
Writes bench/results/llm_mode.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.live import (
    LLMServer,
    fresh_namespace,
    log_path,
    peak_rss_mb,
    start_llm_server,
    start_worker,
    stop,
    wait_ready,
)
from bench.results_io import RESULTS, REUTERS_DEV, machine, now_zulu, target, write_result
from core.job_status import read_status
from core.lag import reflects_everything
from core.publish import publish
from core.settings import Settings, load_settings
from core.tables.errors import SnapshotStoreError
from core.tables.legacy_snapshots import SnapshotStore
from core.tokenizer import ensure_offline_bpe
from kgrag.testing.scripted_text import content_text, n_tokens

DATA = REUTERS_DEV
RESULT = RESULTS / "llm_mode.json"
GRAPHRAG = {
    "index_300_s": 774.7,
    "index_300_calls": 1070,
    "update_3_s": 235.0,
    "update_3_calls": 27,
}
FAULTS = {
    "bad_request": 0.05,
    "malformed": 0.05,
    "kinds": ["community_report", "community_reports", "summarize_descriptions"],
}


def articles(start: int, count: int) -> list[dict[str, Any]]:
    out = []
    with DATA.open() as fh:
        for i, line in enumerate(fh):
            if i >= start + count:
                break
            if i >= start:
                out.append(json.loads(line))
    return out


def write_jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def visible(store: SnapshotStore, wanted: set[str]) -> dict[str, Any] | None:
    """The newest version's figures when it holds every wanted document and an LLM report
    for every community; else None. (Whether its documents are fully extracted is checked
    by the caller: a document is listed as soon as it is chunked.)"""
    if store.latest_version() is None:
        return None
    try:
        snap = store.load()
    except SnapshotStoreError:
        return None
    docs = {d.id for d in snap.documents}
    reports = {r.id: r.mode for r in snap.community_reports}
    llm_reports = sum(1 for c in snap.communities if reports.get(c.id) == "llm")
    if not wanted <= docs or llm_reports < len(snap.communities):
        return None
    return {
        "version": snap.meta.version,
        "documents": len(docs),
        "entities": len(snap.entities),
        "relationships": len(snap.relationships),
        "communities": len(snap.communities),
        "reports_llm": llm_reports,
        "offsets": snap.meta.consumed_offsets,
    }


async def wait_visible(
    settings: Settings, store: SnapshotStore, wanted: set[str], started: float, timeout: float
) -> tuple[float, dict[str, Any]]:
    """Seconds until a complete version, its figures, and the items the LLM refused on the
    way (each run's refusals, read from the job's status as the runs finish)."""
    seen: int | None = None
    seen_at = 0.0
    candidate: dict[str, Any] | None = None
    refused: dict[int, int] = {}  # run's version -> items refused in that run
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        note_refusals(settings, refused)
        version = store.latest_version()
        if version != seen:
            seen, seen_at = version, time.monotonic()
            candidate = visible(store, wanted)
        # the version counts from when it appeared, once it is known to hold everything
        if candidate is not None and await reflects_everything(settings, candidate["offsets"]):
            while time.monotonic() < deadline and max(refused, default=0) < candidate["version"]:
                await asyncio.sleep(0.1)  # the status is written just after the snapshot
                note_refusals(settings, refused)
            figures = {k: v for k, v in candidate.items() if k != "offsets"}
            return seen_at - started, {**figures, "refused_items": sum(refused.values())}
        await asyncio.sleep(0.2)
    raise TimeoutError(f"no complete version after {timeout:.0f}s (last seen {seen})")


def note_refusals(settings: Settings, refused: dict[int, int]) -> None:
    status = read_status(settings)
    if status is not None and status.last_run is not None:
        refused[status.last_run.version] = status.last_run.failed_items


def call_figures(server: LLMServer) -> dict[str, Any]:
    calls = server.calls()
    chat = [c for c in calls if c["path"] == "/v1/chat/completions"]
    answered = [c for c in chat if c["status"] == 200]
    return {
        "chat_calls": dict(sorted(Counter(c["kind"] for c in chat).items())),
        "chat_calls_total": len(chat),
        "refused": len(chat) - len(answered),
        "tokens_in": sum(n_tokens(content_text(m)) for c in answered for m in c["messages"]),
        "tokens_out": sum(n_tokens(c["response"]) for c in answered),
        "embedding_calls": len(calls) - len(chat),
    }


async def events_since(settings: Settings, version: int) -> dict[str, int]:
    """Lineage events of the versions after ``version``, by kind (report updates by reason)."""
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        settings.topic("community_events"),
        bootstrap_servers=settings.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    counts: Counter[str] = Counter()
    try:
        while batch := await consumer.getmany(timeout_ms=2000, max_records=5000):
            for msgs in batch.values():
                for m in msgs:
                    event = json.loads(m.value)
                    if event.get("snapshot_version", 0) > version:
                        reason = event.get("reason")
                        counts[f"{event['kind']}:{reason}" if reason else event["kind"]] += 1
    finally:
        await consumer.stop()
    return dict(sorted(counts.items()))


async def run_pipeline(
    base: Settings, args: argparse.Namespace, workdir: Path, *, faulted: bool
) -> dict[str, Any]:
    prefix = f"bench-llm{'-faulted' if faulted else ''}"
    async with fresh_namespace(base, prefix, workdir) as settings:
        server = start_llm_server(args.latency_ms, log_path(settings, "llm"))
        if faulted:
            server.set_faults({**FAULTS, "seed": 7})
        extra = {
            **server.env(8, settings.data_dir),
            "KGRAG_EXTRACTION__MAX_GLEANINGS": "1",
            "KGRAG_EXTRACTION__CLAIMS_ENABLED": "false",
            "KGRAG_COMMUNITY__DEBOUNCE_S": "1.0",
        }
        worker = start_worker(settings, extra)
        try:
            return await measure(settings, server, worker, args, workdir, faulted=faulted)
        finally:
            stop(worker, server.proc)


async def measure(
    settings: Settings,
    server: LLMServer,
    worker: subprocess.Popen[bytes],
    args: argparse.Namespace,
    workdir: Path,
    *,
    faulted: bool,
) -> dict[str, Any]:
    store = SnapshotStore(settings.snapshots_dir)
    out: dict[str, Any] = {}
    await wait_ready(settings, worker, timeout=180)
    first = articles(0, args.n)
    server.clear_calls()
    started = time.monotonic()
    await publish(settings, write_jsonl(workdir / f"{settings.namespace}-first.jsonl", first))
    wanted = {d["id"] for d in first}
    try:
        took, figures = await wait_visible(settings, store, wanted, started, args.timeout)
        out["index"] = {
            "publish_to_visible_s": round(took, 2),
            **figures,
            **call_figures(server),
        }
    except TimeoutError as e:
        out["index"] = {"timeout": str(e), **call_figures(server)}
        return out
    if not faulted and args.update:
        await asyncio.sleep(args.settle)  # let the last run's trailing work finish
        server.clear_calls()
        more = articles(args.n, args.update)
        started = time.monotonic()
        await publish(settings, write_jsonl(workdir / f"{settings.namespace}-update.jsonl", more))
        wanted |= {d["id"] for d in more}
        took, figures = await wait_visible(settings, store, wanted, started, args.timeout)
        figures["events"] = await events_since(settings, out["index"]["version"])
        out["update"] = {
            "publish_to_visible_s": round(took, 2),
            **figures,
            **call_figures(server),
        }
    status = read_status(settings)
    out["job"] = None if status is None else status.to_json()
    out["memory"] = {"worker": peak_rss_mb(worker.pid)}
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    ensure_offline_bpe()
    base = load_settings()
    workdir = Path(tempfile.mkdtemp(prefix="bench-llm-"))
    started_at = now_zulu()
    env = machine("platform", "cpus", "python", "load_at_start")
    clean = {} if args.skip_clean else await run_pipeline(base, args, workdir, faulted=False)
    result: dict[str, Any] = {
        "benchmark": "llm_mode",
        "date": started_at,
        "machine": env,
        "settings": {
            "articles": args.n,
            "update_articles": args.update,
            "latency_ms": args.latency_ms,
            "llm_concurrency": 8,
            "max_gleanings": 1,
            "claims_enabled": False,
            "debounce_s": 1.0,
            "community": base.community.model_dump(),
            "chunking": {"size": base.chunking.size, "overlap": base.chunking.overlap},
            "embeddings": "offline hashing embedder",
        },
        "graphrag": GRAPHRAG,
        f"index_{args.n}": clean.get("index"),
        f"update_{args.update}": clean.get("update"),
        "job": clean.get("job"),
        "memory": clean.get("memory"),
    }
    if not args.skip_faulted:
        faulted = await run_pipeline(base, args, workdir, faulted=True)
        job = faulted.get("job") or {}
        index = faulted.get("index", {})
        result["faulted"] = {
            "faults": FAULTS,
            "completed": "publish_to_visible_s" in index,
            "publish_to_visible_s": index.get("publish_to_visible_s"),
            "failed_items": index.get("refused_items"),
            "failed_items_outstanding": job.get("failed_items_total"),
            "job_restarts": job.get("restarts"),
            "chat_calls_total": index.get("chat_calls_total"),
            "refused": index.get("refused"),
            "index": index,
            "job": job,
        }
    result["targets"] = targets(result, args)
    return result


def targets(result: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    index = result.get(f"index_{args.n}") or {}
    update = result.get(f"update_{args.update}") or {}
    if "publish_to_visible_s" in index:
        out[f"index_{args.n}.publish_to_visible_s"] = target(
            index["publish_to_visible_s"], 38.7, "<="
        )
        out[f"index_{args.n}.chat_calls_total"] = target(index["chat_calls_total"], 1070, "<=")
    if "publish_to_visible_s" in update:
        out[f"update_{args.update}.publish_to_visible_s"] = target(
            update["publish_to_visible_s"], 4.7, "<="
        )
        out[f"update_{args.update}.chat_calls_total"] = target(update["chat_calls_total"], 40, "<=")
    if "faulted" in result:
        f = result["faulted"]
        out["faulted.completed"] = target(bool(f["completed"]), True, "==")
        out["faulted.job_restarts"] = target(int(f["job_restarts"] or 0), 0, "==")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--update", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--settle", type=float, default=3.0, help="quiet seconds before update")
    parser.add_argument("--skip-faulted", action="store_true")
    parser.add_argument("--skip-clean", action="store_true", help="only the faulted run")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} not found")
        return 0
    result = asyncio.run(main_async(args))
    write_result(args.out, result)
    print(json.dumps({k: result[k] for k in result if k not in ("job",)}, indent=2)[:6000])
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
