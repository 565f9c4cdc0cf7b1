"""DRIFT beside local and global search (level 2), through the real ``openai`` client against
the scripted OpenAI-compatible server at a fixed latency per call. Used by ``bench/query.py``.

For the "main themes" question and ``per_kind`` gold-label questions about people and as many
about organisations (seeded; 50 each in a full run, so the latency percentiles rest on 101
questions), per method: topic coverage (the share of the 10 most frequent gold topics whose
articles the answer's cited documents cover, as ``bench.query_quality.themes`` measures it:
cited reports -> communities -> text units -> documents, cited sources -> documents),
documents reached, LLM calls counted from the server's log, prompt and completion tokens, and
latency (``ms``: p50/p95 over the questions).

``comparison`` holds what the query bench's two DRIFT targets read: DRIFT's topic coverage on
the main-themes question minus local search's (at least 0), and its LLM calls per question
over global search's at level 2 (at most 2).
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bench.query_quality import THEMES, GoldQuestion
from bench.record import percentiles
from core.llm import OpenAILLM
from core.settings.llm import LLMSettings
from kgrag.testing.scripted_llm import FaultConfig, ScriptedLLMServer
from query.deps import QueryDeps
from query.drift_search import DriftConfig
from query.engine import Method, QueryOptions, run_query
from query.index import QueryIndex
from query.results import QueryResult

LATENCY_S = 0.05
METHODS: tuple[Method, ...] = ("drift", "local", "global")


def pick_questions(
    questions: Sequence[GoldQuestion], per_kind: int, seed: int = 21
) -> list[GoldQuestion]:
    out: list[GoldQuestion] = []
    for kind in ("person", "organisation"):
        pool = [q for q in questions if q.kind == kind]
        out += random.Random(seed).sample(pool, min(per_kind, len(pool)))
    return out


def cited_documents(index: QueryIndex, result: QueryResult) -> set[str]:
    docs = {
        index.text_units[u].document_id
        for n in result.citations.get("Reports", [])
        if n in index.communities
        for u in index.communities[n].text_unit_ids
        if u in index.text_units
    }
    docs |= {
        index.text_unit_by_hrid[i].document_id
        for i in result.citations.get("Sources", [])
        if i in index.text_unit_by_hrid
    }
    return docs


def coverage(docs: set[str], topics_of: dict[str, set[str]], top10: Sequence[str]) -> float:
    covered = {t for d in docs for t in topics_of.get(d, ()) if t in top10}
    return round(len(covered) / len(top10), 3) if top10 else 0.0


async def compare(
    index: QueryIndex,
    deps: QueryDeps,
    articles: Sequence[dict[str, Any]],
    questions: Sequence[GoldQuestion],
    drift: DriftConfig,
    per_kind: int,
) -> dict[str, Any]:
    topics_of = {str(a["id"]): set(a["topics"]) for a in articles}
    top10 = [t for t, _ in Counter(t for a in articles for t in a["topics"]).most_common(10)]
    asked = [("themes", THEMES), *((q.kind, q.text) for q in pick_questions(questions, per_kind))]
    out: dict[str, Any] = {"questions": len(asked)}
    with ScriptedLLMServer(faults=FaultConfig(latency_s=LATENCY_S)) as server:
        llm = OpenAILLM(
            LLMSettings(base_url=server.base_url, api_key="bench", model="scripted", concurrency=8)
        )
        llm_deps = replace(deps, llm=llm)
        try:
            for method in METHODS:
                opts = QueryOptions(level=2, drift=drift)
                rows = []
                for label, question in asked:
                    server.clear_calls()
                    started = time.perf_counter()
                    result = await run_query(method, question, index, llm_deps, opts)
                    ms = (time.perf_counter() - started) * 1000
                    calls = [c for c in server.calls() if c.path.endswith("/chat/completions")]
                    docs = cited_documents(index, result)
                    rows.append(
                        {
                            "kind": label,
                            "question": question,
                            "llm_calls": len(calls),
                            "tokens_in": result.prompt_tokens,
                            "tokens_out": result.completion_tokens,
                            "documents_reached": len(docs),
                            "topic_coverage": coverage(docs, topics_of, top10),
                            "ms": round(ms, 1),
                        }
                    )
                out[method] = summarise(rows)
                print_method(method, out[method])
        finally:
            await llm.aclose()
    out["comparison"] = comparison(out)
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    themes = rows[0]
    gold = rows[1:]

    def mean(key: str, of: list[dict[str, Any]]) -> float:
        return round(statistics.mean(r[key] for r in of), 1) if of else 0.0

    return {
        "themes": {k: v for k, v in themes.items() if k not in ("kind", "question")},
        "gold": {
            "questions": len(gold),
            "documents_reached_mean": mean("documents_reached", gold),
            "topic_coverage_mean": round(statistics.mean(r["topic_coverage"] for r in gold), 3)
            if gold
            else 0.0,
        },
        "llm_calls_per_question": mean("llm_calls", rows),
        "tokens_in_per_question": mean("tokens_in", rows),
        "tokens_out_per_question": mean("tokens_out", rows),
        "ms": percentiles([r["ms"] for r in rows], (50, 95), 1),
    }


def comparison(out: dict[str, Any]) -> dict[str, float]:
    """DRIFT against the others: its main-themes topic coverage minus local search's, and
    its LLM calls per question over global search's (level 2)."""
    return {
        "themes_coverage_minus_local": round(
            out["drift"]["themes"]["topic_coverage"] - out["local"]["themes"]["topic_coverage"], 3
        ),
        "llm_calls_over_global": round(
            out["drift"]["llm_calls_per_question"] / out["global"]["llm_calls_per_question"], 4
        ),
    }


def print_method(method: str, r: dict[str, Any]) -> None:
    t = r["themes"]
    print(
        f"  {method:6} themes: coverage {t['topic_coverage']:.1f}, {t['documents_reached']} "
        f"documents, {t['llm_calls']} calls | gold: {r['gold']['documents_reached_mean']} "
        f"documents, coverage {r['gold']['topic_coverage_mean']} | per question: "
        f"{r['llm_calls_per_question']} calls, {r['tokens_in_per_question']:.0f} in / "
        f"{r['tokens_out_per_question']:.0f} out tokens, p95 {r['ms']['p95']:.0f} ms"
    )
