"""Hierarchical Leiden: the whole graph re-clustered each run, warm-started from the last run.

Objective. ``leidenalg.ModularityVertexPartition`` with edge weights — the quantity GraphRAG's
``hierarchical_leiden`` optimises (modularity, resolution 1) and the one we report. We do not use
``RBConfigurationVertexPartition``: at resolution 1 it is the same objective, and a resolution
would be one more knob to tune; granularity comes from the recursion instead.

Hierarchy. Level 0 partitions the whole graph; every community larger than ``max_cluster_size``
is re-partitioned inside itself (Leiden on its induced subgraph), down until every leaf fits. A
community that fits is a leaf and is not repeated at deeper levels. When modularity finds no
split of an oversized community (a near-clique), Leiden is re-run on it with leidenalg's size
constraint (which leidenalg 0.12 only enforces with ``community_constraint_enforcement`` > 0),
so leaves always respect ``max_cluster_size``. Nodes without edges are each their own singleton
community at level 0: they carry no evidence to group them by, and a shared "unconnected"
bucket would be a community in name only.

Determinism. Nodes are sorted by key, edges by their endpoints' indexes, duplicate pairs summed
with ``math.fsum`` (order-free), and the seed comes from the caller (settings default
``0xDEADBEEF``): the same graph and the same previous hierarchy give the same hierarchy whatever
order edges and nodes arrive in. Labels are our own (descending size, then smallest member).

Warm start. Each Leiden run (level 0, and every re-partition below it) starts from the previous
run's labels of its nodes (``initial_membership``). A new node takes the previous label holding
the heaviest total edge weight among its neighbours, else a fresh singleton label; previous
communities that lost their connectivity start as their connected pieces. A node is *changed*
when its incident weighted edges differ from the previous run (a per-node digest stored in the
hierarchy). A previous community that is *intact* — all its members still in this run's node
set and none changed — starts fixed (leidenalg ``is_membership_fixed``): other nodes may join
it, but nothing far from a change is reshuffled. Without this an unchanged graph is not a fixed
point (every bounded Leiden run still finds small gains and moves communities around), and
every such move would cost a report. Fixed members of one starting community enter leidenalg
contracted into one fixed node (their edges kept, internal ones as self-loops, so modularity
is that of the whole graph): they cannot move anyway, and Leiden has fewer nodes to visit. A
community whose members are identical to a previous
split community and none of them changed has exactly the previous induced subgraph, so its
previous sub-hierarchy is copied instead of re-partitioned: reuse never serves stale structure.

Labels are not stable ids: they are renumbered every run. ``graph.community_ids`` turns them
into stable ids by member overlap.
"""

from __future__ import annotations

import gc
import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress, repeat
from operator import add, and_, eq, mul, ne

import igraph as ig
import leidenalg as la
import pyarrow as pa
import pyarrow.compute as pc

from graph.errors import GraphError

DEFAULT_SEED = 0xDEADBEEF
DEFAULT_MAX_CLUSTER_SIZE = 10
_MASK = (1 << 64) - 1


class HierarchyError(GraphError):
    """A graph or a previous hierarchy the clustering cannot work with."""


