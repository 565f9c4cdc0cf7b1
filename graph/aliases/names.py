"""How a name is written: the letters of an acronym, what an acronym spells, and a key with
British spellings and a plural last word normalised (the name forms alias rules compare)."""

from __future__ import annotations

import re

# connectors an acronym skips ("Organization of Petroleum Exporting Countries" -> OPEC)
CONNECTORS = frozenset({"of", "for", "and", "on", "the", "de", "du", "des", "la", "le", "&", "in"})
_ACRONYM = re.compile(r"(?:[A-Z]\.){2,7}|[A-Z][A-Z&]{1,6}")
# British spellings -> American, applied word by word before keys are compared
# last words whose singular is another word in names ("Securities" is not one "Security")
_NOT_PLURALS = frozenset({"securities", "futures", "savings", "news", "works", "arms", "goods"})
_SPELLINGS = {
    "organisation": "organization",
    "organisations": "organizations",
    "programme": "program",
    "labour": "labor",
    "defence": "defense",
    "centre": "center",
    "co operation": "cooperation",
}


def acronym_of(name: str) -> str | None:
    """The letters of a name written as an acronym ("U.N." -> "un", "IMF" -> "imf")."""
    text = name.strip()
    if not _ACRONYM.fullmatch(text):
        return None
    letters = text.replace(".", "").replace("&", "").lower()
    return letters if 2 <= len(letters) <= 7 else None


def spells(letters: str, key: str) -> bool:
    """Whether an acronym's letters spell a name of two content words or more: each content
    word gives its first letter and up to two more of its letters, in order, and a connector
    its first letter or none ("gatt": General Agreement on Tariffs and Trade; "icco":
    International CoCoa Organization; "unctad": United Nations Conference on Trade And
    Development)."""
    words = _spelled(key).replace("-", " ").split()
    if sum(w not in CONNECTORS for w in words) < 2 or words[0][:1] != letters[:1]:
        return False

    def match(i: int, j: int) -> bool:
        if j == len(words):
            return i == len(letters)
        word = words[j]
        if word in CONNECTORS and match(i, j + 1):
            return True
        return any(
            _begins(word, letters[i : i + n]) and match(i + n, j + 1)
            for n in range(1, min(3, len(word)) + 1)
            if i + n <= len(letters)
        )

    return match(0, 0)


def _begins(word: str, part: str) -> bool:
    """``part`` starts with the word's first letter and its other letters follow in order."""
    if not part or part[0] != word[0]:
        return False
    rest = iter(word[1:])
    return all(c in rest for c in part[1:])


def spelling_key(key: str) -> str:
    """The key with British spellings and a plural last word normalised."""
    words = _spelled(key).split()
    if len(words) < 2:  # "Lloyds" and "Lloyd" may well be two things
        return " ".join(words) or key
    last = words[-1]
    if last in _NOT_PLURALS:
        pass
    elif len(last) > 4 and last.endswith("ies"):
        last = last[:-3] + "y"
    elif len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return " ".join([*words[:-1], last])


def _spelled(key: str) -> str:
    text = f" {key} "
    for british, american in _SPELLINGS.items():
        text = text.replace(f" {british} ", f" {american} ")
    return text.strip()
