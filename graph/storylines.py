"""Storylines: the community hierarchy folded into one row per story, and why it is news.

Hierarchical Leiden describes one story at several levels: a community of 40 entities, its
child of 35, the child's child of 30 are one storyline, and ranking every level on its own
fills a trend list with the same story five times. Here:

* **Scoring on documents.** A storyline is news when many articles carry it, not when one
  article names many of its members: the emerging score (``graph.emerging``) is taken on the
  number of documents in the window that mention the community, against its earlier share of
  the news. Earlier documents are not counted (that would read every text unit of the graph
  at every run): the earlier share comes from member mentions (against the whole graph's,
  ``baseline``), turned into documents by the community's mentions per document in the
  window, which assumes that ratio holds over time. A community named by one article has one
  document, however many of its members that article names.
* **Folding.** A child that holds more than half of its parent's members (``FOLD_SHARE``)
  continues the parent's storyline; chains of such links are one storyline, shown at the
  member that scores best in the window. Ties go to the finer level, which names the story
  more narrowly.
* **Distinct rows.** Rows are taken best first; a community nested in (or holding) a row
  already taken is not a row of its own but reachable from that row (``within``): two rows
  never share a member, so the top of the list is that many different stories.
* **Why.** A row carries its mentions in the window against its expected share (``ratio``),
  the entities first seen in the window, and its top documents: those of the window whose
  text units mention the most of its members.
* **Titles.** With no LLM, a storyline is named by the most specific entities its top
  documents share (in most of them, with the largest share of their mentions in the window)
  and the phrase its top documents' headlines share most; a report's title when an LLM wrote
  it.

Pure: the graph is read through ``StoryLookup``, which the query index and the community job
each implement over what they hold.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol

from graph.emerging import EmergingScore, emerging_scores
from graph.graph_view import GraphView
from graph.snapshot_model import SnapshotCommunity

Daily = tuple[tuple[date, int], ...]  # (day, mentions), ascending

FOLD_SHARE = 0.5  # a child holding more than this share of its parent's members continues it
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
class StoryNode:
    """One community as the fold sees it."""

    community: int  # its number (what Reports citations use)
    id: str  # its stable id
    level: int
    parent: int  # -1 at the top level
    members: frozenset[str]
    daily: Daily
    report_title: str = ""  # the report's title, when an LLM wrote it


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
class Storyline:
    """One row: the community shown, its figures in the window, and what it folds."""

    node: StoryNode
    score: float
    recent: int  # mentions in the window
    earlier: int  # mentions before it
    expected: float  # its share of the news before, as mentions in a window like this one
    documents: int  # documents in the window that mention it
    expected_documents: float  # ``expected`` in documents
    folded: tuple[str, ...] = ()  # ids of the other levels of the same storyline
    within: tuple[str, ...] = ()  # ids of other ranked communities nested with this row

    @property
    def ratio(self) -> float:
        """Documents in the window against what its earlier share predicts (priors of 1)."""
        return (self.documents + 1.0) / (self.expected_documents + 1.0)

    @property
    def significance(self) -> float:
        """How unlikely its documents in the window are by chance: the Poisson likelihood-
        ratio statistic G = 2 (x ln(x / λ) − (x − λ)) of x documents where λ were expected
        (both with the priors of ``ratio``), 0 below expectation. G follows a chi-square
        with one degree of freedom: above 10.83 the surge has p < 0.001."""
        x, lam = self.documents + 1.0, self.expected_documents + 1.0
        return 2.0 * (x * math.log(x / lam) - (x - lam)) if x > lam else 0.0


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


def _noon(day: date) -> datetime:
    return datetime.combine(day, time(12), tzinfo=UTC)


def in_window(daily: Daily, since: date, end: date) -> int:
    return sum(n for d, n in daily if since <= d <= end)


def totals(dailies: Iterable[Daily]) -> Daily:
    """Mentions per day summed; of the top level's communities, which cover every member,
    the whole graph's."""
    tally: Counter[date] = Counter()
    for daily in dailies:
        for d, n in daily:
            tally[d] += n
    return tuple(sorted(tally.items()))


def score_nodes(
    nodes: Sequence[StoryNode], since: date, end: date, baseline: Daily | None = None
) -> dict[int, EmergingScore]:
    """Each community's emerging score in ``since`` .. ``end`` on shares of the news."""
    base = totals(n.daily for n in nodes if n.level == 0) if baseline is None else baseline
    histories = {str(n.community): [(_noon(d), c) for d, c in n.daily if d <= end] for n in nodes}
    scored = emerging_scores(
        histories,
        window_days=(end - since).days + 1,
        as_of=_noon(end),
        baseline=[(_noon(d), c) for d, c in base if d <= end],
    )
    return {int(k): v for k, v in scored.items()}


def window_documents(
    units: Iterable[tuple[str, date | None, Iterable[str]]],
    member_of: Mapping[str, Iterable[int]],
    since: date,
    end: date,
) -> dict[int, int]:
    """Documents in ``since`` .. ``end`` mentioning each community, from text units given as
    (document, day, entity keys) and each key's communities (by number, any level)."""
    seen: dict[int, set[str]] = defaultdict(set)
    for document, day, keys in units:
        if day is None or not since <= day <= end:
            continue
        for key in keys:
            for c in member_of.get(key, ()):
                seen[c].add(document)
    return {c: len(docs) for c, docs in seen.items()}


def _document_score(s: EmergingScore, documents: int) -> tuple[float, float]:
    """(score, expected documents): the emerging score on documents (module docstring)."""
    expected = s.expected * documents / s.recent if s.recent else 0.0
    return math.log1p(documents) * math.log((documents + 1.0) / (expected + 1.0)), expected


