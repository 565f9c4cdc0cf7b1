"""Text helpers of the scripted test model: sentences, content words, token counts, clipping,
labelled prompt lines, message content, and the capitalised phrases and their guessed types
that become the scripted model's entities.

Pure functions (no I/O). A request a strict model would refuse raises :class:`RequestRejected`,
which ``kgrag.testing.scripted_llm`` answers with HTTP 400.
"""

from __future__ import annotations

import math
import re
from typing import Any


class RequestRejected(Exception):
    """The request is one a strict model would refuse (answered with HTTP 400)."""


_SENT_RE = re.compile(r"(?<=[.!?])\s+")
_PHRASE_RE = re.compile(r"[A-Z][\w&'.-]*(?:\s+(?:of\s+|de\s+|and\s+)?[A-Z][\w&'.-]*)*")
WORD_RE = re.compile(r"[a-z0-9]+")


def _wordset(text: str) -> frozenset[str]:
    return frozenset(w.replace("_", " ") for w in text.split())


_STOP_START = _wordset(
    "The A An In On At It He She They We I This That These Those But And Or If For As By With "
    "From After Before When While Its His Her Their Our Shares Under Also Chief Executive Mr Mrs "
    "Ms Dr Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March "
    "April May June July August September October November December"
)
_STOPWORDS = _wordset(
    "the a an and or of to in on at for by with from is are was were be been it its this that "
    "what which who whom how why when where does did do about into over than then there their "
    "they them he she his her our we you your not no yes any some"
)
_ORG_WORDS = _wordset(
    "inc corp co ltd plc bank group company corporation ministry commission reserve exchange "
    "association council agency party board fund bureau department university union opec "
    "airlines motors"
)
_EVENT_WORDS = _wordset("summit conference war election crisis strike talks olympics")
_GEO_WORDS = _wordset("city river island state province county republic kingdom")
_GEO_NAMES = _wordset(
    "u.s. us united_states japan britain china france germany west_germany canada brazil "
    "argentina mexico india italy spain australia london new_york tokyo paris washington "
    "frankfurt hong_kong rotterdam europe saudi_arabia iran iraq kuwait soviet_union moscow "
    "chicago zurich"
)
_PERSON_TITLES = _wordset("mr mrs ms dr president minister chairman chief governor")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT_RE.split(text.strip()) if s.strip()]


def words(text: str) -> set[str]:
    return {w for w in WORD_RE.findall(text.lower()) if w not in _STOPWORDS and len(w) > 2}


def n_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def clip(text: str, limit: int = 220) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def last_labelled(text: str, label: str) -> tuple[int, str] | None:
    """Position and value of the last line starting with ``label`` (the real data follows
    the worked examples, which use the same labels)."""
    hits = [m for m in re.finditer(rf"^{re.escape(label)}[ \t]*(.*)$", text, re.M)]
    return (hits[-1].start(), hits[-1].group(1).strip()) if hits else None


def content_text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content).lstrip()


def entity_type(phrase: str, before: str) -> str:
    lower = phrase.lower()
    tokens = lower.replace(".", " ").split()
    if (_ORG_WORDS & set(tokens)) or (phrase.isupper() and len(phrase) <= 5):
        return "organization"
    if _EVENT_WORDS & set(tokens):
        return "event"
    if lower in _GEO_NAMES or (tokens and tokens[-1] in _GEO_WORDS):
        return "geo"
    prev = before.rstrip().rsplit(" ", 1)[-1].lower().rstrip(".") if before.strip() else ""
    if prev in _PERSON_TITLES or len(phrase.split()) in (2, 3):
        return "person"
    return "organization"


def phrases(sent: str) -> list[tuple[str, int]]:
    """Capitalised phrases with their offsets, minus leading function words and dates; "X of
    Y" stays one phrase only when X ends with an organisation word (Bank of Japan)."""
    out: list[tuple[str, int]] = []
    for m in _PHRASE_RE.finditer(sent):
        pieces = [m.group(0)]
        for joiner in (" of ", " and ", " de "):
            pieces = [q for p in pieces for q in _split_join(p, joiner)]
        for piece in pieces:
            parts = piece.split()
            while parts and parts[0] in _STOP_START:
                parts.pop(0)
            phrase = " ".join(parts).rstrip(".'")
            if len(phrase) >= 2:
                out.append((phrase, m.start() + max(0, m.group(0).find(phrase))))
    return out


def _split_join(phrase: str, joiner: str) -> list[str]:
    if joiner not in phrase:
        return [phrase]
    left, right = phrase.split(joiner, 1)
    if left.split()[-1].lower() in _ORG_WORDS:
        return [phrase]
    return [left, *_split_join(right, joiner)]
