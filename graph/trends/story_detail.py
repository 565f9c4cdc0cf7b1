"""Why a storyline is news, and what to call it: a row's top documents, new entities, top
entities and title (``describe``), read from the graph through ``StoryLookup``.

* **Why.** A row carries its mentions in the window against its expected share (``ratio``),
  the entities first seen in the window, and its top documents: those of the window whose
  text units mention the most of its members.
* **Titles.** With no LLM, a storyline is named by the most specific entities its top
  documents share (in most of them, with the largest share of their mentions in the window)
  and the phrase its top documents' headlines share most; a report's title when an LLM wrote
  it.

Pure: the graph is read through ``StoryLookup``, which the query index and the community job
(``ViewStories``) each implement over what they hold.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Protocol

from graph.merge.view import GraphView
from graph.trends.storylines import Daily, Storyline, in_window

TOP_DOCUMENTS = 5
TITLE_ENTITIES = 2
# words a headline phrase is not made of: function words, and the reporting verbs, units and
# corporate suffixes that newswire headlines share whatever the story
STOPWORDS = frozenset(
    """a an and are as at be by for from has have in into is it its of on or to up was were
    will with after over under new more less than not no but if so this that these those
    would could should may might can must also about against between during says say said
    see sees seen set sets get gets make makes made take takes expected expects likely
    report reports reported billion million mln bln pct percent dlrs year years week weeks
    month months first second third quarter qtr shr net inc corp co ltd plc group company
    u.s""".split()
)
TICKER = re.compile(r"<[^>]*>")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9.&'-]*[A-Za-z0-9]|[A-Za-z]")


@dataclass(frozen=True, slots=True)
class TopDocument:
    id: str
    title: str
    day: str  # ISO date
    mentions: int  # member mentions in its text units


@dataclass(frozen=True, slots=True)
class NewMember:
    key: str
    title: str
    first_seen: str
    mentions: int  # in the window


@dataclass(frozen=True, slots=True)
class StoryDetail:
    """Why a storyline is news, and what to call it."""

    title: str
    top_entities: tuple[str, ...]
    new_entities: tuple[NewMember, ...]
    top_documents: tuple[TopDocument, ...]


class StoryLookup(Protocol):
    """What describing a storyline reads of the graph."""

    def entity_title(self, key: str) -> str | None: ...

    def entity_daily(self, key: str) -> Daily: ...

    def entity_first_seen(self, key: str) -> date | None: ...

    def entity_units(self, key: str) -> Iterable[str]: ...

    def unit_document(self, unit: str) -> tuple[str, date | None] | None:
        """The document a text unit belongs to and its day."""
        ...

    def document_title(self, document: str) -> str: ...


@dataclass
class _DocTally:
    mentions: Counter[str] = field(default_factory=Counter)
    day: dict[str, date] = field(default_factory=dict)
    entities: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def _documents(members: Iterable[str], lookup: StoryLookup, since: date, end: date) -> _DocTally:
    tally = _DocTally()
    for key in members:
        for unit in lookup.entity_units(key):
            found = lookup.unit_document(unit)
            if found is None:
                continue
            doc, day = found
            if day is None or not since <= day <= end:
                continue
            tally.mentions[doc] += 1
            tally.day[doc] = day
            tally.entities[doc].add(key)
    return tally


def _words(text: str) -> list[str]:
    return WORD.findall(text)


def same_name(a: str, b: str) -> bool:
    """Whether two entity names are one name for a title: one holds the other ("Apple",
    "Apple Computer") or one spells the other's initials ("EC", "European Community")."""
    x, y = a.casefold(), b.casefold()
    if x in y or y in x:
        return True

    def initials(name: str) -> str:
        return "".join(w[0] for w in _words(name) if w[:1].isupper()).casefold()

    def letters(name: str) -> str:
        return name.replace(".", "").casefold()

    return letters(a) == initials(b) or letters(b) == initials(a)


def _cased(word: str) -> str:
    """A word of an all-capitals headline in title case ("TREASURY'S" -> "Treasury's")."""
    return word[:1].upper() + word[1:].lower()


