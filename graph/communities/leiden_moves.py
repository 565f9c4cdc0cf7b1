"""Level 0 of a maintained hierarchy: where the frontier nodes go while every other node
stays, each previous community they touch contracted into one fixed node
(``graph.communities.leiden_local`` explains why CPM with weighted-degree node sizes at resolution
1/2m optimises the whole graph's modularity)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import igraph as ig
import leidenalg as la


def local_moves(
    free: Sequence[str],
    neighbours: Mapping[str, Mapping[str, float]],
    sizes: Mapping[str, float],
    group_of: Mapping[str, int],
    group_sizes: Mapping[int, float],
    total: float,
    seed: int,
) -> dict[str, int | tuple[int]]:
    """Where each free node goes: a previous group's label, or ``(n,)`` for the n-th new
    group (free nodes only). Every other node of the scope stays in its previous group
    (``group_of``), each group contracted into one fixed node of its fixed members' total
    size (``group_sizes``, the group's total, less its free members'); ``neighbours`` of the
    free nodes and ``sizes`` (weighted degrees) are those of the scope, and ``total`` their
    sum over the whole scope."""
    if not free or total <= 0:
        return {}
    index = {v: i for i, v in enumerate(free)}
    supers = sorted(_touched_groups(free, neighbours, group_of, index))
    f = len(free)
    at = {lab: f + i for i, lab in enumerate(supers)}
    node_sizes = [sizes[v] for v in free]
    free_size: dict[int, float] = {}
    for v in free:
        if (lab := group_of.get(v)) is not None:
            free_size[lab] = free_size.get(lab, 0.0) + sizes[v]
    for lab in supers:  # the fixed part of each group
        node_sizes.append(max(0.0, group_sizes[lab] - free_size.get(lab, 0.0)))
    weights = _contracted_weights(free, neighbours, group_of, index, at)
    edges = sorted(weights)
    partition = la.CPMVertexPartition(
        ig.GraphBase(len(node_sizes), edges, False),
        weights=[weights[e] for e in edges],
        node_sizes=node_sizes,
        initial_membership=_start(free, neighbours, group_of, at),
        resolution_parameter=1.0 / total,
    )
    optimiser = la.Optimiser()
    optimiser.set_rng_seed(seed)
    optimiser.optimise_partition(
        partition, 1, is_membership_fixed=[False] * f + [True] * len(supers)
    )
    membership = list(partition.membership)
    owner = {membership[at[lab]]: lab for lab in supers}
    new_of: dict[int, tuple[int]] = {}
    out: dict[str, int | tuple[int]] = {}
    for i, v in enumerate(free):
        c = membership[i]
        lab = owner.get(c)
        out[v] = new_of.setdefault(c, (len(new_of),)) if lab is None else lab
    return out


def _touched_groups(
    free: Sequence[str],
    neighbours: Mapping[str, Mapping[str, float]],
    group_of: Mapping[str, int],
    index: Mapping[str, int],
) -> set[int]:
    """The previous groups the free nodes were in or have a neighbour in."""
    touched: set[int] = set()
    for v in free:
        if (lab := group_of.get(v)) is not None:
            touched.add(lab)
        for u in neighbours[v]:
            if u not in index:
                touched.add(group_of[u])
    return touched


def _contracted_weights(
    free: Sequence[str],
    neighbours: Mapping[str, Mapping[str, float]],
    group_of: Mapping[str, int],
    index: Mapping[str, int],
    at: Mapping[int, int],
) -> dict[tuple[int, int], float]:
    """The edges of the contracted graph, summed: between two free nodes (``index``), or a
    free node and the fixed node of a group (``at``)."""
    weights: dict[tuple[int, int], float] = {}
    for v in free:
        i = index[v]
        for u, w in neighbours[v].items():
            j = index.get(u)
            if j is None:
                pair = (i, at[group_of[u]])
            elif i < j:
                pair = (i, j)
            else:
                continue
            weights[pair] = weights.get(pair, 0.0) + w
    return weights


def _start(
    free: Sequence[str],
    neighbours: Mapping[str, Mapping[str, float]],
    group_of: Mapping[str, int],
    at: Mapping[int, int],
) -> list[int]:
    """The initial membership: where each node was; a new node where most of its weight
    goes, else alone (a node alone starts as its own index)."""
    start = [0] * (len(free) + len(at))
    for i, v in enumerate(free):
        lab = group_of.get(v)
        if lab is None:
            votes: dict[int, float] = {}
            for u, w in neighbours[v].items():
                if (other := group_of.get(u)) is not None:
                    votes[other] = votes.get(other, 0.0) + w
            if votes:
                lab = min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        start[i] = i if lab is None else at[lab]
    for node in at.values():
        start[node] = node
    return start