def _row(node: StoryNode, scored: tuple[EmergingScore, float, float], documents: int) -> Storyline:
    s, score, expected = scored
    return Storyline(node, score, s.recent, s.earlier, s.expected, documents, expected)


def storyline_groups(nodes: Iterable[StoryNode]) -> dict[int, int]:
    """Each community's storyline: the top of its chain of children that hold most members."""
    by_number = {n.community: n for n in nodes}
    head: dict[int, int] = {}

    def top(n: StoryNode) -> int:
        if n.community in head:
            return head[n.community]
        parent = by_number.get(n.parent)
        continues = parent is not None and len(n.members) > FOLD_SHARE * len(parent.members)
        found = top(parent) if continues and parent is not None else n.community
        head[n.community] = found
        return found

    for n in by_number.values():
        top(n)
    return head


def fold(
    nodes: Sequence[StoryNode],
    since: date,
    end: date,
    *,
    limit: int,
    level: int | None = None,
    baseline: Daily | None = None,
    documents: Mapping[int, int],
    distinct: bool = True,
    reach: bool = True,
) -> list[Storyline]:
    """At most ``limit`` distinct storylines mentioned in the window, best first (see the
    module docstring); ``documents`` is ``window_documents``. ``level`` keeps the rows to one
    level of the hierarchy, ``distinct=False`` lists every community (neither folds).
    ``reach=False`` stops at ``limit`` rows, leaving ``within`` incomplete."""
    mentions = score_nodes(nodes, since, end, baseline)
    scores = {
        n: (s, *_document_score(s, documents.get(n, 0)))
        for n, s in mentions.items()
        if s.recent > 0 and documents.get(n, 0) > 0
    }
    by_number = {n.community: n for n in nodes}
    groups = storyline_groups(nodes)
    chain: dict[int, list[int]] = defaultdict(list)
    for n, g in groups.items():
        chain[g].append(n)
    ranked = sorted(
        (n for n in nodes if n.community in scores),
        key=lambda n: (-scores[n.community][1], -n.level, n.community),
    )
    if level is not None:
        ranked = [n for n in ranked if n.level == level]
    if level is not None or not distinct:
        return [_row(n, scores[n.community], documents[n.community]) for n in ranked[:limit]]
    rows: list[Storyline] = []
    row_of: dict[str, int] = {}  # each member of a row taken: that row (rows are disjoint)
    within: dict[int, list[str]] = defaultdict(list)
    shown_groups: set[int] = set()
    for node in ranked:
        if groups[node.community] in shown_groups:
            continue  # another level of a storyline already shown
        overlap = min((row_of[k] for k in node.members if k in row_of), default=None)
        if overlap is not None:
            within[overlap].append(node.id)
            continue
        if len(rows) == limit:
            if not reach:
                break
            continue  # still collecting what the rows shown hold
        folded = tuple(
            by_number[m].id
            for m in sorted(chain[groups[node.community]], key=lambda m: by_number[m].level)
            if m != node.community
        )
        row = _row(node, scores[node.community], documents[node.community])
        rows.append(replace(row, folded=folded))
        row_of.update(dict.fromkeys(node.members, len(rows) - 1))
        shown_groups.add(groups[node.community])
    return [replace(r, within=tuple(within[i])) for i, r in enumerate(rows)]


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


def newsworthy(
    rows: Iterable[Storyline],
    *,
    min_documents: int,
    min_ratio: float,
    min_significance: float = 0.0,
) -> list[Storyline]:
    """Rows that emerged (no earlier share) or surged (``min_ratio`` × their share), in at
    least ``min_documents`` documents of the window, with a surge at least
    ``min_significance`` (``Storyline.significance``), the most significant first."""
    found = [
        r
        for r in rows
        if r.documents >= min_documents
        and r.score > 0
        and (r.earlier == 0 or r.ratio >= min_ratio)
        and r.significance >= min_significance
    ]
    return sorted(found, key=lambda r: -r.significance)


def daily_from_iso(points: Iterable[tuple[str, int]]) -> Daily:
    tally: Counter[date] = Counter()
    for text, n in points:
        try:
            tally[date.fromisoformat(text[:10])] += n
        except ValueError:
            continue
    return tuple(sorted(tally.items()))


def window_back(end: date, days: int) -> date:
    return end - timedelta(days=max(days, 1) - 1)


def window_nodes(
    communities: Sequence[SnapshotCommunity],
    documents: Mapping[int, int],
    report_titles: Mapping[int, str] | None = None,
) -> tuple[list[StoryNode], Daily]:
    """The fold nodes of the community rows the window's documents mention (every other
    community is left out of the ranking anyway, and an ancestor of one is mentioned too),
    and the baseline: the whole graph's mentions per day, from the top level's rows."""
    baseline = totals(daily_from_iso(c.mentions_per_day) for c in communities if c.level == 0)
    mentioned = [c for c in communities if documents.get(c.community, 0) > 0]
    return nodes_of(mentioned, report_titles), baseline


def nodes_of(
    communities: Iterable[SnapshotCommunity], report_titles: Mapping[int, str] | None = None
) -> list[StoryNode]:
    """Fold nodes of snapshot community rows; ``report_titles`` by community number."""
    titles = report_titles or {}
    return [
        StoryNode(
            community=c.community,
            id=c.id,
            level=c.level,
            parent=c.parent,
            members=frozenset(c.entity_ids),
            daily=daily_from_iso(c.mentions_per_day),
            report_title=titles.get(c.community, ""),
        )
        for c in communities
    ]


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