@dataclass(frozen=True, slots=True)
class WeightedGraph:
    """Canonical undirected graph: sorted keys, edges ``(i, j)`` with ``i < j``, sorted, unique."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]
    weights: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """Communities per level (level 0 the coarsest) with parent links.

    ``levels[l]`` maps a label to its members; ``parents[l]`` maps a level-``l`` label to its
    parent's label at level ``l - 1`` (empty for level 0). ``digests`` maps each node to a
    64-bit digest of its incident weighted edges, so the next run can tell what changed.
    ``modularity`` is that of level 0 on the whole graph.
    """

    levels: tuple[Mapping[int, frozenset[str]], ...]
    parents: tuple[Mapping[int, int], ...]
    modularity: float
    digests: Mapping[str, int]

    def children(self, level: int, label: int) -> list[int]:
        """Labels one level down whose parent is ``label``, in label order."""
        if level + 1 >= len(self.parents):
            return []
        return sorted(c for c, p in self.parents[level + 1].items() if p == label)

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
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise HierarchyError(f"malformed hierarchy state: {e!r}") from e
        return cls(levels, parents, modularity, digests)

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


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic collector off for the duration. Building a graph or a hierarchy allocates
    millions of acyclic tuples and lists; each allocation burst triggers full collections
    that re-scan everything alive (the caller's edge list included): a second or more on
    100k nodes, for no garbage. Re-enabled afterwards only if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def build_graph(nodes: Iterable[str], edges: Iterable[tuple[str, str, float]]) -> WeightedGraph:
    """Canonicalise: endpoints become nodes, self-loops and zero weights are dropped, the two
    directions of a pair are one edge whose weights are summed. Negative or non-finite weights
    are refused (modularity needs non-negative weights)."""
    with _gc_paused():
        return _build_graph(nodes, edges)


def _build_graph(nodes: Iterable[str], edges: Iterable[tuple[str, str, float]]) -> WeightedGraph:
    raw = edges if isinstance(edges, list) else list(edges)
    sources = [e[0] for e in raw]  # not zip(*raw): a call with 500k arguments is slow
    targets = [e[1] for e in raw]
    given = [e[2] for e in raw]
    weights = list(map(float, given))
    if not all(map(math.isfinite, weights)) or (weights and min(weights) < 0):
        bad = next(e for e, w in enumerate(weights) if not math.isfinite(w) or w < 0)
        raise HierarchyError(f"edge {sources[bad]!r}-{targets[bad]!r} has weight {given[bad]!r}")
    names = list(nodes)
    try:
        return _canonical_arrow(names, sources, targets, weights)
    except (UnicodeEncodeError, pa.ArrowException):  # a lone surrogate, a key that is no str
        return _canonical_python(names, sources, targets, weights)


def _canonical_arrow(
    nodes: list[str], sources: list[str], targets: list[str], weights: list[float]
) -> WeightedGraph:
    """The canonical graph computed column-wise by Arrow: a Python loop (or even C-level
    ``map``) over half a million edges costs about a second. Arrow orders strings by their
    UTF-8 bytes, which is code point order: the order ``sorted`` gives."""
    src = pa.array(sources, pa.large_string())
    tgt = pa.array(targets, pa.large_string())
    every = pa.chunked_array([pa.array(nodes, pa.large_string()), src, tgt])
    distinct = pc.unique(every)
    keys = distinct.take(pc.array_sort_indices(distinct))
    n = len(keys)
    first = pc.index_in(src, value_set=keys).cast(pa.int64())
    second = pc.index_in(tgt, value_set=keys).cast(pa.int64())
    w = pa.array(weights, pa.float64())
    keep = pc.and_(pc.not_equal(first, second), pc.not_equal(w, 0.0))  # no loop, no zero
    lo = pc.min_element_wise(first, second).filter(keep)
    hi = pc.max_element_wise(first, second).filter(keep)
    w = w.filter(keep)
    codes = pc.add(pc.multiply(lo, n), hi)  # the pair as one int, i * n + j
    order = pc.array_sort_indices(codes)  # stable
    codes, lo, hi, w = codes.take(order), lo.take(order), hi.take(order), w.take(order)
    repeated = pc.equal(codes[1:], codes[:-1])  # an edge given more than once
    summed: dict[int, float] = {}
    if pc.any(repeated).as_py():
        c, ws = codes.to_pylist(), w.to_pylist()
        summands: dict[int, list[float]] = {}
        for p in pc.indices_nonzero(repeated).to_pylist():
            summands.setdefault(c[p], [ws[p]]).append(ws[p + 1])
        summed = {code: math.fsum(x) for code, x in summands.items()}  # order-free sum
        head = pa.concat_arrays([pa.array([True]), pc.invert(repeated)])
        codes, lo, hi, w = codes.filter(head), lo.filter(head), hi.filter(head), w.filter(head)
    pairs = tuple(zip(lo.to_pylist(), hi.to_pylist(), strict=True))
    if summed:
        return WeightedGraph(
            tuple(keys.to_pylist()),
            pairs,
            tuple(map(summed.get, codes.to_pylist(), w.to_pylist())),
        )
    return WeightedGraph(tuple(keys.to_pylist()), pairs, tuple(w.to_pylist()))


def _canonical_python(
    nodes: list[str], sources: list[str], targets: list[str], weights: list[float]
) -> WeightedGraph:
    """The same canonical graph for keys Arrow cannot hold (not UTF-8 encodable)."""
    keys = sorted({*nodes, *sources, *targets})
    n = len(keys)
    index = {k: i for i, k in enumerate(keys)}
    first = list(map(index.__getitem__, sources))
    second = list(map(index.__getitem__, targets))
    codes = list(map(add, map(mul, map(min, first, second), repeat(n)), map(max, first, second)))
    keep = list(map(and_, map(ne, first, second), map(bool, weights)))  # no loop, no zero
    codes = list(compress(codes, keep))
    weights = list(compress(weights, keep))
    pairs = dict(zip(codes, weights, strict=True))
    if len(pairs) != len(codes):
        repeated = {c for c, k in Counter(codes).items() if k > 1}
        summands: dict[int, list[float]] = {c: [] for c in repeated}
        for c, w in zip(codes, weights, strict=True):
            if c in repeated:
                summands[c].append(w)
        for c, ws in summands.items():
            pairs[c] = math.fsum(ws)  # correctly rounded: the same sum in any order
    ordered = sorted(pairs)
    return WeightedGraph(
        tuple(keys),
        tuple(map(divmod, ordered, repeat(n))),
        tuple(map(pairs.__getitem__, ordered)),
    )


@dataclass(slots=True)
class _Node:
    members: list[int]  # global node indexes, sorted
    children: list[_Node]


@dataclass(frozen=True, slots=True)
class _Prev:
    """The previous hierarchy as seen from this run's node indexes."""

    hierarchy: Hierarchy
    labels: list[list[int | None]]  # per level, per node index: previous label, None if none
    changed: list[bool]  # per node index: new, or its incident edges differ
    reusable: dict[frozenset[str], tuple[int, int]]  # split community's members → (level, label)
    children: dict[tuple[int, int], list[int]]  # (level, label) → child labels