def key_phrase(titles: Sequence[str], exclude: Iterable[str] = ()) -> str:
    """The phrase most of ``titles`` share: the commonest two-word phrase in at least two of
    them, else the commonest word in at least two, else ""; stop words and the words of
    ``exclude`` (names already in the title) left out, shown as the first title has it."""
    banned = {w.lower() for name in exclude for w in _words(name)}
    titles = [TICKER.sub(" ", t) for t in titles]  # "<AAPL>" names a share, not a story
    grams: Counter[tuple[str, ...]] = Counter()
    shown: dict[tuple[str, ...], str] = {}
    for title in titles:
        words = _words(title)
        seen: set[tuple[str, ...]] = set()
        for size in (2, 1):
            for i in range(len(words) - size + 1):
                part = words[i : i + size]
                low = tuple(w.lower() for w in part)
                if any(w in STOPWORDS or w in banned or len(w) < 3 for w in low):
                    continue
                if low not in seen:
                    seen.add(low)
                    grams[low] += 1
                    shown.setdefault(low, " ".join(part))
    for size in (2, 1):
        best = [(c, g) for g, c in grams.items() if len(g) == size and c >= 2]
        if best:
            _, gram = min(best, key=lambda x: (-x[0], x[1]))
            text = shown[gram]
            if text.isupper():
                text = " ".join(_cased(w) for w in text.split())
            return re.sub(r"'S\b", "'s", text)
    return ""


def describe(
    row: Storyline, lookup: StoryLookup, since: date, end: date, *, top: int = TOP_DOCUMENTS
) -> StoryDetail:
    """The row's top documents, new entities, top entities and title."""
    members = sorted(row.node.members)
    docs = _documents(members, lookup, since, end)
    top_docs = sorted(docs.mentions, key=lambda d: (-docs.mentions[d], -docs.day[d].toordinal(), d))
    top_docs = top_docs[:top]
    window_mentions = {k: in_window(lookup.entity_daily(k), since, end) for k in members}
    mentioned = [k for k in members if window_mentions[k] > 0]
    top_entities = sorted(mentioned, key=lambda k: (-window_mentions[k], k))[:5]

    def total(k: str) -> int:
        return sum(n for _, n in lookup.entity_daily(k)) or 1

    covers = Counter(k for d in top_docs for k in docs.entities[d])
    needed = 1 if len(top_docs) < 2 else 2
    shared = [k for k in mentioned if covers[k] >= needed]
    names: list[str] = []
    for k in sorted(
        shared, key=lambda k: (-covers[k], -window_mentions[k] / total(k), -window_mentions[k], k)
    ):
        name = lookup.entity_title(k) or k
        if not any(same_name(name, n) for n in names):
            names.append(name)
        if len(names) == TITLE_ENTITIES:
            break
    headlines = [lookup.document_title(d) for d in top_docs]
    phrase = key_phrase(headlines, exclude=names)
    title = row.node.report_title
    if not title:
        named = ", ".join(names)
        title = f"{named}: {phrase}" if named and phrase else named or phrase
        title = title or (headlines[0] if headlines else f"Community {row.node.community}")
    new = []
    for k in mentioned:
        first = lookup.entity_first_seen(k)
        if first is not None and since <= first <= end:
            new.append(
                NewMember(k, lookup.entity_title(k) or k, first.isoformat(), window_mentions[k])
            )
    new.sort(key=lambda m: (-m.mentions, m.first_seen, m.key))
    return StoryDetail(
        title=title,
        top_entities=tuple(lookup.entity_title(k) or k for k in top_entities),
        new_entities=tuple(new[:5]),
        top_documents=tuple(
            TopDocument(d, lookup.document_title(d), docs.day[d].isoformat(), docs.mentions[d])
            for d in top_docs
        ),
    )


class ViewStories:
    """``StoryLookup`` over the community job's merged graph."""

    def __init__(self, view: GraphView) -> None:
        self.view = view

    def entity_title(self, key: str) -> str | None:
        e = self.view.entities.get(key)
        return e.name if e is not None else None

    def entity_daily(self, key: str) -> Daily:
        e = self.view.entities.get(key)
        return () if e is None else tuple(sorted(e.days.per_day().items()))

    def entity_first_seen(self, key: str) -> date | None:
        e = self.view.entities.get(key)
        return e.first_seen if e is not None else None

    def entity_units(self, key: str) -> Iterable[str]:
        return self.view.entity_units.get(key, ())

    def unit_document(self, unit: str) -> tuple[str, date | None] | None:
        chunk = self.view.text_units.get(unit)
        if chunk is None:
            return None
        try:
            return chunk.document_id, date.fromisoformat(chunk.published_at[:10])
        except ValueError:
            return chunk.document_id, None

    def document_title(self, document: str) -> str:
        return str(self.view.documents.get(document, {}).get("title") or document)
