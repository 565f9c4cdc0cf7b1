"""Entities the question names: a lexical step before the vector search of local search.

Why: an entity's vector is built from its name and its descriptions, so its name is a small
part of it; with the offline hashing embedder a question naming "Balladur" lands nearer to
short, unrelated entities (hash collisions) than to "Edouard Balladur", whose vector is
spread over three description sentences. Measured on 8,107 Reuters articles (bench/query.py):
the entity a gold question named was among the ten selected for 26 of 100 person questions
(58 of 98 organisation questions), and local search's precision@10 fell below basic search's.
A name the user typed is the strongest evidence there is, so it is looked up directly.

Matching: the words of every entity name are indexed once per snapshot with their inverse
document frequency over names (``NameIndex``). An entity matches when the question holds at
least ``min_coverage`` of its name's IDF weight ("Balladur" covers "Edouard Balladur"; the
common "James" alone does not cover "James Exon"). Matches are ranked by the IDF weight they
cover (specific names first), then by how often the entity is mentioned. Stop words and the
words of the question's frame ("what happened involving …") never match.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from graph.keys import entity_key

STOP_WORDS = frozenset(
    (
        "a an and are as at be by did do does for from had has have how in into is it its of "
        "on or over the their to was were what when where which who whom why with about after "
        "before between during happened happen involving involve involved tell me us say said "
        "news latest recent recently any all this that these those there"
    ).split()
)


@dataclass(frozen=True, slots=True)
class NameIndex:
    """Entity keys by name word, and each word's inverse document frequency over names."""

    by_word: dict[str, tuple[str, ...]]
    idf: dict[str, float]

    @classmethod
    def build(cls, keys: Iterable[str]) -> NameIndex:
        by_word: dict[str, list[str]] = defaultdict(list)
        n = 0
        for key in keys:
            n += 1
            for word in set(key.split()):
                by_word[word].append(key)
        idf = {w: math.log((n + 1) / len(ks)) for w, ks in by_word.items()}
        return cls({w: tuple(ks) for w, ks in by_word.items()}, idf)

    def weight(self, words: Iterable[str]) -> float:
        return sum(self.idf.get(w, 0.0) for w in set(words))


def question_words(question: str) -> set[str]:
    return {w for w in entity_key(question).split() if w not in STOP_WORDS and len(w) > 1}


def named_entities(
    question: str,
    names: NameIndex,
    frequency: Callable[[str], int],
    *,
    limit: int,
    min_coverage: float = 0.5,
) -> list[str]:
    """Keys of the entities the question names, best first, at most ``limit``.

    First one entity per part of the question ("Herrington", then "natural gas"): each pick
    must cover a question word no earlier pick covered; then the other matches."""
    words = question_words(question)
    candidates = {k for w in words for k in names.by_word.get(w, ())}
    scored = []
    for key in candidates:
        name_words = set(key.split())
        total = names.weight(name_words)
        covered = names.weight(name_words & words)
        if total > 0 and covered / total >= min_coverage:
            scored.append((-covered, -covered / total, -frequency(key), key))
    ranked = [key for *_, key in sorted(scored)]
    spread: list[str] = []
    seen: set[str] = set()
    for key in ranked:
        found = set(key.split()) & words
        if not found <= seen:
            spread.append(key)
            seen |= found
    rest = [k for k in ranked if k not in spread]
    return (spread + rest)[:limit]
