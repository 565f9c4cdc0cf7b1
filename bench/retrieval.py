"""Retrieval bench: local and basic search against plain BM25 over whole articles.

Usage: ``.venv/bin/python bench/retrieval.py [path.jsonl] [--full] [--n N] [--rebuild]
[--out PATH]``

On the Reuters dev set, every (person or organisation) x topic pair of the gold labels with at
least one article tagged with both becomes the question "What did <name> say or do about
<topic>?"; an article is relevant when it carries both tags. Three methods answer each
question, in one run over one offline index (``bench/query_index.py``, namespace
``bench-retrieval``, or ``bench-retrieval-quick`` for a quick run, so that neither run's index
replaces the other's):

* **bm25**: ``bm25s`` over whole articles (title and body, English stop words, no stemming):
  the lexical floor a user could have with no graph at all;
* **local**: the Sources of local search's context (``query.context.local_context``, as
  ``kgrag query local`` builds it, through Weaviate);
* **basic**: basic search's context (``query.basic_search.basic_context``: Weaviate's
  hybrid search over text units);
* **bm25_keywords**, for comparison only: the floor given the keyword query basic search
  sends Weaviate instead of the whole question.

Each is scored by nDCG@10 (binary relevance) and precision@10 over the first 10 distinct
documents it returns; the differences to BM25 get a paired bootstrap 95% interval over the
questions (2,000 resamples, seeded). Latency is p50 and p95 per method on this machine, one
sample per question (``latency_ms``). ``types`` is
the offline extractor's typing: entities per type, a confusion table of the entities that the
gold people, organisation and place labels name against the type they were given, and a
seeded sample of 100 entities for review.

The quick run takes the first 800 articles (a few dozen questions); ``--full`` all of them
(about 250 questions, so the percentiles rest on more than 100 samples). Needs Weaviate
(``.venv/bin/kgrag services up``). Skips cleanly (exit 0) when the data file is absent. Writes
its run into ``bench/results/retrieval.json`` (``bench.record``); targets are judged on the
full run.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.query_index import prepare
from bench.query_quality import ORG_NAMES, first_documents, person_name, topic_words
from bench.record import Target, mode_argument, percentiles, record
from bench.results_io import REUTERS_DEV, mode_corpus
from core.clients import build_embedder
from core.settings import Settings
from core.vector_store import WeaviateStore
from graph.keys import entity_key
from prompts import PromptLibrary
from query.basic_search import BasicSearchConfig, basic_context
from query.context import LocalContextConfig, local_context
from query.deps import QueryDeps, token_counter
from query.entity_names import keyword_query
from query.index import QueryIndex
from query.time_window import TimeWindow

K = 10
RESAMPLES = 2_000
SEED = 1987
# bm25_keywords: the floor given the same keyword query basic search sends Weaviate
# (``query.entity_names.keyword_query``), to show how much of basic search's lead is that query
METHODS = ("bm25", "local", "basic", "bm25_keywords")
# gold place codes whose name is not the code with spaces
PLACE_NAMES = {
    "usa": "United States",
    "uk": "Britain",
    "ussr": "Soviet Union",
    "uae": "United Arab Emirates",
}
GOLD_TYPE = {"people": "person", "orgs": "organization", "places": "geo"}
QUICK_ARTICLES = 800
NAMESPACE = {"full": "bench-retrieval", "quick": "bench-retrieval-quick"}

TARGETS = {
    "local_minus_bm25_mean": Target("/local_minus_bm25/mean", ">=", 0.05),
    "local_minus_bm25_ci95_low": Target("/local_minus_bm25/ci95_low", ">=", 0.0),
    "basic_minus_bm25_mean": Target("/basic_minus_bm25/mean", ">=", 0.0),
    "local_p95_ms": Target("/latency_ms/local/p95", "<=", 150),
}


@dataclass(frozen=True, slots=True)
class Question:
    kind: str  # "people" or "orgs"
    label: str
    topic: str
    text: str
    relevant: frozenset[str]


def questions(articles: Sequence[dict[str, Any]]) -> list[Question]:
    """Every (person or organisation) x topic pair with at least one article tagged with
    both, in label order."""
    out: list[Question] = []
    for kind, name in (
        ("people", person_name),
        ("orgs", lambda label: ORG_NAMES.get(label, label.upper())),
    ):
        pairs = sorted({(x, t) for a in articles for x in a[kind] for t in a["topics"]})
        for label, topic in pairs:
            relevant = frozenset(
                str(a["id"]) for a in articles if label in a[kind] and topic in a["topics"]
            )
            text = f"What did {name(label)} say or do about {topic_words(topic)}?"
            out.append(Question(kind, label, topic, text, relevant))
    return out


# ==== scores ====================================================================================


def ndcg(docs: Sequence[str], relevant: frozenset[str], k: int = K) -> float:
    """Binary-relevance nDCG@k of a ranked list of distinct documents."""
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(docs[:k]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal if ideal else 0.0


def paired_bootstrap(a: Sequence[float], b: Sequence[float]) -> dict[str, float]:
    """Mean of a - b over questions with a 95% percentile interval from resampling the
    questions (the same resample for both methods)."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    rng = random.Random(SEED)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(RESAMPLES))
    return {
        "mean": round(statistics.mean(diffs), 4),
        "ci95_low": round(means[int(0.025 * RESAMPLES)], 4),
        "ci95_high": round(means[int(0.975 * RESAMPLES) - 1], 4),
    }


