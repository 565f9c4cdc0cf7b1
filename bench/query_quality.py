"""The query bench's measures against the gold labels: questions, retrieval quality, themes.

Questions are built from the Reuters labels, "What happened involving <person> in <topic>?"
(and the same for organisations), ``PER_KIND`` of each kind, seeded. ``retrieval`` scores the
Sources of local search's context against basic vector search by precision@10 of distinct
documents carrying both labels; ``themes`` measures, for the "main themes" question, the share
of the 10 most frequent gold topics whose articles each answer cites. Used by
``bench/query.py``.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from query.basic_search import BasicSearchConfig, basic_context
from query.context import LocalContextConfig, local_context
from query.deps import QueryDeps
from query.index import QueryIndex
from query.offline_answers import offline_global
from query.time_window import TimeWindow

THEMES = "What are the main themes of these articles?"
LEVELS = (0, 1, 2)
PER_KIND = 100
TOPIC_WORDS = {
    "acq": "acquisitions",
    "bop": "balance of payments",
    "cpi": "consumer prices",
    "crude": "crude oil",
    "dlr": "dollar",
    "earn": "earnings",
    "gnp": "economic growth",
    "interest": "interest rates",
    "ipi": "industrial production",
    "jobs": "unemployment",
    "l-cattle": "cattle",
    "meal-feed": "animal feed",
    "money-fx": "foreign exchange",
    "money-supply": "money supply",
    "nat-gas": "natural gas",
    "pet-chem": "petrochemicals",
    "reserves": "currency reserves",
    "ship": "shipping",
    "stg": "sterling",
    "trade": "trade",
}
ORG_NAMES = {
    "adb-africa": "African Development Bank",
    "adb-asia": "Asian Development Bank",
    "atpc": "Association of Tin Producing Countries",
    "bis": "Bank for International Settlements",
    "ec": "European Community",
    "eib": "European Investment Bank",
    "euratom": "Euratom",
    "fao": "Food and Agriculture Organization",
    "gatt": "GATT",
    "gcc": "Gulf Cooperation Council",
    "icco": "International Cocoa Organization",
    "ico-coffee": "International Coffee Organization",
    "ida": "International Development Association",
    "iea": "International Energy Agency",
    "imco": "International Maritime Organization",
    "imf": "International Monetary Fund",
    "inro": "International Natural Rubber Organization",
    "isa": "International Sugar Agreement",
    "itc": "International Tin Council",
    "iwc-wheat": "International Wheat Council",
    "iwcc": "International Wrought Copper Council",
    "oapec": "OAPEC",
    "oecd": "OECD",
    "opec": "OPEC",
    "un": "United Nations",
    "unctad": "UNCTAD",
    "worldbank": "World Bank",
}


# ==== gold questions ==========================================================================


@dataclass(frozen=True, slots=True)
class GoldQuestion:
    kind: str  # "person" or "organisation"
    label: str  # the person or organisation label
    topic: str
    text: str


def topic_words(topic: str) -> str:
    return TOPIC_WORDS.get(topic, topic.replace("-", " "))


def person_name(label: str) -> str:
    return " ".join(part.capitalize() for part in label.split("-"))


def gold_questions(articles: Sequence[dict[str, Any]], seed: int = 1987) -> list[GoldQuestion]:
    """Up to ``PER_KIND`` (label, topic) pairs per kind among articles carrying both, seeded."""
    out: list[GoldQuestion] = []
    for kind, field, name in (
        ("person", "people", person_name),
        ("organisation", "orgs", lambda label: ORG_NAMES.get(label, label.upper())),
    ):
        pairs = sorted({(x, t) for a in articles for x in a[field] for t in a["topics"]})
        picked = random.Random(seed).sample(pairs, min(PER_KIND, len(pairs)))
        for label, topic in sorted(picked):
            text = f"What happened involving {name(label)} in {topic_words(topic)}?"
            out.append(GoldQuestion(kind, label, topic, text))
    return out


def relevant_documents(articles: Sequence[dict[str, Any]], q: GoldQuestion) -> set[str]:
    field = "people" if q.kind == "person" else "orgs"
    return {str(a["id"]) for a in articles if q.label in a[field] and q.topic in a["topics"]}


def gold_entity(q: GoldQuestion, key: str) -> bool:
    """Whether an entity key names the question's person (by surname) or organisation."""
    if q.kind == "person":
        return q.label.split("-")[-1] in key.split()
    return key in {q.label, ORG_NAMES.get(q.label, "").lower()}


def first_documents(index: QueryIndex, source_ids: Sequence[int], k: int = 10) -> list[str]:
    """The first ``k`` distinct documents behind a ranked list of Sources ids."""
    docs: list[str] = []
    for i in source_ids:
        doc = index.text_unit_by_hrid[i].document_id
        if doc not in docs:
            docs.append(doc)
        if len(docs) == k:
            break
    return docs


# ==== retrieval quality =========================================================================


