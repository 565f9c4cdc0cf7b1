"""Lineage: what happened to the communities between two runs, as events.

Communities are compared level by level (ids never change level). ``share`` (default 0.25) is
how much of a previous community must land in a new one for that new one to be its
*successor* (and it its *predecessor*); "mainly in" means more than half of its members.

- ``split``: a previous community has ≥ 2 successors that together hold more than half of it.
  One event, on the previous id, listing the successors.
- ``merged``: ≥ 2 previous communities are each mainly in one new community. One event, on the
  new id, listing those predecessors.
- ``grew`` / ``shrank`` / ``unchanged``: a community that kept its id (``graph.communities.ids``)
  and is in no split or merge; its size changed by more than ``size_tolerance`` (a share of the
  previous size, default 0.1) or not. Members may drift within the tolerance.
- ``emerged``: a new id that no split or merge explains. Usually nothing overlaps it; if a
  previous community did overlap it (a storyline so transformed that its id ended), that one is
  listed as a predecessor.
- ``dissolved``: a previous id that ended with no split or merge explaining it; successors are
  listed when some of its members live on elsewhere.
- ``bootstrap``: the first run of an empty index — one event instead of an ``emerged`` per
  community: ``size`` is the number of entities clustered, ``successors`` the level-0 ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from graph.model import Community

EventKind = Literal[
    "bootstrap", "emerged", "grew", "shrank", "split", "merged", "dissolved", "unchanged"
]
# the kinds the community-events topic carries: ``unchanged`` is never published, a
# regenerated report of a community that kept its id is a ``report_updated``, and a merge of
# two names made or undone by alias resolution is an ``aliased`` / ``unaliased``
PUBLISHED_KINDS = (
    "bootstrap",
    "emerged",
    "grew",
    "shrank",
    "split",
    "merged",
    "dissolved",
    "report_updated",
    # alias resolution (graph.aliases.resolution): one name resolved to another, or no longer
    "aliased",
    "unaliased",
    # a storyline that emerged or surged in the latest days of document time
    # (graph.trends.storylines), with why: the run's bounded, ranked digest
    "headline",
)
# what a reader sees by default: the headlines, not every change of every community
HEADLINE_KINDS = ("headline",)


def kinds_shown(kinds: Iterable[str] | None, raw: bool) -> frozenset[str] | None:
    """The event kinds a reader sees: those asked for, else every kind (None) when ``raw``,
    else the headlines."""
    asked = frozenset(kinds or ())
    return asked or (None if raw else frozenset(HEADLINE_KINDS))


DEFAULT_SHARE = 0.25
DEFAULT_SIZE_TOLERANCE = 0.1


@dataclass(frozen=True, slots=True)
class LineageEvent:
    """One change of one community. ``size`` is the id's size in this run (0 once it ended),
    ``previous_size`` its size in the previous run (0 if it is new)."""

    kind: EventKind
    community_id: str | None  # None only for ``bootstrap``
    level: int
    size: int
    previous_size: int
    predecessors: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()


def classify(
    previous: Sequence[Community],
    current: Sequence[Community],
    *,
    share: float = DEFAULT_SHARE,
    size_tolerance: float = DEFAULT_SIZE_TOLERANCE,
    unchanged: bool = True,
) -> list[LineageEvent]:
    """Events of one run, sorted by level, then community id, then kind. ``unchanged``
    False leaves out the ``unchanged`` events: a caller that publishes changes only need not
    have one made for every community of the graph each run."""
    if not previous:
        return _bootstrap(current) if current else []
    if not unchanged:
        # a community the run kept as it was (the same object: ``graph.communities.ids``
        # reuses it) has no event and shares no member with another of its level
        had = {c.id: c for c in previous}
        has = {c.id: c for c in current}
        previous = [c for c in previous if has.get(c.id) is not c]
        current = [c for c in current if had.get(c.id) is not c]
    return _events(previous, current, share, size_tolerance, unchanged)


def classify_changes(
    before: Sequence[Community],
    after: Sequence[Community],
    *,
    share: float = DEFAULT_SHARE,
    size_tolerance: float = DEFAULT_SIZE_TOLERANCE,
) -> list[LineageEvent]:
    """``classify(previous, current, unchanged=False)`` of a run after the first, from what
    it changed alone (``graph.communities.ids.Delta``: the previous communities not kept as
    they were, and the run's communities that are not the previous object): every other
    community is the same object in both runs, which that call drops before it counts."""
    return _events(before, after, share, size_tolerance, False)


def _events(
    previous: Sequence[Community],
    current: Sequence[Community],
    share: float,
    size_tolerance: float,
    unchanged: bool,
) -> list[LineageEvent]:
    by_level: dict[int, tuple[list[Community], list[Community]]] = {}
    for c in previous:
        by_level.setdefault(c.level, ([], []))[0].append(c)
    for c in current:
        by_level.setdefault(c.level, ([], []))[1].append(c)
    events: list[LineageEvent] = []
    for level, (was, now) in sorted(by_level.items()):
        # a community with the id and members it had is unchanged, and shares no member with
        # any other community of its level: only the rest needs the overlap counting
        before = {c.id: c.entity_keys for c in was}
        same = {c.id for c in now if same_members(before.get(c.id), c.entity_keys)}
        old = [c for c in was if c.id not in same]
        new = [c for c in now if c.id not in same]
        found = _classify_level(level, old, new, share, size_tolerance)
        events.extend(e for e in found if unchanged or e.kind != "unchanged")
        if unchanged:
            events.extend(
                LineageEvent("unchanged", c.id, level, len(c.entity_keys), len(c.entity_keys))
                for c in now
                if c.id in same
            )
    events.sort(key=lambda e: (e.level, e.community_id or "", e.kind))
    return events


def same_members(a: frozenset[str] | None, b: frozenset[str]) -> bool:
    """Equal member sets, the same object first: a kept community keeps its member-set
    object, and ``==`` on two sets compares every member even when they are one object."""
    return a is b or a == b


def _bootstrap(current: Sequence[Community]) -> list[LineageEvent]:
    top = sorted(c.id for c in current if c.level == 0)
    size = len(frozenset().union(*(c.entity_keys for c in current if c.level == 0)))
    return [LineageEvent("bootstrap", None, 0, size, 0, (), tuple(top))]


def _overlaps(old: Sequence[Community], new: Sequence[Community]) -> dict[tuple[int, int], int]:
    """(old index, new index) → number of shared members, for pairs that share any.

    A community that kept its id mostly kept its members (the communities around hubs, a
    tenth of the graph, change by a few members a run): its overlap with itself is one set
    intersection, and only the members that moved are looked up one by one. A member that
    left an old community is either in a new id or joined another kept id (it was not in
    that one's old members: communities of a level are disjoint), so the lookup table holds
    only the new ids' members and the kept ids' joiners."""
    by_id = {c.id: j for j, c in enumerate(new)}
    owner: dict[str, int] = {}
    old_members = {c.id: c.entity_keys for c in old}
    for j, c in enumerate(new):
        was = old_members.get(c.id)
        owner.update(dict.fromkeys(c.entity_keys if was is None else c.entity_keys - was, j))
    out: dict[tuple[int, int], int] = {}
    for i, c in enumerate(old):
        moved: Iterable[str] = c.entity_keys
        j_same = by_id.get(c.id)
        if j_same is not None:
            now = new[j_same].entity_keys
            if stayed := len(c.entity_keys & now):
                out[(i, j_same)] = stayed
            moved = c.entity_keys - now
        for key in moved:
            into = owner.get(key)
            if into is not None:
                out[(i, into)] = out.get((i, into), 0) + 1
    return out


def _classify_level(
    level: int,
    old: Sequence[Community],
    new: Sequence[Community],
    share: float,
    size_tolerance: float,
) -> list[LineageEvent]:
    overlap = _overlaps(old, new)
    succ: dict[int, list[int]] = {}  # old index → new indexes holding ≥ share of it
    pred: dict[int, list[int]] = {}  # new index → old indexes it holds ≥ share of
    mainly: dict[int, list[int]] = {}  # new index → old indexes mainly in it
    for (i, j), n in sorted(
        overlap.items(), key=lambda kv: (-kv[1], old[kv[0][0]].id, new[kv[0][1]].id)
    ):
        size = len(old[i].entity_keys)
        if n >= share * size:
            succ.setdefault(i, []).append(j)
            pred.setdefault(j, []).append(i)
        if 2 * n > size:
            mainly.setdefault(j, []).append(i)
    split = {
        i
        for i, js in succ.items()
        if len(js) >= 2 and 2 * sum(overlap[(i, j)] for j in js) > len(old[i].entity_keys)
    }
    merged = {j for j, is_ in mainly.items() if len(is_) >= 2}
    in_merge = {i for j in merged for i in mainly[j]}
    split_products = {j for i in split for j in succ[i]}
    old_by_id = {c.id: i for i, c in enumerate(old)}
    new_size = {c.id: len(c.entity_keys) for c in new}
    events: list[LineageEvent] = []
    for i in sorted(split):
        o = old[i]
        ids = tuple(new[j].id for j in succ[i])
        size = new_size.get(o.id, 0)
        events.append(LineageEvent("split", o.id, level, size, len(o.entity_keys), (), ids))
    for j in sorted(merged):
        c = new[j]
        before = len(old[old_by_id[c.id]].entity_keys) if c.id in old_by_id else 0
        ids = tuple(sorted(old[i].id for i in mainly[j]))
        events.append(LineageEvent("merged", c.id, level, len(c.entity_keys), before, ids))
    for i, o in enumerate(old):
        if o.id not in new_size and i not in split and i not in in_merge:
            ids = tuple(new[j].id for j in succ.get(i, ()))
            events.append(LineageEvent("dissolved", o.id, level, 0, len(o.entity_keys), (), ids))
    for j, c in enumerate(new):
        if j in merged:
            continue
        if c.id in old_by_id:
            if old_by_id[c.id] not in split:
                o = old[old_by_id[c.id]]
                events.append(_resized(level, o, c, size_tolerance))
        elif j not in split_products:
            ids = tuple(old[i].id for i in pred.get(j, ()))
            events.append(LineageEvent("emerged", c.id, level, len(c.entity_keys), 0, ids))
    return events


def _resized(level: int, old: Community, new: Community, tolerance: float) -> LineageEvent:
    before, after = len(old.entity_keys), len(new.entity_keys)
    kind: EventKind = "unchanged"
    if abs(after - before) > tolerance * before:
        kind = "grew" if after > before else "shrank"
    return LineageEvent(kind, new.id, level, after, before)
