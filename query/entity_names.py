"""Entities the question names: a lexical step before the vector search of local search.

Why: an entity's vector is built from its name and its descriptions, so its name is a small
part of it; with the offline hashing embedder a question naming "Balladur" lands nearer to
short, unrelated entities (hash collisions) than to "Edouard Balladur", whose vector is
spread over three description sentences, so vector search alone often misses the entity a
question names (bench/query.py measures how often). A name the user typed is the strongest
evidence there is, so it is looked up directly.

Phrases: the question is cut into phrases, maximal runs of words between punctuation and
stop words (the question's frame, "what happened involving …", is stop words). When the
question is cased (it has both capitalised and lower-case words outside the stop words), case
also cuts: a *proper* phrase is a run of capitalised words, joined across lower-case
connectors ("Bank for International Settlements", "Gerhard de Kock"), and a *common* phrase
is a run of lower-case words ("crude oil"). A sentence's capitalised first word counts as
capitalised (missing a name there costs more than a common word taken for one). A question
whose words outside the stop words are all capitalised or all lower-case carries no such
information, and all its phrases count as proper.

Matching: the words of every entity name are indexed once per snapshot with their inverse
document frequency over names (``NameIndex``). Words are counted within one phrase only:
"Oil World" is not named by "World Bank in crude oil", whose "world" and "oil" belong to
different phrases, nor "European Economic Community" by "European Community in economic
growth". A phrase names an entity when it holds

* the whole name ("World Bank" in "World Bank", "Fahd" in "King Fahd");
* a person's surname, the last words of a person's name ("Aqazadeh" for "Gholamreza
  Aqazadeh"), however common the surname;
* at least ``min_coverage`` of the name's IDF weight ("World Bank" covers "Toronto World
  Bank"; the common "James" alone does not cover "James Exon");
* or is the name's acronym: the initials of a phrase of several words ("European Community"
  -> "EC"), or the names whose initials are a word written in capitals ("IMF" ->
  "International Monetary Fund", the most mentioned), taken only when mentioned in a text
  unit together with an entity the phrase names (articles introduce the acronym next to the
  name: "Leigh Pemberton" does not name "LP").

A common phrase of a cased question names only whole names, as a *concept* ("natural gas");
holding part of a name there ("crude" of "Majestic Crude") is no evidence.

Order: entities named by proper phrases, then concepts. Within each group, one entity per
phrase first ("Volcker and Baker": both before their namesakes), then the rest; by the
weighted Jaccard overlap of phrase and name (the IDF weight both hold over the weight of
either; a person's given names do not count against a surname match, an acronym counts as the
whole phrase), so the longer, more specific match comes first ("Fahd" before "King Instrument"
for "King Fahd"); ties go to the whole name, then to the greater share of the name covered,
then to the entity mentioned more often.
"""

from __future__ import annotations

import bisect
import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

STOP_WORDS = frozenset(
    (
        "a an and are as at be by did do does for from had has have how in into is it its of "
        "on or over the their to was were what when where which who whom why with about after "
        "before between during happened happen involving involve involved tell me us say said "
        "news latest recent recently any all this that these those there"
    ).split()
)
# lower-case words that join capitalised words into one name ("Bank for International …")
CONNECTORS = frozenset("of for and de du la le van von der den da di del y &".split())

PROPER, CONCEPT = 0, 1  # match groups, in order

_POSSESSIVE = re.compile(r"['\u2019]s\b")
_TOKEN = re.compile(r"[\w&]+|[^\w\s]")
_BREAKS = frozenset(',;:?!()[]{}"/')  # punctuation that ends a phrase ("." ends a sentence)


