"""What was active in a time window: mentions of entities and communities on document time.

A community is active when its members are mentioned in the window at all; global search and
the local context can then keep to the storylines of that period.
"""

from __future__ import annotations

from query.index import QueryIndex
from query.time_window import TimeWindow


def entity_mentions(index: QueryIndex, key: str, window: TimeWindow) -> int:
    return window.count(index.entity_daily.get(key, ()))


def community_mentions(index: QueryIndex, community: int, window: TimeWindow) -> int:
    return window.count(index.community_daily.get(community, ()))


def active_communities(index: QueryIndex, window: TimeWindow) -> set[int] | None:
    """Community numbers with mentions in the window; ``None`` (no filter) when unbounded."""
    if not window.bounded:
        return None
    return {c for c in index.communities if community_mentions(index, c, window) > 0}


def text_units_in_window(index: QueryIndex, window: TimeWindow) -> list[str]:
    return [u for u, day in index.unit_dates.items() if window.contains(day)]
