"""Each community's mentions per day and emerging score, kept between runs in memory.

A community's row in the graph tables carries its members' mentions per day and the emerging
score computed from them (``graph.trends.emerging``). Summing them anew for every community
at every commit read every member entity of the graph: at 20,000 articles most of a +40
commit. ``Dailies`` keeps, per community, the member set it summed over with the sum, and each
score with the time it was scored at; a commit sums again only the communities whose members
changed or hold an entity the run's changes touched, and scores again only those, unless the
newest mention day moved (then every score, since each depends on it).

It lives in the job's memory, not in its saved state (a restarted job sums every community
once): it pickles as an empty cache.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time
from typing import Any

from graph.merge.view import GraphView
from graph.model import Community
from graph.trends.emerging import emerging_scores


def community_daily(view: GraphView, members: Iterable[str]) -> dict[date, int]:
    daily: Counter[date] = Counter()
    for key in members:
        ent = view.entities.get(key)
        if ent is not None:
            for day, n in ent.days.per_day().items():
                daily[day] += n
    return dict(daily)


def _noon(d: date) -> datetime:
    return datetime.combine(d, time(12), tzinfo=UTC)


def emerging(
    dailies: Mapping[str, Mapping[date, int]], as_of: date | None = None
) -> dict[str, float]:
    """Each community's emerging score from its mentions per day (by community id), as of
    noon of ``as_of`` (default: the newest day of any of them)."""
    histories = {
        cid: [(_noon(d), n) for d, n in sorted(daily.items())] for cid, daily in dailies.items()
    }
    histories = {k: v for k, v in histories.items() if v}
    if not histories:
        return {}
    at = None if as_of is None else _noon(as_of)
    return {k: s.score for k, s in emerging_scores(histories, as_of=at).items()}


class Dailies:
    """Per community id: the members its mentions per day were summed over and the sum; its
    score and the day it was scored as of."""

    def __init__(self) -> None:
        self.sums: dict[str, tuple[frozenset[str], dict[date, int]]] = {}
        self.scores: dict[str, float] = {}
        self.as_of: date | None = None

    def __reduce__(self) -> tuple[type[Dailies], tuple[Any, ...]]:
        return (Dailies, ())  # memory only: a loaded state sums afresh

    def update(
        self,
        view: GraphView,
        communities: Iterable[Community],
        touched: set[str] | None,
    ) -> tuple[dict[str, dict[date, int]], dict[str, float]]:
        """The mentions per day and the score of each of ``communities``, summed again for
        those whose members changed or include a ``touched`` entity (None: every one)."""
        if touched is None:
            self.sums.clear()
        sums: dict[str, tuple[frozenset[str], dict[date, int]]] = {}
        redone: set[str] = set()
        changed = touched or set()
        for c in communities:
            kept = self.sums.get(c.id)
            if kept is None or kept[0] != c.entity_keys or not c.entity_keys.isdisjoint(changed):
                kept = (c.entity_keys, community_daily(view, c.entity_keys))
                redone.add(c.id)
            sums[c.id] = kept
        self.sums = sums
        days = [max(daily) for _, daily in sums.values() if daily]
        as_of = max(days) if days else None
        if as_of != self.as_of:
            redone = set(sums)
        fresh = emerging({cid: sums[cid][1] for cid in redone}, as_of)
        self.scores = {
            cid: fresh.get(cid, 0.0) if cid in redone else self.scores.get(cid, 0.0) for cid in sums
        }
        self.as_of = as_of
        return {cid: daily for cid, (_, daily) in sums.items()}, self.scores
