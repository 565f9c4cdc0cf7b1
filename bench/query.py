"""Query bench on the Reuters dev set: latency, global-search cost, themes, DRIFT.

Usage: ``.venv/bin/python bench/query.py [path.jsonl] [--full] [--n N] [--rebuild]
[--skip-global] [--skip-drift] [--out PATH]``

Builds (or reuses) an offline index of the articles in-process (``bench/query_index.py``:
chunk, extract offline, merge, community job, hashing-embedder vectors in Weaviate under the
``bench-query`` namespace, or ``bench-query-quick`` for a quick run, so that neither run's index
replaces the other's), then measures:

* **latency** (``latency_ms``, p50/p95 with min, max and the sample count, one sample per gold
  question) of local-context building (``query.context.build_local_context``, pure), of the one
  filtered Weaviate search giving the candidate text units' distances to the question
  (``query.context.text_unit_distances``, which orders the Sources) and of a whole offline
  local query (embedding + Weaviate entity and text-unit searches + context + the extractive
  answer); target: context build p95 <= 100 ms;
* **global search cost** per community level (0, 1, 2), plain map-reduce and with dynamic
  community selection (``DynamicConfig(max_level=level)``), against the scripted
  OpenAI-compatible server through the real ``openai`` client: calls counted from the
  server's log, tokens from the results, seconds over ``GLOBAL_REPEATS`` repeats;
* **the paper's claim, offline**: for "What are the main themes of these articles?", the
  share of the index's 10 most frequent gold topics whose articles the answer cites (cited
  reports -> communities -> text units -> documents -> topics), global against basic;
* **DRIFT** beside local and global search at level 2 (``bench/query_drift.py``), with the
  scripted server at 50 ms a call: topic coverage, documents reached, calls, tokens and p95
  for the main-themes question and the gold-label questions, and the issue's two targets.

The gold questions and the themes measure are in ``bench/query_quality.py``. Retrieval quality
(nDCG, precision@10 against BM25) is bench/retrieval.py's.

The quick run takes the first 800 articles; ``--full`` all of them (200 gold questions, 101
asked of DRIFT, so every percentile rests on more than 100 samples). Needs Weaviate
(``.venv/bin/kgrag services up``). Skips cleanly (exit 0) when the data file is absent. Writes
its run into ``bench/results/query.json`` (``bench.record``); targets are judged on the full
run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.query_drift import LATENCY_S
from bench.query_drift import compare as drift_compare
from bench.query_index import prepare
from bench.query_quality import (
    LEVELS,
    PER_KIND,
    THEMES,
    GoldQuestion,
    gold_questions,
    print_themes,
    themes,
)
from bench.record import Target, mode_argument, percentiles, record, timing
from bench.results_io import REUTERS_DEV, mode_corpus
from core.clients import build_embedder
from core.llm import OpenAILLM
from core.settings import Settings
from core.settings.llm import LLMSettings
from core.vector_store import WeaviateStore
from graph.versions.model import Snapshot
from kgrag.testing.scripted_llm import ScriptedLLMServer
from prompts import PromptLibrary
from query.context import (
    LocalContextConfig,
    build_local_context,
    select_entities,
    text_unit_distances,
)
from query.deps import QueryDeps, token_counter
from query.drift_search import DriftConfig
from query.dynamic import DynamicConfig
from query.global_search import GlobalSearchConfig, global_search
from query.index import QueryIndex
from query.offline_answers import offline_basic, offline_local
from query.time_window import TimeWindow

DATA = REUTERS_DEV
STORYLINE = "What did OPEC decide about crude oil production quotas and prices?"
QUICK_ARTICLES = 800
NAMESPACE = {"full": "bench-query", "quick": "bench-query-quick"}
DRIFT_PER_KIND = {"full": 50, "quick": 10}  # gold questions of each kind asked of DRIFT
GLOBAL_REPEATS = 3  # each global search timed this many times
INDEX_REPEATS = 3  # the query index built from the snapshot this many times
# the bench code its figures also depend on, besides the product packages
MEASURES = ("bench/query_index.py", "bench/query_quality.py", "bench/query_drift.py")

TARGETS = {
    "context_build_p95_ms": Target("/latency_ms/context_build/p95", "<=", 100),
    "drift_themes_topic_coverage_minus_local": Target(
        "/drift/comparison/themes_coverage_minus_local", ">=", 0.0
    ),
    "drift_llm_calls_per_question_over_global_level2": Target(
        "/drift/comparison/llm_calls_over_global", "<=", 2.0
    ),
}


# ==== helpers ===================================================================================


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = await call()
    return value, (time.perf_counter() - started) * 1000


# ==== 1. latency ===============================================================================


async def latency(
    index: QueryIndex, deps: QueryDeps, questions: Sequence[GoldQuestion]
) -> dict[str, Any]:
    config = LocalContextConfig()
    window = TimeWindow()
    for q in questions[:5]:  # warm-up: connections, tokenizer, caches
        await offline_local(q.text, index, deps, config=config)
    select: list[float] = []
    distances_ms: list[float] = []
    build: list[float] = []
    whole: list[float] = []
    basic: list[float] = []
    tokens: list[int] = []
    phases: dict[str, list[float]] = defaultdict(list)
    for q in questions:
        (keys, _), ms = await timed(
            partial(
                select_entities,
                q.text,
                index=index,
                embedder=deps.embedder,
                store=deps.store,
                config=config,
                window=window,
            )
        )
        select.append(ms)
        [vector] = await deps.embedder.embed([q.text])
        distances, ms = await timed(
            partial(
                text_unit_distances,
                vector,
                keys,
                index=index,
                store=deps.store,
                window=window,
                limit=config.question_ranked_units,
            )
        )
        distances_ms.append(ms)
        started = time.perf_counter()
        ctx = build_local_context(
            index, keys, config=config, count_tokens=deps.count_tokens, unit_distances=distances
        )
        build.append((time.perf_counter() - started) * 1000)
        tokens.append(sum(ctx.tokens.values()))
        _, ms = await timed(partial(offline_local, q.text, index, deps, config=config))
        whole.append(ms)
        _, ms = await timed(partial(offline_basic, q.text, index, deps))
        basic.append(ms)
        for name, ms_phase in context_phases(index, keys, config, deps, distances).items():
            phases[name].append(ms_phase)
    return {
        "context": {
            "entities": len(index.entities),
            "tokens_mean": round(statistics.mean(tokens), 1),
        },
        "latency_ms": {
            "select_entities": percentiles(select),
            "text_unit_distances": percentiles(distances_ms),
            "context_build": percentiles(build),
            "context_build_phases": {k: percentiles(v) for k, v in phases.items()},
            "offline_local_query": percentiles(whole),
            "offline_basic_query": percentiles(basic),
        },
    }


def context_phases(
    index: QueryIndex,
    keys: Sequence[str],
    config: LocalContextConfig,
    deps: QueryDeps,
    distances: dict[str, float],
) -> dict[str, float]:
    """Where context building spends its time: the same steps as ``build_local_context``."""
    from query.context import _Builder

    builder = _Builder(index, config, deps.count_tokens, TimeWindow())
    report_budget, local_budget, source_budget = config.budgets()
    out: dict[str, float] = {}
    t = time.perf_counter()
    builder.reports(keys, report_budget)
    out["reports"], t = (time.perf_counter() - t) * 1000, time.perf_counter()
    local = builder.local_section(keys, local_budget)
    out["entities_relationships"], t = (time.perf_counter() - t) * 1000, time.perf_counter()
    rel_ids = next((tb.ids for tb in local if tb.name == "Relationships"), [])
    builder.sources(keys, rel_ids, source_budget, distances)
    out["sources"] = (time.perf_counter() - t) * 1000
    return out


# ==== 2. global search cost =====================================================================


async def global_cost(index: QueryIndex, deps: QueryDeps) -> dict[str, Any]:
    """Calls and tokens of global search per level, plain and dynamic, for two questions."""
    out: dict[str, Any] = {}
    with ScriptedLLMServer() as server:
        llm = OpenAILLM(
            LLMSettings(base_url=server.base_url, api_key="bench", model="scripted", concurrency=8)
        )
        llm_deps = replace(deps, llm=llm)
        try:
            for label, question in (("themes", THEMES), ("storyline", STORYLINE)):
                rows = []
                for level in LEVELS:
                    for dynamic in (False, True):
                        rows.append(
                            await _one_global(server, llm_deps, index, question, level, dynamic)
                        )
                out[label] = {"question": question, "runs": rows}
        finally:
            await llm.aclose()
    return out


async def _one_global(
    server: ScriptedLLMServer,
    deps: QueryDeps,
    index: QueryIndex,
    question: str,
    level: int,
    dynamic: bool,
) -> dict[str, Any]:
    seconds = []
    for _ in range(GLOBAL_REPEATS):  # the scripted answers are the same each time
        server.clear_calls()
        result, ms = await timed(
            lambda: global_search(
                question,
                index,
                deps,
                config=GlobalSearchConfig(level=level),
                dynamic=DynamicConfig(max_level=level) if dynamic else None,
            )
        )
        seconds.append(ms / 1000)
    by_kind = Counter(c.kind for c in server.calls() if c.path.endswith("/chat/completions"))
    return {
        "level": level,
        "dynamic": dynamic,
        "reports_in_scope": len(index.communities_at_level(level)),
        "reports_mapped": result.extra.get("reports"),
        "server_calls": sum(by_kind.values()),
        "server_calls_by_kind": dict(by_kind),
        "result_llm_calls": result.llm_calls,
        "rating_calls": result.extra.get("rating_calls", 0),
        "map_calls": result.extra.get("map_calls"),
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cited_reports": len(result.citations.get("Reports", [])),
        "seconds": timing(seconds, 2),
    }


# ==== main ======================================================================================


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA)
    mode_argument(parser)
    parser.add_argument(
        "--n", type=int, default=None, help="first N articles (default: 800 quick, all full)"
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the index")
    parser.add_argument("--skip-global", action="store_true", help="skip the LLM cost runs")
    parser.add_argument("--skip-drift", action="store_true", help="skip DRIFT beside the others")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.full and (args.skip_global or args.skip_drift):
        parser.error("a full run measures everything (its targets read DRIFT's figures)")
    return args


def index_figures(snapshot: Snapshot, built: dict[str, Any]) -> dict[str, Any]:
    """The index's sizes, and the query index built from the snapshot (timed, repeated)."""
    build_ms = []
    for _ in range(INDEX_REPEATS):
        started = time.perf_counter()
        QueryIndex.from_snapshot(snapshot)
        build_ms.append((time.perf_counter() - started) * 1000)
    return {
        "vectors": built["vectors"],
        "counts": snapshot.meta.counts,
        "reports": len(snapshot.community_reports),
        "query_index_build_ms": timing(build_ms, 1),
        "communities_per_level": dict(
            sorted(Counter(c.level for c in snapshot.communities).items())
        ),
    }


