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

Below. A level-0 community whose members changed, or that holds a frontier node, is brought
up to date inside itself; every other community keeps its previous sub-hierarchy as it is:
its labels, its member sets (the same objects, so matching them to stable ids costs a hash
lookup). A small changed community (``PLACE_ABOVE``) is split again (``graph.leiden``'s
recursion on its own induced subgraph, warm-started, frontier free). A large one changed by
a few of its members (the communities around hubs, which a run touches every time and which
can hold a tenth of the graph) keeps its children: each frontier member joins the child
holding most of its weight to the members that stay, and only the children that gained or
lost a member are visited, the same way, one level down. Its volumes follow from the moved
members' edges. So a change at a hub costs what it moved, not the size of the hub's
community. Placing ignores the null model of modularity (it favours the larger child); below
level 0 nothing measures that quality, and a community changed by more than
``SPLIT_SHARE`` of its members is split again with Leiden.

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

# A changed community larger than this, changed by at most SPLIT_SHARE of its members, keeps
# its children and places the changed members among them (``_placed``); smaller ones are
# split again with Leiden, which costs little at that size and is what a whole-graph run
# would do. Above it, splitting again reads every edge of a community that can hold a tenth
# of the graph (the hubs' communities), for a change of a few members.
PLACE_ABOVE = 1000
SPLIT_SHARE = 0.1


def maintain(
    ci: ClusterInput,
    prev: Hierarchy,
    changes: Changes,
    *,
    max_cluster_size: int,
    seed: int,
    frontier_tolerance: float,
    place_above: int = PLACE_ABOVE,
    split_share: float = SPLIT_SHARE,
) -> Hierarchy | None:
    """``prev`` brought up to date for ``changes`` (what changed in ``ci`` since ``prev`` was
    made); None when the state does not add up, and the whole graph must be re-clustered.
    ``place_above``, ``split_share``: communities larger than ``place_above`` and changed by
    at most ``split_share`` of their members place the changed ones instead of being split
    again (``PLACE_ABOVE``)."""
    if not prev.levels or not prev.placed_strengths():
        return None
    with gc_paused():
        return _maintain(
            ci,
            prev,
            changes,
            _Limits(max_cluster_size, seed, frontier_tolerance, place_above, split_share),
        )


@dataclass(frozen=True, slots=True)
class _Limits:
    max_size: int
    seed: int
    tolerance: float
    place_above: int
    split_share: float


def _maintain(
    ci: ClusterInput, prev: Hierarchy, changes: Changes, limits: _Limits
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
        moved = on_frontier(prev, v, digest, now, before, limits.tolerance)
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
    volumes = _current_volumes(ci, prev, label0, changes.deltas)
    degrees = {label: degree for label, (_, degree) in volumes.items()}
    moved_to = _local_moves(frontier, adjacency, strengths, label0, degrees, total, limits.seed)
    groups, changed = _new_level_zero(prev, label0, frontier, gone, moved_to)
    for label in sorted({label0[v] for v in changes.cut if v in label0}):
        if label not in changed:
            changed[label] = _Change(prev.levels[0][label], frozenset(), frozenset())
    env = _Env(prev, prev.children_index(), label0, set(frontier), changes.cut, ci, limits)
    trees: list[_Tree] = []
    for label, change in changed.items():
        trees.extend(_changed_tree(env, label, change, volumes.pop(label, None)))
    for members in groups:
        trees.extend(_trees(env, members, [], 0))
    trees.sort(key=lambda t: (-len(t.members), _Smallest(t.members)))
    return _assemble(prev, env.children, set(changed), trees, digests, placed, volumes, total)


def _local_moves(
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
    free_size: dict[int, float] = {}
    for v in free:
        if (lab := group_of.get(v)) is not None:
            free_size[lab] = free_size.get(lab, 0.0) + sizes[v]
    for lab in supers:  # the fixed part of each group
        node_sizes.append(max(0.0, group_sizes[lab] - free_size.get(lab, 0.0)))
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
) -> tuple[list[frozenset[str]], dict[int, _Change]]:
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
    changed: dict[int, _Change] = {}
    for label in sorted({*leaving, *joining}):
        out, into = frozenset(leaving.get(label, ())), frozenset(joining.get(label, ()))
        changed[label] = _Change((prev.levels[0][label] - out) | into, out, into)
    return [frozenset(m) for _, m in sorted(new.items())], changed


@dataclass(frozen=True, slots=True)
class _Change:
    """A previous level-0 community's members now, and the members that left it or joined
    it (a frontier node that stayed is in both)."""

    members: frozenset[str]
    leaving: frozenset[str]
    joining: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Kept:
    """A previous community kept with its whole sub-hierarchy (its member sets reused)."""

    level: int
    label: int


@dataclass(frozen=True, slots=True)
class _Out:
    """A community made this run: its members, its children, and the previous member set it
    continues (a community changed in place), if any."""

    members: frozenset[str]
    children: list[_Out | _Kept]
    origin: frozenset[str] | None = None


class _Smallest:
    """A member set's smallest key, as a sort key found only when the sort compares it: on
    a tie in size, which communities of thousands of members (a hub's) rarely have."""

    __slots__ = ("_key", "_members")

    def __init__(self, members: frozenset[str]) -> None:
        self._members, self._key = members, ""

    def key(self) -> str:
        if not self._key:
            self._key = min(self._members)
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Smallest) and self.key() == other.key()

    def __lt__(self, other: _Smallest) -> bool:
        return self.key() < other.key()

    def __hash__(self) -> int:
        return hash(self.key())


