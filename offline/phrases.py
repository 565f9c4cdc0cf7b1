"""Proper-noun phrases of one sentence, with the type their own words suggest.

A run is a maximal sequence of capitalised words, allowing "of" after an institution
("Bank of Japan"), name particles ("Ciriaco De Mita") and "&". Each run is then cut where
its words say so: a title ends a qualifier and starts a person's name ("Federal Reserve
Board Chairman Paul Volcker" is an organisation and a person), a gazetteer name at the front
is a place ("U.S. Trade Representative Clayton Yeutter"), a known first name starts a person.
What the words do not settle stays untyped (``None``) for the chunk-level pass to decide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graph.keys import entity_key
from offline.lexicon import (
    AND_NAMES,
    CORPORATE_SUFFIXES,
    DEMONYM_ENDINGS,
    DEMONYMS,
    EDGE_STOP,
    EVENT_HEADS,
    FIRST_NAMES,
    FUNCTION_WORDS,
    GEO_HEADS,
    GEO_INDEX,
    GEO_MAX_TOKENS,
    NAME_PARTICLES,
    NAME_SUFFIXES,
    OF_HEADS,
    ON_HEADS,
    ORG_HEADS,
    PORTFOLIO,
    SOLO_STOP,
    STARTER_WORDS,
    TITLES,
)
from offline.text import Sentence, Token

_ACRONYM = re.compile(r"[A-Z][A-Z0-9&]{1,6}|(?:[A-Z]\.){2,4}")
_INITIAL = re.compile(r"[A-Z]\.?")
_TICKER = re.compile(r"[A-Z.]{1,6}")
_RATING = re.compile(r"(?:A{1,3}|Aa{1,2}|B{1,3}|Ba{1,2}|P|M)(?:-?\d)?(?:-?(?:minus|plus))?")
_MAX_NAME_TOKENS = 6
_BASED = "-based"
_PLACE_WORD = re.compile(r"[A-Z][a-z]{2,}(?<!ly)")
_SEAS = frozenset({"Gulf", "Sea", "Ocean"})
_CONNECTORS = frozenset({"of", "the", "and", "&", "on"})
_GROUP_NUMBERS = frozenset({"Two", "Three", "Five", "Seven", "Ten", "Twenty", "Eight"})
# Stems of one-word places: "Nicaragu" makes "Nicaraguan" a demonym, not a name.
_GEO_STEMS = frozenset(
    name[:-1] if len(name) >= 5 else name for name in GEO_INDEX.values() if " " not in name
)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A phrase found in a sentence, before chunk-level resolution."""

    words: tuple[str, ...]
    type: str | None  # None: the words alone do not tell
    position: int  # token index in the sentence, for co-occurrence distance
    clause_start: bool  # began a sentence, so its capital proves nothing

    @property
    def name(self) -> str:
        return " ".join(self.words)


def sentence_candidates(sentence: Sentence) -> list[Candidate]:
    """Every phrase of a prose sentence."""
    tokens = sentence.tokens
    found: list[Candidate] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.kind == "bracket":
            found.extend(_bracketed(token.text, i))
            i += 1
        elif token.kind == "word" and token.text.endswith(_BASED) and token.text[:1].isupper():
            found.extend(_based(tokens, i))
            i += 1
        elif token.cap:
            end = _run_end(tokens, i)
            words = tuple(t.text for t in tokens[i:end])
            found.extend(_analyse(words, i, token.clause_start))
            i = end
        else:
            i += 1
    return found


def caps_candidates(sentence: Sentence) -> list[Candidate]:
    """Gazetteer places only: an ALL-CAPS headline gives no other evidence."""
    words = [t.text.title() if t.kind == "word" else "" for t in sentence.tokens]
    found: list[Candidate] = []
    i = 0
    while i < len(words):
        size, name = _geo_prefix(tuple(words[i : i + GEO_MAX_TOKENS]))
        if size:
            found.append(Candidate((name,), "geo", i, False))
        i += max(size, 1)
    return found


