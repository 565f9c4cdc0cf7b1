"""The graph Leiden clusters, kept between runs and brought up to date from what changed.

Rebuilding the clustering graph from every relationship of the view, then every node's edge
digest and weighted degree, cost a run time in proportion to the whole graph (a fifth of a
second at 8,000 articles) however few rows changed. ``ClusterInput`` keeps the graph as
unordered pairs with their summed weight, each node's neighbours, digest and weighted degree,
and a run refreshes only the relationships and entities its changes touched. What it hands
to ``graph.communities.leiden`` is exactly what ``clustering_graph`` and
``graph.communities.leiden_graph`` compute from scratch (tested side by side): the same canonical
graph, the same 64-bit digests (a sum of per-edge terms mod 2**64, so kept by adding and subtracting
terms) and the same degrees (summed in canonical edge order, recomputed for the nodes whose edges
changed).

Refreshing is idempotent: a key is recomputed from the view as it is now, so refreshing more
keys than changed (changes folded while the run was under way) is harmless.

Besides relationships the graph holds **alias glue**: an edge between a key that alias
resolution merged into another ("IMF" into "International Monetary Fund",
``graph.aliases.resolution``) and its canonical key, weighted by the alias's mentions, so Leiden
keeps the two names of one thing in one community without the graph losing either node (every table,
report and lineage event keeps speaking of entity keys). A merge made or undone is an edge added or
removed, which the maintained clustering treats like any other change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field

from graph.communities.leiden_graph import (
    DIGEST_C1,
    DIGEST_C2,
    HierarchyError,
    WeightedGraph,
    key_hash,
)
from graph.merge.view import GraphView

_MASK = (1 << 64) - 1

Pair = tuple[str, str]  # entity keys, the smaller first
_JOIN = "\x00"  # joins a pair's keys into one string key of ``pairs`` (no key holds a NUL)
Edge = tuple[str, str, float]  # source, target, weight
# key prefix of a glue edge (alias -> canonical): no relationship key starts with a control
# character
GLUE = "\x1falias:"


def edge_term(a: str, b: str, weight: float) -> int:
    """One edge's share of both ends' digests (``a < b``), as ``node_digests`` computes it."""
    mixed = (key_hash(a) * DIGEST_C1 + key_hash(b)) & _MASK
    return ((mixed * DIGEST_C2) & _MASK) ^ (hash(weight) & _MASK)


def glue_edges(view: GraphView, aliases: Mapping[str, str]) -> dict[str, Edge]:
    """The glue edge of each whole merge (alias key -> canonical key) whose both ends are in
    the view, weighted by the alias's mentions rounded down to a power of two: the tie grows
    with how much the graph says under that name, and changes (an edge change Leiden
    revisits) only when that doubles, not with every article that uses the name."""
    return {
        GLUE + alias: (alias, canonical, glue_weight(view.entities[alias].mention_count))
        for alias, canonical in sorted(aliases.items())
        if alias in view.entities and canonical in view.entities and alias != canonical
    }


def pair_key(pair: Pair) -> str:
    """A pair as one string, the key of ``ClusterInput.pairs`` (a table's keys are strings)."""
    return pair[0] + _JOIN + pair[1]


def glue_weight(mentions: int) -> float:
    return float(1 << (max(1, mentions).bit_length() - 1))


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed in the clustering graph between two runs."""

    dirty: set[str]  # nodes whose edges changed
    cut: set[str]  # of those, the ones that lost an edge
    deltas: dict[Pair, float]  # pair -> its weight now minus then (0 when absent)


@dataclass
class ClusterInput:
    """The clustering graph of a view: relationships between two known, distinct entities,
    a pair's weight the exact sum of its relationships' weights.

    ``counted``, ``pairs`` and ``ends`` are read only for the keys a refresh names; the job
    keeps them as tables of its state database (``agents.community.state``), so they take no
    memory between runs. The rest is what Leiden reads whole."""

    # relationship key -> the pair it counts towards and its weight (edges that count only)
    counted: MutableMapping[str, tuple[Pair, float]] = field(default_factory=dict)
    # pair (``pair_key``) -> relationship key -> weight
    pairs: MutableMapping[str, dict[str, float]] = field(default_factory=dict)
    # entity key -> every relationship key with that end, counted or not (an entity that
    # appears or goes changes whether they count)
    ends: MutableMapping[str, set[str]] = field(default_factory=dict)
    # node -> neighbour -> pair weight (nonzero weights): the graph's edges, each under both
    # ends (``edge_weights`` names each once); a node is any end of a counted relationship,
    # with an entry even when all its weights are zero
    adjacency: dict[str, dict[str, float]] = field(default_factory=dict)
    digests: dict[str, int] = field(default_factory=dict)
    strengths: dict[str, float] = field(default_factory=dict)
    # the entities of the view when their relationships were last counted
    known: set[str] = field(default_factory=set)
    # nodes whose edges changed since the last ``take_changes`` (None: not known, e.g. a
    # fresh build), and of those the ones that lost an edge (a community holding one may
    # have come apart)
    dirty: set[str] | None = None
    cut: set[str] = field(default_factory=set)
    # pair -> its weight now minus its weight then, for the pairs that changed since
    deltas: dict[Pair, float] = field(default_factory=dict)
    # glue key (GLUE + alias key) -> (alias, canonical, weight): see the module docstring
    glue: dict[str, Edge] = field(default_factory=dict)
    _graph: WeightedGraph | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, view: GraphView, glue: dict[str, Edge] | None = None) -> ClusterInput:
        made = cls(known=set(view.entities), glue=dict(glue or {}))
        made.refresh(view, [*view.relationships, *made.glue], ())
        return made

    def set_glue(self, view: GraphView, glue: dict[str, Edge]) -> None:
        """Make the glue edges ``glue`` (``glue_edges``), refreshing the ones that changed."""
        changed = {k for k in self.glue.keys() | glue.keys() if self.glue.get(k) != glue.get(k)}
        for key in changed & self.glue.keys():  # ends a glue key no longer has
            now = glue[key][:2] if key in glue else ()
            for end in self.glue[key][:2]:
                if end not in now:
                    self.ends.get(end, set()).discard(key)
        self.glue = dict(glue)
        if changed:
            self.refresh(view, changed, ())

    def _edge(self, view: GraphView, key: str) -> Edge | None:
        if key.startswith(GLUE):
            return self.glue.get(key)
        rel = view.relationships.get(key)
        return None if rel is None else (rel.source_key, rel.target_key, rel.weight)

    def refresh(
        self, view: GraphView, relationships: Iterable[str], entities: Iterable[str]
    ) -> None:
        """Recompute the given relationships, and every relationship ending at one of the
        given entities that appeared or went since (which changes whether they count)."""
        keys = set(relationships)
        for entity in entities:
            if (entity in view.entities) != (entity in self.known):
                keys.update(self.ends.get(entity, ()))
                if entity in view.entities:
                    self.known.add(entity)
                else:
                    self.known.discard(entity)
        touched_pairs: set[Pair] = set()
        for key in keys:
            old = self.counted.pop(key, None)
            edge = self._edge(view, key)
            if old is not None:
                pair, _ = old
                del self.pairs[pair_key(pair)][key]
                touched_pairs.add(pair)
                ends_now = edge[:2] if edge is not None else ()
                for end in pair:  # gone, or a glue edge re-pointed at another name
                    if end not in ends_now:
                        self.ends.get(end, set()).discard(key)
            self._index_ends(edge, key)
            if edge is None:
                continue
            source, target, raw = edge
            if source == target or source not in view.entities or target not in view.entities:
                continue
            weight = float(raw)
            if not math.isfinite(weight) or weight < 0:
                raise HierarchyError(f"edge {source!r}-{target!r} has weight {raw!r}")
            a, b = sorted((source, target))
            self.counted[key] = ((a, b), weight)
            self.pairs.setdefault(pair_key((a, b)), {})[key] = weight
            touched_pairs.add((a, b))
        if touched_pairs:
            self._graph = None
        changed_nodes: set[str] = set()
        for pair in touched_pairs:
            self._set_pair(pair, changed_nodes)
        for node in changed_nodes:
            self._settle(node)
        if self.dirty is not None:
            self.dirty.update(changed_nodes)

    def take_changes(self) -> Changes | None:
        """What changed since the last call; None when not known (the next call knows: the
        baseline starts now)."""
        dirty, cut, deltas = self.dirty, self.cut, self.deltas
        self.dirty, self.cut, self.deltas = set(), set(), {}
        return None if dirty is None else Changes(dirty, cut, deltas)

    def _index_ends(self, edge: Edge | None, key: str) -> None:
        for end in edge[:2] if edge is not None else ():
            self.ends.setdefault(end, set()).add(key)

    def _set_pair(self, pair: Pair, changed: set[str]) -> None:
        a, b = pair
        rels = self.pairs.get(pair_key(pair))
        before = self.adjacency.get(a, {}).get(b)
        nonzero = [w for w in rels.values() if w != 0] if rels else []
        after = math.fsum(nonzero) if nonzero else None
        if not rels:
            self.pairs.pop(pair_key(pair), None)
        if before != after:
            self.deltas[pair] = self.deltas.get(pair, 0.0) + (after or 0.0) - (before or 0.0)
        for node, other in ((a, b), (b, a)):
            row = self.adjacency.setdefault(node, {})
            changed.add(node)
            if before == after:
                continue
            digest = self.digests.get(node, 0)
            if before is not None:
                digest -= edge_term(a, b, before)
                del row[other]
                if after is None:
                    self.cut.add(node)
            if after is not None:
                digest += edge_term(a, b, after)
                row[other] = after
            self.digests[node] = digest & _MASK

    def _settle(self, node: str) -> None:
        """A node's weighted degree, summed in canonical edge order (by neighbour key), as
        ``graph.communities.leiden`` sums it; a node no counted relationship ends at any more is
        dropped."""
        neighbours = self.adjacency[node]
        if not neighbours and not any(k in self.counted for k in self.ends.get(node, ())):
            del self.adjacency[node]
            self.digests.pop(node, None)
            self.strengths.pop(node, None)
            return
        total = 0.0
        for other in sorted(neighbours):
            total += neighbours[other]
        self.strengths[node] = total
        self.digests.setdefault(node, 0)

    def weight(self, a: str, b: str) -> float | None:
        """The weight of the edge between ``a`` and ``b``; None when there is none."""
        return self.adjacency.get(a, {}).get(b)

    def edge_weights(self) -> Iterator[tuple[Pair, float]]:
        """Every edge once, as (pair, weight), the pair's smaller key first."""
        for a, row in self.adjacency.items():
            for b, w in row.items():
                if a < b:
                    yield (a, b), w

    def __getstate__(self) -> dict[str, object]:
        return {**vars(self), "_graph": None}  # a cache, rebuilt on first use

    def __setstate__(self, data: dict[str, object]) -> None:
        # a checkpoint from before changes were kept: not known until the next run; from
        # before aliases: no glue until the next run sets it
        vars(self).update({"dirty": None, "cut": set(), "deltas": {}, "glue": {}, **data})
        vars(self).pop("weights", None)  # each edge kept twice before: it is in ``adjacency``
        pairs = vars(self)["pairs"]
        if isinstance(pairs, dict) and any(isinstance(k, tuple) for k in pairs):
            self.pairs = {pair_key(k): v for k, v in pairs.items()}  # keyed by tuples before

    def graph(self) -> tuple[WeightedGraph, list[int], list[float]]:
        """The canonical graph with each node's digest and weighted degree, in node order."""
        if self._graph is None:
            keys = sorted(self.adjacency)
            n = len(keys)
            at = dict(zip(keys, range(n), strict=True)).__getitem__
            codes, weights = [], []
            for (a, b), w in self.edge_weights():
                codes.append(at(a) * n + at(b))  # the pair as one int
                weights.append(w)
            order = sorted(range(len(codes)), key=codes.__getitem__)
            self._graph = WeightedGraph(
                tuple(keys),
                tuple(divmod(codes[e], n) for e in order),
                tuple(weights[e] for e in order),
            )
        nodes = self._graph.nodes
        return (
            self._graph,
            [self.digests[k] for k in nodes],
            [self.strengths[k] for k in nodes],
        )
