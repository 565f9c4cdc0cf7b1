"""Text segmentation for the offline extractor: datelines, paragraphs, tables, sentences.

Reuters copy wraps lines inside sentences and starts each paragraph with an indented line;
earnings reports are tables of short rows ("Shr loss 14 cts vs loss 27 cts"). Proper-noun
detection only works on prose, so this module decides which paragraphs are prose, which are
ALL-CAPS (headlines, table headers: gazetteer look-ups only) and which are tables (nothing),
and cuts prose into sentences of tokens without being fooled by "U.S." or "James A. Baker".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from offline.lexicon import (
    ABBREVIATIONS,
    CORPORATE_SUFFIXES,
    FUNCTION_WORDS,
    POSSESSIVE_NAMES,
    TABLE_WORDS,
)

ParagraphKind = Literal["prose", "caps", "table"]

_DATELINE = re.compile(
    r"^\s*(?P<city>[A-Z][A-Z.'\- ]{1,40}?)\s*(?:\((?P<region>[A-Za-z ]+)\))?"
    r"(?P<more>(?:,\s*[A-Z][A-Za-z.' ]{1,30}?)*?)"
    r"(?:,\s*[A-Z][a-z]{2,8}\.?\s+\d{1,2})?\s+-{1,2}\s+"
)
_INITIALS = re.compile(r"(?:[A-Z]\.)+")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n|\n[ \t]+")
_TOKEN = re.compile(
    r"<[^<>\n]{1,80}>"  # Reuters marks company names as <Texaco Inc>
    r"|[^\W_](?:[\w'\u2019&\-]*\w)?(?:\.(?:[^\W_][\w'\u2019\-]*)?)*"
    r"|[^\w\s]"
)
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_NUMBER = re.compile(r"\d[\d,./\-]*")
_WORD = re.compile(r"[A-Za-z][A-Za-z.'\-]*")
# "Bahrain-based", "Rotterdam-bound", "Earth-observation": a capital before one of these
# compound heads makes an adjective or a common noun, not a name ("Sun-yong" stays a name).
_ADJECTIVE = re.compile(
    r"-(?:based|owned|led|made|controlled|backed|run|registered|listed|bound|oriented|related"
    r"|linked|style|type|class|wide|born|speaking|sized|like|free|observation|era|built)$"
)
_VS = re.compile(r"\bvs\.?(?:\s|$)", re.IGNORECASE)
_SENTENCE_END = frozenset(".!?")
_CLAUSE_OPEN = frozenset({'"', "'", ":", "(", "\u201c", "-", ";"})
# Company suffixes end a sentence before any capitalised word but another suffix ("Co. Ltd.").
_COMPANY_ABBREVIATIONS = frozenset({"Inc", "Corp", "Co", "Ltd", "Cos", "Bros"})


@dataclass(frozen=True, slots=True)
class Token:
    """A word or punctuation mark of a sentence, as the phrase finder sees it."""

    text: str  # possessive and sentence-final period removed
    kind: Literal["word", "punct", "bracket"]
    possessive: bool = False  # "Craxi's": a name ends here
    clause_start: bool = False  # first word of a sentence or of a quote: capitals prove little

    @property
    def cap(self) -> bool:
        """Capitalised and not an adjective like "Bahrain-based" or "U.S.-owned"."""
        return self.kind == "word" and self.text[:1].isupper() and not _ADJECTIVE.search(self.text)


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str  # whitespace collapsed, for descriptions
    tokens: tuple[Token, ...]


def split_dateline(text: str) -> tuple[tuple[str, ...], str]:
    """The places of a leading "NEW YORK, March 3 - " or "SKARVIK, Norway, March 21 - ", and
    the text after it. The dateline is cut from the prose so that its capitals and its date are
    not read as names; its places are real mentions, returned in title case."""
    match = _DATELINE.match(text)
    if match is None:
        return (), text
    parts = [match.group("city"), match.group("region") or ""]
    parts += match.group("more").split(",")
    places = tuple(_title(p) for p in parts if p.strip())
    return places, text[match.end() :]


def paragraphs(text: str) -> list[str]:
    """Paragraphs (dateline already cut) with the line wraps inside them joined by spaces."""
    parts = _PARAGRAPH_BREAK.split(text)
    return [" ".join(p.split()) for p in parts if p.strip()]


def _title(place: str) -> str:
    """Title case for an all-caps place ("NEW YORK"); mixed-case ones ("Norway") are kept."""
    words = place.split()
    if any(c.islower() for c in place):
        return " ".join(words)
    return " ".join(w if _INITIALS.fullmatch(w) else w.capitalize() for w in words)


def paragraph_kind(paragraph: str) -> ParagraphKind:
    """Tables carry numbers more than words, start with a table word, or compare with "vs"."""
    words = _WORD.findall(paragraph)
    numbers = _NUMBER.findall(paragraph)
    if not words:
        return "table"
    if numbers and (
        words[0].rstrip(".").capitalize() in TABLE_WORDS
        or _VS.search(paragraph)
        or len(numbers) >= max(2, len(words) // 2)
    ):
        return "table"
    letters = [c for c in paragraph if c.isalpha()]
    if letters and all(c.isupper() for c in letters):
        return "table" if numbers else "caps"
    return "prose"


def sentences(paragraph: str) -> list[Sentence]:
    """Sentences of one prose paragraph."""
    raw = list(_TOKEN.finditer(paragraph))
    result: list[Sentence] = []
    current: list[Token] = []
    begin = 0
    clause_start = True
    for i, match in enumerate(raw):
        nxt = raw[i + 1].group() if i + 1 < len(raw) else ""
        if not current:
            begin = match.start()
        tokens, ends = _tokens_of(match.group(), nxt, clause_start)
        current.extend(tokens)
        if tokens:
            clause_start = tokens[-1].kind == "punct" and tokens[-1].text in _CLAUSE_OPEN
        if ends and current:
            result.append(Sentence(paragraph[begin : match.end()], tuple(current)))
            current, clause_start = [], True
    if current:
        result.append(Sentence(paragraph[begin:], tuple(current)))
    return result


def _tokens_of(item: str, nxt: str, clause_start: bool) -> tuple[list[Token], bool]:
    """One raw match as tokens, and whether a sentence ends after it."""
    if item.startswith("<") and len(item) > 2:
        return [Token(item[1:-1].strip(), "bracket")], False
    if not (item[0].isalnum()):
        return [Token(item, "punct")], item in _SENTENCE_END
    if item.endswith(".") and len(item) > 1:
        core = item[:-1]
        if core in ABBREVIATIONS or "." in core or (len(core) == 1 and core.isupper()):
            return [Token(item, "word", clause_start=clause_start)], _abbreviation_ends(core, nxt)
        return [_word(core, clause_start), Token(".", "punct")], True
    return [_word(item, clause_start)], False


def _abbreviation_ends(core: str, nxt: str) -> bool:
    """Whether "Inc." or "U.S." or "P." also ends its sentence, judged by the next word."""
    if core in _COMPANY_ABBREVIATIONS:
        return nxt[:1].isupper() and nxt.rstrip(".") not in CORPORATE_SUFFIXES
    if "." in core or len(core) == 1:
        return nxt in FUNCTION_WORDS and nxt[:1].isupper()
    return False


def _word(text: str, clause_start: bool) -> Token:
    possessive = bool(_POSSESSIVE.search(text)) and len(text) > 2 and text not in POSSESSIVE_NAMES
    if possessive:
        text = _POSSESSIVE.sub("", text)
    return Token(text, "word", possessive=possessive, clause_start=clause_start)
