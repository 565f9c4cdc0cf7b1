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
from dataclasses import asdict, dataclass
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
class TrendsResult:
    since: str
    until: str
    window_days: int
    communities: tuple[TrendingCommunity, ...]
    new_entities: tuple[NewEntity, ...]
    timelines: tuple[EntityTimeline, ...]
    snapshot_version: int

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