def _based(tokens: tuple[Token, ...], i: int) -> list[Candidate]:
    """The place in "Dublin-based" or "New York-based", where a company is based."""
    stem = tokens[i].text[: -len(_BASED)]
    if i > 0 and tokens[i - 1].cap:  # "New York-based"; "San Diego-based" is left alone
        size, name = _geo_prefix((tokens[i - 1].text, stem))
        return [Candidate((name,), "geo", i - 1, tokens[i - 1].clause_start)] if size else []
    size, name = _geo_prefix((stem,))
    if size:
        return [Candidate((name,), "geo", i, tokens[i].clause_start)]
    if _PLACE_WORD.fullmatch(stem) and stem not in SOLO_STOP and not tokens[i].clause_start:
        return [Candidate((stem,), "geo", i, False)]  # "Broadly-based" starts sentences
    return []


def dateline_candidates(places: tuple[str, ...]) -> list[Candidate]:
    """The places of a dateline ("SKARVIK, Norway"), typed geo, at the front of the text."""
    found: list[Candidate] = []
    for place in places:
        words = tuple(place.split())
        size, name = _geo_prefix(words)
        if size == len(words):
            words = (name,)
        elif all(w.rstrip(".") in SOLO_STOP for w in words):
            continue
        found.append(Candidate(words, "geo", 0, False))
    return found


def _run_end(tokens: tuple[Token, ...], start: int) -> int:
    """Index just past the run of capitalised words that starts at ``start``."""
    j = start + 1
    while j < len(tokens) and not tokens[j - 1].possessive and not _ends_name(tokens, j):
        t = tokens[j]
        nxt = tokens[j + 1] if j + 1 < len(tokens) else None
        if t.cap:
            j += 1
        elif nxt is not None and nxt.cap and _joins(tokens[j - 1].text, t.text):
            j += 2
        elif t.text == "of" and tokens[j - 1].text in OF_HEADS | TITLES and _of_the(tokens, j):
            j += 3
        elif _on_name(tokens, j) or (t.text == "and" and _and_name(tokens, start, j)):
            j += 2
        else:
            break
    return j


def _ends_name(tokens: tuple[Token, ...], j: int) -> bool:
    """A company suffix closes its name ("Lloyds Bank PLC Allied ..."), unless another follows."""
    return (
        tokens[j - 1].text.rstrip(".") in CORPORATE_SUFFIXES
        and tokens[j].text.rstrip(".") not in CORPORATE_SUFFIXES
    )


def _joins(previous: str, word: str) -> bool:
    if word in NAME_PARTICLES or word == "&":
        return True
    return word == "of" and (previous in OF_HEADS or previous in TITLES)


def _and_name(tokens: tuple[Token, ...], start: int, j: int) -> bool:
    """An "and" inside a name: "Securities and Exchange Commission", "S and P"."""
    if j + 1 >= len(tokens) or not tokens[j + 1].cap:
        return False
    before = tokens[j - 1].text
    after = [t.text for t in tokens[j + 1 : j + 4]]
    if len(before) == 1 and len(after[0]) == 1:
        return True
    for name in AND_NAMES:
        i = name.index("and")
        left, right = name[:i], name[i + 1 :]
        if (
            tuple(t.text for t in tokens[max(start, j - len(left)) : j]) == left
            and tuple(after[: len(right)]) == right
        ):
            return True
    k = j + 1
    while k < len(tokens) and tokens[k].cap and not tokens[k - 1].possessive:
        k += 1
    return k - j <= 3 and tokens[k - 1].text.rstrip(".") in CORPORATE_SUFFIXES


def _on_name(tokens: tuple[Token, ...], j: int) -> bool:
    """An "on" inside a name: "General Agreement on Tariffs and Trade"."""
    return (
        tokens[j].text == "on"
        and tokens[j - 1].text in ON_HEADS
        and j + 1 < len(tokens)
        and tokens[j + 1].cap
    )