# ==== the lexical floor =========================================================================


class ArticleBM25:
    """BM25 over whole articles (title and body), English stop words, no stemming."""

    def __init__(self, articles: Sequence[dict[str, Any]]) -> None:
        self.ids = [str(a["id"]) for a in articles]
        corpus = [f"{a['title']}\n{a['text']}" for a in articles]
        self.model = bm25s.BM25()
        self.model.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False))

    def search(self, question: str, k: int = K) -> list[str]:
        tokens = bm25s.tokenize([question], stopwords="en", show_progress=False)
        docs, scores = self.model.retrieve(tokens, k=k, show_progress=False)
        return [self.ids[i] for i, s in zip(docs[0], scores[0], strict=True) if s > 0]


# ==== the methods ===============================================================================


async def run_questions(
    index: QueryIndex, deps: QueryDeps, bm25: ArticleBM25, qs: Sequence[Question]
) -> dict[str, Any]:
    local_config = LocalContextConfig()
    basic_config = BasicSearchConfig(k=3 * K)  # enough text units for 10 distinct documents
    window = TimeWindow()

    async def local(q: Question) -> list[str]:
        ctx = await local_context(
            q.text,
            index=index,
            embedder=deps.embedder,
            store=deps.store,
            config=local_config,
            count_tokens=deps.count_tokens,
        )
        return first_documents(index, ctx.ids["Sources"], K)

    async def basic(q: Question) -> list[str]:
        ctx = await basic_context(q.text, index, deps, config=basic_config, window=window)
        return first_documents(index, ctx.table.ids, K)

    async def lexical(q: Question) -> list[str]:
        return bm25.search(q.text)

    async def lexical_keywords(q: Question) -> list[str]:
        return bm25.search(keyword_query(q.text) or q.text)

    calls: dict[str, Callable[[Question], Any]] = {
        "bm25": lexical,
        "local": local,
        "basic": basic,
        "bm25_keywords": lexical_keywords,
    }
    for q in qs[:5]:  # warm-up: connections, tokenizer, caches
        for call in calls.values():
            await call(q)
    ndcgs: dict[str, list[float]] = {m: [] for m in METHODS}
    p10s: dict[str, list[float]] = {m: [] for m in METHODS}
    ms: dict[str, list[float]] = {m: [] for m in METHODS}
    examples: list[dict[str, Any]] = []
    for i, q in enumerate(qs):
        row: dict[str, Any] = {"question": q.text, "relevant": len(q.relevant)}
        for method, call in calls.items():
            started = time.perf_counter()
            docs = await call(q)
            ms[method].append((time.perf_counter() - started) * 1000)
            ndcgs[method].append(ndcg(docs, q.relevant))
            p10s[method].append(sum(d in q.relevant for d in docs[:K]) / K)
            row[method] = round(ndcgs[method][-1], 3)
        if i % 25 == 0:
            examples.append(row)
    return {
        "questions": len(qs),
        "questions_by_kind": dict(Counter(q.kind for q in qs)),
        **{f"{m}_ndcg10": round(statistics.mean(ndcgs[m]), 4) for m in METHODS},
        "local_minus_bm25": paired_bootstrap(ndcgs["local"], ndcgs["bm25"]),
        "basic_minus_bm25": paired_bootstrap(ndcgs["basic"], ndcgs["bm25"]),
        "by_kind": {
            kind: {
                m: round(
                    statistics.mean(x for x, q in zip(ndcgs[m], qs, strict=True) if q.kind == kind),
                    4,
                )
                for m in METHODS
            }
            for kind in ("people", "orgs")
        },
        "p10": {m: round(statistics.mean(p10s[m]), 4) for m in METHODS},
        "ceiling_p10": round(statistics.mean(min(K, len(q.relevant)) / K for q in qs), 4),
        "latency_ms": {m: percentiles(ms[m], (50, 95)) for m in METHODS},
        "examples": examples,
    }


# ==== entity types ==============================================================================


