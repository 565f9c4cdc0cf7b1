"""The offline extractor: entities and relationships from one chunk with no model at all.

This is the default when no LLM endpoint is configured, in the spirit of Microsoft's "fast"
NLP graph: proper-noun phrases typed by simple rules (titles, organisation suffixes, a small
gazetteer, event words), relationships from co-occurrence within a sentence, descriptions cut
from the sentences that mention an entity. It is pure and deterministic: the same chunk gives
the same extraction, so redelivery and replays change nothing downstream.

Chunk-level resolution happens here: a surname alone ("Baker said") becomes the full name the
chunk gave earlier or later ("James A. Baker"), provided exactly one person has that surname;
a word whose type its own letters do not show takes the type the chunk gave it elsewhere, else
the type the words around its mentions vote for (``offline.context``), then the wide
gazetteers (a place of ``places.txt``; a person when the name starts with a given name of
``given_names.txt``), and only then the fallback; a demonym of a place of the chunk
("Tarvonian") is a mention of that place; a
capitalised word that only ever starts sentences, or that the chunk also uses in lower case,
is ordinary English and dropped. A dateline's places are mentions of the first sentence.
Besides same-sentence pairs, a sentence naming a single entity (a quoted analyst) is weakly
linked to the entities of the adjacent sentences of its paragraph.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from graph.keys import entity_key
from graph.model import Chunk, ChunkExtraction, EntityMention, RelationshipMention
from offline.context import SPEAKER, context_type, demonym_of
from offline.lexicon import GIVEN_NAMES, PLACES, SOLO_STOP
from offline.phrases import (
    Candidate,
    caps_candidates,
    dateline_candidates,
    sentence_candidates,
)
from offline.text import Sentence, paragraph_kind, paragraphs, sentences, split_dateline

DEFAULT_ENTITY_TYPES: tuple[str, ...] = ("organization", "person", "geo", "event")
MAX_DESCRIPTION_CHARS = 240
MAX_SENTENCES_PER_DESCRIPTION = 2
# In a sentence naming more entities than this (a list of countries), only near neighbours
# in the list are linked, so one enumeration does not become a clique.
MAX_CLIQUE = 8
NEIGHBOURS_IN_LISTS = 2
# Names in adjacent sentences of one paragraph, one of which names a single entity ("...,"
# the analyst said"), are linked at the bottom of the strength scale.
ADJACENT_STRENGTH = 1.0
FALLBACK_TYPE = "organization"  # business news: an unexplained proper noun is usually a company

_LOWER_WORD = re.compile(r"\b[a-z][a-z\-]+\b")
_NAME_WORD = re.compile(r"(?:Ma?c|O'|D')?[A-Z][a-z]+(?:-[A-Z][a-z]+)?")  # "Lundberg", "McCarthy"


@dataclass(frozen=True, slots=True)
class _Segment:
    """A sentence with its candidate phrases and the paragraph it belongs to."""

    sentence: Sentence
    candidates: tuple[Candidate, ...]
    paragraph: int


@dataclass(frozen=True, slots=True)
class _Found:
    """A resolved mention: which entity, where."""

    key: str
    name: str
    type: str
    sentence: int
    position: int


def extract_offline(
    chunk: Chunk, *, entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES
) -> ChunkExtraction:
    """Entities and co-occurrence relationships of one chunk, labelled ``mode="offline"``."""
    allowed = {t.strip().lower() for t in entity_types}
    segments = _segments(chunk.text)
    found = [f for f in _resolve(segments, chunk.text) if f.type in allowed]
    texts = [s.sentence.text for s in segments]
    entities = _entities(found, texts, chunk.id)
    relationships = _relationships(found, segments, chunk.id)
    return ChunkExtraction(
        chunk=chunk, entities=entities, relationships=relationships, mode="offline"
    )


def _segments(text: str) -> list[_Segment]:
    """Sentences of the prose and headline paragraphs; the dateline joins the first one."""
    places, body = split_dateline(text)
    result: list[_Segment] = []
    for index, paragraph in enumerate(paragraphs(body)):
        kind = paragraph_kind(paragraph)
        if kind == "table":
            continue
        finder = caps_candidates if kind == "caps" else sentence_candidates
        result.extend(_Segment(s, tuple(finder(s)), index) for s in sentences(paragraph))
    dateline = tuple(dateline_candidates(places))
    if dateline and result:
        result[0] = replace(result[0], candidates=dateline + result[0].candidates)
    elif dateline:
        result.append(_Segment(Sentence(", ".join(places), ()), dateline, 0))
    return result


def _resolve(segments: list[_Segment], text: str) -> list[_Found]:
    """Give every candidate its final name and type, or drop it.

    Types come, in this order, from the phrase's own words anywhere in the chunk, from the
    words around its mentions (see ``offline.context``), and only then from the
    fallback; ordinary English words are dropped before the context is asked."""
    lower_words = set(_LOWER_WORD.findall(text))
    mid_sentence = {
        entity_key(c.name) for s in segments for c in s.candidates if not c.clause_start
    }
    typed = _typed_keys(segments)
    cued = _cued_keys(segments, typed, mid_sentence, lower_words)
    surnames = _surnames(segments, typed, cued)
    places = _places(segments, typed, cued)
    result: list[_Found] = []
    for index, segment in enumerate(segments):
        for cand in segment.candidates:
            cand = _full_name(cand, surnames)
            cand = _as_place(cand, places)
            key = entity_key(cand.name)
            kind = cand.type or typed.get(key)
            if kind is None and (
                key in cued or not _plain_english(cand, key, mid_sentence, lower_words)
            ):
                kind = cued.get(key) or _unexplained(cand, key)
            if key and kind:
                result.append(_Found(key, cand.name, kind, index, cand.position))
    return result


def _typed_keys(segments: list[_Segment]) -> dict[str, str]:
    """The type each key was given by its own words somewhere in the chunk."""
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for segment in segments:
        for c in segment.candidates:
            if c.type:
                votes[entity_key(c.name)][c.type] += 1
    return {k: v.most_common(1)[0][0] for k, v in votes.items()}


def _cued_keys(
    segments: list[_Segment],
    typed: dict[str, str],
    mid_sentence: set[str],
    lower_words: set[str],
) -> dict[str, str]:
    """The type the contexts of a key's untyped mentions vote for, over the whole chunk."""
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    alone = {entity_key(c.name) for s in segments for c in s.candidates if len(c.words) == 1}
    for segment in segments:
        for c in segment.candidates:
            key = entity_key(c.name)
            if c.type or key in typed:
                continue
            cue = context_type(c, segment.sentence)
            if cue == SPEAKER:
                cue = "person" if entity_key(c.words[-1]) in alone else None
            if cue and not _plain_english(c, key, mid_sentence, lower_words, geo=cue == "geo"):
                votes[key][cue] += 1
    return {k: sorted(v.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] for k, v in votes.items()}


