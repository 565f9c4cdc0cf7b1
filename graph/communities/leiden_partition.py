"""One Leiden run of the hierarchy (level 0, or the re-partition of one oversized community),
warm-started from the previous run.

Objective. ``leidenalg.ModularityVertexPartition`` with edge weights — the quantity GraphRAG's
``hierarchical_leiden`` optimises (modularity, resolution 1) and the one we report. We do not use
``RBConfigurationVertexPartition``: at resolution 1 it is the same objective, and a resolution
would be one more knob to tune; granularity comes from the recursion (``graph.communities.leiden``)
instead.

Warm start. Each run starts from the previous run's labels of its nodes
(``initial_membership``). A new node takes the previous label holding the heaviest total edge
weight among its neighbours, else a fresh singleton label; previous communities that lost their
connectivity start as their connected pieces. Only the *frontier* (``graph.communities.leiden``
decides it: new nodes and nodes whose incident weight changed materially) may move; every other node
starts fixed in its previous community (leidenalg ``is_membership_fixed``): frontier nodes may
join or leave it, but nothing off the frontier is reshuffled. Without this an unchanged graph
is not a fixed point (every bounded Leiden run still finds small gains and moves communities
around), and every such move would cost a report.

Contraction. Fixed members of one starting community enter leidenalg contracted into one fixed
node (their edges kept, internal ones as self-loops, so modularity is that of the whole graph):
they cannot move anyway, and Leiden has fewer nodes to visit.

The recursion that calls these runs, and the ``Hierarchy`` they build, are
``graph.communities.leiden``; this module sees the previous hierarchy only as ``PreviousRun``,
indexed by this run's nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import eq

import igraph as ig
import leidenalg as la


@dataclass(frozen=True, slots=True)
class PreviousRun:
    """The previous hierarchy as seen from this run's node indexes."""

    levels: tuple[Mapping[int, frozenset[str]], ...]  # the previous communities per level
    labels: list[list[int | None]]  # per level, per node index: previous label, None if none
    frontier: list[bool]  # per node index: free to move this run (new, or materially changed)
    children: dict[tuple[int, int], list[int]]  # (level, label) → child labels


@dataclass(frozen=True, slots=True)
class RunInputs:
    """One run's fixed inputs; edges are addressed by their index in the canonical graph."""

    keys: tuple[str, ...]
    source: Sequence[int]
    target: Sequence[int]
    weight: tuple[float, ...]
    max_size: int
    seed: int
    n_iterations: int
    prev: PreviousRun | None


@dataclass(frozen=True, slots=True)
class _Start:
    membership: list[int]
    fixed: list[bool]


def warm_start(
    ctx: RunInputs,
    g: ig.GraphBase,
    nodes: Sequence[int],
    level: int,
    ls: Sequence[int],
    lt: Sequence[int],
    weights: Sequence[float],
) -> _Start | None:
    """Initial membership from the nodes' previous labels at ``level`` (see the module
    docstring), and which nodes stay fixed: those with a previous label, off the frontier.
    ``g`` is the run's graph, whose edges ``ls``, ``lt`` are indexes into ``nodes``."""
    prev = ctx.prev
    if prev is None or level >= len(prev.labels):
        return None
    labels = list(map(prev.labels[level].__getitem__, nodes))
    if labels.count(None) == len(labels):
        return None
    free = map(prev.frontier.__getitem__, nodes)
    fixed = [lab is not None and not f for lab, f in zip(labels, free, strict=True)]
    full = _adopt_new_nodes(labels, ls, lt, weights) if None in labels else labels
    same = map(eq, map(full.__getitem__, ls), map(full.__getitem__, lt))
    inside = list(compress(range(len(ls)), same))
    pieces = g.subgraph_edges(inside, delete_vertices=False).connected_components()
    return _Start(list(pieces), fixed)