def gold_entity(index: QueryIndex, kind: str, label: str) -> str | None:
    """The entity a gold label names: the most mentioned of the keys it may be spelled as
    (a person: any name ending with the label's words, "lawson" or "nigel lawson"; an
    organisation: its acronym or full name; a place: its name)."""
    if kind == "people":
        tail = entity_key(label.replace("-", " "))
        keys = [
            k
            for k in index.names.by_word.get(tail.split()[-1], ())
            if k == tail or k.endswith(f" {tail}")
        ]
    elif kind == "orgs":
        keys = [entity_key(ORG_NAMES.get(label, label)), label]
    else:
        keys = [entity_key(PLACE_NAMES.get(label, label.replace("-", " ")))]
    found = [k for k in keys if k in index.entities]
    return max(found, key=lambda k: (index.entities[k].frequency, k), default=None)


def types(index: QueryIndex, articles: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Entities per type, the confusion table of the gold-labelled entities (gold class x
    given type, each label counted once, by the entity it names, ``gold_entity``) and
    a seeded sample of 100 entities."""
    per_type = Counter(e.type for e in index.entities.values())
    confusion: dict[str, Counter[str]] = {}
    missing: dict[str, int] = {}
    for kind, gold in GOLD_TYPE.items():
        labels = sorted({x for a in articles for x in a[kind]})
        table: Counter[str] = Counter()
        for label in labels:
            key = gold_entity(index, kind, label)
            if key is None:
                missing[gold] = missing.get(gold, 0) + 1
            else:
                table[index.entities[key].type] += 1
        confusion[gold] = table
    given = sorted({t for row in confusion.values() for t in row})
    matched = sum(sum(row.values()) for row in confusion.values())
    right = sum(confusion[g][g] for g in confusion)
    sample_keys = random.Random(SEED).sample(sorted(index.entities), min(100, len(index.entities)))
    return {
        "entities": len(index.entities),
        "entities_per_type": dict(per_type.most_common()),
        "confusion": {g: {t: row[t] for t in given} for g, row in confusion.items()},
        "gold_labels_not_found": missing,
        "gold_typed_right": round(right / matched, 4) if matched else 0.0,
        "sample": [
            {"name": index.entities[k].title, "type": index.entities[k].type} for k in sample_keys
        ],
    }


# ==== main ======================================================================================


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=REUTERS_DEV)
    mode_argument(parser)
    parser.add_argument(
        "--n", type=int, default=None, help="first N articles (default: 800 quick, all full)"
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild the index")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


async def run(settings: Settings, articles: list[dict[str, Any]], rebuild: bool) -> dict[str, Any]:
    snapshot, built = await prepare(settings, articles, rebuild=rebuild)
    index = QueryIndex.from_snapshot(snapshot)
    qs = questions(articles)
    bm25 = ArticleBM25(articles)
    async with WeaviateStore(settings) as store:
        deps = QueryDeps(
            embedder=build_embedder(settings),
            store=store,
            prompts=PromptLibrary(settings.extraction.prompts_dir),
            count_tokens=token_counter(settings.chunking.encoding),
        )
        scores = await run_questions(index, deps, bm25, qs)
    return {
        "articles": len(articles),
        "index_reused": built.get("reused", False),
        **scores,
        "types": types(index, articles),
    }


def _print(r: dict[str, Any]) -> None:
    print(f"{r['questions']} questions {r['questions_by_kind']} over {r['articles']} articles")
    for m in METHODS:
        lat = r["latency_ms"][m]
        print(
            f"  {m:6} nDCG@10 {r[f'{m}_ndcg10']:.4f}  P@10 {r['p10'][m]:.4f}  "
            f"p50 {lat['p50']:7.2f} ms  p95 {lat['p95']:7.2f} ms"
        )
    for key in ("local_minus_bm25", "basic_minus_bm25"):
        d = r[key]
        print(f"  {key}: {d['mean']:+.4f} [{d['ci95_low']:+.4f}, {d['ci95_high']:+.4f}]")
    t = r["types"]
    print(f"types: {t['entities_per_type']}; gold typed right {t['gold_typed_right']}")
    for gold, row in t["confusion"].items():
        print(f"  {gold:13} {row}")


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    picked = mode_corpus(args, QUICK_ARTICLES, NAMESPACE)
    if picked is None:
        return 0
    mode, n, settings, articles = picked
    result = asyncio.run(run(settings, articles, args.rebuild))
    _print(result)
    run_settings = {
        "data": args.data.name,
        "articles": n or "all",
        "namespace": settings.namespace,
        "index_reused": result.pop("index_reused"),
        "k": K,
        "resamples": RESAMPLES,
        "seed": SEED,
        "hybrid": {"alpha": settings.hybrid_alpha, "fusion": settings.weaviate.hybrid_fusion},
    }
    record("retrieval", mode, result, TARGETS, run_settings, path=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