@dataclass(frozen=True, slots=True)
class _Tree:
    """A new level-0 community and its volumes (weight inside, sum of weighted degrees)."""

    members: frozenset[str]
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
    cut: set[str]
    ci: ClusterInput
    limits: _Limits


Edges = list[tuple[int, int, float]]  # (i, j, weight), i < j indexes into sorted keys


def _induced(adjacency: Mapping[str, Mapping[str, float]], keys: Sequence[str]) -> Edges:
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


def _connected(
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


def _seeds(env: _Env, members: frozenset[str], lost: Iterable[str]) -> set[str]:
    """The members a community that lost ``lost`` could have come apart between: the lost
    members' neighbours still in it, and its members that lost an edge."""
    adjacency = env.ci.adjacency
    seeds = env.cut & members
    for v in lost:
        seeds.update(u for u in adjacency.get(v, ()) if u in members)
    return seeds


def _changed_tree(
    env: _Env, label: int, change: _Change, volumes: tuple[float, float] | None
) -> list[_Tree]:
    """A changed level-0 community as communities. A large one changed by a few members
    keeps its sub-hierarchy where the change did not reach (``_placed``), with volumes
    brought up to date from the moved members' edges alone; otherwise (a small community,
    a large change, one that came apart) its pieces are split again (``_trees``)."""
    members = change.members
    if not members:
        return []
    lost = change.leaving - members
    seeds = _seeds(env, members, lost)
    if (
        volumes is None
        or len(members) <= env.limits.place_above
        or (seeds and not _connected(env.ci.adjacency, members, seeds))
    ):
        return _trees(env, members, [label], 0)
    before = env.prev.levels[0][label]
    inside, degree = _moved_volumes(env.ci, volumes, before, change)
    node = _placed(env, members, 0, label, lost)
    return [_Tree(members, node, inside, degree)]


def _moved_volumes(
    ci: ClusterInput, volumes: tuple[float, float], before: frozenset[str], change: _Change
) -> tuple[float, float]:
    """The volumes of a community that had ``before`` as members (``volumes``, counted on
    the graph as it is now) once ``change`` moved members out and in: only the moved
    members' edges are read."""
    adjacency, strengths = ci.adjacency, ci.strengths
    inside, degree = volumes
    out, into, members = change.leaving, change.joining, change.members
    for v in out:  # each edge inside ``before`` with an end leaving, once
        for u, w in adjacency.get(v, {}).items():
            if u in before and (u not in out or v < u):
                inside -= w
        degree -= strengths.get(v, 0.0)
    for v in into:  # each edge inside ``members`` with an end joining, once
        for u, w in adjacency[v].items():
            if u in members and (u not in into or v < u):
                inside += w
        degree += strengths[v]
    return inside, degree


def _placed(
    env: _Env, members: frozenset[str], level: int, label: int, lost: frozenset[str]
) -> _Out | _Kept:
    """A changed community (``label`` at ``level`` before, now ``members``; ``lost``: the
    members it lost), with its children kept where the change did not reach. Its frontier
    members join the child holding most of their edge weight to members that stay, and only
    the children that gained or lost a member (or hold one that lost an edge) are visited,
    the same way, one level down. A small community, one without children before, or one
    changed by more than ``split_share`` of its members is split again instead."""
    limits = env.limits
    before = env.prev.levels[level][label]
    if len(members) <= limits.max_size:
        return _Out(members, [], before)
    kids = env.children.get((level, label), [])
    free = env.frontier & members
    if (
        not kids
        or len(members) <= limits.place_above
        or len(free) + len(lost) > limits.split_share * len(before)
    ):
        return _split_again(env, members, level, [label])
    below = env.prev.levels[level + 1]
    kid_of = _KidOf(kids, below)
    taken: dict[int, set[str]] = {}
    for v in (*lost, *(free & before)):
        taken.setdefault(kid_of(v), set()).add(v)
    joined, fresh = _place(env.ci.adjacency, members, free, kid_of)
    touched = {kid_of(v) for v in env.cut & members if v not in free}
    children: list[_Out | _Kept] = []
    for kid in kids:
        out, into = taken.get(kid, set()), joined.get(kid, set())
        if not out and not into and kid not in touched:
            children.append(_Kept(level + 1, kid))
            continue
        now = (below[kid] - out) | into
        if not now:
            continue
        gone = frozenset(out - into)
        seeds = _seeds(env, now, gone)
        if seeds and not _connected(env.ci.adjacency, now, seeds):
            children.extend(t.node for t in _trees(env, now, [kid], level + 1))
        else:
            children.append(_placed(env, now, level + 1, kid, gone))
    for group in fresh:
        children.extend(t.node for t in _trees(env, group, [], level + 1))
    if len(children) < 2:  # the change left it one child: not a split any more
        return _split_again(env, members, level, [label])
    return _Out(members, children, before)


class _KidOf:
    """Which child (of a previous community's ``kids``) a member of it was in: a scan of
    the children's member sets, remembered."""

    def __init__(self, kids: Sequence[int], below: Mapping[int, frozenset[str]]) -> None:
        self._sets = [(kid, below[kid]) for kid in kids]
        self._known: dict[str, int] = {}

    def __call__(self, v: str) -> int:
        kid = self._known.get(v)
        if kid is None:
            kid = next(k for k, members in self._sets if v in members)
            self._known[v] = kid
        return kid


def _place(
    adjacency: Mapping[str, Mapping[str, float]],
    members: frozenset[str],
    free: set[str],
    kid_of: _KidOf,
) -> tuple[dict[int, set[str]], list[frozenset[str]]]:
    """Where the ``free`` members go among the children: the one holding most of their edge
    weight to placed members (members that stay first, then free ones placed before them;
    ties to the smaller label). Free members with no placed neighbour at all form new
    children, one per connected group of them."""
    place: dict[str, int] = {}
    pending = sorted(free)
    while pending:
        waiting: list[str] = []
        for v in pending:
            tally: dict[int, float] = {}
            for u, w in adjacency[v].items():
                if u not in members:
                    continue
                kid = place.get(u) if u in free else kid_of(u)
                if kid is not None:
                    tally[kid] = tally.get(kid, 0.0) + w
            if tally:
                place[v] = min(tally.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            else:
                waiting.append(v)
        if len(waiting) == len(pending):
            break
        pending = waiting
    joined: dict[int, set[str]] = {}
    for v, kid in place.items():
        joined.setdefault(kid, set()).add(v)
    fresh: list[frozenset[str]] = []
    left = set(pending) - place.keys()
    for v in sorted(left):
        if v not in left:
            continue
        group, stack = {v}, [v]
        left.discard(v)
        while stack:
            for u in adjacency[stack.pop()]:
                if u in left:
                    left.discard(u)
                    group.add(u)
                    stack.append(u)
        fresh.append(frozenset(group))
    return joined, fresh


def _trees(env: _Env, members: frozenset[str], starts: list[int], level: int) -> list[_Tree]:
    """A community as communities: one per connected piece (a community that lost a member
    or an edge may have come apart), each split inside itself while it is too large
    (``graph.leiden``'s recursion on its induced subgraph, warm-started from the previous
    communities ``starts`` at ``level`` — at level 0, from wherever its members were)."""
    if not members:
        return []
    keys = tuple(sorted(members))
    out = []
    for piece, edges in _pieces(keys, _induced(env.ci.adjacency, keys)):
        node = (
            _Out(frozenset(piece), [])
            if len(piece) <= env.limits.max_size
            else _full_split(piece, edges, env, level, starts)
        )
        inside = math.fsum(w for _, _, w in edges)
        degree = math.fsum(map(env.ci.strengths.__getitem__, piece))
        out.append(_Tree(frozenset(piece), node, inside, degree))
    return out


def _split_again(env: _Env, members: frozenset[str], level: int, starts: list[int]) -> _Out | _Kept:
    """A connected community split again inside itself (``_full_split``)."""
    keys = tuple(sorted(members))
    return _full_split(keys, _induced(env.ci.adjacency, keys), env, level, starts)


def _full_split(
    keys: tuple[str, ...], edges: Edges, env: _Env, level: int, starts: list[int]
) -> _Out | _Kept:
    """``graph.leiden``'s recursion on the community's induced subgraph (a community at
    ``level``), warm-started from where its members were."""
    if level == 0:
        starts = sorted({env.label0[k] for k in keys if k in env.label0})
    labels = _previous_labels(env.prev, env.children, level, starts, keys)
    run_prev = PreviousRun(env.prev.levels, labels, [v in env.frontier for v in keys], env.children)
    ctx = RunInputs(
        keys,
        [a for a, _, _ in edges],
        [b for _, b, _ in edges],
        tuple(w for _, _, w in edges),
        env.limits.max_size,
        env.limits.seed,
        1,
        run_prev,
    )
    split = _split(ctx, list(range(len(keys))), list(range(len(edges))), level)
    return _converted(keys, split)


def _converted(keys: Sequence[str], node: _Node) -> _Out | _Kept:
    if node.reused is not None:
        return _Kept(*node.reused)
    return _Out(
        frozenset(map(keys.__getitem__, node.members)),
        [_converted(keys, c) for c in node.children],
    )


def _previous_labels(
    prev: Hierarchy,
    children: dict[tuple[int, int], list[int]],
    level: int,
    starts: Sequence[int],
    keys: Sequence[str],
) -> list[list[int | None]]:
    """Per level, each key's previous label (None where it had none), found by walking down
    from the previous communities ``starts`` at ``level``: visits their subtrees only."""
    wanted = set(keys)
    per_level: list[dict[str, int]] = [{} for _ in prev.levels]
    current = list(starts)
    for at in range(level, len(prev.levels)):
        nxt: list[int] = []
        for label in current:
            members = prev.levels[at][label]
            mine = members & wanted if len(members) > len(wanted) else wanted & members
            per_level[at].update(dict.fromkeys(mine, label))
            nxt.extend(children.get((at, label), ()))
        current = nxt
    return [list(map(labels.get, keys)) if labels else [None] * len(keys) for labels in per_level]


def with_volumes(ci: ClusterInput, hierarchy: Hierarchy) -> Hierarchy:
    """``hierarchy`` (from a whole-graph run on ``ci``'s graph) with its level-0 volumes
    counted, so the next maintained run starts from them instead of a pass over every edge."""
    if not hierarchy.levels:
        return hierarchy
    label0: dict[str, int] = {}
    for label, members in hierarchy.levels[0].items():
        label0.update(dict.fromkeys(members, label))
    volumes = _current_volumes(ci, hierarchy, label0, {})
    return Hierarchy(
        hierarchy.levels,
        hierarchy.parents,
        hierarchy.modularity,
        hierarchy.digests,
        hierarchy.placed_strengths(),
        volumes,
    )


def _current_volumes(
    ci: ClusterInput,
    prev: Hierarchy,
    label0: Mapping[str, int],
    deltas: Mapping[tuple[str, str], float],
) -> dict[int, tuple[float, float]]:
    """The volumes of the previous level-0 communities' member sets on the graph as it is
    now: the kept ones brought up to date by the weight changes of their edges (or counted
    afresh once, for a hierarchy without them)."""
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
    return {lab: (inside.get(lab, 0.0), deg) for lab, deg in degree.items()}


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
    """``prev`` with the level-0 communities ``replaced`` taken out and ``trees`` put in,
    level by level, breadth first. A previous community kept at its own level (most of a
    large changed community's sub-hierarchy) stays where it is, with its label and its whole
    subtree: only its parent link changes, so the work follows what was made, not the size of
    the changed communities. Made communities get new labels; a kept one that moved to
    another level is copied under new labels, member sets reused."""
    levels = [dict(lv) for lv in prev.levels]
    parents = [dict(pv) for pv in prev.parents]
    stay = _in_place(trees)
    doomed = [(0, label) for label in replaced]
    kept: set[tuple[int, int]] = set()
    index = dict(children)  # the children index, brought up to date below
    while doomed:
        at = doomed.pop()
        if at in stay:
            kept.add(at)
            continue
        level, label = at
        del levels[level][label]
        parents[level].pop(label, None)
        doomed.extend((level + 1, kid) for kid in index.pop(at, ()))
    next_label = [max(lv, default=-1) + 1 for lv in levels]
    origins: dict[tuple[int, int], frozenset[str]] = {}
    made: set[tuple[int, int]] = set()
    queue: list[tuple[_Out | _Kept, int | None, _Tree | None]] = [(t.node, None, t) for t in trees]
    level = 0
    while queue:
        if level == len(levels):
            levels.append({})
            parents.append({})
            next_label.append(0)
        below: list[tuple[_Out | _Kept, int | None, _Tree | None]] = []
        for node, parent, tree in queue:
            kids: list[_Out | _Kept] = []
            if isinstance(node, _Kept) and (node.level, node.label) in kept:
                label = node.label  # in place: its subtree stays as it is
            else:
                label = next_label[level]
                next_label[level] += 1
                if isinstance(node, _Kept):
                    levels[level][label] = prev.levels[node.level][node.label]
                    kids = [
                        _Kept(node.level + 1, k) for k in children.get((node.level, node.label), ())
                    ]
                else:
                    levels[level][label] = node.members
                    kids = sorted(node.children, key=lambda c: _order(prev, c))
                    if node.origin is not None:
                        origins[(level, label)] = node.origin
            made.add((level, label))
            if parent is not None:
                parents[level][label] = parent
            if tree is not None:
                volumes[label] = (tree.inside, tree.degree)
            below.extend((kid, label, None) for kid in kids)
        queue = below
        level += 1
    while levels and not levels[-1]:
        levels.pop()
        parents.pop()
    # a label gone took its children's entry with it; a made label's children are all made
    # (a kept-in-place one keeps its own), and no other label gained or lost one
    made_kids: dict[tuple[int, int], list[int]] = {}
    for level, label in made:
        up = parents[level].get(label)
        if up is not None:
            made_kids.setdefault((level - 1, up), []).append(label)
    for at, labels in made_kids.items():
        index[at] = sorted(labels)
    return Hierarchy(
        tuple(levels),
        tuple(parents),
        _modularity(volumes, total),
        digests,
        placed,
        volumes,
        origins,
        frozenset(made),
        index,
    )


def _in_place(trees: Sequence[_Tree]) -> set[tuple[int, int]]:
    """The previous communities the trees keep at the level they were at."""
    out: set[tuple[int, int]] = set()
    queue: list[_Out | _Kept] = [t.node for t in trees]
    level = 0
    while queue:
        below: list[_Out | _Kept] = []
        for node in queue:
            if isinstance(node, _Kept):
                if node.level == level:
                    out.add((node.level, node.label))
            else:
                below.extend(node.children)
        queue = below
        level += 1
    return out


def _order(prev: Hierarchy, node: _Out | _Kept) -> tuple[int, int, str | _Smallest]:
    """Children by descending size; made ones by their smallest key, kept ones by label."""
    if isinstance(node, _Kept):
        return (-len(prev.levels[node.level][node.label]), 1, f"{node.label:012d}")
    return (-len(node.members), 0, _Smallest(node.members))


def _modularity(volumes: Mapping[int, tuple[float, float]], total: float) -> float:
    """Weighted modularity (resolution 1) of level 0 from its communities' volumes;
    ``total`` is the sum of every node's weighted degree (twice the graph's weight)."""
    if total <= 0:
        return 0.0
    inside = math.fsum(i for i, _ in volumes.values())
    spread = math.fsum((d / total) ** 2 for _, d in volumes.values())
    return 2 * inside / total - spread
