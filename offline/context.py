"""What the words around a name say about its type, for the offline extractor.

A phrase's own words settle many types ("Texaco Inc", "Finance Minister ..."); the rest
would fall back to one default type, which splits a person's mentions between "person" and
"organization" across chunks. News prose gives cheap, reliable hints instead: people are
quoted ("Amira Haddad said", "said Egon Padovan", "according to ..."), described in an
apposition (", chief economist at ...") and referred to as "he" or "she"; companies speak of
themselves as "it"; countries own ministers and governments ("Kadara's Energy Minister"). A
demonym ("Tarvonian wheat") is a form of a place named in the same chunk, not a name of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from offline.lexicon import DEMONYM_ENDINGS, PERSON_ROLE_WORDS
from offline.phrases import Candidate
from offline.text import Sentence

_SPEECH = frozenset(
    {"said", "says", "told", "added", "wrote", "argued", "warned", "noted", "explained"}
)
_PERSONAL = frozenset({"he", "she", "his", "her", "him"})
_IMPERSONAL = frozenset({"it", "its"})
_ARTICLES = frozenset({"the", "a", "an"})
_STATE_WORDS = frozenset(
    {
        "minister",
        "ministry",
        "government",
        "parliament",
        "cabinet",
        "economy",
        "central",
        "prime",
        "currency",
    }
)
_NOT_PERSONAL = frozenset({"lead", "co-lead"})
_MINISTERS = frozenset({"Minister", "minister", "Ambassador", "ambassador", "Premier"})
_PLURAL_NOUN_ENDINGS = ("ies", "als", "ics", "ions", "ments", "ings", "ures", "ets", "ors")
_APPOSITION_WINDOW = 6
_NAME_WORD = re.compile(r"[A-Z][a-z][A-Za-z'\-]*|(?:[A-Z]\.)+")
# A weak cue: "Kaiser Cement said" is as common in business news as "Amira Haddad said", so a
# bare speech verb makes a person only when the chunk also uses the surname alone.
SPEAKER = "speaker"
_MIN_STEM = 4


def context_type(cand: Candidate, sentence: Sentence) -> str | None:
    """Type suggested by the words around the name: person, geo, organization, or the weak
    ``SPEAKER``; None if silent."""
    tokens = [t.text for t in sentence.tokens]
    start, end = cand.position, cand.position + len(cand.words)
    before = tokens[max(start - 2, 0) : start]
    after = tokens[end : end + 3]
    if _owns_a_state(sentence, end) or (len(cand.words) == 1 and _minister_of(tokens, start)):
        return "geo"
    if before[-1:] and before[-1].lower() in PERSON_ROLE_WORDS:
        # "lead manager Schweizerische Bankverein" is a bank arranging a bond
        return None if before[:-1] and before[0].lower() in _NOT_PERSONAL else "person"
    if _name_shaped(cand.words) and (before[-1:] == ["said"] or before == ["according", "to"]):
        return "person"  # quote attribution: '..., said Egon Padovan'
    if _apposition(tokens, end):
        return "person"
    if after[:2] == [",", "which"]:
        return "organization"
    if after[:1] and after[0] in _SPEECH:
        return _speaker(cand, after[1:2])
    return None


def demonym_of(word: str, places: Iterable[str]) -> str | None:
    """The place whose adjective ``word`` is ("Tarvonian" of "Tarvonia", "Solvan" of
    "Solvany"), among ``places`` (display names of one word); None when it is none's."""
    if not word.endswith(DEMONYM_ENDINGS):
        return None
    for place in places:
        stem = place[:-1] if len(place) > _MIN_STEM else place
        if (
            place != word
            and len(stem) >= _MIN_STEM
            and word.startswith(stem)
            and len(word) - len(place) <= 3
        ):
            return place
    return None


def _speaker(cand: Candidate, next_word: list[str]) -> str | None:
    """'X said he' is a person, 'X said it' a company; 'Amira Haddad said' most likely a
    person, 'Deltaport Terminals said' not: surnames rarely look like plural common nouns."""
    if next_word and next_word[0] in _PERSONAL:
        return "person"
    if next_word and next_word[0] in _IMPERSONAL:
        return "organization"
    if _name_shaped(cand.words) and not cand.words[-1].endswith(_PLURAL_NOUN_ENDINGS):
        return SPEAKER
    return None


def _name_shaped(words: tuple[str, ...]) -> bool:
    """Two or three capitalised words or initials: "Amira Haddad", "J.A. Elkins", not "S and
    P" or "IBM PC"."""
    return (
        2 <= len(words) <= 3
        and all(_NAME_WORD.fullmatch(w) for w in words)
        and any(c.islower() for c in words[-1])
    )


def _minister_of(tokens: list[str], start: int) -> bool:
    """ "Energy Minister Karim Bensaid of Kadara": a minister is of a country."""
    if start < 2 or tokens[start - 1] != "of":
        return False
    return any(t in _MINISTERS for t in tokens[max(start - 6, 0) : start - 1])


def _owns_a_state(sentence: Sentence, end: int) -> bool:
    """A possessive name followed by a minister or a government: "Kadara's Energy Minister"."""
    tokens = sentence.tokens
    if end == 0 or not tokens[end - 1].possessive:
        return False
    return any(t.text.lower() in _STATE_WORDS for t in tokens[end : end + 3])


def _apposition(tokens: list[str], end: int) -> bool:
    """', who' or ', a senior pharmaceuticals analyst at' right after the name."""
    if tokens[end : end + 1] != [","]:
        return False
    words = [w for w in tokens[end + 1 : end + 1 + _APPOSITION_WINDOW] if w not in _ARTICLES]
    if words[:1] == ["who"]:
        return True
    for word in words:
        if word.lower() in PERSON_ROLE_WORDS:
            return True  # ", Chairman of the Japan Socialist Party," too
        if word == "," or word[:1].isupper():
            return False
    return False