async def retrieval(
    index: QueryIndex,
    deps: QueryDeps,
    articles: Sequence[dict[str, Any]],
    questions: Sequence[GoldQuestion],
) -> dict[str, Any]:
    config = LocalContextConfig()
    basic_config = BasicSearchConfig(k=30)  # enough text units for 10 distinct documents
    per_kind: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    examples: list[dict[str, Any]] = []
    for q in questions:
        wanted = relevant_documents(articles, q)
        ctx = await local_context(
            q.text,
            index=index,
            embedder=deps.embedder,
            store=deps.store,
            config=config,
            count_tokens=deps.count_tokens,
        )
        keys = ctx.entity_keys
        local_docs = first_documents(index, ctx.ids["Sources"])
        basic = await basic_context(q.text, index, deps, config=basic_config, window=TimeWindow())
        basic_docs = first_documents(index, basic.table.ids)
        scores = per_kind[q.kind]
        for method, docs in (("local", local_docs), ("basic", basic_docs)):
            hits = sum(d in wanted for d in docs)
            scores[f"{method}_p10"].append(hits / 10)
            scores[f"{method}_p10_norm"].append(hits / min(10, len(wanted)))
            scores[f"{method}_docs"].append(len(docs))
        scores["relevant_docs"].append(len(wanted))
        scores["gold_entity_selected"].append(float(any(gold_entity(q, k) for k in keys)))
        if sum(e["kind"] == q.kind for e in examples) < 5:
            examples.append(
                {
                    "kind": q.kind,
                    "question": q.text,
                    "relevant": len(wanted),
                    "entities": [index.entities[k].title for k in keys[:5]],
                    "local_hits": sum(d in wanted for d in local_docs),
                    "basic_hits": sum(d in wanted for d in basic_docs),
                }
            )
    summary = {kind: _mean_scores(s) for kind, s in per_kind.items()}
    summary["all"] = _mean_scores(
        {k: [x for s in per_kind.values() for x in s[k]] for k in next(iter(per_kind.values()))}
    )
    return {"by_kind": summary, "examples": examples, "target_points": 10}


def _mean_scores(scores: dict[str, list[float]]) -> dict[str, float]:
    means = {k: round(statistics.mean(v), 4) for k, v in scores.items()}
    means["questions"] = len(scores["local_p10"])
    # the best precision@10 possible: most questions have fewer than 10 relevant documents
    means["ceiling_p10"] = round(
        statistics.mean(min(10, r) / 10 for r in scores["relevant_docs"]), 4
    )
    means["local_minus_basic_points"] = round(100 * (means["local_p10"] - means["basic_p10"]), 1)
    return means


# ==== main themes =============================================================================


def themes(index: QueryIndex, articles: Sequence[dict[str, Any]], basic: Any) -> dict[str, Any]:
    """Share of the 10 most frequent gold topics whose articles each answer cites."""
    topics_of = {str(a["id"]): set(a["topics"]) for a in articles}
    top10 = [t for t, _ in Counter(t for a in articles for t in a["topics"]).most_common(10)]
    out: dict[str, Any] = {"question": THEMES, "top10_topics": top10}
    for level in LEVELS:
        result = offline_global(THEMES, index, level=level)
        docs = {
            index.text_units[u].document_id
            for n in result.citations.get("Reports", [])
            for u in index.communities[n].text_unit_ids
            if u in index.text_units
        }
        out[f"global_level_{level}"] = _coverage(docs, topics_of, top10, result)
    docs = {index.text_unit_by_hrid[i].document_id for i in basic.citations.get("Sources", [])}
    out["basic"] = _coverage(docs, topics_of, top10, basic)
    return out


def _coverage(
    docs: set[str], topics_of: dict[str, set[str]], top10: list[str], result: Any
) -> dict[str, Any]:
    covered = sorted({t for d in docs for t in topics_of.get(d, ()) if t in top10})
    return {
        "cited": {k: len(v) for k, v in result.citations.items() if v},
        "documents_reached": len(docs),
        "top10_topics_covered": covered,
        "share": round(len(covered) / len(top10), 2),
    }


def print_retrieval(r: dict[str, Any]) -> None:
    print("retrieval precision@10 (distinct source documents carrying both labels):")
    for kind, s in r["by_kind"].items():
        print(
            f"  {kind:13} n={s['questions']:3}  local {100 * s['local_p10']:5.1f}  "
            f"basic {100 * s['basic_p10']:5.1f}  (local-basic "
            f"{s['local_minus_basic_points']:+.1f} pts; normalised local "
            f"{100 * s['local_p10_norm']:5.1f} basic {100 * s['basic_p10_norm']:5.1f}; "
            f"named entity selected {100 * s['gold_entity_selected']:.0f}%; "
            f"ceiling {100 * s['ceiling_p10']:.1f})"
        )


def print_themes(r: dict[str, Any]) -> None:
    print(f"main themes: top-10 topics {r['top10_topics']}")
    for key in [k for k in r if k.startswith(("global", "basic"))]:
        v = r[key]
        print(
            f"  {key:16} share {v['share']:.2f}  docs {v['documents_reached']:5}  "
            f"covered {v['top10_topics_covered']}"
        )