@dataclass(frozen=True, slots=True)
class NameIndex:
    """Entity keys by name word and by acronym, and each word's inverse document frequency
    over names (computed when asked: every new name moves all of them)."""

    by_word: dict[str, tuple[str, ...]]
    names: int  # the entity keys indexed
    by_initials: dict[str, tuple[str, ...]]  # "imf" -> ("international monetary fund", …)

    @classmethod
    def build(cls, keys: Iterable[str]) -> NameIndex:
        by_word: dict[str, list[str]] = defaultdict(list)
        by_initials: dict[str, list[str]] = defaultdict(list)
        n = 0
        for key in sorted(keys):  # the order of a name's entities does not hang on insertion
            n += 1
            words = key.split()
            for word in set(words):
                by_word[word].append(key)
            content = content_words(words)
            if len(content) >= 2:
                by_initials["".join(w[0] for w in content)].append(key)
        return cls(
            {w: tuple(ks) for w, ks in by_word.items()},
            n,
            {a: tuple(ks) for a, ks in by_initials.items()},
        )

    def updated(
        self, keys: Collection[str], added: Iterable[str], removed: Iterable[str]
    ) -> NameIndex:
        """The index of ``keys`` (all entity keys now) from this one, given the keys
        ``added`` and ``removed`` since: equal to ``build(keys)``, at the cost of the change
        (and of the word weights, which every new name moves)."""
        by_word = dict(self.by_word)
        by_initials = dict(self.by_initials)
        for key in removed:
            for word, mapping in _entries(key, by_word, by_initials):
                left = tuple(k for k in mapping.get(word, ()) if k != key)
                if left:
                    mapping[word] = left
                else:
                    mapping.pop(word, None)
        for key in added:
            for word, mapping in _entries(key, by_word, by_initials):
                held = list(mapping.get(word, ()))
                if key not in held:
                    bisect.insort(held, key)
                    mapping[word] = tuple(held)
        return NameIndex(by_word, len(keys), by_initials)

    def weight(self, words: Iterable[str]) -> float:
        return sum(self.idf(w) for w in set(words))

    def idf(self, word: str) -> float:
        holders = self.by_word.get(word)
        return math.log((self.names + 1) / len(holders)) if holders else 0.0


def _entries(
    key: str, by_word: dict[str, tuple[str, ...]], by_initials: dict[str, tuple[str, ...]]
) -> list[tuple[str, dict[str, tuple[str, ...]]]]:
    """Where ``build`` files one key: under each of its words, and its initials."""
    words = key.split()
    out = [(word, by_word) for word in set(words)]
    content = content_words(words)
    if len(content) >= 2:
        out.append(("".join(w[0] for w in content), by_initials))
    return out


def content_words(words: Iterable[str]) -> list[str]:
    """The words that can name something: not stop words, not single characters."""
    return [w for w in words if w not in STOP_WORDS and len(w) > 1]


@dataclass(frozen=True, slots=True)
class Phrase:
    words: tuple[str, ...]  # normalised, connectors included
    proper: bool  # capitalised (or the question carries no case)
    acronym: bool = False  # one word written in capitals ("IMF")

    @property
    def content(self) -> frozenset[str]:
        return frozenset(content_words(self.words))


def phrases(question: str) -> list[Phrase]:
    """The question's phrases (see the module docstring)."""
    text = _POSSESSIVE.sub("", unicodedata.normalize("NFKC", question))
    shouted = not any(c.islower() for c in text)  # capitals mark no acronym then
    tokens: list[tuple[str, bool]] = []  # (raw word, capitalised); ("", False) is a break
    for raw in _TOKEN.findall(text):
        if raw[0].isalnum() or raw[0] in "_&":
            tokens.append((raw, raw[0].isupper()))
        elif raw in _BREAKS or raw == ".":
            tokens.append(("", False))
    caps = {cap for raw, cap in tokens if content_words([raw.casefold()])}
    cased = caps == {True, False}
    out: list[Phrase] = []
    run: list[tuple[str, bool]] = []  # (word, written in capitals)
    run_proper = False

    def close() -> None:
        while run and run[-1][0] in CONNECTORS:  # a connector only joins two name words
            run.pop()
        if run:
            acronym = len(run) == 1 and run[0][1]
            out.append(Phrase(tuple(w for w, _ in run), not cased or run_proper, acronym))
        run.clear()

    for i, (raw, cap) in enumerate(tokens):
        word = raw.casefold()
        if not raw:
            close()
            continue
        if cased and run and run_proper and not cap and word in CONNECTORS:
            following = tokens[i + 1] if i + 1 < len(tokens) else ("", False)
            if following[1]:  # "Bank for International …": the connector joins
                run.append((word, False))
                continue
        if word in STOP_WORDS or (not cap and word in CONNECTORS):
            close()
            continue
        if run and cased and cap != run_proper:
            close()
        if not run:
            run_proper = cap
        upper = not shouted and len(raw) > 1 and raw.isalpha() and raw.isupper()
        run.append((word, upper))
    close()
    return out


def keyword_query(question: str) -> str:
    """The words of the question a keyword (BM25) search should match: the content words of
    its phrases, each once, in order, possessives stripped; the question's frame ("what did …
    say or do about") and its stop words left out, since Weaviate's English stop words are
    Lucene's short list and leave "what", "did", "say" to match every article that quotes
    anyone. "" when nothing is left."""
    words = (w for p in phrases(question) for w in content_words(p.words))
    return " ".join(dict.fromkeys(words))


