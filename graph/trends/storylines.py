"""Storylines: the community hierarchy folded into one row per story, ranked by its news.

Hierarchical Leiden describes one story at several levels: a community of 40 entities, its
child of 35, the child's child of 30 are one storyline, and ranking every level on its own
fills a trend list with the same story five times. Here:

* **Scoring on documents.** A storyline is news when many articles carry it, not when one
  article names many of its members: the emerging score (``graph.trends.emerging``) is taken on the
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
* **Why** and **titles**: ``graph.trends.story_detail`` describes a row (its top documents, new
  entities and title).

Pure: it reads the community rows and their mentions per day it is given.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta

from graph.trends.emerging import EmergingScore, emerging_scores
from graph.versions.model import SnapshotCommunity

Daily = tuple[tuple[date, int], ...]  # (day, mentions), ascending

FOLD_SHARE = 0.5  # a child holding more than this share of its parent's members continues it


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


def row_daily(c: SnapshotCommunity) -> Daily:
    """A community row's own mentions per day (as the graph tables derive them on reading)."""
    return daily_from_iso(c.mentions_per_day)


def window_nodes(
    communities: Sequence[SnapshotCommunity],
    documents: Mapping[int, int],
    report_titles: Mapping[int, str] | None = None,
    daily: Callable[[SnapshotCommunity], Daily] = row_daily,
) -> tuple[list[StoryNode], Daily]:
    """The fold nodes of the community rows the window's documents mention (every other
    community is left out of the ranking anyway, and an ancestor of one is mentioned too),
    and the baseline: the whole graph's mentions per day, from the top level's rows.
    ``daily``: a community's mentions per day (a writer's rows carry none)."""
    baseline = totals(daily(c) for c in communities if c.level == 0)
    mentioned = [c for c in communities if documents.get(c.community, 0) > 0]
    return nodes_of(mentioned, report_titles, daily), baseline


def nodes_of(
    communities: Iterable[SnapshotCommunity],
    report_titles: Mapping[int, str] | None = None,
    daily: Callable[[SnapshotCommunity], Daily] = row_daily,
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
            daily=daily(c),
            report_title=titles.get(c.community, ""),
        )
        for c in communities
    ]
