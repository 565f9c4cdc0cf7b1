"""Hierarchical Leiden on planted graphs: determinism, size bound, warm start, reuse."""

from __future__ import annotations

import pickle
import random
from itertools import combinations

import igraph as ig
import leidenalg as la
import orjson
import pytest

import graph.communities.leiden_partition as partition_module
from graph.communities.leiden import (
    Hierarchy,
    frontier_nodes,
    hierarchical_leiden,
    scratch_modularity,
)
from graph.communities.leiden_graph import (
    HierarchyError,
    WeightedGraph,
    _canonical_arrow,
    _canonical_python,
    build_graph,
)
from graph.communities.leiden_partition import _contract, _Start

Edge = tuple[str, str, float]


# ---- builders (also used by test_community_ids and test_lineage) ---------------------------
def node(cluster: int, i: int) -> str:
    return f"k{cluster:02d}-{i:02d}"


def clique(cluster: int, size: int) -> list[Edge]:
    return [(node(cluster, a), node(cluster, b), 1.0) for a, b in combinations(range(size), 2)]


def cliques(k: int, size: int) -> tuple[list[str], list[Edge]]:
    """``k`` cliques of ``size`` joined in a ring by one edge each (sparse inter-edges)."""
    nodes = [node(c, i) for c in range(k) for i in range(size)]
    edges = [e for c in range(k) for e in clique(c, size)]
    edges += [(node(c, 0), node((c + 1) % k, 1), 1.0) for c in range(k)]
    return nodes, edges


def modules(k: int, size: int, p_in: float, inter: int, seed: int) -> tuple[list[str], list[Edge]]:
    """``k`` random dense modules of ``size`` nodes (larger than a leaf) plus ``inter``
    random edges between modules."""
    rng = random.Random(seed)
    nodes = [node(c, i) for c in range(k) for i in range(size)]
    edges = [
        (node(c, a), node(c, b), 1.0)
        for c in range(k)
        for a, b in combinations(range(size), 2)
        if rng.random() < p_in
    ]
    for _ in range(inter):
        c1, c2 = rng.sample(range(k), 2)
        edges.append((node(c1, rng.randrange(size)), node(c2, rng.randrange(size)), 1.0))
    return nodes, edges


def shuffled(nodes: list[str], edges: list[Edge], seed: int) -> tuple[list[str], list[Edge]]:
    """Same graph, other order: nodes and edges shuffled, half the edges reversed."""
    rng = random.Random(seed)
    n2, e2 = list(nodes), [(t, s, w) if rng.random() < 0.5 else (s, t, w) for s, t, w in edges]
    rng.shuffle(n2)
    rng.shuffle(e2)
    return n2, e2


def level0(h: Hierarchy) -> set[frozenset[str]]:
    return set(h.levels[0].values())


def nmi(a: list[frozenset[str]], b: list[frozenset[str]]) -> float:
    """NMI of two partitions of the same keys (igraph's implementation)."""
    label_a = {k: i for i, m in enumerate(a) for k in m}
    label_b = {k: i for i, m in enumerate(b) for k in m}
    keys = sorted(label_a)
    return float(
        ig.compare_communities([label_a[k] for k in keys], [label_b[k] for k in keys], method="nmi")
    )


def run(nodes: list[str], edges: list[Edge], previous: Hierarchy | None = None) -> Hierarchy:
    return hierarchical_leiden(build_graph(nodes, edges), previous=previous)


# ---- tests ---------------------------------------------------------------------------------
class TestDeterminism:
    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_edge_and_node_order_do_not_matter(self, seed: int) -> None:
        nodes, edges = modules(8, 20, 0.4, 30, seed=7)
        assert run(*shuffled(nodes, edges, seed)) == run(nodes, edges)

    def test_warm_start_on_unchanged_graph_is_a_fixed_point(self) -> None:
        nodes, edges = modules(8, 20, 0.4, 30, seed=7)
        first = run(nodes, edges)
        assert run(*shuffled(nodes, edges, 5), previous=first) == first

    def test_seed_is_the_callers(self) -> None:
        nodes, edges = modules(8, 20, 0.4, 30, seed=7)
        g = build_graph(nodes, edges)
        runs = {repr(hierarchical_leiden(g, seed=s).paths()) for s in (1, 2, 3, 4)}
        assert len(runs) > 1  # the seed reaches Leiden (sub-partitions of a module vary)