def _adopt_new_nodes(
    labels: Sequence[int | None], ls: Sequence[int], lt: Sequence[int], weights: Sequence[float]
) -> list[int]:
    """A node without a previous label takes the previous label with the heaviest total edge
    weight among its neighbours (ties: smallest label), else a fresh singleton label."""
    votes: dict[int, dict[int, float]] = {}
    for a, b, w in zip(ls, lt, weights, strict=True):
        la_, lb = labels[a], labels[b]
        if la_ is None and lb is not None:
            tally = votes.setdefault(a, {})
            tally[lb] = tally.get(lb, 0.0) + w
        elif lb is None and la_ is not None:
            tally = votes.setdefault(b, {})
            tally[la_] = tally.get(la_, 0.0) + w
    fresh = max((lab for lab in labels if lab is not None), default=-1) + 1
    full: list[int] = []
    for v, lab in enumerate(labels):
        if lab is None and v in votes:
            lab = min(votes[v].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        elif lab is None:
            lab, fresh = fresh, fresh + 1
        full.append(lab)
    return full


def make_igraph(n: int, ls: Sequence[int], lt: Sequence[int]) -> ig.GraphBase:
    """An undirected igraph graph. ``GraphBase``, not ``Graph``: ``Graph.__init__`` probes for
    numpy on every call, which costs more than a small sub-run's Leiden when numpy is absent;
    leidenalg only needs the base type."""
    return ig.GraphBase(n, list(zip(ls, lt, strict=True)), False)


def warm_leiden(
    ctx: RunInputs,
    g: ig.GraphBase,
    ls: Sequence[int],
    lt: Sequence[int],
    weights: Sequence[float],
    start: _Start | None,
) -> tuple[list[int], la.ModularityVertexPartition | None]:
    """``run_leiden`` from ``start`` with each group of fixed nodes sharing a starting community
    contracted into one fixed node (the group's edges kept: internal ones become self-loops,
    so every community's internal weight and total degree, hence modularity, are those of
    the uncontracted graph). Fixed nodes never move, so the run optimises the same thing
    with fewer nodes to visit; other nodes may still join the contracted community."""
    if start is None or all(start.fixed) or not any(start.fixed):
        return run_leiden(ctx, g, weights, start)
    node_of, membership, fixed = _contract(start)
    if len(membership) == len(node_of):
        return run_leiden(ctx, g, weights, start)  # no two fixed nodes share a community
    contracted = make_igraph(
        len(membership), list(map(node_of.__getitem__, ls)), list(map(node_of.__getitem__, lt))
    )
    labels, partition = run_leiden(ctx, contracted, weights, _Start(membership, fixed))
    return list(map(labels.__getitem__, node_of)), partition


def _contract(start: _Start) -> tuple[list[int], list[int], list[bool]]:
    """Per node its contracted node (in node order: fixed nodes of one starting community
    share the first one's), and per contracted node its starting community and fixedness."""
    node_of: list[int] = []
    membership: list[int] = []
    fixed: list[bool] = []
    shared: dict[int, int] = {}
    for label, is_fixed in zip(start.membership, start.fixed, strict=True):
        if is_fixed and label in shared:
            node_of.append(shared[label])
            continue
        if is_fixed:
            shared[label] = len(membership)
        node_of.append(len(membership))
        membership.append(label)
        fixed.append(is_fixed)
    return node_of, membership, fixed


def run_leiden(
    ctx: RunInputs,
    g: ig.GraphBase,
    weights: Sequence[float],
    start: _Start | None,
    cap: int = 0,
) -> tuple[list[int], la.ModularityVertexPartition | None]:
    """One Leiden run from ``start``; ``cap`` > 0 enforces a maximum community size. Returns
    the membership and the partition (None without edges), whose ``quality()`` is the
    weighted modularity: its ``modularity`` property is igraph's, which ignores weights."""
    if not weights:
        return list(range(g.vcount())), None
    initial = start.membership if start is not None else None
    partition = la.ModularityVertexPartition(g, weights=list(weights), initial_membership=initial)
    if start is not None and all(start.fixed):
        return list(partition.membership), partition
    optimiser = la.Optimiser()
    optimiser.set_rng_seed(ctx.seed)
    if cap:
        optimiser.max_comm_size = cap
        optimiser.community_constraint_enforcement = 1
    fixed = start.fixed if start is not None and any(start.fixed) else None
    optimiser.optimise_partition(partition, ctx.n_iterations, is_membership_fixed=fixed)
    return list(partition.membership), partition