def _of_the(tokens: tuple[Token, ...], j: int) -> bool:
    return j + 2 < len(tokens) and tokens[j + 1].text == "the" and tokens[j + 2].cap


def _bracketed(text: str, position: int) -> list[Candidate]:
    """``<Texaco Inc>`` is Reuters' own organisation markup; a bare ticker is not a name."""
    if _TICKER.fullmatch(text):
        return []
    words = _strip_suffixes(tuple(text.split()))
    return [Candidate(words, "organization", position, False)] if words else []


def _analyse(words: tuple[str, ...], position: int, clause_start: bool) -> list[Candidate]:
    """Cut one run into typed phrases."""
    words, position, clause_start = _strip_front(words, position, clause_start)
    while words and (words[-1].rstrip(".") in EDGE_STOP or words[-1] in _CONNECTORS):
        if len(words) > 2 and words[-2] == "of" and words[-1] in _GROUP_NUMBERS:
            break  # "Group of Five"
        words = words[:-1]
    if not words:
        return []
    size, geo = _geo_prefix(words)
    rest = words[size:]
    if size and (not rest or _has_title(rest) or _generic(rest)):
        if _generic(rest):
            rest = ()
        tail = _analyse(rest, position + size, False) if rest else []
        return [Candidate((geo,), "geo", position, clause_start), *tail]
    return _split_titles(words, position, clause_start)


def _strip_front(
    words: tuple[str, ...], position: int, clause_start: bool
) -> tuple[tuple[str, ...], int, bool]:
    while words and (
        words[0] in FUNCTION_WORDS
        or words[0].rstrip(".") in EDGE_STOP
        or (clause_start and words[0] in STARTER_WORDS)
    ):
        words, position, clause_start = words[1:], position + 1, False
    return words, position, clause_start


def _split_titles(words: tuple[str, ...], position: int, clause_start: bool) -> list[Candidate]:
    """A title block ("Finance Minister", "Secretary of State") is followed by a person."""
    start, end = _title_block(words)
    if end == 0:
        return _split_first_name(words, position, clause_start)
    if "the" in words[start:end] and _is_org(words[end:]):
        # "Ministers of the Petroleum Exporters Council": "Petroleum" opens the institution
        end = start + words[start:end].index("the") + 1
    prefix = _analyse(words[:start], position, clause_start) if start else []
    name = words[end:]
    if not name:
        return prefix
    if _is_org(name) or _geo_prefix(name)[0] == len(name) or _ACRONYM.fullmatch(" ".join(name)):
        return [*prefix, *_analyse(name, position + end, False)]
    return [*prefix, *_person(name, position + end)]


def _title_block(words: tuple[str, ...]) -> tuple[int, int]:
    """(start, end) of the last title block, (0, 0) when there is none."""
    start = end = 0
    in_block = False
    for i, word in enumerate(words):
        if is_title(word) and (i == 0 or words[i - 1] not in _CONNECTORS):
            if not in_block:
                start = i
                while start > 0 and words[start - 1] in PORTFOLIO:
                    start -= 1
            end, in_block = i + 1, True
        elif in_block and (word in PORTFOLIO or word in {"of", "the"}):
            end = i + 1
        else:
            in_block = False
    return start, end


def is_title(word: str) -> bool:
    """A title word, or a hyphenated one made of title words ("Secretary-General")."""
    word = word.rstrip(".")
    if word in TITLES:
        return True
    parts = word.split("-")
    return (
        len(parts) > 1
        and any(p in TITLES for p in parts)
        and all(p in TITLES or p in PORTFOLIO for p in parts)
    )