@dataclass(frozen=True, slots=True)
class _Ctx:
    """One run's fixed inputs; edges are addressed by their index in the canonical graph."""

    keys: tuple[str, ...]
    source: Sequence[int]
    target: Sequence[int]
    weight: tuple[float, ...]
    max_size: int
    seed: int
    n_iterations: int
    prev: _Prev | None


def hierarchical_leiden(
    graph: WeightedGraph,
    *,
    max_cluster_size: int = DEFAULT_MAX_CLUSTER_SIZE,
    seed: int = DEFAULT_SEED,
    previous: Hierarchy | Mapping[str, int | Sequence[int]] | None = None,
    n_iterations: int | None = None,
) -> Hierarchy:
    """Partition ``graph`` into a hierarchy whose leaves have at most ``max_cluster_size``
    members, warm-started from ``previous`` (a ``Hierarchy``, or node → level-0 label or leaf
    path).

    ``n_iterations`` is leidenalg's, for every run in the tree; by default 2 from scratch
    (leidenalg's default) and 1 when warm-started, which starts next to a local optimum and
    keeps intact communities fixed. Negative means "until an iteration changes nothing",
    which takes minutes on 100k nodes.
    """
    if max_cluster_size < 2:
        raise HierarchyError(f"max_cluster_size must be >= 2, got {max_cluster_size}")
    with _gc_paused():
        return _hierarchical_leiden(graph, max_cluster_size, seed, previous, n_iterations)