@dataclass(frozen=True, slots=True)
class _Match:
    group: int  # PROPER or CONCEPT
    phrase: int  # index of the phrase that names the entity
    overlap: float  # IDF-weighted overlap of the phrase and the name (see _overlap)
    whole: bool  # the phrase holds the whole name
    share: float  # share of the name's IDF weight the phrase holds
    frequency: int
    key: str

    def order(self) -> tuple[int, float, bool, float, int, str]:
        return (self.group, -self.overlap, not self.whole, -self.share, -self.frequency, self.key)


def _surname(name: Sequence[str], matched: set[str]) -> bool:
    """Whether the matched words are the last words of the name (and not all of them)."""
    return 0 < len(matched) < len(name) and set(name[-len(matched) :]) == matched


def _phrase_matches(
    i: int,
    phrase: Phrase,
    names: NameIndex,
    frequency: Callable[[str], int],
    is_person: Callable[[str], bool],
    min_coverage: float,
) -> list[_Match]:
    words = set(phrase.words)
    group = PROPER if phrase.proper else CONCEPT
    out: list[_Match] = []
    for key in {k for w in phrase.content for k in names.by_word.get(w, ())}:
        name = key.split()
        matched = set(name) & words
        total = names.weight(name)
        covered = names.weight(matched)
        whole = matched == set(name)
        share = covered / total if total > 0 else float(whole)
        surname = phrase.proper and is_person(key) and _surname(name, matched)
        if not (whole or surname or (phrase.proper and share >= min_coverage)):
            continue  # too little of the name, or part of a name in lower-case words
        # a person is named by the surname alone: the given names do not count against it
        named_by = matched if surname else set(name)
        overlap = _overlap(names, matched, words | named_by)
        out.append(_Match(group, i, overlap, whole, share, frequency(key), key))
    return out


def _overlap(names: NameIndex, shared: set[str], union: set[str]) -> float:
    """Weighted Jaccard: the IDF weight phrase and name share over the weight of either."""
    if shared == union:
        return 1.0  # exactly, whatever order the floating-point sums take
    total = names.weight(union)
    return names.weight(shared) / total if total > 0 else 0.0


def _aliases(
    i: int,
    phrase: Phrase,
    found: Sequence[_Match],
    names: NameIndex,
    frequency: Callable[[str], int],
    units: Callable[[str], Iterable[str]],
) -> list[_Match]:
    """The phrase's acronym ("European Community" -> "ec"), or for a word written in
    capitals the names with those initials ("IMF" -> "international monetary fund"), when
    mentioned in a text unit together with an entity the phrase names."""
    content = content_words(phrase.words)
    if len(content) >= 2:
        acronym = "".join(w[0] for w in content)
        candidates: Sequence[str] = [acronym] if acronym in names.by_word.get(acronym, ()) else []
    elif phrase.acronym and content:
        candidates = names.by_initials.get(content[0], ())
    else:
        return []
    if not candidates or not found:
        return []
    near = {u for m in found for u in units(m.key)}
    accepted = [k for k in candidates if not near.isdisjoint(units(k))]
    if not accepted:
        return []
    best = max(accepted, key=lambda k: (frequency(k), k))
    return [_Match(PROPER, i, 1.0, False, 1.0, frequency(best), best)]


def named_entities(
    question: str,
    names: NameIndex,
    frequency: Callable[[str], int],
    *,
    limit: int,
    min_coverage: float = 0.5,
    is_person: Callable[[str], bool] | None = None,
    units: Callable[[str], Iterable[str]] | None = None,
) -> list[str]:
    """Keys of the entities the question names, best first, at most ``limit`` (the rule is
    the module docstring's). ``is_person`` tells person entities (for surnames); ``units``
    gives an entity's text units (for acronyms); without them neither is used."""
    person = is_person or (lambda _key: False)
    best: dict[str, _Match] = {}
    for i, phrase in enumerate(phrases(question)):
        found = _phrase_matches(i, phrase, names, frequency, person, min_coverage)
        if units is not None and phrase.proper:
            found += _aliases(i, phrase, found, names, frequency, units)
        for m in found:
            if m.key not in best or m.order() < best[m.key].order():
                best[m.key] = m
    ranked = sorted(best.values(), key=_Match.order)
    firsts: set[str] = set()
    seen: set[tuple[int, int]] = set()
    for m in ranked:
        if (m.group, m.phrase) not in seen:
            seen.add((m.group, m.phrase))
            firsts.add(m.key)
    ordered = sorted(ranked, key=lambda m: (m.group, m.key not in firsts, m.order()))
    return [m.key for m in ordered][:limit]
