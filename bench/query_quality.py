"""The query bench's measures against the gold labels: questions and themes.

Questions are built from the Reuters labels, "What happened involving <person> in <topic>?"
(and the same for organisations), ``PER_KIND`` of each kind, seeded; ``themes`` measures, for
the "main themes" question, the share of the 10 most frequent gold topics whose articles each
answer cites. Used by ``bench/query.py``; the label names and ``first_documents`` also by
``bench/retrieval.py``, which owns the retrieval-quality figures.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from query.index import QueryIndex
from query.offline_answers import offline_global

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


def print_themes(r: dict[str, Any]) -> None:
    print(f"main themes: top-10 topics {r['top10_topics']}")
    for key in [k for k in r if k.startswith(("global", "basic"))]:
        v = r[key]
        print(
            f"  {key:16} share {v['share']:.2f}  docs {v['documents_reached']:5}  "
            f"covered {v['top10_topics_covered']}"
        )
