"""The canonical weighted graph that ``graph.communities.leiden`` clusters, and each node's edge
digest.

Determinism starts here. Nodes are sorted by key, edges by their endpoints' indexes, duplicate
pairs summed with ``math.fsum`` (order-free): the same nodes and edges give the same graph
whatever order they arrive in, so the clustering never sees the input order. The
digest of a node's incident weighted edges is what lets the next run tell which nodes changed
(see ``graph.communities.leiden_partition``).

The work is column-wise in Arrow, with a pure-Python fallback for keys Arrow cannot hold: a
Python loop over half a million edges costs about a second. ``HierarchyError`` is defined here,
below ``graph.communities.leiden``, because both the graph building here and the clustering there
raise it.
"""

from __future__ import annotations

import gc
import hashlib
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress, repeat
from operator import add, and_, mul, ne

import pyarrow as pa
import pyarrow.compute as pc

from graph.errors import GraphError

_MASK = (1 << 64) - 1
# the odd constants that mix an edge's end hashes into its digest term (``node_digests``)
DIGEST_C1 = 0x9E3779B97F4A7C15
DIGEST_C2 = 0xBF58476D1CE4E5B9


def key_hash(key: str) -> int:
    """A node key's 64-bit hash in edge digests (blake2b: the same in every process)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")


class HierarchyError(GraphError):
    """A graph or a previous hierarchy the clustering cannot work with."""


@dataclass(frozen=True, slots=True)
class WeightedGraph:
    """Canonical undirected graph: sorted keys, edges ``(i, j)`` with ``i < j``, sorted, unique."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]
    weights: tuple[float, ...]


@contextmanager
def gc_paused() -> Iterator[None]:
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
    with gc_paused():
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


def node_digests(
    keys: Sequence[str], source: Sequence[int], target: Sequence[int], weights: Sequence[float]
) -> list[int]:
    """Per node, a 64-bit digest of its incident edges (other endpoint's key and weight): the
    sum mod 2**64, over its edges ``(a, b, w)``, of ``(h(a) * C1 + h(b)) * C2 ^ hash(w)`` mod
    2**64, ``h`` a key's blake2b. Computed column-wise in Arrow's uint64 arithmetic, which
    wraps around mod 2**64 (the per-edge Python loop cost half a second on 500k edges)."""
    nh = pa.array(list(map(key_hash, keys)), pa.uint64())
    a = pa.array(source, pa.int64())
    b = pa.array(target, pa.int64())
    mixed = pc.add(pc.multiply(nh.take(a), pa.scalar(DIGEST_C1, pa.uint64())), nh.take(b))
    hw = pa.array(list(map(hash, weights)), pa.int64()).cast(pa.uint64(), safe=False)  # bits
    h = pc.bit_wise_xor(pc.multiply(mixed, pa.scalar(DIGEST_C2, pa.uint64())), hw)
    ends = pa.table({"v": pa.concat_arrays([a, b]), "h": pa.concat_arrays([h, h])})
    sums = ends.group_by("v").aggregate([("h", "sum")])
    out = [0] * len(keys)  # a node without edges
    for v, d in zip(sums["v"].to_pylist(), sums["h_sum"].to_pylist(), strict=True):
        out[v] = d & _MASK
    return out