async def run(
    settings: Settings, articles: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    snapshot, built = await prepare(settings, articles, rebuild=args.rebuild)
    result: dict[str, Any] = {
        "articles": len(articles),
        "index_reused": built.get("reused", False),
        "index": index_figures(snapshot, built),
    }
    index = QueryIndex.from_snapshot(snapshot)
    questions = gold_questions(articles)
    result["questions"] = dict(Counter(q.kind for q in questions))
    async with WeaviateStore(settings) as store:
        deps = QueryDeps(
            embedder=build_embedder(settings),
            store=store,
            prompts=PromptLibrary(settings.extraction.prompts_dir),
            count_tokens=token_counter(settings.chunking.encoding),
        )
        result |= await latency(index, deps, questions)
        _print_latency(result)
        basic = await offline_basic(THEMES, index, deps)
        result["themes"] = themes(index, articles, basic)
        print_themes(result["themes"])
        if not args.skip_global:
            result["global_cost"] = await global_cost(index, deps)
            _print_global(result["global_cost"])
        if not args.skip_drift:
            print("DRIFT beside local and global (level 2), scripted LLM at 50 ms a call:")
            drift = DriftConfig.of(settings.drift)
            per_kind = DRIFT_PER_KIND["full" if args.full else "quick"]
            result["drift"] = await drift_compare(index, deps, articles, questions, drift, per_kind)
    return result


def _print_latency(r: dict[str, Any]) -> None:
    print(f"latency at {r['context']['entities']} entities (ms):")
    ms = r["latency_ms"]
    for name in (
        "select_entities",
        "text_unit_distances",
        "context_build",
        "offline_local_query",
        "offline_basic_query",
    ):
        p = ms[name]
        print(f"  {name:22} p50 {p['p50']:8.2f}  p95 {p['p95']:8.2f}  max {p['max']:8.2f}")
    for name, p in ms["context_build_phases"].items():
        print(f"    phase {name:22} p50 {p['p50']:8.2f}  p95 {p['p95']:8.2f}")
    print(f"  context tokens (mean) {r['context']['tokens_mean']}")


def _print_global(r: dict[str, Any]) -> None:
    print("global search cost (scripted LLM):")
    for label, block in r.items():
        print(f"  {label}: {block['question']}")
        for row in block["runs"]:
            print(
                f"    level {row['level']} {'dynamic' if row['dynamic'] else 'plain  '}  "
                f"calls {row['server_calls']:5} (rating {row['rating_calls']:5}, map "
                f"{row['map_calls']:4})  prompt tok {row['prompt_tokens']:9}  "
                f"completion tok {row['completion_tokens']:7}  cited {row['cited_reports']:3}  "
                f"{row['seconds']['median']:.1f} s"
            )


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    picked = mode_corpus(args, QUICK_ARTICLES, NAMESPACE)
    if picked is None:
        return 0
    mode, n, settings, articles = picked
    result = asyncio.run(run(settings, articles, args))
    run_settings = {
        "data": args.data.name,
        "articles": n or "all",
        "namespace": settings.namespace,
        "index_reused": result.pop("index_reused"),
        "gold_questions_per_kind": PER_KIND,
        "global_repeats": GLOBAL_REPEATS,
        "skipped": [
            k for k, skip in (("global", args.skip_global), ("drift", args.skip_drift)) if skip
        ],
        "drift_questions_per_kind": DRIFT_PER_KIND[mode],
        "drift_latency_per_call_s": LATENCY_S,
        "drift": asdict(DriftConfig.of(settings.drift)),
    }
    record("query", mode, result, TARGETS, run_settings, MEASURES, path=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
