"""Each community's mentions per day and emerging score, kept between runs in memory.

A community's row in the graph tables carries its members' mentions per day and the emerging
score computed from them (``graph.trends.emerging``). Summing them anew for every community
at every commit read every member entity of the graph: at 20,000 articles most of a +40
commit. ``Dailies`` keeps, per community, the member set it summed over with the sum, and each
score with the time it was scored at; a commit sums again only the communities whose members
changed or hold an entity the run's changes touched, and scores again only those, unless the
newest mention day moved (then every score, since each depends on it). A community its
children partition (the hierarchy's levels nest) is the sum of theirs, so only the finest
communities read entities: a touched member of a large community costs its leaf's entities,
not the large one's.

It lives in the job's memory, not in its saved state (a restarted job sums every community
once): it pickles as an empty cache, and a child retired for its memory hands it to the next
one (``graph.job.warm``).
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
    noon: dict[date, datetime] = {}  # a day's noon made once, not once per community
    histories = {
        cid: [(noon.get(d) or noon.setdefault(d, _noon(d)), n) for d, n in sorted(daily.items())]
        for cid, daily in dailies.items()
    }
    histories = {k: v for k, v in histories.items() if v}
    if not histories:
        return {}
    at = None if as_of is None else _noon(as_of)
    return {k: s.score for k, s in emerging_scores(histories, as_of=at).items()}


def _partitioned(c: Community, kids: list[Community]) -> bool:
    """Whether ``kids`` split ``c``'s members between them, each member in one: then ``c``'s
    mentions per day are theirs added up, with no entity read."""
    if sum(len(k.entity_keys) for k in kids) != len(c.entity_keys):
        return False
    return frozenset().union(*(k.entity_keys for k in kids)) == c.entity_keys


def _added(dailies: Iterable[dict[date, int]]) -> dict[date, int]:
    total: Counter[date] = Counter()
    for daily in dailies:
        total.update(daily)
    return dict(total)


class Dailies:
    """Per community id: the members its mentions per day were summed over and the sum; its
    score and the day it was scored as of."""

    def __init__(self) -> None:
        self.sums: dict[str, tuple[frozenset[str], dict[date, int]]] = {}
        self.scores: dict[str, float] = {}
        self.as_of: date | None = None
        self.redone: set[str] = set()  # the communities the last update summed or scored again

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
        by_id = {c.id: c for c in communities}
        sums: dict[str, tuple[frozenset[str], dict[date, int]]] = {}
        redone: set[str] = set()
        changed = touched or set()

        def summed(c: Community) -> None:
            kids = [by_id[k] for k in c.children if k in by_id]
            for kid in kids:
                if kid.id not in sums:
                    summed(kid)
            nested = bool(kids) and _partitioned(c, kids)
            kept = self.sums.get(c.id)
            if (
                kept is None
                or kept[0] != c.entity_keys
                or (nested and any(k.id in redone for k in kids))
                or (not nested and not c.entity_keys.isdisjoint(changed))
            ):
                daily = (
                    _added(sums[k.id][1] for k in kids)
                    if nested
                    else community_daily(view, c.entity_keys)
                )
                kept = (c.entity_keys, daily)
                redone.add(c.id)
            sums[c.id] = kept

        for c in by_id.values():
            if c.id not in sums:
                summed(c)
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
        self.redone = redone
        return {cid: daily for cid, (_, daily) in sums.items()}, self.scores
