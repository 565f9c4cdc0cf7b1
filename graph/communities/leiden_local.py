"""Maintaining the hierarchy where the graph changed, without visiting the rest of it.

``graph.communities.leiden.hierarchical_leiden`` warm-starts from the previous hierarchy and lets
only the frontier move, but it builds the whole graph, every node's previous labels and every
community's member set: seconds at 100,000 articles (184k entities, 449k edges) for a run
that moves a hundred nodes. Here a run touches only what changed.

Level 0. Only frontier nodes may move (the same rule as ``graph.communities.leiden``: new, or
changed by at least ``frontier_tolerance`` of their weighted degree since last placed), so every
other node's community is fixed. Leiden then only needs the frontier nodes, each previous community
they touch contracted into one fixed node, and the edges at the frontier. Modularity's null
model reaches outside that region through community totals alone: the contracted graph is
optimised with leidenalg's CPM and node sizes set to weighted degrees at resolution 1/2m,
whose move gains are exactly modularity's (times a constant), so the region is optimised for
the modularity of the whole graph. Fixed nodes never move, so no other community changes.

Below. A level-0 community whose members changed, or that holds a frontier node, is brought
up to date inside itself; every other community keeps its previous sub-hierarchy as it is:
its labels, its member sets (the same objects, so matching them to stable ids costs a hash
lookup). A small changed community (``PLACE_ABOVE``) is split again
(``graph.communities.leiden_split``'s recursion on its own induced subgraph, warm-started, frontier
free). A large one changed by a few of its members (the communities around hubs, which a run touches
every time and which can hold a tenth of the graph) keeps its children: each frontier member joins
the child holding most of its weight to the members that stay, and only the children that gained or
lost a member are visited, the same way, one level down. Its volumes follow from the moved
members' edges. So a change at a hub costs what it moved, not the size of the hub's
community. Placing ignores the null model of modularity (it favours the larger child); below
level 0 nothing measures that quality, and a community changed by more than
``SPLIT_SHARE`` of its members is split again with Leiden.

Connectivity. A community that lost a member or an edge may have come apart: it is checked,
and its connected pieces become communities (as a fresh Leiden run would never leave one in
two pieces).

Labels. Kept for untouched communities; new communities get new labels past the level's
largest, in a deterministic order. Labels are not ids (``graph.communities.ids`` matches by
members).

When the changes since the last hierarchy are not known (a fresh clustering input, an old
checkpoint) or the state does not add up, ``maintain`` returns None and the caller runs the
whole-graph ``hierarchical_leiden``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from graph.communities.cluster_input import Changes, ClusterInput
from graph.communities.leiden import Hierarchy, on_frontier
from graph.communities.leiden_assembly import (
    KeptNode,
    MadeNode,
    NewTree,
    SmallestKey,
    assemble_hierarchy,
)
from graph.communities.leiden_graph import gc_paused
from graph.communities.leiden_moves import local_moves
from graph.communities.leiden_partition import PreviousRun, RunInputs
from graph.communities.leiden_split import SplitNode, split_community
from graph.communities.leiden_subgraphs import (
    Edges,
    connected_pieces,
    induced_edges,
    still_connected,
)
from graph.communities.leiden_volumes import current_volumes

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
    volumes = current_volumes(ci, prev, label0, changes.deltas)
    degrees = {label: degree for label, (_, degree) in volumes.items()}
    moved_to = local_moves(frontier, adjacency, strengths, label0, degrees, total, limits.seed)
    groups, changed = _new_level_zero(prev, label0, frontier, gone, moved_to)
    for label in sorted({label0[v] for v in changes.cut if v in label0}):
        if label not in changed:
            changed[label] = _Change(prev.levels[0][label], frozenset(), frozenset())
    env = _Env(prev, prev.children_index(), label0, set(frontier), changes.cut, ci, limits)
    trees: list[NewTree] = []
    for label, change in changed.items():
        trees.extend(_changed_tree(env, label, change, volumes.pop(label, None)))
    for members in groups:
        trees.extend(_trees(env, members, [], 0))
    trees.sort(key=lambda t: (-len(t.members), SmallestKey(t.members)))
    return assemble_hierarchy(
        prev, env.children, set(changed), trees, digests, placed, volumes, total
    )


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
class _Env:
    """What every rebuild below level 0 reads."""

    prev: Hierarchy
    children: dict[tuple[int, int], list[int]]
    label0: Mapping[str, int]
    frontier: set[str]
    cut: set[str]
    ci: ClusterInput
    limits: _Limits


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
) -> list[NewTree]:
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
        or (seeds and not still_connected(env.ci.adjacency, members, seeds))
    ):
        return _trees(env, members, [label], 0)
    before = env.prev.levels[0][label]
    inside, degree = _moved_volumes(env.ci, volumes, before, change)
    node = _placed(env, members, 0, label, lost)
    return [NewTree(members, node, inside, degree)]


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
) -> MadeNode | KeptNode:
    """A changed community (``label`` at ``level`` before, now ``members``; ``lost``: the
    members it lost), with its children kept where the change did not reach. Its frontier
    members join the child holding most of their edge weight to members that stay, and only
    the children that gained or lost a member (or hold one that lost an edge) are visited,
    the same way, one level down. A small community, one without children before, or one
    changed by more than ``split_share`` of its members is split again instead."""
    limits = env.limits
    before = env.prev.levels[level][label]
    if len(members) <= limits.max_size:
        return MadeNode(members, [], before)
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
    children: list[MadeNode | KeptNode] = []
    for kid in kids:
        out, into = taken.get(kid, set()), joined.get(kid, set())
        if not out and not into and kid not in touched:
            children.append(KeptNode(level + 1, kid))
            continue
        now = (below[kid] - out) | into
        if not now:
            continue
        gone = frozenset(out - into)
        seeds = _seeds(env, now, gone)
        if seeds and not still_connected(env.ci.adjacency, now, seeds):
            children.extend(t.node for t in _trees(env, now, [kid], level + 1))
        else:
            children.append(_placed(env, now, level + 1, kid, gone))
    for group in fresh:
        children.extend(t.node for t in _trees(env, group, [], level + 1))
    if len(children) < 2:  # the change left it one child: not a split any more
        return _split_again(env, members, level, [label])
    return MadeNode(members, children, before)


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


def _trees(env: _Env, members: frozenset[str], starts: list[int], level: int) -> list[NewTree]:
    """A community as communities: one per connected piece (a community that lost a member
    or an edge may have come apart), each split inside itself while it is too large
    (``graph.communities.leiden_split``'s recursion on its induced subgraph, warm-started from the
    previous communities ``starts`` at ``level`` — at level 0, from wherever its members were)."""
    if not members:
        return []
    keys = tuple(sorted(members))
    out = []
    for piece, edges in connected_pieces(keys, induced_edges(env.ci.adjacency, keys)):
        node = (
            MadeNode(frozenset(piece), [])
            if len(piece) <= env.limits.max_size
            else _full_split(piece, edges, env, level, starts)
        )
        inside = math.fsum(w for _, _, w in edges)
        degree = math.fsum(map(env.ci.strengths.__getitem__, piece))
        out.append(NewTree(frozenset(piece), node, inside, degree))
    return out


def _split_again(
    env: _Env, members: frozenset[str], level: int, starts: list[int]
) -> MadeNode | KeptNode:
    """A connected community split again inside itself (``_full_split``)."""
    keys = tuple(sorted(members))
    return _full_split(keys, induced_edges(env.ci.adjacency, keys), env, level, starts)


def _full_split(
    keys: tuple[str, ...], edges: Edges, env: _Env, level: int, starts: list[int]
) -> MadeNode | KeptNode:
    """``graph.communities.leiden_split``'s recursion on the community's induced subgraph (a
    community at ``level``), warm-started from where its members were."""
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
    split = split_community(ctx, list(range(len(keys))), list(range(len(edges))), level)
    return _converted(keys, split)


def _converted(keys: Sequence[str], node: SplitNode) -> MadeNode | KeptNode:
    if node.reused is not None:
        return KeptNode(*node.reused)
    return MadeNode(
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
