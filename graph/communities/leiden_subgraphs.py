"""A community's member set as a subgraph: the edges among its members, its connected pieces,
and whether some of its members are still joined to each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import igraph as ig

Edges = list[tuple[int, int, float]]  # (i, j, weight), i < j indexes into sorted keys


def induced_edges(adjacency: Mapping[str, Mapping[str, float]], keys: Sequence[str]) -> Edges:
    """The edges among ``keys`` (sorted), each once. A member with more edges than there
    are members after it (a hub) has those looked up instead of all its edges read."""
    local = {v: i for i, v in enumerate(keys)}
    n = len(keys)
    edges: Edges = []
    for i, v in enumerate(keys):
        around = adjacency[v]
        if len(around) > n - i:
            for j in range(i + 1, n):
                w = around.get(keys[j])
                if w is not None:
                    edges.append((i, j, w))
            continue
        for u, w in around.items():
            at = local.get(u)
            if at is not None and i < at:
                edges.append((i, at, w))
    edges.sort()
    return edges


def connected_pieces(keys: tuple[str, ...], edges: Edges) -> list[tuple[tuple[str, ...], Edges]]:
    """The connected pieces of a community, each with its keys and its edges re-indexed."""
    if len(keys) < 2:
        return [(keys, edges)]
    piece_of = ig.GraphBase(len(keys), [(a, b) for a, b, _ in edges], False).connected_components()
    if max(piece_of) == 0:
        return [(keys, edges)]
    return _regroup(keys, edges, piece_of)


def _regroup(
    keys: tuple[str, ...], edges: Edges, group_of: Sequence[int]
) -> list[tuple[tuple[str, ...], Edges]]:
    """``keys`` bucketed by ``group_of`` (in order of first appearance), each bucket with the
    edges inside it, re-indexed into it."""
    position: list[int] = []
    buckets: dict[int, list[str]] = {}
    for key, g in zip(keys, group_of, strict=True):
        bucket = buckets.setdefault(g, [])
        position.append(len(bucket))
        bucket.append(key)
    inside: dict[int, Edges] = {g: [] for g in buckets}
    for i, j, w in edges:
        g = group_of[i]
        if g == group_of[j]:
            inside[g].append((position[i], position[j], w))
    return [(tuple(buckets[g]), inside[g]) for g in buckets]


def still_connected(
    adjacency: Mapping[str, Mapping[str, float]], members: frozenset[str], seeds: set[str]
) -> bool:
    """Whether ``seeds`` (members) are still joined to each other inside ``members``: a walk
    from one of them that stops as soon as it has met them all. A community that lost a
    member comes apart, if at all, between that member's former neighbours (``seeds``), and
    they usually meet again within a step or two (through a hub), so the walk rarely visits
    the whole community."""
    left = set(seeds)
    start = left.pop()
    seen = {start}
    stack = [start]
    while stack and left:
        for u in adjacency[stack.pop()]:
            if u in members and u not in seen:
                seen.add(u)
                stack.append(u)
                left.discard(u)
    return not left
