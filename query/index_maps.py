"""The lookup maps and rows of a followed index rewritten: copies of the old index's maps with
only the entries a change reaches replaced (``query.index_update`` applies the changed rows and
calls these).

Each function returns a new map or row; the old one, still serving queries, is never mutated.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import date
from typing import Protocol, TypeVar

from graph.versions.model import SnapshotCommunity, SnapshotRelationship, SnapshotReport
from query.time_window import DailyCounts


class _Row(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def human_readable_id(self) -> int: ...


R = TypeVar("R", bound=_Row)
C = TypeVar("C", SnapshotCommunity, SnapshotReport)

# (entity key, level, community number): one entity's membership at one level
Membership = tuple[str, int, int]


def moved_memberships(
    before: Mapping[str, dict[int, int]], leave: Iterable[Membership], join: Iterable[Membership]
) -> dict[str, dict[int, int]]:
    """Entity -> {level: community} after the memberships in ``leave`` ended and those in
    ``join`` began; only the level maps of the entities that moved are copied."""
    memberships = dict(before)
    copied: set[str] = set()  # entities whose level map is this map's own already

    def levels_of(key: str) -> dict[int, int]:
        if key not in copied:
            copied.add(key)
            memberships[key] = dict(memberships.get(key, {}))
        return memberships[key]

    for key, level, n in leave:  # all endings first: a member may move between two
        if memberships.get(key, {}).get(level) == n:
            del levels_of(key)[level]
    for key, level, n in join:
        levels_of(key)[level] = n
    for key in copied:
        levels = memberships[key]
        if levels:
            memberships[key] = dict(sorted(levels.items()))
        else:
            del memberships[key]
    return memberships


@dataclass(frozen=True, slots=True)
class DailyMoves:
    """Entities' mentions per day before and after a change; ``redone``: the keys whose
    series ``now`` holds afresh (every other one is as it was)."""

    before: Mapping[str, DailyCounts]
    now: Mapping[str, DailyCounts]
    redone: set[str]


def moved_daily(
    community_daily: Mapping[int, DailyCounts],
    entities: DailyMoves,
    memberships: Mapping[str, Mapping[int, int]],
    moves: tuple[Iterable[Membership], Iterable[Membership]],
) -> tuple[dict[int, DailyCounts], set[int]]:
    """Each community's mentions per day (its members' added up) after a change, and the
    communities whose series moved: the previous sums less the members that left (``moves``:
    the memberships that ended, then those that began) and plus those that joined, and for a
    member that stayed, less its previous series and plus its new one, so a community of
    100,000 members with three new mentions costs three entities, not its members.
    ``memberships``: entity -> {level: community} after the change."""
    plus: dict[int, Counter[date]] = defaultdict(Counter)
    minus: dict[int, Counter[date]] = defaultdict(Counter)
    leave, join = moves
    joined: set[tuple[str, int]] = set()
    for key, _, number in leave:
        minus[number].update(dict(entities.before.get(key, ())))
    for key, _, number in join:
        plus[number].update(dict(entities.now.get(key, ())))
        joined.add((key, number))
    for key in entities.redone:
        was, now = entities.before.get(key, ()), entities.now.get(key, ())
        if was == now:
            continue
        for number in memberships.get(key, {}).values():
            if (key, number) not in joined:  # a member before and after
                minus[number].update(dict(was))
                plus[number].update(dict(now))
    out = dict(community_daily)
    moved = plus.keys() | minus.keys()
    for number in moved:
        tally = Counter(dict(out.get(number, ())))
        tally.update(plus.get(number, {}))
        tally.subtract(minus.get(number, {}))
        out[number] = tuple(sorted((d, n) for d, n in tally.items() if n > 0))
    return out, moved


def by_hrid(
    old: Mapping[int, R], before: Mapping[str, R], after: Mapping[str, R], changed: set[str]
) -> dict[int, R]:
    """The human-readable-id map with the entries of the ``changed`` ids rewritten."""
    out = dict(old)
    for rid in changed:
        row = before.get(rid)
        if row is not None and out.get(row.human_readable_id) is row:
            del out[row.human_readable_id]
    for rid in changed:
        row = after.get(rid)
        if row is not None:
            out[row.human_readable_id] = row
    return out


def by_community_id(rows: Mapping[int, C]) -> dict[int, C]:
    """Community-number maps in the order a fresh index has them (by community id)."""
    return dict(sorted(rows.items(), key=lambda kv: kv[1].id))


_RELATIONSHIP_FIELDS = tuple(f.name for f in fields(SnapshotRelationship))


def with_combined_degree(r: SnapshotRelationship, value: int) -> SnapshotRelationship:
    """``replace(r, combined_degree=value)`` without its per-call introspection: a hub's new
    relationship moves the combined degree of every one of its relationships."""
    values = {name: getattr(r, name) for name in _RELATIONSHIP_FIELDS}
    values["combined_degree"] = value
    return SnapshotRelationship(**values)
