"""Lineage events between runs, on planted cliques run through Leiden and id matching."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from itertools import product

import pytest

from graph.communities.human_ids import HumanIds
from graph.communities.ids import assign_community_ids
from graph.communities.leiden import Hierarchy, hierarchical_leiden
from graph.communities.leiden_graph import build_graph
from graph.communities.lineage import LineageEvent, _overlaps, classify
from graph.model import Community
from tests.unit.test_leiden import Edge, clique, cliques, node


@dataclass(frozen=True)
class State:
    hierarchy: Hierarchy | None = None
    communities: tuple[Community, ...] = ()
    human_ids: HumanIds = field(default_factory=HumanIds.empty)


def step(state: State, nodes: list[str], edges: list[Edge]) -> tuple[State, list[LineageEvent]]:
    """One community-job run: warm Leiden, stable ids, lineage against the previous run."""
    h = hierarchical_leiden(build_graph(nodes, edges), previous=state.hierarchy)
    s = assign_community_ids(h, state.communities, state.human_ids)
    return State(h, s.communities, s.human_ids), classify(state.communities, s.communities)


def id_of(state: State, cluster: int, size: int = 5) -> str:
    members = frozenset(node(cluster, i) for i in range(size))
    return next(c.id for c in state.communities if c.entity_keys == members)


def kinds(events: list[LineageEvent]) -> Counter[str]:
    return Counter(e.kind for e in events)


def steady(k: int = 8) -> tuple[State, list[str], list[Edge]]:
    nodes, edges = cliques(k, 5)
    state, _ = step(State(), nodes, edges)
    return state, nodes, edges


class TestRunsOnPlantedGraphs:
    def test_first_run_is_a_single_bootstrap(self) -> None:
        nodes, edges = cliques(8, 5)
        _state, events = step(State(), nodes, edges)
        assert [e.kind for e in events] == ["bootstrap"]
        assert events[0].size == 40 and len(events[0].successors) == 8

    def test_unchanged_graph_yields_only_unchanged(self) -> None:
        state, nodes, edges = steady()
        _, events = step(state, nodes, edges)
        assert kinds(events) == Counter(unchanged=8)

    def test_new_separate_cluster_emerges_alone(self) -> None:
        state, nodes, edges = steady()
        new_nodes = [node(8, i) for i in range(5)]
        bridge = (node(8, 0), node(3, 2), 1.0)  # loosely attached, as news usually is
        after, events = step(state, nodes + new_nodes, [*edges, *clique(8, 5), bridge])
        assert kinds(events) == Counter(unchanged=8, emerged=1)
        (emerged,) = [e for e in events if e.kind == "emerged"]
        assert emerged.community_id == id_of(after, 8) and emerged.size == 5
        assert emerged.predecessors == ()

    def test_joining_two_clusters_is_a_merge(self) -> None:
        state, nodes, edges = steady()
        joins = [(node(0, a), node(1, b), 1.0) for a, b in product(range(5), range(5)) if a != b]
        _after, events = step(state, nodes, edges + joins)
        (merged,) = [e for e in events if e.kind == "merged"]
        assert set(merged.predecessors) == {id_of(state, 0), id_of(state, 1)}
        assert merged.community_id in merged.predecessors and merged.size == 10
        assert kinds(events) == Counter(unchanged=6, merged=1)

    def test_cutting_a_cluster_in_two_is_a_split(self) -> None:
        nodes, edges = cliques(8, 5)
        halves = [(node(0, a), node(8, b), 1.0) for a, b in product(range(5), range(5)) if a < b]
        nodes += [node(8, i) for i in range(5)]
        edges += clique(8, 5)
        state, _ = step(State(), nodes, [*edges, *halves])
        pair = frozenset(node(c, i) for c in (0, 8) for i in range(5))
        assert pair in {c.entity_keys for c in state.communities}  # one community of 10
        _, events = step(state, nodes, edges)  # bridges removed
        (split,) = [e for e in events if e.kind == "split"]
        assert split.previous_size == 10 and len(split.successors) == 2
        assert kinds(events) == Counter(unchanged=7, split=1)

    def test_removing_a_cluster_dissolves_it(self) -> None:
        state, nodes, edges = steady()
        gone = id_of(state, 5)
        keep = [n for n in nodes if not n.startswith("k05")]
        _, events = step(state, keep, [e for e in edges if "k05" not in e[0] + e[1]])
        assert kinds(events) == Counter(unchanged=7, dissolved=1)
        (dissolved,) = [e for e in events if e.kind == "dissolved"]
        assert (dissolved.community_id, dissolved.size, dissolved.successors) == (gone, 0, ())

    def test_a_cluster_that_gains_members_grew(self) -> None:
        state, nodes, edges = steady()
        extra = [(f"new-{i}", node(2, j), 1.0) for i in range(2) for j in range(5)]
        _after, events = step(state, [*nodes, "new-0", "new-1"], edges + extra)
        (grew,) = [e for e in events if e.kind == "grew"]
        assert (grew.community_id, grew.previous_size, grew.size) == (id_of(state, 2), 5, 7)


def comm(cid: str, keys: str, level: int = 0) -> Community:
    return Community(cid, level, None, (), frozenset(keys))


class TestClassifyRules:
    def test_events_do_not_depend_on_input_order(self) -> None:
        old = [comm("c-0", "abcdef"), comm("c-1", "ghij"), comm("c-2", "klmn"), comm("c-3", "op")]
        new = [comm("c-0", "abc"), comm("c-9", "def"), comm("c-1", "ghijklmn"), comm("c-8", "xy")]
        expected = classify(old, new)
        rng = random.Random(1)
        for _ in range(5):
            o, n = list(old), list(new)
            rng.shuffle(o)
            rng.shuffle(n)
            assert classify(o, n) == expected
        assert [(e.kind, e.community_id) for e in expected] == [
            ("split", "c-0"),
            ("merged", "c-1"),
            ("dissolved", "c-3"),
            ("emerged", "c-8"),
        ]

    def test_size_tolerance(self) -> None:
        old = [comm("c-0", "abcdefghij"), comm("c-1", "klmnopqrst")]
        new = [comm("c-0", "abcdefghi"), comm("c-1", "klmnopqrstuv")]
        events = classify(old, new, size_tolerance=0.1)
        assert [(e.kind, e.size, e.previous_size) for e in events] == [
            ("unchanged", 9, 10),
            ("grew", 12, 10),
        ]
        assert [e.kind for e in classify(old, new, size_tolerance=0.0)] == ["shrank", "grew"]

    def test_levels_are_compared_separately(self) -> None:
        old = [comm("c-0", "abcd"), comm("c-1", "ab", 1)]
        new = [comm("c-0", "abcd"), comm("c-2", "ab", 1)]
        events = classify(old, new)
        assert [(e.kind, e.level) for e in events] == [
            ("unchanged", 0),
            ("dissolved", 1),
            ("emerged", 1),
        ]
        # a storyline whose id ended is still traceable through the listed counterparts
        assert events[1].successors == ("c-2",) and events[2].predecessors == ("c-1",)

    def test_empty_to_empty_and_everything_removed(self) -> None:
        assert classify([], []) == []
        assert [e.kind for e in classify([comm("c-0", "ab")], [])] == ["dissolved"]


def naive_overlaps(old: list[Community], new: list[Community]) -> dict[tuple[int, int], int]:
    """Shared members counted key by key, for every pair."""
    return {
        (i, j): n
        for i, o in enumerate(old)
        for j, c in enumerate(new)
        if (n := len(o.entity_keys & c.entity_keys))
    }


@pytest.mark.parametrize("seed", range(30))
def test_overlaps_counted_through_kept_ids_equal_counting_every_member(seed: int) -> None:
    """Kept ids, new ids, ended ids, members moved between kept ids, members added and
    removed: the counting that looks up only moved members agrees with counting them all,
    and leaving out ``unchanged`` events leaves the others as they were."""
    rng = random.Random(seed)
    universe = [f"k{i}" for i in range(rng.randint(5, 60))]
    before = rng.sample(universe, rng.randint(1, len(universe)))
    after = rng.sample(universe, rng.randint(1, len(universe)))
    old = [
        Community(cid, 0, None, (), frozenset(m))
        for cid, m in _groups(rng, before, [f"c-{i}" for i in range(rng.randint(1, 8))]).items()
    ]
    new = [
        Community(cid, 0, None, (), frozenset(m))
        for cid, m in _groups(rng, after, [f"c-{i}" for i in range(3, rng.randint(4, 12))]).items()
    ]
    assert _overlaps(old, new) == naive_overlaps(old, new)
    everything = classify(old, new)
    assert classify(old, new, unchanged=False) == [e for e in everything if e.kind != "unchanged"]
    # some communities kept as they were, the same objects (as the community job reuses them)
    kept = [c for c in old if rng.random() < 0.5]
    held = {k for c in kept for k in c.entity_keys}
    taken = {c.id for c in kept}
    rest = [k for k in after if k not in held]
    new = kept + [
        Community(cid, 0, None, (), frozenset(m))
        for cid, m in _groups(rng, rest, [f"c-{i}" for i in range(3, 14)]).items()
        if cid not in taken
    ]
    everything = classify(old, new)
    assert classify(old, new, unchanged=False) == [e for e in everything if e.kind != "unchanged"]


def _groups(rng: random.Random, keys: list[str], ids: list[str]) -> dict[str, set[str]]:
    groups: dict[str, set[str]] = {}
    for key in keys:
        groups.setdefault(rng.choice(ids), set()).add(key)
    return groups