class TestHierarchyShape:
    def test_planted_cliques_are_the_level0_communities(self) -> None:
        nodes, edges = cliques(8, 5)
        h = run(nodes, edges)
        assert level0(h) == {frozenset(node(c, i) for i in range(5)) for c in range(8)}
        assert len(h.levels) == 1 and h.modularity > 0.7

    @pytest.mark.parametrize("max_size", [3, 5, 10])
    def test_leaves_respect_max_cluster_size(self, max_size: int) -> None:
        nodes, edges = modules(6, 30, 0.5, 20, seed=3)
        h = hierarchical_leiden(build_graph(nodes, edges), max_cluster_size=max_size)
        assert len(h.levels) >= 2
        assert max(len(m) for m in h.leaves()) <= max_size
        assert sorted(k for m in h.leaves() for k in m) == sorted(nodes)  # leaves partition

    def test_a_clique_too_big_for_a_leaf_is_still_split(self) -> None:
        # modularity never splits a clique; the size-constrained fallback must
        h = run([], clique(0, 25))
        assert max(len(m) for m in h.leaves()) <= 10
        assert len(h.levels[0]) == 1 and len(h.levels[1]) >= 3

    def test_every_level_partitions_its_parents_members(self) -> None:
        nodes, edges = modules(6, 30, 0.5, 20, seed=3)
        h = run(nodes, edges)
        assert sorted(k for m in h.levels[0].values() for k in m) == sorted(nodes)
        for level in range(len(h.levels) - 1):
            for label, members in h.levels[level].items():
                kids = h.children(level, label)
                if kids:
                    assert frozenset().union(*(h.levels[level + 1][c] for c in kids)) == members
                    assert len(members) > 10
                else:
                    assert len(members) <= 10

    def test_modularity_is_the_weighted_one(self) -> None:
        # the objective is weighted modularity; so is the reported figure (leidenalg's
        # ``modularity`` property is igraph's unweighted one: 0.0 on this graph)
        edges = [("a", "b", 10.0), ("b", "c", 1.0), ("c", "d", 10.0), ("a", "d", 1.0)]
        g = build_graph([], edges)
        h = hierarchical_leiden(g)
        label = {k: lab for lab, m in h.levels[0].items() for k in m}
        weighted = ig.GraphBase(4, list(g.edges), False).modularity(
            [label[k] for k in g.nodes], weights=list(g.weights)
        )
        assert h.modularity == pytest.approx(weighted) and h.modularity > 0.4

    def test_isolated_nodes_are_singletons(self) -> None:
        nodes, edges = cliques(3, 5)
        h = run([*nodes, "lonely-a", "lonely-b"], edges)
        assert frozenset({"lonely-a"}) in level0(h) and frozenset({"lonely-b"}) in level0(h)

    def test_empty_graph(self) -> None:
        h = run([], [])
        assert h.levels == () and h.modularity == 0.0