def _hierarchical_leiden(
    graph: WeightedGraph,
    max_cluster_size: int,
    seed: int,
    previous: Hierarchy | Mapping[str, int | Sequence[int]] | None,
    n_iterations: int | None,
) -> Hierarchy:
    if previous is not None and not isinstance(previous, Hierarchy):
        previous = Hierarchy.from_paths(previous)
    source = [a for a, _ in graph.edges]
    target = [b for _, b in graph.edges]
    digests = _digests(graph.nodes, source, target, graph.weights)
    prev = _prepare_previous(graph, previous, digests) if previous is not None else None
    if n_iterations is None:
        n_iterations = 2 if previous is None else 1
    ctx = _Ctx(
        graph.nodes, source, target, graph.weights, max_cluster_size, seed, n_iterations, prev
    )
    top, modularity = _level_zero(ctx)
    return _flatten(ctx, top, modularity, dict(zip(graph.nodes, digests, strict=True)))


def _digests(
    keys: Sequence[str], source: Sequence[int], target: Sequence[int], weights: Sequence[float]
) -> list[int]:
    """Per node, a 64-bit digest of its incident edges (other endpoint's key and weight): the
    sum mod 2**64, over its edges ``(a, b, w)``, of ``(h(a) * C1 + h(b)) * C2 ^ hash(w)`` mod
    2**64, ``h`` a key's blake2b. Computed column-wise in Arrow's uint64 arithmetic, which
    wraps around mod 2**64 (the per-edge Python loop cost half a second on 500k edges)."""
    nh = pa.array(
        [
            int.from_bytes(hashlib.blake2b(k.encode("utf-8"), digest_size=8).digest(), "little")
            for k in keys
        ],
        pa.uint64(),
    )
    a = pa.array(source, pa.int64())
    b = pa.array(target, pa.int64())
    mixed = pc.add(pc.multiply(nh.take(a), pa.scalar(0x9E3779B97F4A7C15, pa.uint64())), nh.take(b))
    hw = pa.array(list(map(hash, weights)), pa.int64()).cast(pa.uint64(), safe=False)  # bits
    h = pc.bit_wise_xor(pc.multiply(mixed, pa.scalar(0xBF58476D1CE4E5B9, pa.uint64())), hw)
    ends = pa.table({"v": pa.concat_arrays([a, b]), "h": pa.concat_arrays([h, h])})
    sums = ends.group_by("v").aggregate([("h", "sum")])
    out = [0] * len(keys)  # a node without edges
    for v, d in zip(sums["v"].to_pylist(), sums["h_sum"].to_pylist(), strict=True):
        out[v] = d & _MASK
    return out


def _prepare_previous(graph: WeightedGraph, prev: Hierarchy, digests: list[int]) -> _Prev:
    labels: list[list[int | None]] = []
    for communities in prev.levels:
        label_of: dict[str, int] = {}
        for label, members in communities.items():
            label_of.update(dict.fromkeys(members, label))
        labels.append(list(map(label_of.get, graph.nodes)))
    children: dict[tuple[int, int], list[int]] = {}
    for level, parents in enumerate(prev.parents):
        for label, parent in sorted(parents.items()):
            children.setdefault((level - 1, parent), []).append(label)
    reusable = {prev.levels[lv][lab]: (lv, lab) for lv, lab in children}
    changed = list(map(ne, map(prev.digests.get, graph.nodes), digests))
    return _Prev(prev, labels, changed, reusable, children)