def _plain_english(
    cand: Candidate, key: str, mid_sentence: set[str], lower_words: set[str], *, geo: bool = False
) -> bool:
    """A capitalised word that is only a sentence start (unless it owns a government:
    "Tarvonia's cabinet"), or that the chunk also writes in lower case, or a stop word."""
    if len(cand.words) == 1:
        word = cand.words[0]
        return (
            word in SOLO_STOP
            or word.lower() in lower_words
            or (cand.clause_start and key not in mid_sentence and not geo)
        )
    return cand.clause_start and cand.words[0].lower() in lower_words


def _unexplained(cand: Candidate, key: str) -> str:
    """The type of a name that neither its words nor its context explain: a place of the
    wide gazetteer, a person when it is two to four capitalised words starting with a given
    name ("Marguerite Olvenhaus"), else the fallback."""
    if key in PLACES:
        return "geo"
    words = cand.words
    if (
        2 <= len(words) <= 4
        and words[0] in GIVEN_NAMES
        and all(_NAME_WORD.fullmatch(w) and w not in SOLO_STOP for w in words[1:])
    ):
        return "person"
    return FALLBACK_TYPE


def _surnames(
    segments: list[_Segment], typed: dict[str, str], cued: dict[str, str]
) -> dict[str, set[str]]:
    """Surname key -> the full names (of two words or more) of people that end with it."""
    names: dict[str, set[str]] = defaultdict(set)
    for segment in segments:
        for c in segment.candidates:
            key = entity_key(c.name)
            person = c.type == "person" or (
                c.type is None
                and key not in typed
                and (cued.get(key) or _unexplained(c, key)) == "person"
            )
            if person and len(c.words) > 1:
                names[entity_key(c.words[-1])].add(c.name)
    return names


def _places(segments: list[_Segment], typed: dict[str, str], cued: dict[str, str]) -> list[str]:
    """One-word places of the chunk, whose demonyms ("Tarvonian") are not names of their own."""
    found: dict[str, str] = {}
    for segment in segments:
        for c in segment.candidates:
            key = entity_key(c.name)
            if len(c.words) == 1 and "geo" in (c.type, typed.get(key), cued.get(key)):
                found.setdefault(key, c.name)
    return sorted(found.values())


def _full_name(cand: Candidate, surnames: dict[str, set[str]]) -> Candidate:
    """A surname alone becomes the full name when exactly one person of the chunk has it."""
    if len(cand.words) != 1 or cand.type not in (None, "person"):
        return cand
    full = surnames.get(entity_key(cand.words[0]), set())
    if len(full) != 1:
        return cand
    return replace(cand, words=tuple(next(iter(full)).split()), type="person")


def _as_place(cand: Candidate, places: list[str]) -> Candidate:
    """A demonym ("Tarvonian wheat") is a mention of its place (Tarvonia), not a name."""
    if len(cand.words) != 1 or cand.type is not None:
        return cand
    place = demonym_of(cand.words[0], places)
    return cand if place is None else replace(cand, words=(place,), type="geo")


