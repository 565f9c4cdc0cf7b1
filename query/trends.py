"""Trend questions on document time: what is emerging, what is new, how mentions moved.

The window is ``since`` .. ``until`` (whole days); an open end is the newest document's day
and an open start is ``default_days`` before the end, so "trends" with no window means the
last week of the collection. Communities are ranked by ``graph.emerging`` on their daily
mentions, with the window as the recent period and its end as ``as_of`` (mentions after the
end are not seen, so asking about March gives March's answer even in a snapshot of June).
Only communities mentioned in the window are listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from graph.emerging import emerging_scores, rank_emerging
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
    expected: float  # the community's earlier rate per window
    top_entities: tuple[str, ...]


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


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _top_members(
    index: QueryIndex, community: int, window: TimeWindow, n: int = 5
) -> tuple[str, ...]:
    members = index.communities[community].entity_ids
    counted = [
        (window.count(index.entity_daily.get(k, ())), index.entities[k].title)
        for k in members
        if k in index.entities
    ]
    return tuple(t for c, t in sorted(counted, key=lambda x: (-x[0], x[1])) if c > 0)[:n]


def trending_communities(
    index: QueryIndex, since: date, end: date, *, limit: int, level: int | None = None
) -> list[TrendingCommunity]:
    """Communities mentioned in ``since`` .. ``end``, by emerging score, best first."""
    window = TimeWindow(since, end)
    histories = {
        str(n): [(_midnight(d), c) for d, c in index.community_daily.get(n, ()) if d <= end]
        for n, community in index.communities.items()
        if level is None or community.level == level
    }
    days = (end - since).days + 1
    scores = emerging_scores(histories, window_days=days, as_of=_midnight(end))
    out = []
    for s in rank_emerging(scores):
        if s.recent <= 0:
            continue
        n = int(s.community_id)
        c = index.communities[n]
        report = index.reports.get(n)
        title = report.title if report else c.title
        top = _top_members(index, n, window)
        out.append(
            TrendingCommunity(
                n, c.id, c.level, title, s.score, s.recent, s.earlier, s.expected, top
            )
        )
    return out[:limit]


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
    ranked = trending_communities(then_index, since, until, limit=everything, level=level)
    place = {c.id: (i, c) for i, c in enumerate(ranked, 1)}
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