def _level_zero(ctx: _Ctx) -> tuple[list[_Node], float]:
    """Leiden on the whole graph, then the recursion into every oversized community."""
    n = len(ctx.keys)
    connected = sorted({*ctx.source, *ctx.target})
    if len(connected) == n:
        ls, lt = ctx.source, ctx.target
    else:
        local = dict(zip(connected, range(len(connected)), strict=True))
        ls = list(map(local.__getitem__, ctx.source))
        lt = list(map(local.__getitem__, ctx.target))
    g = _igraph(len(connected), ls, lt)
    start = _warm_start(ctx, g, connected, 0, ls, lt, ctx.weight)
    membership, partition = _warm_leiden(ctx, g, ls, lt, ctx.weight, start)
    modularity = 0.0 if partition is None else float(partition.quality())
    groups, group_of = _groups(len(connected), membership)
    members = [list(map(connected.__getitem__, g)) for g in groups]
    members.extend([v] for v in sorted(set(range(n)) - set(connected)))
    internal = _internal_edges(group_of, ls, lt, range(len(ls)), len(groups))
    internal.extend([] for _ in range(len(members) - len(groups)))
    nodes = [_split(ctx, m, internal[c], 0) for c, m in enumerate(members)]
    return nodes, modularity


def _internal_edges(
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


def _groups(n: int, membership: Sequence[int]) -> tuple[list[list[int]], list[int]]:
    """Members (local indexes ``0..n-1``) per community, ordered by descending size then
    smallest member (our labels), and each member's group."""
    buckets: dict[int, list[int]] = {}
    for v, c in zip(range(n), membership, strict=True):
        buckets.setdefault(c, []).append(v)  # ascending v: each bucket is sorted
    ordered = sorted(buckets.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    rank = {c: g for g, (c, _) in enumerate(ordered)}
    return [m for _, m in ordered], list(map(rank.__getitem__, membership))


def _split(ctx: _Ctx, members: list[int], edges: list[int], depth: int) -> _Node:
    """A community, re-partitioned inside itself while it is larger than ``max_size``."""
    if len(members) <= ctx.max_size:
        return _Node(members, [])
    reused = _reuse(ctx, members)
    if reused is not None:
        return reused
    local = dict(zip(members, range(len(members)), strict=True))
    ls = list(map(local.__getitem__, map(ctx.source.__getitem__, edges)))
    lt = list(map(local.__getitem__, map(ctx.target.__getitem__, edges)))
    weights = list(map(ctx.weight.__getitem__, edges))
    g = _igraph(len(members), ls, lt)
    start = _warm_start(ctx, g, members, depth + 1, ls, lt, weights)
    membership, _ = _warm_leiden(ctx, g, ls, lt, weights, start)
    if len(set(membership)) < 2:
        membership, _ = _leiden(ctx, g, weights, None, cap=ctx.max_size)
    if len(set(membership)) < 2:
        raise HierarchyError(f"Leiden could not split a community of {len(members)} nodes")
    groups, group_of = _groups(len(members), membership)
    internal = _internal_edges(group_of, ls, lt, edges, len(groups))
    return _Node(
        members,
        [
            _split(ctx, list(map(members.__getitem__, g)), internal[c], depth + 1)
            for c, g in enumerate(groups)
        ],
    )


def _reuse(ctx: _Ctx, members: list[int]) -> _Node | None:
    """The previous sub-hierarchy of an identical community none of whose members changed."""
    prev = ctx.prev
    if prev is None or any(map(prev.changed.__getitem__, members)):
        return None
    found = prev.reusable.get(frozenset(map(ctx.keys.__getitem__, members)))
    if found is None:
        return None
    index = {ctx.keys[v]: v for v in members}
    return _copy_subtree(prev, *found, index)


def _copy_subtree(prev: _Prev, level: int, label: int, index: Mapping[str, int]) -> _Node:
    members = sorted(map(index.__getitem__, prev.hierarchy.levels[level][label]))
    kids = prev.children.get((level, label), [])
    return _Node(members, [_copy_subtree(prev, level + 1, c, index) for c in kids])


@dataclass(frozen=True, slots=True)
class _Start:
    membership: list[int]
    fixed: list[bool]


def _warm_start(
    ctx: _Ctx,
    g: ig.GraphBase,
    nodes: Sequence[int],
    level: int,
    ls: Sequence[int],
    lt: Sequence[int],
    weights: Sequence[float],
) -> _Start | None:
    """Initial membership from the nodes' previous labels at ``level`` (see the module
    docstring), and which nodes stay fixed: the members of intact previous communities.
    ``g`` is the run's graph, whose edges ``ls``, ``lt`` are indexes into ``nodes``."""
    prev = ctx.prev
    if prev is None or level >= len(prev.labels):
        return None
    labels = list(map(prev.labels[level].__getitem__, nodes))
    if labels.count(None) == len(labels):
        return None
    intact = _intact(prev, nodes, labels, level)
    fixed = list(map(intact.__contains__, labels))
    full = _adopt_new_nodes(labels, ls, lt, weights) if None in labels else labels
    same = map(eq, map(full.__getitem__, ls), map(full.__getitem__, lt))
    inside = list(compress(range(len(ls)), same))
    pieces = g.subgraph_edges(inside, delete_vertices=False).connected_components()
    return _Start(list(pieces), fixed)


def _intact(
    prev: _Prev, nodes: Sequence[int], labels: Sequence[int | None], level: int
) -> set[int | None]:
    """Previous labels all of whose members are here and unchanged."""
    count = Counter(labels)
    broken = set(compress(labels, map(prev.changed.__getitem__, nodes)))
    sizes = prev.hierarchy.levels[level]
    return {
        lab
        for lab, c in count.items()
        if lab is not None and lab not in broken and c == len(sizes[lab])
    }


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


def _igraph(n: int, ls: Sequence[int], lt: Sequence[int]) -> ig.GraphBase:
    """An undirected igraph graph. ``GraphBase``, not ``Graph``: ``Graph.__init__`` probes for
    numpy on every call, which costs more than a small sub-run's Leiden when numpy is absent;
    leidenalg only needs the base type."""
    return ig.GraphBase(n, list(zip(ls, lt, strict=True)), False)


def _warm_leiden(
    ctx: _Ctx,
    g: ig.GraphBase,
    ls: Sequence[int],
    lt: Sequence[int],
    weights: Sequence[float],
    start: _Start | None,
) -> tuple[list[int], la.ModularityVertexPartition | None]:
    """``_leiden`` from ``start`` with each group of fixed nodes sharing a starting community
    contracted into one fixed node (the group's edges kept: internal ones become self-loops,
    so every community's internal weight and total degree, hence modularity, are those of
    the uncontracted graph). Fixed nodes never move, so the run optimises the same thing
    with fewer nodes to visit; other nodes may still join the contracted community."""
    if start is None or all(start.fixed) or not any(start.fixed):
        return _leiden(ctx, g, weights, start)
    node_of, membership, fixed = _contract(start)
    if len(membership) == len(node_of):
        return _leiden(ctx, g, weights, start)  # no two fixed nodes share a community
    contracted = _igraph(
        len(membership), list(map(node_of.__getitem__, ls)), list(map(node_of.__getitem__, lt))
    )
    labels, partition = _leiden(ctx, contracted, weights, _Start(membership, fixed))
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


def _leiden(
    ctx: _Ctx,
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


def _flatten(
    ctx: _Ctx, top: list[_Node], modularity: float, digests: Mapping[str, int]
) -> Hierarchy:
    """Label the tree level by level, breadth first, children by size then smallest member."""
    keys = ctx.keys
    levels: list[dict[int, frozenset[str]]] = []
    parents: list[dict[int, int]] = []
    frontier: list[tuple[_Node, int | None]] = [(node, None) for node in top]
    while frontier:
        level = len(levels)
        levels.append({})
        parents.append({})
        below: list[tuple[_Node, int | None]] = []
        for label, (node, parent) in enumerate(frontier):
            levels[level][label] = frozenset(map(keys.__getitem__, node.members))
            if parent is not None:
                parents[level][label] = parent
            kids = sorted(node.children, key=lambda c: (-len(c.members), c.members[0]))
            below.extend((child, label) for child in kids)
        frontier = below
    return Hierarchy(tuple(levels), tuple(parents), modularity, digests)
