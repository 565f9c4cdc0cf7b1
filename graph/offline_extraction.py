"""The offline extractor: entities and relationships from one chunk with no model at all.

This is the default when no LLM endpoint is configured, in the spirit of Microsoft's "fast"
NLP graph: proper-noun phrases typed by simple rules (titles, organisation suffixes, a small
gazetteer, event words), relationships from co-occurrence within a sentence, descriptions cut
from the sentences that mention an entity. It is pure and deterministic: the same chunk gives
the same extraction, so redelivery and replays change nothing downstream.

Chunk-level resolution happens here: a surname alone ("Baker said") becomes the full name the
chunk gave earlier or later ("James A. Baker"), provided exactly one person has that surname;
a word whose type its own letters do not show takes the type the chunk gave it elsewhere; a
capitalised word that only ever starts sentences, or that the chunk also uses in lower case,
is ordinary English and dropped.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from graph.keys import entity_key
from graph.model import Chunk, ChunkExtraction, EntityMention, RelationshipMention
from graph.offline_lexicon import PERSON_ROLE_WORDS, SOLO_STOP
from graph.offline_phrases import Candidate, caps_candidates, sentence_candidates
from graph.offline_text import Sentence, paragraph_kind, paragraphs, sentences

DEFAULT_ENTITY_TYPES: tuple[str, ...] = ("organization", "person", "geo", "event")
MAX_DESCRIPTION_CHARS = 240
MAX_SENTENCES_PER_DESCRIPTION = 2
# In a sentence naming more entities than this (a list of countries), only near neighbours
# in the list are linked, so one enumeration does not become a clique.
MAX_CLIQUE = 8
NEIGHBOURS_IN_LISTS = 2
FALLBACK_TYPE = "organization"  # business news: an unexplained proper noun is usually a company

_NOT_PERSONAL = frozenset({"lead", "co-lead"})
_LOWER_WORD = re.compile(r"\b[a-z][a-z\-]+\b")


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
    found_sentences = _sentences_with_candidates(chunk.text)
    found = [f for f in _resolve(found_sentences, chunk.text) if f.type in allowed]
    texts = [s.text for s, _ in found_sentences]
    entities = _entities(found, texts, chunk.id)
    relationships = _relationships(found, texts, chunk.id)
    return ChunkExtraction(
        chunk=chunk, entities=entities, relationships=relationships, mode="offline"
    )


def _sentences_with_candidates(text: str) -> list[tuple[Sentence, list[Candidate]]]:
    result: list[tuple[Sentence, list[Candidate]]] = []
    for paragraph in paragraphs(text):
        kind = paragraph_kind(paragraph)
        if kind == "table":
            continue
        finder = caps_candidates if kind == "caps" else sentence_candidates
        result.extend((s, finder(s)) for s in sentences(paragraph))
    return result


def _resolve(found_sentences: list[tuple[Sentence, list[Candidate]]], text: str) -> list[_Found]:
    """Give every candidate its final name and type, or drop it."""
    lower_words = set(_LOWER_WORD.findall(text))
    typed = _typed_keys(found_sentences)
    surnames = _surnames(found_sentences)
    mid_sentence = {
        entity_key(c.name) for _, cands in found_sentences for c in cands if not c.clause_start
    }
    result: list[_Found] = []
    for index, (sentence, cands) in enumerate(found_sentences):
        for cand in cands:
            cand = _full_name(cand, surnames)
            key = entity_key(cand.name)
            kind = cand.type or _infer_type(cand, key, sentence, typed, mid_sentence, lower_words)
            if key and kind:
                result.append(_Found(key, cand.name, kind, index, cand.position))
    return result


def _typed_keys(found_sentences: list[tuple[Sentence, list[Candidate]]]) -> dict[str, str]:
    """The type each key was given by its own words somewhere in the chunk."""
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    for _, cands in found_sentences:
        for c in cands:
            if c.type:
                votes[entity_key(c.name)][c.type] += 1
    return {k: v.most_common(1)[0][0] for k, v in votes.items()}


def _surnames(found_sentences: list[tuple[Sentence, list[Candidate]]]) -> dict[str, set[str]]:
    """Surname key -> the full names (of two words or more) that end with it."""
    names: dict[str, set[str]] = defaultdict(set)
    for _, cands in found_sentences:
        for c in cands:
            if c.type == "person" and len(c.words) > 1:
                names[entity_key(c.words[-1])].add(c.name)
    return names


def _full_name(cand: Candidate, surnames: dict[str, set[str]]) -> Candidate:
    """A surname alone becomes the full name when exactly one person of the chunk has it."""
    if len(cand.words) != 1 or cand.type not in (None, "person"):
        return cand
    full = surnames.get(entity_key(cand.words[0]), set())
    if len(full) != 1:
        return cand
    return replace(cand, words=tuple(next(iter(full)).split()), type="person")


def _infer_type(
    cand: Candidate,
    key: str,
    sentence: Sentence,
    typed: dict[str, str],
    mid_sentence: set[str],
    lower_words: set[str],
) -> str | None:
    """Type of a phrase its own words did not type; None drops it as ordinary English."""
    if key in typed:
        return typed[key]
    if len(cand.words) == 1:
        word = cand.words[0]
        if word in SOLO_STOP or word.lower() in lower_words:
            return None
        if cand.clause_start and key not in mid_sentence:
            return None
    elif cand.clause_start and cand.words[0].lower() in lower_words:
        return None
    return "person" if _near_role_word(cand, sentence) else FALLBACK_TYPE


def _near_role_word(cand: Candidate, sentence: Sentence) -> bool:
    """A role word around the name: "chairman John Smith", "Smith, chairman of", "Smith, who"."""
    tokens = sentence.tokens
    before = tokens[cand.position - 1].text if cand.position > 0 else ""
    after = cand.position + len(cand.words)
    following = [t.text for t in tokens[after : after + 3]]
    if before == "said" and 2 <= len(cand.words) <= 3:
        return True  # quote attribution: '..., said Egon Padovan'
    if before.lower() in PERSON_ROLE_WORDS:
        # "lead manager Schweizerische Bankverein" is a bank arranging a bond
        return cand.position < 2 or tokens[cand.position - 2].text.lower() not in _NOT_PERSONAL
    if following[:1] != [","]:
        return False
    role = [w for w in following[1:] if w not in {"the", "a", "an"}][:1]
    return bool(role) and (role[0].lower() in PERSON_ROLE_WORDS or role[0] == "who")


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
    found: list[_Found], texts: list[str], chunk_id: str
) -> tuple[RelationshipMention, ...]:
    """Pairs of entities named in the same sentence; closer and more often is stronger."""
    names = {f.key: f.name for f in found}
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
    result = []
    for (a, b), distances in pair_distance.items():
        result.append(
            RelationshipMention(
                source=names[a],
                target=names[b],
                description=_describe([texts[pair_sentence[(a, b)]]]),
                strength=_strength(min(distances), len(distances)),
                chunk_id=chunk_id,
            )
        )
    return tuple(result)


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
