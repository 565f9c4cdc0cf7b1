"""The lookup maps and rows of a followed index rewritten: copies of the old index's maps with
only the entries a change reaches replaced (``query.index_update`` applies the changed rows and
calls these).

Each function returns a new map or row; the old one, still serving queries, is never mutated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Protocol, TypeVar

from graph.versions.model import SnapshotCommunity, SnapshotRelationship, SnapshotReport


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
