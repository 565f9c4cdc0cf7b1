"""The recursion of hierarchical Leiden: a community re-partitioned inside itself (Leiden on
its induced subgraph, warm-started) until every leaf fits, or its previous sub-hierarchy
copied when none of its members is on the frontier (``graph.communities.leiden``'s module
docstring).

Shared by the whole-graph run (``graph.communities.leiden``) and the maintained one
(``graph.communities.leiden_local``), which splits a changed community the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import eq

from graph.communities.leiden_graph import HierarchyError
from graph.communities.leiden_partition import (
    PreviousRun,
    RunInputs,
    make_igraph,
    run_leiden,
    warm_leiden,
    warm_start,
)


@dataclass(slots=True)
class SplitNode:
    """A community of the recursion: its members and the communities it was split into."""

    members: list[int]  # global node indexes, sorted
    children: list[SplitNode]
    # (level, label) of the previous community with exactly these members, when copied
    reused: tuple[int, int] | None = None


def internal_edges(
    group_of: Sequence[int],
    ls: Sequence[int],
    lt: Sequence[int],
    edges: Iterable[int],
    n_groups: int,
) -> list[list[int]]:
    """``edges`` (whose local endpoints are ``ls``, ``lt``) with both ends in the same group,
    bucketed by group, in order."""
    out: list[list[int]] = [[] for _ in range(n_groups)]
    gs = list(map(group_of.__getitem__, ls))
    inside = map(eq, gs, map(group_of.__getitem__, lt))
    for e, c in compress(zip(edges, gs, strict=True), inside):
        out[c].append(e)
    return out


def ranked_groups(n: int, membership: Sequence[int]) -> tuple[list[list[int]], list[int]]:
    """Members (local indexes ``0..n-1``) per community, ordered by descending size then
    smallest member (our labels), and each member's group."""
    buckets: dict[int, list[int]] = {}
    for v, c in zip(range(n), membership, strict=True):
        buckets.setdefault(c, []).append(v)  # ascending v: each bucket is sorted
    ordered = sorted(buckets.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    rank = {c: g for g, (c, _) in enumerate(ordered)}
    return [m for _, m in ordered], list(map(rank.__getitem__, membership))


def split_community(ctx: RunInputs, members: list[int], edges: list[int], depth: int) -> SplitNode:
    """A community, re-partitioned inside itself while it is larger than ``max_size``."""
    if len(members) <= ctx.max_size:
        return SplitNode(members, [], _previous_leaf(ctx, members))
    reused = _reuse(ctx, members)
    if reused is not None:
        return reused
    local = dict(zip(members, range(len(members)), strict=True))
    ls = list(map(local.__getitem__, map(ctx.source.__getitem__, edges)))
    lt = list(map(local.__getitem__, map(ctx.target.__getitem__, edges)))
    weights = list(map(ctx.weight.__getitem__, edges))
    g = make_igraph(len(members), ls, lt)
    start = warm_start(ctx, g, members, depth + 1, ls, lt, weights)
    membership, _ = warm_leiden(ctx, g, ls, lt, weights, start)
    if len(set(membership)) < 2:
        membership, _ = run_leiden(ctx, g, weights, None, cap=ctx.max_size)
    if len(set(membership)) < 2:
        raise HierarchyError(f"Leiden could not split a community of {len(members)} nodes")
    groups, group_of = ranked_groups(len(members), membership)
    internal = internal_edges(group_of, ls, lt, edges, len(groups))
    return SplitNode(
        members,
        [
            split_community(ctx, list(map(members.__getitem__, g)), internal[c], depth + 1)
            for c, g in enumerate(groups)
        ],
    )


def _reuse(ctx: RunInputs, members: list[int]) -> SplitNode | None:
    """The previous sub-hierarchy of an identical community none of whose members is on the
    frontier."""
    prev = ctx.prev
    if prev is None or any(map(prev.frontier.__getitem__, members)):
        return None
    found = _previous_same(prev, members)
    if found is None or found not in prev.children:
        return None
    return _copy_subtree(prev, *found, members)


def _previous_leaf(ctx: RunInputs, members: list[int]) -> tuple[int, int] | None:
    """(level, label) of the previous leaf community with exactly ``members``, frontier or
    not: a leaf is its members alone, so the one the split made again is that community,
    which the caller can then keep (its member set, its label, its id) instead of making it
    anew."""
    if ctx.prev is None:
        return None
    found = _previous_same(ctx.prev, members)
    return None if found is None or found in ctx.prev.children else found


def _previous_same(prev: PreviousRun, members: list[int]) -> tuple[int, int] | None:
    """(level, label) of the previous community with exactly ``members``, found through the
    first member's previous labels, from the top: the first of its communities with the
    same size, when every member carried that label. Levels where it has no label are
    above those the labels were looked up for (or it is new). Index lookups only, no member
    set built: a run reuses most of the hierarchy, and this is done for every community it
    reuses."""
    first = members[0]
    for level, labels in enumerate(prev.labels):
        label = labels[first]
        if label is None:
            continue
        size = len(prev.levels[level][label])
        if size > len(members):
            continue
        if size == len(members) and list(map(labels.__getitem__, members)).count(label) == size:
            return level, label
        return None
    return None


def _copy_subtree(prev: PreviousRun, level: int, label: int, members: list[int]) -> SplitNode:
    """The previous community (``level``, ``label``), whose members are now ``members``
    (sorted indexes), with its sub-hierarchy: each level's members bucketed by their previous
    label one level down (children partition their parent), so every bucket stays sorted."""
    kids = prev.children.get((level, label), [])
    if not kids:
        return SplitNode(members, [], (level, label))
    below = prev.labels[level + 1]
    buckets: dict[int | None, list[int]] = {kid: [] for kid in kids}
    for v in members:
        buckets[below[v]].append(v)
    return SplitNode(
        members,
        [_copy_subtree(prev, level + 1, kid, buckets[kid]) for kid in kids],
        (level, label),
    )
