"""Query bench on the Reuters dev set: latency, global-search cost, retrieval quality, themes.

Usage: ``.venv/bin/python bench/query.py [path.jsonl] [--n N] [--rebuild]``

Builds (or reuses) an offline index of the articles in-process (``bench/query_index.py``:
chunk, extract offline, merge, community job, hashing-embedder vectors in Weaviate under the
``bench-query`` namespace), then measures:

* **latency** of local-context building (``query.context.build_local_context``, pure), of
  the one filtered Weaviate search giving the candidate text units' distances to the question
  (``query.context.text_unit_distances``, which orders the Sources) and of a whole offline
  local query (embedding + Weaviate entity and text-unit searches + context + the extractive
  answer), p50/p95 over the gold questions below (target: context p95 <= 100 ms);
* **global search cost** per community level (0, 1, 2), plain map-reduce and with dynamic
  community selection (``DynamicConfig(max_level=level)``), against the scripted
  OpenAI-compatible server through the real ``openai`` client: calls counted from the
  server's log, tokens from the results;
* **retrieval quality**: questions built from the gold labels, "What happened involving
  <person> in <topic>?" (and the same for organisations), scored by precision@10 of distinct
  source documents carrying both labels: the Sources of local search's context
  (``query.context.local_context``, as local search builds it) against basic
  vector search over text units with the same embedder (target: local >= basic + 10 points);
* **the paper's claim, offline**: for "What are the main themes of these articles?", the
  share of the index's 10 most frequent gold topics whose articles the answer cites (cited
  reports -> communities -> text units -> documents -> topics), global against basic;
* **DRIFT** beside local and global search at level 2 (``bench/query_drift.py``), with the
  scripted server at 50 ms a call: topic coverage, documents reached, calls, tokens and p95
  for the main-themes question and 20 gold-label questions, and the issue's two targets.

The gold questions and the last two measures are in ``bench/query_quality.py``.

Needs Weaviate (``.venv/bin/kgrag services up``). Skips cleanly (exit 0) when the data file
is absent. Writes bench/results/query.json.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.query_drift import compare as drift_compare
from bench.query_index import prepare
from bench.query_quality import (
    LEVELS,
    THEMES,
    GoldQuestion,
    gold_questions,
    print_retrieval,
    print_themes,
    retrieval,
    themes,
)
from bench.results_io import RESULTS, REUTERS_DEV, machine_line, now_iso, read_jsonl, write_result
from core.clients import build_embedder
from core.llm import OpenAILLM
from core.settings import Settings
from core.settings.llm import LLMSettings
from core.vector_store import WeaviateStore
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
RESULT = RESULTS / "query.json"
STORYLINE = "What did OPEC decide about crude oil production quotas and prices?"


# ==== helpers ===================================================================================


def percentiles(samples_ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    q = statistics.quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else ordered
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(q[94] if len(ordered) > 1 else ordered[0], 2),
        "max_ms": round(ordered[-1], 2),
    }


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
        "entities": len(index.entities),
        "select_entities": percentiles(select),
        "text_unit_distances": percentiles(distances_ms),
        "context_build": percentiles(build),
        "context_build_phases": {k: percentiles(v) for k, v in phases.items()},
        "offline_local_query": percentiles(whole),
        "offline_basic_query": percentiles(basic),
        "context_tokens_mean": round(statistics.mean(tokens), 1),
        "target_context_p95_ms": 100,
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
        "seconds": round(ms / 1000, 2),
    }


# ==== main ======================================================================================


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA)
    parser.add_argument("--n", type=int, default=0, help="first N articles (default: all)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the index")
    parser.add_argument("--skip-global", action="store_true", help="skip the LLM cost runs")
    parser.add_argument("--skip-drift", action="store_true", help="skip DRIFT beside the others")
    return parser.parse_args()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = Settings().model_copy(update={"namespace": "bench-query"})
    articles = read_jsonl(args.data, args.n or None)
    snapshot, built = await prepare(settings, articles, rebuild=args.rebuild)
    started = time.perf_counter()
    index = QueryIndex.from_snapshot(snapshot)
    index_ms = (time.perf_counter() - started) * 1000
    questions = gold_questions(articles)
    async with WeaviateStore(settings) as store:
        deps = QueryDeps(
            embedder=build_embedder(settings),
            store=store,
            prompts=PromptLibrary(settings.extraction.prompts_dir),
            count_tokens=token_counter(settings.chunking.encoding),
        )
        result: dict[str, Any] = {
            "articles": len(articles),
            "index": {
                **{k: v for k, v in built.items() if k != "ids_hash"},
                "counts": snapshot.meta.counts,
                "reports": len(snapshot.community_reports),
                "query_index_build_ms": round(index_ms, 1),
                "communities_per_level": dict(
                    sorted(Counter(c.level for c in snapshot.communities).items())
                ),
            },
            "questions": dict(Counter(q.kind for q in questions)),
        }
        result["latency"] = await latency(index, deps, questions)
        _print_latency(result["latency"])
        result["retrieval"] = await retrieval(index, deps, articles, questions)
        print_retrieval(result["retrieval"])
        basic = await offline_basic(THEMES, index, deps)
        result["themes"] = themes(index, articles, basic)
        print_themes(result["themes"])
        if not args.skip_global:
            result["global_cost"] = await global_cost(index, deps)
            _print_global(result["global_cost"])
        if not args.skip_drift:
            print("DRIFT beside local and global (level 2), scripted LLM at 50 ms a call:")
            drift = DriftConfig.of(settings.drift)
            result["drift"] = await drift_compare(index, deps, articles, questions, drift)
            result["targets"] = result["drift"].pop("targets")
    result["machine"] = machine_line()
    result["date"] = now_iso()
    if "targets" in result:
        result["targets"] = result.pop("targets")  # the file ends with its targets
    return result


def _print_latency(r: dict[str, Any]) -> None:
    print(f"latency at {r['entities']} entities (ms):")
    for name in (
        "select_entities",
        "text_unit_distances",
        "context_build",
        "offline_local_query",
        "offline_basic_query",
    ):
        p = r[name]
        print(f"  {name:22} p50 {p['p50_ms']:8.2f}  p95 {p['p95_ms']:8.2f}  max {p['max_ms']:8.2f}")
    for name, p in r["context_build_phases"].items():
        print(f"    phase {name:22} p50 {p['p50_ms']:8.2f}  p95 {p['p95_ms']:8.2f}")
    print(f"  context tokens (mean) {r['context_tokens_mean']}")


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
                f"{row['seconds']:.1f} s"
            )


def main() -> int:
    args = _args()
    if not args.data.exists():
        print(f"skipped: {args.data} not found")
        return 0
    result = asyncio.run(run(args))
    write_result(RESULT, result, ensure_ascii=False)
    print(f"written {RESULT}  ({result['machine']}, {result['date']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
