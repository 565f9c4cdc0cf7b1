"""Trend questions on document time: what is emerging, what is new, how mentions moved.

The window is ``since`` .. ``until`` (whole days); an open end is the newest document's day
and an open start is ``default_days`` before the end, so "trends" with no window means the
last week of the collection. Communities are ranked by ``graph.trends.emerging`` on their daily
mentions against the whole graph's (shares of the news), with the window as the recent
period and its end as ``as_of`` (mentions after the end are not seen, so asking about March
gives March's answer even in a snapshot of June), and folded into one row per storyline
(``graph.trends.storylines``): the levels of one story are one row, rows never share members, and
each row says why it is news (its top documents, its new entities) and is titled by them
(by its report's title when an LLM wrote it). Only communities mentioned in the window are
listed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date, timedelta
from typing import Any

from graph.trends.story_detail import NewMember, StoryDetail, TopDocument, describe
from graph.trends.storylines import Daily, Storyline, StoryNode, fold, totals, window_documents
from query.index import QueryIndex
from query.time_window import TimeWindow, to_date


@dataclass(frozen=True, slots=True)
class TrendingCommunity:
    community: int  # the number Reports citations use
    id: str
    level: int
    title: str
    score: float
    recent: int  # mentions in the window
    earlier: int  # mentions before it
    expected: float  # the community's earlier share of the news, as mentions per window
    top_entities: tuple[str, ...]
    documents: int = 0  # documents in the window that mention it
    expected_documents: float = 0.0  # ``expected`` in documents
    ratio: float = 1.0  # (documents + 1) / (expected_documents + 1)
    folded: tuple[str, ...] = ()  # ids of the other levels of this storyline
    within: tuple[str, ...] = ()  # ids of other ranked communities nested with this row
    top_documents: tuple[TopDocument, ...] = ()
    new_entities: tuple[NewMember, ...] = ()


@dataclass(frozen=True, slots=True)
class NewEntity:
    id: int
    key: str
    title: str
    type: str
    first_seen: str
    mentions: int  # in the window


@dataclass(frozen=True, slots=True)
class EntityTimeline:
    id: int
    key: str
    title: str
    points: tuple[tuple[str, int], ...]  # (ISO day, mentions) for days with mentions


@dataclass(frozen=True, slots=True)
class ThenCommunity:
    """A community of the answer as an earlier graph version knew it (by its stable id)."""

    existed: bool  # the community had this id then
    size: int  # its members then (0 when it did not exist)
    rank: int | None  # its place in that version's ranking (None: not mentioned in its window)
    score: float | None
    recent: int  # its mentions in that version's window


@dataclass(frozen=True, slots=True)
class DroppedCommunity:
    """A top row of the earlier answer that is not in the answer now, as it was then."""

    rank: int  # its place in that version's ranking
    community: int
    id: str
    level: int
    title: str
    score: float
    recent: int


@dataclass(frozen=True, slots=True)
class TrendComparison:
    """The same trend question answered from another graph version: ``then`` for every
    community of the answer now, and the communities that were in the top rows then and
    are not now (``dropped``, as they were then)."""

    snapshot_version: int
    since: str
    until: str
    then: dict[str, ThenCommunity]  # by community id
    dropped: tuple[DroppedCommunity, ...]


@dataclass(frozen=True, slots=True)
class TrendsResult:
    since: str
    until: str
    window_days: int
    communities: tuple[TrendingCommunity, ...]
    new_entities: tuple[NewEntity, ...]
    timelines: tuple[EntityTimeline, ...]
    snapshot_version: int
    compared: TrendComparison | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def effective_span(index: QueryIndex, window: TimeWindow, default_days: int) -> tuple[date, date]:
    """Both ends of the window: an open end is the newest document's day, an open start
    ``default_days`` before the end."""
    end = window.until or index.newest or date(1970, 1, 1)
    return window.since or end - timedelta(days=default_days - 1), end


class IndexStories:
    """``graph.trends.story_detail.StoryLookup`` over a query index."""

    def __init__(self, index: QueryIndex) -> None:
        self.index = index

    def entity_title(self, key: str) -> str | None:
        e = self.index.entities.get(key)
        return e.title if e is not None else None

    def entity_daily(self, key: str) -> Daily:
        return self.index.entity_daily.get(key, ())

    def entity_first_seen(self, key: str) -> date | None:
        e = self.index.entities.get(key)
        daily = self.index.entity_daily.get(key, ())
        return (to_date(e.first_seen) if e is not None else None) or (
            daily[0][0] if daily else None
        )

    def entity_units(self, key: str) -> tuple[str, ...]:
        return self.index.text_units_by_entity.get(key, ())

    def unit_document(self, unit: str) -> tuple[str, date | None] | None:
        u = self.index.text_units.get(unit)
        return None if u is None else (u.document_id, self.index.unit_dates.get(unit))

    def document_title(self, document: str) -> str:
        d = self.index.documents.get(document)
        return d.title if d is not None else document


def story_nodes(index: QueryIndex, documents: Mapping[int, int]) -> list[StoryNode]:
    """The fold's view of the communities the window's documents mention; report titles
    only in LLM mode (an offline report's title is a list of names, which the storyline
    title beats)."""
    llm = index.meta.mode == "llm"
    out = []
    for n, c in index.communities.items():
        if documents.get(n, 0) <= 0:
            continue
        report = index.reports.get(n)
        titled = report is not None and (llm or report.mode == "llm")
        out.append(
            StoryNode(
                n,
                c.id,
                c.level,
                c.parent,
                frozenset(c.entity_ids),
                index.community_daily.get(n, ()),
                report.title if titled and report is not None else "",
            )
        )
    return out


def trending_communities(
    index: QueryIndex,
    since: date,
    end: date,
    *,
    limit: int,
    level: int | None = None,
    detail: bool = True,
    distinct: bool = True,
) -> list[TrendingCommunity]:
    """Storylines mentioned in ``since`` .. ``end``, by emerging score, best first; with
    ``level``, the communities of that level alone; ``distinct=False``, every community.
    ``detail=False`` leaves out the top documents and new entities and titles rows by their
    report (cheaper, for comparisons)."""
    documents = window_documents(
        (
            (u.document_id, index.unit_dates.get(u.id), u.entity_ids)
            for u in index.text_units.values()
        ),
        {k: levels.values() for k, levels in index.entity_communities.items()},
        since,
        end,
    )
    rows = fold(
        story_nodes(index, documents),
        since,
        end,
        limit=limit,
        level=level,
        documents=documents,
        distinct=distinct,
        baseline=totals(
            index.community_daily.get(n, ()) for n, c in index.communities.items() if c.level == 0
        ),
    )
    lookup = IndexStories(index)
    return [_trending(index, row, lookup, since, end, detail=detail) for row in rows]


def _trending(
    index: QueryIndex,
    row: Storyline,
    lookup: IndexStories,
    since: date,
    end: date,
    *,
    detail: bool,
) -> TrendingCommunity:
    """One storyline as a row; without ``detail``, titled by its report alone."""
    n = row.node.community
    c = index.communities[n]
    if detail:
        found = describe(row, lookup, since, end)
    else:
        report = index.reports.get(n)
        found = StoryDetail(report.title if report else c.title, (), (), ())
    return TrendingCommunity(
        n,
        c.id,
        c.level,
        found.title,
        row.score,
        row.recent,
        row.earlier,
        row.expected,
        found.top_entities,
        row.documents,
        round(row.expected_documents, 2),
        round(row.ratio, 3),
        row.folded,
        row.within,
        found.top_documents,
        found.new_entities,
    )


def new_entities(index: QueryIndex, window: TimeWindow, *, limit: int) -> list[NewEntity]:
    """Entities first mentioned inside the window, most mentioned first."""
    found = []
    for e in index.entities.values():
        daily = index.entity_daily.get(e.id, ())
        first = to_date(e.first_seen) or (daily[0][0] if daily else None)
        if first is not None and window.contains(first):
            found.append(
                NewEntity(
                    e.human_readable_id,
                    e.id,
                    e.title,
                    e.type,
                    first.isoformat(),
                    window.count(daily),
                )
            )
    found.sort(key=lambda x: (-x.mentions, x.first_seen, x.title))
    return found[:limit]


def timelines(
    index: QueryIndex, window: TimeWindow, *, keys: Sequence[str] | None = None, limit: int = 10
) -> list[EntityTimeline]:
    """Daily mentions in the window of ``keys``, or of the most mentioned entities."""
    if keys is None:
        counted = [(window.count(index.entity_daily.get(k, ())), k) for k in index.entities]
        keys = [k for c, k in sorted(counted, key=lambda x: (-x[0], x[1])) if c > 0][:limit]
    out = []
    for k in keys:
        e = index.entities.get(k)
        if e is None:
            continue
        points = tuple(
            (d.isoformat(), n) for d, n in index.entity_daily.get(k, ()) if window.contains(d)
        )
        out.append(EntityTimeline(e.human_readable_id, k, e.title, points))
    return out


def trends(
    index: QueryIndex,
    window: TimeWindow,
    *,
    limit: int = 10,
    level: int | None = None,
    entity_keys: Sequence[str] | None = None,
    default_days: int = 7,
) -> TrendsResult:
    since, until = effective_span(index, window, default_days)
    span = TimeWindow(since, until)
    return TrendsResult(
        since=since.isoformat(),
        until=until.isoformat(),
        window_days=(until - since).days + 1,
        communities=tuple(trending_communities(index, since, until, limit=limit, level=level)),
        new_entities=tuple(new_entities(index, span, limit=limit)),
        timelines=tuple(timelines(index, span, keys=entity_keys, limit=limit)),
        snapshot_version=index.version,
    )


def compare_trends(
    now: TrendsResult,
    then_index: QueryIndex,
    window: TimeWindow,
    *,
    limit: int = 10,
    level: int | None = None,
    default_days: int = 7,
) -> TrendsResult:
    """``now`` with the same question answered from ``then_index`` (another graph version)
    beside it. ``window`` is the question's window read against that version (callers
    parse it with its newest day: "last 7 days" is the last week of what each version had,
    a date range the same days in both). Communities are matched by their stable ids,
    which follow a community through its changes."""
    since, until = effective_span(then_index, window, default_days)
    everything = len(then_index.communities)
    ranked = trending_communities(
        then_index, since, until, limit=everything, level=level, detail=False
    )
    # a community folded into (or nested in) a row then takes that row's place
    place = {
        cid: (i, c)
        for i, c in reversed(list(enumerate(ranked, 1)))
        for cid in (*c.within, *c.folded, c.id)
    }
    then: dict[str, ThenCommunity] = {}
    for c in now.communities:
        found = then_index.community_by_id.get(c.id)
        at = place.get(c.id)
        then[c.id] = ThenCommunity(
            existed=found is not None,
            size=found.size if found is not None else 0,
            rank=at[0] if at else None,
            score=at[1].score if at else None,
            recent=at[1].recent if at else 0,
        )
    shown = {c.id for c in now.communities}
    dropped = tuple(
        DroppedCommunity(i, c.community, c.id, c.level, c.title, c.score, c.recent)
        for i, c in enumerate(ranked[:limit], 1)
        if c.id not in shown
    )
    comparison = TrendComparison(
        then_index.version, since.isoformat(), until.isoformat(), then, dropped
    )
    return replace(now, compared=comparison)