class TestWarmStart:
    def test_new_node_joins_its_neighbours(self) -> None:
        nodes, edges = cliques(6, 5)
        first = run(nodes, edges)
        extra = [("newcomer", node(2, i), 1.0) for i in range(3)] + [("newcomer", node(4, 0), 1.0)]
        second = run(nodes, edges + extra, previous=first)
        assert frozenset({*(node(2, i) for i in range(5)), "newcomer"}) in level0(second)

    def test_one_percent_edge_change_keeps_the_partition(self) -> None:
        nodes, edges = modules(30, 20, 0.5, 60, seed=11)
        first = run(nodes, edges)
        rng = random.Random(4)
        changed = list(edges)
        for _ in range(len(edges) // 200):
            changed.pop(rng.randrange(len(changed)))
            a, b = rng.sample(nodes, 2)
            changed.append((a, b, 1.0))
        second = run(nodes, changed, previous=first)
        assert nmi(first.leaves(), second.leaves()) > 0.9
        assert nmi(list(first.levels[0].values()), list(second.levels[0].values())) > 0.95
        assert second.modularity >= run(nodes, changed).modularity - 0.01

    def test_untouched_community_keeps_its_sub_hierarchy(self) -> None:
        nodes, edges = modules(6, 30, 0.5, 0, seed=3)  # components: one module each
        first = run(nodes, edges)
        grown = [*edges, (node(0, 0), "newcomer", 1.0), (node(0, 1), "newcomer", 1.0)]
        second = run([*nodes, "newcomer"], grown, previous=first)
        module5 = frozenset(node(5, i) for i in range(30))

        def subtree(h: Hierarchy) -> set[frozenset[str]]:
            return {m for lv in h.levels[1:] for m in lv.values() if m <= module5}

        assert subtree(second) == subtree(first) and len(subtree(first)) >= 2

    def test_a_hub_touched_a_little_keeps_its_community_and_its_neighbourhood(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A new entity linked to a hub (a country every article mentions) joins it; only the
        newcomer is free to move in any Leiden run, and every community keeps its members,
        down to the leaves."""
        nodes, edges = modules(6, 30, 0.5, 40, seed=5)
        hub = node(0, 0)
        edges += [(hub, node(c, i), 1.0) for c in range(1, 6) for i in range(3)]
        first = run(nodes, edges)
        free: list[int] = []
        real = partition_module.run_leiden

        def spy(ctx, g, weights, start, cap=0):  # type: ignore[no-untyped-def]
            free.append(len(start.fixed) - sum(start.fixed) if start is not None else g.vcount())
            return real(ctx, g, weights, start, cap)

        monkeypatch.setattr(partition_module, "run_leiden", spy)
        grown = build_graph([*nodes, "newcomer"], [*edges, (hub, "newcomer", 1.0)])
        assert frontier_nodes(grown, first, 0.25) == ["newcomer"]
        assert set(frontier_nodes(grown, first, 0.0)) == {"newcomer", hub}
        second = hierarchical_leiden(grown, previous=first, frontier_tolerance=0.25)
        assert free and max(free) == 1
        before = [m for lv in first.levels for m in lv.values()]
        after = {m - {"newcomer"} for lv in second.levels for m in lv.values()}
        assert set(before) <= after
        assert any("newcomer" in m and hub in m for m in second.levels[0].values())

    def test_a_rebalance_frees_every_node_but_starts_from_where_they_are(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        nodes, edges = modules(6, 30, 0.5, 40, seed=5)
        first = run(nodes, edges)
        free: list[int] = []
        real = partition_module.run_leiden

        def spy(ctx, g, weights, start, cap=0):  # type: ignore[no-untyped-def]
            free.append(len(start.fixed) - sum(start.fixed) if start is not None else -1)
            return real(ctx, g, weights, start, cap)

        monkeypatch.setattr(partition_module, "run_leiden", spy)
        again = hierarchical_leiden(build_graph(nodes, edges), previous=first, rebalance=True)
        assert free[0] == len(nodes)  # level 0: nothing fixed, but warm-started
        assert level0(again) == level0(first)  # planted modules: the same place again

    def test_scratch_modularity_is_that_of_a_fresh_hierarchy(self) -> None:
        nodes, edges = modules(8, 20, 0.4, 30, seed=2)
        graph = build_graph(nodes, edges)
        fresh = hierarchical_leiden(graph)
        assert scratch_modularity(graph) == pytest.approx(fresh.modularity)
        assert scratch_modularity(build_graph(["a", "b"], [])) == 0.0

    def test_small_changes_accumulate_against_the_degree_last_placed_at(self) -> None:
        nodes, edges = cliques(6, 5)
        hub = node(0, 0)
        first = hierarchical_leiden(build_graph(nodes, edges), frontier_tolerance=0.5)
        placed = first.strengths[hub]
        one = [*edges, (hub, "n1", 1.0)]
        second = hierarchical_leiden(
            build_graph([*nodes, "n1"], one), previous=first, frontier_tolerance=0.5
        )
        assert second.strengths[hub] == placed  # below the tolerance: still judged from there
        assert second.strengths["n1"] == 1.0
        many = [*one, *((hub, f"n{i}", 1.0) for i in range(2, 6))]
        third = hierarchical_leiden(
            build_graph([*nodes, *(f"n{i}" for i in range(1, 6))], many),
            previous=second,
            frontier_tolerance=0.5,
        )
        assert third.strengths[hub] == placed + 5  # together they passed it: placed anew

    def test_a_hierarchy_from_before_strengths_were_recorded_still_warm_starts(self) -> None:
        """A checkpoint's hierarchy unpickled without the field: every changed node is on the
        frontier, as before, and the next hierarchy records the degrees."""
        nodes, edges = cliques(6, 5)
        first = run(nodes, edges)
        object.__delattr__(first, "strengths")
        assert first.placed_strengths() == {}
        extra = [("newcomer", node(2, i), 1.0) for i in range(3)]
        second = hierarchical_leiden(
            build_graph([*nodes, "newcomer"], edges + extra),
            previous=first,
            frontier_tolerance=0.25,
        )
        assert frozenset({*(node(2, i) for i in range(5)), "newcomer"}) in level0(second)
        assert second.strengths["newcomer"] == 3.0

    def test_frontier_tolerance_out_of_range_is_refused(self) -> None:
        nodes, edges = cliques(2, 3)
        with pytest.raises(HierarchyError, match="frontier_tolerance"):
            hierarchical_leiden(build_graph(nodes, edges), frontier_tolerance=1.0)

    def test_warm_start_with_contracted_fixed_communities_is_order_free(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # intact communities enter Leiden contracted (one node per fixed group): that path
        # must be as order-free as the rest, and must actually run here
        nodes, edges = modules(12, 30, 0.4, 40, seed=5)
        first = run(nodes, edges)
        rng = random.Random(8)
        changed = [*edges, *((rng.choice(nodes), rng.choice(nodes), 1.0) for _ in range(6))]
        calls: list[int] = []
        real = partition_module._contract

        def counting(start: _Start) -> tuple[list[int], list[int], list[bool]]:
            calls.append(1)
            return real(start)

        monkeypatch.setattr(partition_module, "_contract", counting)
        second = run(nodes, changed, previous=first)
        assert calls
        for seed in (1, 2):
            assert run(*shuffled(nodes, changed, seed), previous=first) == second
        assert max(len(m) for m in second.leaves()) <= 10

    def test_contracting_fixed_groups_keeps_modularity(self) -> None:
        nodes, edges = modules(4, 12, 0.5, 10, seed=2)
        g = build_graph(nodes, edges)
        rng = random.Random(3)
        membership = [v // 6 for v in range(len(g.nodes))]
        fixed = [label % 2 == 0 for label in membership]  # every other group fixed
        node_of, c_membership, c_fixed = _contract(_Start(membership, fixed))
        assert len(c_membership) < len(membership) and c_fixed.count(True) == 4
        whole = ig.GraphBase(len(g.nodes), list(g.edges), False)
        contracted = ig.GraphBase(
            len(c_membership), [(node_of[a], node_of[b]) for a, b in g.edges], False
        )
        for _ in range(5):  # any partition that keeps each fixed group together
            labels = [rng.randrange(5) for _ in c_membership]
            q_whole = la.ModularityVertexPartition(
                whole, weights=list(g.weights), initial_membership=[labels[c] for c in node_of]
            ).quality()
            q_contracted = la.ModularityVertexPartition(
                contracted, weights=list(g.weights), initial_membership=labels
            ).quality()
            assert q_contracted == pytest.approx(q_whole, abs=1e-12)

    def test_paths_are_an_accepted_warm_start(self) -> None:
        nodes, edges = modules(8, 20, 0.4, 30, seed=7)
        first = run(nodes, edges)
        second = hierarchical_leiden(build_graph(nodes, edges), previous=first.paths())
        assert level0(second) == level0(first)


class TestInput:
    def test_duplicate_pairs_are_summed_and_self_loops_dropped(self) -> None:
        g = build_graph(["c"], [("a", "b", 1.0), ("b", "a", 2.0), ("a", "a", 5.0)])
        assert g == WeightedGraph(("a", "b", "c"), ((0, 1),), (3.0,))

    def test_arrow_and_python_canonicalisation_agree(self) -> None:
        # build_graph canonicalises with Arrow and falls back to Python for keys Arrow cannot
        # hold: both must give the same graph (key order is code point order in both)
        rng = random.Random(9)
        alphabet = ["a", "B", "z", "é", "ß", "中", "\uffff", "😀", "0", " "]
        keys = ["".join(rng.choices(alphabet, k=rng.randrange(1, 4))) for _ in range(40)]
        edges = [
            (rng.choice(keys), rng.choice(keys), rng.choice([0.0, 0.5, 1.0, 0.1, 0.2, 0.7]))
            for _ in range(300)
        ]  # repeated pairs in both directions, self-loops and zero weights included
        sources, targets, weights = ([e[i] for e in edges] for i in range(3))
        nodes = ["lonely", *keys[:5]]
        arrow = _canonical_arrow(nodes, sources, targets, weights)  # type: ignore[arg-type]
        python = _canonical_python(nodes, sources, targets, weights)  # type: ignore[arg-type]
        assert arrow == python
        assert arrow.nodes == tuple(sorted({*nodes, *keys}))
        assert len(set(arrow.edges)) == len(arrow.edges) < 300

    def test_keys_arrow_cannot_encode_fall_back_to_python(self) -> None:
        lone = "\ud800"  # a lone surrogate: a str, but no UTF-8
        g = build_graph([], [(lone, "b", 1.0), ("b", lone, 2.0), ("a", "b", 1.0)])
        assert g == WeightedGraph(("a", "b", lone), ((0, 1), (1, 2)), (1.0, 3.0))

    @pytest.mark.parametrize("weight", [-1.0, float("nan"), float("inf")])
    def test_bad_weights_are_refused(self, weight: float) -> None:
        with pytest.raises(HierarchyError, match="weight"):
            build_graph([], [("a", "b", weight)])

    def test_too_small_max_cluster_size_is_refused(self) -> None:
        with pytest.raises(HierarchyError, match="max_cluster_size"):
            hierarchical_leiden(build_graph([], [("a", "b", 1.0)]), max_cluster_size=1)

    def test_state_roundtrips_through_json(self) -> None:
        nodes, edges = modules(6, 30, 0.5, 20, seed=3)
        h = run(nodes, edges)
        assert Hierarchy.from_dict(orjson.loads(orjson.dumps(h.to_dict()))) == h

    def test_malformed_state_is_a_typed_error(self) -> None:
        with pytest.raises(HierarchyError, match="malformed"):
            Hierarchy.from_dict({"levels": [{"x": ["a"]}]})


def test_a_hierarchy_pickled_before_its_later_fields_loads_with_their_defaults() -> None:
    """A checkpoint's hierarchy from an earlier version has fewer field values: unpickled,
    the later fields take their defaults, and it pickles again (an unset field would make
    the next checkpoint of the job fail)."""
    h = Hierarchy(({0: frozenset("ab")},), ({},), 0.5, {"a": 1, "b": 2})
    old = Hierarchy.__new__(Hierarchy)
    old.__setstate__([h.levels, h.parents, h.modularity, h.digests])  # as unpickling does
    again = pickle.loads(pickle.dumps(old))
    assert again == h
    assert again.strengths == {} and again.volumes is None and again.made is None
    assert again.children_index() == {}
