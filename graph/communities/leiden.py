"""Hierarchical Leiden: the whole graph clustered, warm-started from the last run.

Used for the first run, a re-balance and whenever the changes since the last hierarchy are
not known; between those, ``graph.communities.leiden_local`` maintains the hierarchy where the graph
changed, with the same frontier rule and the same recursion (``graph.communities.leiden_split``).

Hierarchy. Level 0 partitions the whole graph; every community larger than ``max_cluster_size``
is re-partitioned inside itself (Leiden on its induced subgraph), down until every leaf fits. A
community that fits is a leaf and is not repeated at deeper levels. When modularity finds no
split of an oversized community (a near-clique), Leiden is re-run on it with leidenalg's size
constraint (which leidenalg 0.12 only enforces with ``community_constraint_enforcement`` > 0),
so leaves always respect ``max_cluster_size``. Nodes without edges are each their own singleton
community at level 0: they carry no evidence to group them by, and a shared "unconnected"
bucket would be a community in name only.

Determinism. The graph is canonical (``graph.communities.leiden_graph``) and the seed comes from the
caller (settings default ``0xDEADBEEF``): the same graph and the same previous hierarchy give the
same hierarchy whatever order edges and nodes arrive in. Labels are our own (descending size, then
smallest member; a maintained hierarchy keeps its untouched communities' labels instead).

Warm start, frontier and reuse. Every Leiden run in the tree starts from the previous
hierarchy's labels (``graph.communities.leiden_partition``). Only the *frontier* may move: new
nodes, and nodes whose incident weight changed materially since they were last placed, by at least
``frontier_tolerance`` of their weighted degree (without a recorded degree, any change counts).
Every other node keeps its previous community. A hub that every run touches a little (a
country, a central bank) therefore stays put, and so do the communities around it; a new
entity linked to it is free to join it. Changes below the tolerance accumulate against the
degree recorded when the node was last placed (``Hierarchy.strengths``), so many small ones
free the node in the end. A community whose members are identical to a previous split
community and none of them is on the frontier keeps its previous sub-hierarchy (copied, not
re-partitioned): the cost of a run follows the change, not the size of the graph. With
``frontier_tolerance=0`` every changed node is on the frontier and reuse never serves
structure built on other edges than today's.

Labels are not stable ids: they are renumbered every run. ``graph.communities.ids`` turns them
into stable ids by member overlap.

This module is the entry point: ``hierarchical_leiden`` and the ``Hierarchy`` it returns. The
``Hierarchy`` is pickled in the community job's checkpoint (``graph.job.state.JobState``), so it
stays here, at the path the checkpoint names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from itertools import compress

from graph.communities.leiden_graph import HierarchyError, WeightedGraph, gc_paused, node_digests
from graph.communities.leiden_partition import (
    PreviousRun,
    RunInputs,
    make_igraph,
    run_leiden,
    warm_leiden,
    warm_start,
)
from graph.communities.leiden_split import SplitNode, internal_edges, ranked_groups, split_community

DEFAULT_SEED = 0xDEADBEEF
DEFAULT_MAX_CLUSTER_SIZE = 10


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """Communities per level (level 0 the coarsest) with parent links.

    ``levels[l]`` maps a label to its members; ``parents[l]`` maps a level-``l`` label to its
    parent's label at level ``l - 1`` (empty for level 0). ``digests`` maps each node to a
    64-bit digest of its incident weighted edges, so the next run can tell what changed.
    ``modularity`` is that of level 0 on the whole graph. ``strengths`` maps each node to its
    weighted degree when it was last placed (on the frontier), against which the next run
    measures how much it changed; empty in a hierarchy from before it was recorded.
    """

    levels: tuple[Mapping[int, frozenset[str]], ...]
    parents: tuple[Mapping[int, int], ...]
    modularity: float
    digests: Mapping[str, int]
    strengths: Mapping[str, float] = field(default_factory=dict)
    # level-0 label -> (weight inside it, sum of its members' weighted degrees), kept by
    # ``graph.communities.leiden_local`` to update ``modularity`` without a pass over every edge
    volumes: Mapping[int, tuple[float, float]] | None = None
    # (level, label) of a community ``graph.communities.leiden_local`` changed in place -> the
    # previous member set it continues, which ``graph.communities.ids`` tries first for its id
    origins: Mapping[tuple[int, int], frozenset[str]] | None = field(default=None, compare=False)
    # (level, label) of every community ``graph.communities.leiden_local`` placed when it made this
    # hierarchy from the previous one: every other label has the members object, parent label
    # and children labels it had there; None when not known (a whole-graph run)
    made: frozenset[tuple[int, int]] | None = field(default=None, compare=False)
    # ``children_index()`` when the maker had it at hand (``graph.communities.leiden_local`` carries
    # the previous one over); None: counted when asked
    kids: dict[tuple[int, int], list[int]] | None = field(default=None, compare=False)

    def __setstate__(self, state: Sequence[object]) -> None:
        # a hierarchy pickled before its later fields existed has fewer values: those get
        # their defaults (left unset, the next pickle of it would fail)
        values = list(state)
        for i, f in enumerate(fields(self)):
            if i < len(values):
                value = values[i]
            elif f.default_factory is not MISSING:
                value = f.default_factory()
            else:
                value = f.default
            object.__setattr__(self, f.name, value)

    def continued(self) -> Mapping[tuple[int, int], frozenset[str]]:
        """``origins``, also for a hierarchy unpickled from before the field existed."""
        return getattr(self, "origins", None) or {}

    def placed(self) -> frozenset[tuple[int, int]] | None:
        """``made``, also for a hierarchy unpickled from before the field existed."""
        return getattr(self, "made", None)

    def level_zero_volumes(self) -> Mapping[int, tuple[float, float]] | None:
        """``volumes``, also for a hierarchy unpickled from before the field existed."""
        return getattr(self, "volumes", None)

    def placed_strengths(self) -> Mapping[str, float]:
        """``strengths``, also for a hierarchy unpickled from a checkpoint written before the
        field existed (it then has no such attribute: every changed node is on the frontier)."""
        return getattr(self, "strengths", None) or {}

    def children(self, level: int, label: int) -> list[int]:
        """Labels one level down whose parent is ``label``, in label order."""
        if level + 1 >= len(self.parents):
            return []
        return sorted(c for c, p in self.parents[level + 1].items() if p == label)

    def children_index(self) -> dict[tuple[int, int], list[int]]:
        """(level, label) → its children's labels one level down, in label order; every
        community at once (``children`` finds one community's by a scan). Shared: read it,
        do not change it."""
        kept = getattr(self, "kids", None)
        if kept is not None:
            return kept
        index: dict[tuple[int, int], list[int]] = {}
        for level, parents in enumerate(self.parents):
            for label, parent in sorted(parents.items()):
                index.setdefault((level - 1, parent), []).append(label)
        return index

    def paths(self) -> dict[str, tuple[int, ...]]:
        """Each node's labels from level 0 down to its leaf (the serialisable warm start)."""
        out: dict[str, tuple[int, ...]] = {}
        for level, communities in enumerate(self.levels):
            for label, members in communities.items():
                for key in members:
                    out[key] = (*out[key], label) if level else (label,)
        return out

    def leaves(self) -> list[frozenset[str]]:
        """Member sets of the communities that were not split further."""
        out: list[frozenset[str]] = []
        for level, communities in enumerate(self.levels):
            below = self.parents[level + 1] if level + 1 < len(self.parents) else {}
            split = set(below.values())
            out.extend(m for label, m in sorted(communities.items()) if label not in split)
        return out

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-able form (for orjson) of the job's state."""
        return {
            "levels": [{str(k): sorted(m) for k, m in sorted(lv.items())} for lv in self.levels],
            "parents": [{str(c): p for c, p in sorted(pv.items())} for pv in self.parents],
            "modularity": self.modularity,
            "digests": dict(sorted(self.digests.items())),
            "strengths": dict(sorted(self.placed_strengths().items())),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Hierarchy:
        """Inverse of ``to_dict``; raises ``HierarchyError`` on a malformed state."""
        try:
            levels = tuple(
                {int(k): frozenset(m) for k, m in lv.items()}
                for lv in data["levels"]  # type: ignore[attr-defined]
            )
            parents = tuple(
                {int(c): int(p) for c, p in pv.items()}
                for pv in data["parents"]  # type: ignore[attr-defined]
            )
            digests = {str(k): int(d) for k, d in data["digests"].items()}  # type: ignore[attr-defined]
            modularity = float(data["modularity"])  # type: ignore[arg-type]
            strengths = {
                str(k): float(v)
                for k, v in data.get("strengths", {}).items()  # type: ignore[attr-defined]
            }
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise HierarchyError(f"malformed hierarchy state: {e!r}") from e
        return cls(levels, parents, modularity, digests, strengths)

    @classmethod
    def from_paths(cls, paths: Mapping[str, int | Sequence[int]]) -> Hierarchy:
        """A warm start from node → level-0 label or leaf path. It has no digests, so every
        node counts as changed: a plain warm start, with nothing fixed and nothing reused."""
        levels: list[dict[int, set[str]]] = []
        parents: list[dict[int, int]] = []
        for key, path in paths.items():
            labels = (path,) if isinstance(path, int) else tuple(path)
            for level, label in enumerate(labels):
                if level == len(levels):
                    levels.append({})
                    parents.append({})
                levels[level].setdefault(label, set()).add(key)
                if (
                    level
                    and parents[level].setdefault(label, labels[level - 1]) != labels[level - 1]
                ):
                    raise HierarchyError(f"label {label} at level {level} has two parents")
        frozen = tuple({lab: frozenset(m) for lab, m in lv.items()} for lv in levels)
        return cls(frozen, tuple(parents), 0.0, {})


def hierarchical_leiden(
    graph: WeightedGraph,
    *,
    max_cluster_size: int = DEFAULT_MAX_CLUSTER_SIZE,
    seed: int = DEFAULT_SEED,
    previous: Hierarchy | Mapping[str, int | Sequence[int]] | None = None,
    n_iterations: int | None = None,
    frontier_tolerance: float = 0.0,
    rebalance: bool = False,
    node_stats: tuple[Sequence[int], Sequence[float]] | None = None,
) -> Hierarchy:
    """Partition ``graph`` into a hierarchy whose leaves have at most ``max_cluster_size``
    members, warm-started from ``previous`` (a ``Hierarchy``, or node → level-0 label or leaf
    path), only the frontier free to move (see the module docstring). ``rebalance`` frees
    every node (still warm-started, nothing reused): the maintained hierarchy's quality has
    drifted from what a fresh clustering finds (``scratch_modularity``). ``node_stats``: each
    node's edge digest and weighted degree, in node order, when the caller keeps them up to
    date (``graph.communities.cluster_input``); computed here otherwise.

    ``n_iterations`` is leidenalg's, for every run in the tree; by default 2 from scratch
    (leidenalg's default) and 1 when warm-started, which starts next to a local optimum and
    keeps intact communities fixed. Negative means "until an iteration changes nothing",
    which takes minutes on 100k nodes.
    """
    if max_cluster_size < 2:
        raise HierarchyError(f"max_cluster_size must be >= 2, got {max_cluster_size}")
    if not 0.0 <= frontier_tolerance < 1.0:
        raise HierarchyError(f"frontier_tolerance must be in [0, 1), got {frontier_tolerance}")
    with gc_paused():
        return _hierarchical_leiden(
            graph,
            max_cluster_size,
            seed,
            previous,
            n_iterations,
            frontier_tolerance,
            rebalance,
            node_stats,
        )


def _hierarchical_leiden(
    graph: WeightedGraph,
    max_cluster_size: int,
    seed: int,
    previous: Hierarchy | Mapping[str, int | Sequence[int]] | None,
    n_iterations: int | None,
    tolerance: float,
    rebalance: bool = False,
    node_stats: tuple[Sequence[int], Sequence[float]] | None = None,
) -> Hierarchy:
    if previous is not None and not isinstance(previous, Hierarchy):
        previous = Hierarchy.from_paths(previous)
    source = [a for a, _ in graph.edges]
    target = [b for _, b in graph.edges]
    if node_stats is None:
        digests: Sequence[int] = node_digests(graph.nodes, source, target, graph.weights)
        strengths: Sequence[float] = _strengths(graph, source, target)
    else:
        digests, strengths = node_stats
    prev = None
    placed = dict(zip(graph.nodes, strengths, strict=True))
    if previous is not None:
        prev, placed = _prepare_previous(graph, previous, digests, strengths, tolerance)
        if rebalance:
            prev = replace(prev, frontier=[True] * len(graph.nodes))
            placed = dict(zip(graph.nodes, strengths, strict=True))
    if n_iterations is None:
        n_iterations = 2 if previous is None else 1
    ctx = RunInputs(
        graph.nodes, source, target, graph.weights, max_cluster_size, seed, n_iterations, prev
    )
    top, modularity = _level_zero(ctx)
    return _flatten(ctx, top, modularity, dict(zip(graph.nodes, digests, strict=True)), placed)


def scratch_modularity(graph: WeightedGraph, *, seed: int = DEFAULT_SEED) -> float:
    """Level-0 modularity of a fresh Leiden run on ``graph`` (nothing warm-started): the
    yardstick a maintained hierarchy's ``modularity`` drifts from."""
    connected = sorted({k for edge in graph.edges for k in edge})
    if not connected:
        return 0.0
    local = {v: i for i, v in enumerate(connected)}
    ls = [local[a] for a, _ in graph.edges]
    lt = [local[b] for _, b in graph.edges]
    ctx = RunInputs(graph.nodes, ls, lt, graph.weights, len(connected), seed, 2, None)
    _, partition = run_leiden(ctx, make_igraph(len(connected), ls, lt), graph.weights, None)
    return 0.0 if partition is None else float(partition.quality())


def _strengths(graph: WeightedGraph, source: Sequence[int], target: Sequence[int]) -> list[float]:
    out = [0.0] * len(graph.nodes)
    for a, b, w in zip(source, target, graph.weights, strict=True):
        out[a] += w
        out[b] += w
    return out


def frontier_nodes(
    graph: WeightedGraph, previous: Hierarchy, frontier_tolerance: float = 0.0
) -> list[str]:
    """The nodes a warm-started ``hierarchical_leiden`` on ``graph`` lets move (for reports
    and benchmarks; the run computes the same)."""
    source = [a for a, _ in graph.edges]
    target = [b for _, b in graph.edges]
    digests = node_digests(graph.nodes, source, target, graph.weights)
    strengths = _strengths(graph, source, target)
    free, _ = _frontier(graph, previous, digests, strengths, frontier_tolerance)
    return list(compress(graph.nodes, free))


def _frontier(
    graph: WeightedGraph,
    prev: Hierarchy,
    digests: Sequence[int],
    strengths: Sequence[float],
    tolerance: float,
) -> tuple[list[bool], dict[str, float]]:
    """Per node whether it is on the frontier (new, or changed by at least ``tolerance`` of
    its weighted degree since it was last placed), and the degree each node was last placed
    at: today's for the frontier, the recorded one for the others."""
    recorded = prev.placed_strengths()
    frontier: list[bool] = []
    placed: dict[str, float] = {}
    for key, digest, now in zip(graph.nodes, digests, strengths, strict=True):
        before = recorded.get(key)
        moved = on_frontier(prev, key, digest, now, before, tolerance)
        frontier.append(moved)
        placed[key] = now if moved or before is None else before
    return frontier, placed


def on_frontier(
    prev: Hierarchy, key: str, digest: int, now: float, before: float | None, tolerance: float
) -> bool:
    """Whether a node is free to move this run: new, or its edges changed since ``prev`` by
    at least ``tolerance`` of its weighted degree (``now``) against the degree it was last
    placed at (``before``; unknown: any change counts)."""
    if prev.digests.get(key) == digest:
        return False
    if before is None or key not in prev.digests:
        return True
    return abs(now - before) >= tolerance * max(now, before)


def _prepare_previous(
    graph: WeightedGraph,
    prev: Hierarchy,
    digests: Sequence[int],
    strengths: Sequence[float],
    tolerance: float,
) -> tuple[PreviousRun, dict[str, float]]:
    labels: list[list[int | None]] = []
    for communities in prev.levels:
        label_of: dict[str, int] = {}
        for label, members in communities.items():
            label_of.update(dict.fromkeys(members, label))
        labels.append(list(map(label_of.get, graph.nodes)))
    children = prev.children_index()
    frontier, placed = _frontier(graph, prev, digests, strengths, tolerance)
    return PreviousRun(prev.levels, labels, frontier, children), placed


def _level_zero(ctx: RunInputs) -> tuple[list[SplitNode], float]:
    """Leiden on the whole graph, then the recursion into every oversized community."""
    n = len(ctx.keys)
    connected = sorted({*ctx.source, *ctx.target})
    if len(connected) == n:
        ls, lt = ctx.source, ctx.target
    else:
        local = dict(zip(connected, range(len(connected)), strict=True))
        ls = list(map(local.__getitem__, ctx.source))
        lt = list(map(local.__getitem__, ctx.target))
    g = make_igraph(len(connected), ls, lt)
    start = warm_start(ctx, g, connected, 0, ls, lt, ctx.weight)
    membership, partition = warm_leiden(ctx, g, ls, lt, ctx.weight, start)
    modularity = 0.0 if partition is None else float(partition.quality())
    groups, group_of = ranked_groups(len(connected), membership)
    members = [list(map(connected.__getitem__, g)) for g in groups]
    members.extend([v] for v in sorted(set(range(n)) - set(connected)))
    internal = internal_edges(group_of, ls, lt, range(len(ls)), len(groups))
    internal.extend([] for _ in range(len(members) - len(groups)))
    nodes = [split_community(ctx, m, internal[c], 0) for c, m in enumerate(members)]
    return nodes, modularity


def _flatten(
    ctx: RunInputs,
    top: list[SplitNode],
    modularity: float,
    digests: Mapping[str, int],
    strengths: Mapping[str, float],
) -> Hierarchy:
    """Label the tree level by level, breadth first, children by size then smallest member."""
    keys = ctx.keys
    levels: list[dict[int, frozenset[str]]] = []
    parents: list[dict[int, int]] = []
    frontier: list[tuple[SplitNode, int | None]] = [(node, None) for node in top]
    while frontier:
        level = len(levels)
        levels.append({})
        parents.append({})
        below: list[tuple[SplitNode, int | None]] = []
        for label, (node, parent) in enumerate(frontier):
            levels[level][label] = frozenset(map(keys.__getitem__, node.members))
            if parent is not None:
                parents[level][label] = parent
            kids = sorted(node.children, key=lambda c: (-len(c.members), c.members[0]))
            below.extend((child, label) for child in kids)
        frontier = below
    return Hierarchy(tuple(levels), tuple(parents), modularity, digests, strengths)