def _split_first_name(words: tuple[str, ...], position: int, clause_start: bool) -> list[Candidate]:
    """A known first name starts a person: "Public Credit Gustavo Petricioli"."""
    for i, word in enumerate(words):
        rest = words[i:]
        if (
            word in FIRST_NAMES
            and 2 <= len(rest) <= 4
            and not _is_org(rest[1:])
            and not any(w in SOLO_STOP for w in rest[1:])
        ):
            prefix = _classify(words[:i], position, clause_start) if i else []
            return [*prefix, *_person(rest, position + i)]
    if len(words) in (3, 4) and any(_INITIAL.fullmatch(w) for w in words[1:-1]):
        return _person(words, position)
    return _classify(words, position, clause_start)


def _classify(words: tuple[str, ...], position: int, clause_start: bool) -> list[Candidate]:
    """The type a run's own words give it, or None."""
    if len(words) == 2 and _is_demonym(words[0]) and words[1] in GEO_HEADS | _SEAS:
        return [Candidate(words, "geo", position, clause_start)]  # "Norwegian Sea"
    if len(words) <= 2 and _is_demonym(words[0]) and not _is_org(words):
        words, position, clause_start = words[1:], position + 1, False
    if not words or (len(words) == 1 and len(words[0].rstrip(".")) < 2):
        return []
    if _is_org(words):
        kind: str | None = "organization"
        words = _strip_suffixes(words) or words
    elif len(words) > 1 and words[-1] in EVENT_HEADS:
        kind = "event"
    elif len(words) > 1 and words[-1] in GEO_HEADS:
        kind = "geo"
    elif len(words) == 1 and _RATING.fullmatch(words[0]):
        return []
    elif len(words) == 1 and _ACRONYM.fullmatch(words[0]):
        kind = "organization"
    else:
        kind = None
    if all(w in SOLO_STOP for w in words) and not (kind == "organization" and len(words) > 1):
        return []
    return [Candidate(words[:_MAX_NAME_TOKENS], kind, position, clause_start)]


def _person(words: tuple[str, ...], position: int) -> list[Candidate]:
    """A person's name without middle initials or "Jr", so that its forms share a key."""
    kept = [w for w in words if w not in NAME_SUFFIXES]
    if len(kept) > 2:
        kept = [kept[0], *(w for w in kept[1:-1] if not _INITIAL.fullmatch(w)), kept[-1]]
    kept = kept[-4:]
    if not kept or all(w in SOLO_STOP for w in kept):
        return []
    return [Candidate(tuple(kept), "person", position, False)]


def _is_org(words: tuple[str, ...]) -> bool:
    return any(w.rstrip(".") in ORG_HEADS for w in words) or (
        len(words) > 1 and words[-1] in CORPORATE_SUFFIXES
    )


def _is_demonym(word: str) -> bool:
    if word in DEMONYMS:
        return True
    if not word.endswith(DEMONYM_ENDINGS) or entity_key(word) in GEO_INDEX:
        return False
    return any(word[:n] in _GEO_STEMS for n in range(4, len(word)))


def _generic(words: tuple[str, ...]) -> bool:
    """Words like "Officials" or "Government" that add nothing to a place before them."""
    return bool(words) and all(w in SOLO_STOP for w in words) and not _is_org(words)


def _has_title(words: tuple[str, ...]) -> bool:
    return any(is_title(w) for w in words)


def _strip_suffixes(words: tuple[str, ...]) -> tuple[str, ...]:
    while len(words) > 1 and (words[-1] in CORPORATE_SUFFIXES or words[-1] in {"&", "and"}):
        words = words[:-1]
    return words


def _geo_prefix(words: tuple[str, ...]) -> tuple[int, str]:
    """Length and canonical name of the longest gazetteer name at the front, or (0, "")."""
    for size in range(min(GEO_MAX_TOKENS, len(words)), 0, -1):
        name = GEO_INDEX.get(entity_key(" ".join(words[:size])))
        if name is not None:
            return size, name
    return 0, ""