def _entities(found: list[_Found], texts: list[str], chunk_id: str) -> tuple[EntityMention, ...]:
    """One mention per entity key, in order of first appearance."""
    by_key: dict[str, list[_Found]] = defaultdict(list)
    for f in found:
        by_key[f.key].append(f)
    result: list[EntityMention] = []
    for items in by_key.values():
        kind = Counter(f.type for f in items).most_common(1)[0][0]
        name = max((f.name for f in items), key=len) if kind == "person" else items[0].name
        indices = list(dict.fromkeys(f.sentence for f in items))
        description = _describe([texts[i] for i in indices[:MAX_SENTENCES_PER_DESCRIPTION]])
        result.append(
            EntityMention(name=name, type=kind, description=description, chunk_id=chunk_id)
        )
    return tuple(result)


def _relationships(
    found: list[_Found], segments: list[_Segment], chunk_id: str
) -> tuple[RelationshipMention, ...]:
    """Pairs of entities named in the same sentence, closer and more often stronger; then
    weak links across adjacent sentences of a paragraph for pairs no sentence joins."""
    names = {f.key: f.name for f in found}
    texts = [s.sentence.text for s in segments]
    pair_distance: dict[tuple[str, str], list[int]] = {}
    pair_sentence: dict[tuple[str, str], int] = {}
    by_sentence: dict[int, list[_Found]] = defaultdict(list)
    for f in found:
        by_sentence[f.sentence].append(f)
    for index in sorted(by_sentence):
        for (a, b), distance in _sentence_pairs(by_sentence[index]).items():
            pair = (a, b) if (b, a) not in pair_distance else (b, a)
            pair_distance.setdefault(pair, []).append(distance)
            pair_sentence.setdefault(pair, index)
    result = [
        RelationshipMention(
            source=names[a],
            target=names[b],
            description=_describe([texts[pair_sentence[(a, b)]]]),
            strength=_strength(min(distances), len(distances)),
            chunk_id=chunk_id,
        )
        for (a, b), distances in pair_distance.items()
    ]
    joined = {frozenset(p) for p in pair_distance}
    for (a, b), index in _adjacent_pairs(by_sentence, segments, joined).items():
        result.append(
            RelationshipMention(
                source=names[a],
                target=names[b],
                description=_describe(texts[index : index + 2]),
                strength=ADJACENT_STRENGTH,
                chunk_id=chunk_id,
            )
        )
    return tuple(result)


def _adjacent_pairs(
    by_sentence: dict[int, list[_Found]], segments: list[_Segment], joined: set[frozenset[str]]
) -> dict[tuple[str, str], int]:
    """Pairs across sentences i and i+1 of one paragraph when one of them names a single
    entity (a quote, an aside), with the index of the first sentence of the first such pair."""
    pairs: dict[tuple[str, str], int] = {}
    for index in sorted(by_sentence):
        following = by_sentence.get(index + 1)
        if not following or segments[index].paragraph != segments[index + 1].paragraph:
            continue
        left = list(dict.fromkeys(f.key for f in by_sentence[index]))[:MAX_CLIQUE]
        right = list(dict.fromkeys(f.key for f in following))[:MAX_CLIQUE]
        if len(left) > 1 and len(right) > 1:
            continue
        for a in left:
            for b in right:
                if a != b and frozenset((a, b)) not in joined:
                    joined.add(frozenset((a, b)))
                    pairs[(a, b)] = index
    return pairs


def _sentence_pairs(items: list[_Found]) -> dict[tuple[str, str], int]:
    """Closest token distance of each pair of distinct keys of one sentence."""
    first: dict[str, list[int]] = {}
    for f in items:
        first.setdefault(f.key, []).append(f.position)
    keys = list(first)
    window = len(keys) if len(keys) <= MAX_CLIQUE else NEIGHBOURS_IN_LISTS
    pairs: dict[tuple[str, str], int] = {}
    for i, a in enumerate(keys):
        for b in keys[i + 1 : i + 1 + window]:
            pairs[(a, b)] = min(abs(x - y) for x in first[a] for y in first[b])
    return pairs


def _strength(distance: int, sentences_together: int) -> float:
    """1..10: adjacent names score about 9, names 40 tokens apart about 1; each further
    sentence that names both adds one."""
    closeness = 10.0 / (1.0 + max(distance - 1, 0) / 6.0)
    return float(min(10, max(1, round(closeness) + sentences_together - 1)))


def _describe(texts: Sequence[str]) -> str:
    """The mentioning sentences, joined and cut at a word boundary to a bounded length."""
    text = " ".join(" ".join(texts).replace("<", "").replace(">", "").split())
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    cut = text[: MAX_DESCRIPTION_CHARS - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > MAX_DESCRIPTION_CHARS // 2 else cut).rstrip(" ,;:") + "\u2026"
