"""Extractive description summaries for offline mode.

With an LLM, an entity (or relationship) with two or more descriptions gets one summary that
keeps every fact. Offline, we keep sentences instead: sentences that repeat one another
(content-word Jaccard ≥ 0.7) count once, the most informative sentence (most distinct content
words, names and numbers) stands for its group, and descriptions take turns so each distinct
description contributes its best sentence before any contributes a second one, until the
length bound. Chosen sentences keep their original order. If no chosen sentence names the
subject, the summary is prefixed with it, so it still reads as a description of something.
Descriptions are sorted first: the summary does not depend on the order they arrived in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")
_NAME_OR_NUMBER = re.compile(r"(?<!^)\b(?:[A-Z][\w&-]*|\d[\d.,%]*)")
NEAR_DUPLICATE = 0.7
_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each few
for from further had has have having he her here hers herself him himself his how i if
in into is it its itself just me more most my no nor not of off on once only or other
our out over own said same she should so some such than that the their them then there
these they this those through to too under until up very was we were what when where
which while who whom why will with would you your
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str
    source: int  # index of the description it came from (after sorting)
    position: int  # index within that description
    words: frozenset[str]  # content words, case-folded
    score: float
    covers: frozenset[int]  # descriptions saying this (near-duplicates collapse into one)


def clean(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _terminated(text: str) -> str:
    """A sentence with its full stop, so joined sentences stay readable."""
    return text if text.endswith((".", "!", "?", "…", '"', "'", ")")) else text + "."


def split_sentences(text: str) -> list[str]:
    return [s for s in (clean(p) for p in _SENTENCE_END.split(clean(text))) if s]


def content_words(text: str) -> frozenset[str]:
    return frozenset(
        w for w in (m.casefold() for m in _WORD.findall(text)) if w not in STOPWORDS and len(w) > 1
    )


def informativeness(text: str, names: Sequence[str] = ()) -> float:
    """Distinct content words, plus names and numbers, plus one for naming the subject."""
    score = len(content_words(text)) + 0.5 * len(set(_NAME_OR_NUMBER.findall(text)))
    folded = text.casefold()
    return score + (1.0 if any(n.casefold() in folded for n in names if n) else 0.0)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def distinct_sentences(texts: Sequence[str], names: Sequence[str] = ()) -> list[Sentence]:
    """Every sentence of every text, near-duplicates collapsed to their most informative one
    (which then covers every description that said it); best first, deterministic."""
    candidates = [
        Sentence(_terminated(s), i, j, content_words(s), informativeness(s, names), frozenset({i}))
        for i, text in enumerate(texts)
        for j, s in enumerate(split_sentences(text))
    ]
    candidates.sort(key=lambda s: (-s.score, -len(s.text), s.text, s.source, s.position))
    kept: list[Sentence] = []
    for cand in candidates:
        twin = next((k for k in kept if _jaccard(cand.words, k.words) >= NEAR_DUPLICATE), None)
        if twin is None:
            kept.append(cand)
        else:
            kept[kept.index(twin)] = replace(twin, covers=twin.covers | cand.covers)
    return kept


def _round_robin(sentences: list[Sentence], n_sources: int) -> list[Sentence]:
    """Best sentence of each description, then second-best of each, and so on; a sentence
    several descriptions share is that turn for all of them."""
    by_source: list[list[Sentence]] = [[] for _ in range(n_sources)]
    for s in sentences:
        for i in sorted(s.covers):
            by_source[i].append(s)
    source_order = sorted(
        (i for i in range(n_sources) if by_source[i]), key=lambda i: (-by_source[i][0].score, i)
    )
    rounds = max((len(v) for v in by_source), default=0)
    out: list[Sentence] = []
    for r in range(rounds):
        for i in source_order:
            if r < len(by_source[i]) and by_source[i][r] not in out:
                out.append(by_source[i][r])
    return out


def truncate(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max(1, max_chars - 1)].rsplit(" ", 1)[0].rstrip(" ,;:")
    return cut + "…"


def summarize_descriptions(
    names: str | Sequence[str], descriptions: Sequence[str], *, max_chars: int = 600
) -> str:
    """One extractive description of the subject within ``max_chars`` characters.

    ``names`` is the entity name, or the (source, target) names of a relationship.
    """
    subject = (names,) if isinstance(names, str) else tuple(names)
    texts = sorted({clean(d) for d in descriptions if clean(d)}, key=lambda t: (t.casefold(), t))
    if not texts:
        return ""
    prefix = f"{' – '.join(subject)}: "
    budget = max(1, max_chars - len(prefix))
    chosen: list[Sentence] = []
    used = -1  # no separator before the first sentence
    for s in _round_robin(distinct_sentences(texts, subject), len(texts)):
        if used + 1 + len(s.text) <= budget:
            chosen.append(s)
            used += 1 + len(s.text)
    if not chosen:  # the best sentence alone is longer than the bound
        best = distinct_sentences(texts, subject)[0]
        return _with_subject(subject, truncate(best.text, budget), prefix)
    chosen.sort(key=lambda s: (s.source, s.position))
    return _with_subject(subject, " ".join(s.text for s in chosen), prefix)


def _with_subject(subject: Sequence[str], text: str, prefix: str) -> str:
    folded = text.casefold()
    return text if any(n.casefold() in folded for n in subject if n) else prefix + text
