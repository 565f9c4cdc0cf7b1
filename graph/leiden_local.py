"""Maintaining the hierarchy where the graph changed, without visiting the rest of it.

``graph.leiden.hierarchical_leiden`` warm-starts from the previous hierarchy and lets only the
frontier move, but it builds the whole graph, every node's previous labels and every
community's member set: seconds at 100,000 articles (184k entities, 449k edges) for a run
that moves a hundred nodes. Here a run touches only what changed.

Level 0. Only frontier nodes may move (the same rule as ``graph.leiden``: new, or changed by
at least ``frontier_tolerance`` of their weighted degree since last placed), so every other
node's community is fixed. Leiden then only needs the frontier nodes, each previous community
they touch contracted into one fixed node, and the edges at the frontier. Modularity's null
model reaches outside that region through community totals alone: the contracted graph is
optimised with leidenalg's CPM and node sizes set to weighted degrees at resolution 1/2m,
whose move gains are exactly modularity's (times a constant), so the region is optimised for
the modularity of the whole graph. Fixed nodes never move, so no other community changes.

Below. A level-0 community whose members changed, or that holds a frontier node, is split
again inside itself (``graph.leiden``'s recursion, on its own induced subgraph, warm-started);
every other community keeps its previous sub-hierarchy as it is: its labels, its member sets
(the same objects, so matching them to stable ids costs a hash lookup).

Connectivity. A community that lost a member or an edge may have come apart: it is checked,
and its connected pieces become communities (as a fresh Leiden run would never leave one in
two pieces).

Labels. Kept for untouched communities; new communities get new labels past the level's
largest, in a deterministic order. Labels are not ids (``graph.community_ids`` matches by
members).

When the changes since the last hierarchy are not known (a fresh clustering input, an old
checkpoint) or the state does not add up, ``maintain`` returns None and the caller runs the
whole-graph ``hierarchical_leiden``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import igraph as ig
import leidenalg as la

from graph.cluster_input import Changes, ClusterInput
from graph.leiden import Hierarchy, _Node, _split, on_frontier
from graph.leiden_graph import gc_paused
from graph.leiden_partition import PreviousRun, RunInputs


def maintain(
    ci: ClusterInput,
    prev: Hierarchy,
    changes: Changes,
    *,
    max_cluster_size: int,
    seed: int,
    frontier_tolerance: float,
) -> Hierarchy | None:
    """``prev`` brought up to date for ``changes`` (what changed in ``ci`` since ``prev`` was
    made); None when the state does not add up, and the whole graph must be re-clustered."""
    if not prev.levels or not prev.placed_strengths():
        return None
    with gc_paused():
        return _maintain(ci, prev, changes, max_cluster_size, seed, frontier_tolerance)


def _maintain(
    ci: ClusterInput,
    prev: Hierarchy,
    changes: Changes,
    max_size: int,
    seed: int,
    tolerance: float,
) -> Hierarchy | None:
    adjacency, strengths = ci.adjacency, ci.strengths
    digests = dict(prev.digests)
    placed = dict(prev.placed_strengths())
    frontier: list[str] = []
    gone: list[str] = []
    for v in sorted(changes.dirty):
        if v not in adjacency:
            if v in digests:
                gone.append(v)
                del digests[v]
                placed.pop(v, None)
            continue
        now, digest = strengths[v], ci.digests[v]
        before = placed.get(v)
        moved = on_frontier(prev, v, digest, now, before, tolerance)
        digests[v] = digest
        if moved or before is None:
            placed[v] = now
        if moved:
            frontier.append(v)
    if len(digests) != len(adjacency):
        return None  # the previous hierarchy does not cover this graph: start afresh
    label0: dict[str, int] = {}
    for label, members in prev.levels[0].items():
        label0.update(dict.fromkeys(members, label))
    total = sum(strengths.values())
    moved_to = _local_moves(frontier, adjacency, strengths, label0, prev.levels[0], total, seed)
    groups, changed = _new_level_zero(prev, label0, frontier, gone, moved_to)
    for label in sorted({label0[v] for v in changes.cut if v in label0}):
        if label not in changed:
            changed[label] = prev.levels[0][label]
    env = _Env(prev, prev.children_index(), label0, set(frontier), max_size, seed)
    trees: list[_Tree] = []
    for members in [*changed.values(), *groups]:
        trees.extend(_trees(adjacency, strengths, env, members))
    trees.sort(key=lambda t: (-len(t.keys), t.keys[0]))
    volumes = _kept_volumes(ci, prev, label0, set(changed), changes.deltas)
    return _assemble(prev, env.children, set(changed), trees, digests, placed, volumes, total)


def _local_moves(
    free: Sequence[str],
    neighbours: Mapping[str, Mapping[str, float]],
    sizes: Mapping[str, float],
    group_of: Mapping[str, int],
    groups: Mapping[int, frozenset[str]],
    total: float,
    seed: int,
) -> dict[str, int | tuple[int]]:
    """Where each free node goes: a previous group's label, or ``(n,)`` for the n-th new
    group (free nodes only). Every other node of the scope stays in its previous group
    (``group_of``), each group contracted into one fixed node of its fixed members' total
    size; ``neighbours`` of the free nodes and ``sizes`` (weighted degrees) are those of the
    scope, and ``total`` their sum over the whole scope."""
    if not free or total <= 0:
        return {}
    index = {v: i for i, v in enumerate(free)}
    f = len(free)
    touched: set[int] = set()
    for v in free:
        if (lab := group_of.get(v)) is not None:
            touched.add(lab)
        for u in neighbours[v]:
            if u not in index:
                touched.add(group_of[u])
    supers = sorted(touched)
    at = {lab: f + i for i, lab in enumerate(supers)}
    node_sizes = [sizes[v] for v in free]
    for lab in supers:  # the fixed part of each group
        node_sizes.append(sum(sizes.get(u, 0.0) for u in groups[lab] if u not in index))
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
    edges = sorted(weights)
    # start: where each node was; a new node where most of its weight goes, else alone
    start = [0] * (f + len(supers))  # a node alone starts as its own index
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
    for lab in supers:
        start[at[lab]] = at[lab]
    partition = la.CPMVertexPartition(
        ig.GraphBase(len(start), edges, False),
        weights=[weights[e] for e in edges],
        node_sizes=node_sizes,
        initial_membership=start,
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


def _new_level_zero(
    prev: Hierarchy,
    label0: Mapping[str, int],
    frontier: Sequence[str],
    gone: Sequence[str],
    moved_to: Mapping[str, int | tuple[int]],
) -> tuple[list[frozenset[str]], dict[int, frozenset[str]]]:
    """The new level-0 communities made of frontier nodes only, and the previous communities
    whose members changed or hold a frontier node, with their members now."""
    leaving: dict[int, set[str]] = {}
    joining: dict[int, set[str]] = {}
    new: dict[tuple[int], set[str]] = {}
    for v in gone:
        leaving.setdefault(label0[v], set()).add(v)
    for v in frontier:
        before = label0.get(v)
        after = moved_to.get(v)
        if before is not None:
            leaving.setdefault(before, set()).add(v)
        if isinstance(after, int):
            joining.setdefault(after, set()).add(v)
        elif after is not None:
            new.setdefault(after, set()).add(v)
        else:  # no edges at all: a community of its own
            new.setdefault((-1 - len(new),), set()).add(v)
    changed: dict[int, frozenset[str]] = {}
    for label in sorted({*leaving, *joining}):
        members = (prev.levels[0][label] - leaving.get(label, set())) | joining.get(label, set())
        changed[label] = frozenset(members)
    return [frozenset(m) for _, m in sorted(new.items())], changed


@dataclass(frozen=True, slots=True)
class _Kept:
    """A previous community kept with its whole sub-hierarchy (its member sets reused)."""

    level: int
    label: int


@dataclass(frozen=True, slots=True)
class _Out:
    """A community made this run: its keys (sorted) and its children."""

    keys: tuple[str, ...]
    children: list[_Out | _Kept]


@dataclass(frozen=True, slots=True)
class _Tree:
    """A new level-0 community with its keys (sorted) and volumes (weight inside, sum of
    weighted degrees)."""

    keys: tuple[str, ...]
    node: _Out | _Kept
    inside: float
    degree: float


@dataclass(frozen=True, slots=True)
class _Env:
    """What every rebuild below level 0 reads."""

    prev: Hierarchy
    children: dict[tuple[int, int], list[int]]
    label0: Mapping[str, int]
    frontier: set[str]
    max_size: int
    seed: int


Edges = list[tuple[int, int, float]]  # (i, j, weight), i < j indexes into sorted keys


def _induced(adjacency: Mapping[str, Mapping[str, float]], keys: Sequence[str]) -> Edges:
    local = {v: i for i, v in enumerate(keys)}
    edges: Edges = []
    for i, v in enumerate(keys):
        for u, w in adjacency[v].items():
            j = local.get(u)
            if j is not None and i < j:
                edges.append((i, j, w))
    edges.sort()
    return edges


def _pieces(keys: tuple[str, ...], edges: Edges) -> list[tuple[tuple[str, ...], Edges]]:
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


def _trees(
    adjacency: Mapping[str, Mapping[str, float]],
    strengths: Mapping[str, float],
    env: _Env,
    members: frozenset[str],
) -> list[_Tree]:
    """A changed level-0 community as communities: one per connected piece (a community
    that lost a member or an edge may have come apart), each split inside itself while it
    is too large (``graph.leiden``'s recursion on its induced subgraph, warm-started)."""
    if not members:
        return []
    keys = tuple(sorted(members))
    out = []
    for piece, edges in _pieces(keys, _induced(adjacency, keys)):
        node = _Out(piece, []) if len(piece) <= env.max_size else _full_split(piece, edges, env)
        inside = math.fsum(w for _, _, w in edges)
        out.append(_Tree(piece, node, inside, math.fsum(map(strengths.__getitem__, piece))))
    return out


def _full_split(keys: tuple[str, ...], edges: Edges, env: _Env) -> _Out | _Kept:
    """``graph.leiden``'s recursion on the community's induced subgraph, warm-started from
    where its members were."""
    labels = _previous_labels(env.prev, env.children, env.label0, keys)
    run_prev = PreviousRun(env.prev.levels, labels, [v in env.frontier for v in keys], env.children)
    ctx = RunInputs(
        keys,
        [a for a, _, _ in edges],
        [b for _, b, _ in edges],
        tuple(w for _, _, w in edges),
        env.max_size,
        env.seed,
        1,
        run_prev,
    )
    return _converted(keys, _split(ctx, list(range(len(keys))), list(range(len(edges))), 0))


def _converted(keys: Sequence[str], node: _Node) -> _Out | _Kept:
    if node.reused is not None:
        return _Kept(*node.reused)
    return _Out(
        tuple(map(keys.__getitem__, node.members)), [_converted(keys, c) for c in node.children]
    )


def _previous_labels(
    prev: Hierarchy,
    children: dict[tuple[int, int], list[int]],
    label0: Mapping[str, int],
    keys: Sequence[str],
) -> list[list[int | None]]:
    """Per level, each key's previous label (None where it had none), found by walking down
    from the level-0 communities the keys were in: visits their previous subtrees only."""
    wanted = set(keys)
    per_level: list[dict[str, int]] = [{} for _ in prev.levels]
    current = sorted({label0[k] for k in keys if k in label0})
    for level in range(len(prev.levels)):
        nxt: list[int] = []
        for label in current:
            members = prev.levels[level][label]
            mine = members & wanted if len(members) > len(wanted) else wanted & members
            per_level[level].update(dict.fromkeys(mine, label))
            nxt.extend(children.get((level, label), ()))
        current = nxt
    return [[labels.get(k) for k in keys] for labels in per_level]


def with_volumes(ci: ClusterInput, hierarchy: Hierarchy) -> Hierarchy:
    """``hierarchy`` (from a whole-graph run on ``ci``'s graph) with its level-0 volumes
    counted, so the next maintained run starts from them instead of a pass over every edge."""
    if not hierarchy.levels:
        return hierarchy
    label0: dict[str, int] = {}
    for label, members in hierarchy.levels[0].items():
        label0.update(dict.fromkeys(members, label))
    volumes = _kept_volumes(ci, hierarchy, label0, set(), {})
    return Hierarchy(
        hierarchy.levels,
        hierarchy.parents,
        hierarchy.modularity,
        hierarchy.digests,
        hierarchy.placed_strengths(),
        volumes,
    )


def _kept_volumes(
    ci: ClusterInput,
    prev: Hierarchy,
    label0: Mapping[str, int],
    replaced: set[int],
    deltas: Mapping[tuple[str, str], float],
) -> dict[int, tuple[float, float]]:
    """The volumes of the level-0 communities kept as they were, brought up to date by the
    weight changes of their edges (or counted afresh once, for a hierarchy without them)."""
    kept = prev.level_zero_volumes()
    inside: dict[int, float] = {}
    degree: dict[int, float] = {}
    pairs: Iterable[tuple[tuple[str, str], float]]
    if kept is None:
        pairs = ci.weights.items()
        for v, s in ci.strengths.items():
            if (lab := label0.get(v)) is not None:
                degree[lab] = degree.get(lab, 0.0) + s
    else:
        pairs = deltas.items()
        for lab, (ins, deg) in kept.items():
            inside[lab], degree[lab] = ins, deg
    for (a, b), w in pairs:
        la_, lb = label0.get(a), label0.get(b)
        if la_ is not None and la_ == lb:
            inside[la_] = inside.get(la_, 0.0) + w
        if kept is not None:
            for lab in (la_, lb):
                if lab is not None:
                    degree[lab] = degree.get(lab, 0.0) + w
    return {lab: (inside.get(lab, 0.0), deg) for lab, deg in degree.items() if lab not in replaced}


def _assemble(
    prev: Hierarchy,
    children: dict[tuple[int, int], list[int]],
    replaced: set[int],
    trees: Sequence[_Tree],
    digests: dict[str, int],
    placed: dict[str, float],
    volumes: dict[int, tuple[float, float]],
    total: float,
) -> Hierarchy:
    """``prev`` with the level-0 communities ``replaced`` (and their subtrees) taken out and
    ``trees`` put in under new labels, level by level, breadth first. A community kept from
    the previous hierarchy keeps its member set (the same object)."""
    levels = [dict(lv) for lv in prev.levels]
    parents = [dict(pv) for pv in prev.parents]
    doomed = [(0, label) for label in replaced]
    while doomed:
        level, label = doomed.pop()
        del levels[level][label]
        parents[level].pop(label, None)
        doomed.extend((level + 1, kid) for kid in children.get((level, label), ()))
    next_label = [max(lv, default=-1) + 1 for lv in levels]
    for i, tree in enumerate(trees):  # level 0 is labelled in the order of ``trees``
        volumes[next_label[0] + i] = (tree.inside, tree.degree)
    queue: list[tuple[_Out | _Kept, int | None]] = [(t.node, None) for t in trees]
    level = 0
    while queue:
        if level == len(levels):
            levels.append({})
            parents.append({})
            next_label.append(0)
        below: list[tuple[_Out | _Kept, int | None]] = []
        for node, parent in queue:
            label = next_label[level]
            next_label[level] += 1
            if isinstance(node, _Kept):
                levels[level][label] = prev.levels[node.level][node.label]
                kids: list[_Out | _Kept] = [
                    _Kept(node.level + 1, kid) for kid in children.get((node.level, node.label), ())
                ]
            else:
                levels[level][label] = frozenset(node.keys)
                kids = sorted(node.children, key=lambda c: _order(prev, c))
            if parent is not None:
                parents[level][label] = parent
            below.extend((kid, label) for kid in kids)
        queue = below
        level += 1
    while levels and not levels[-1]:
        levels.pop()
        parents.pop()
    return Hierarchy(
        tuple(levels), tuple(parents), _modularity(volumes, total), digests, placed, volumes
    )


def _order(prev: Hierarchy, node: _Out | _Kept) -> tuple[int, int, str]:
    """Children by descending size; made ones by their smallest key, kept ones by label."""
    if isinstance(node, _Kept):
        return (-len(prev.levels[node.level][node.label]), 1, f"{node.label:012d}")
    return (-len(node.keys), 0, node.keys[0])


def _modularity(volumes: Mapping[int, tuple[float, float]], total: float) -> float:
    """Weighted modularity (resolution 1) of level 0 from its communities' volumes;
    ``total`` is the sum of every node's weighted degree (twice the graph's weight)."""
    if total <= 0:
        return 0.0
    inside = math.fsum(i for i, _ in volumes.values())
    spread = math.fsum((d / total) ** 2 for _, d in volumes.values())
    return 2 * inside / total - spread
