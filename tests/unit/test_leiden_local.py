"""Maintaining the hierarchy where the graph changed (``graph.communities.leiden_local``): after any
sequence of changes the maintained hierarchy is a valid one of the graph as it is now, its
modularity is the one a count over every edge gives, what the changes did not reach is kept
as it was (the same member sets), and the clustering input says what changed."""

from __future__ import annotations

import collections
import dataclasses
import pickle
import random

import pytest

from graph.communities import ids as community_ids
from graph.communities.cluster_input import Changes, ClusterInput
from graph.communities.human_ids import HumanIds
from graph.communities.leiden import Hierarchy, hierarchical_leiden
from graph.communities.leiden_local import _KidOf, _place, maintain
from graph.communities.leiden_volumes import with_volumes
from graph.merge.changes import GraphChange
from tests.unit.test_cluster_input import random_step, refresh
from tests.unit.test_community_run import World, base_world

MAX_SIZE = 4
SEED = 7


def full(kept: ClusterInput, previous: Hierarchy | None = None) -> Hierarchy:
    graph, digests, strengths = kept.graph()
    return hierarchical_leiden(
        graph,
        max_cluster_size=MAX_SIZE,
        seed=SEED,
        previous=previous,
        node_stats=(digests, strengths),
    )


def started(world: World) -> tuple[ClusterInput, Hierarchy]:
    """The clustering input of a world, changes taken (the baseline is now), and a
    whole-graph hierarchy of it."""
    kept = ClusterInput.build(world.view)
    world.view.take_touched()
    kept.take_changes()
    return kept, full(kept)


def maintained(
    kept: ClusterInput, prev: Hierarchy, changes: Changes, *, placing: bool = False
) -> Hierarchy:
    """``maintain`` at the test's sizes; ``placing``: every community over MAX_SIZE places
    its changed members among its children (the path large communities take) instead of
    being split again."""
    out = maintain(
        kept,
        prev,
        changes,
        max_cluster_size=MAX_SIZE,
        seed=SEED,
        frontier_tolerance=0.0,
        **({"place_above": 0, "split_share": 1.0} if placing else {}),
    )
    assert out is not None
    return out


def changed_and_maintained(
    change: tuple[World, random.Random, list[str], int],
    kept: ClusterInput,
    h: Hierarchy,
    placing: bool,
) -> Hierarchy:
    """One random step of the world (``random_step``'s arguments), the clustering input
    refreshed for it, and ``h`` maintained for what changed."""
    world, rng, names, step = change
    random_step(world, rng, names, step)
    refresh(kept, world.view)
    changes = kept.take_changes()
    assert changes is not None
    return maintained(kept, h, changes, placing=placing)


def modularity(kept: ClusterInput, h: Hierarchy) -> float:
    """Level-0 weighted modularity counted over every edge."""
    label = {k: lab for lab, members in h.levels[0].items() for k in members}
    total = sum(kept.strengths.values())
    if total == 0:
        return 0.0
    inside: dict[int, float] = {}
    degree: dict[int, float] = {}
    for (a, b), w in kept.edge_weights():
        if label[a] == label[b]:
            inside[label[a]] = inside.get(label[a], 0.0) + w
    for v, s in kept.strengths.items():
        degree[label[v]] = degree.get(label[v], 0.0) + s
    return 2 * sum(inside.values()) / total - sum((d / total) ** 2 for d in degree.values())


def assert_valid(kept: ClusterInput, h: Hierarchy) -> None:
    """Level 0 partitions the graph's nodes; every deeper level partitions its parents'
    members, in at least two children; every community is connected; leaves fit; digests
    cover exactly the graph."""
    level0 = list(h.levels[0].values())
    assert sorted(k for m in level0 for k in m) == sorted(kept.adjacency)
    for members in (m for level in h.levels for m in level.values()):
        seen, stack = {min(members)}, [min(members)]
        while stack:
            for u in kept.adjacency[stack.pop()]:
                if u in members and u not in seen:
                    seen.add(u)
                    stack.append(u)
        assert seen == members, f"community {sorted(members)} is in pieces"
    for level in range(1, len(h.levels)):
        kids = collections.Counter(h.parents[level].values())
        assert min(kids.values()) >= 2, "a split community has one child"
        below: dict[int, set[str]] = {}
        for label, parent in h.parents[level].items():
            assert not below.get(parent, set()) & h.levels[level][label]
            below.setdefault(parent, set()).update(h.levels[level][label])
        assert set(h.parents[level]) == set(h.levels[level])
        for parent, keys in below.items():
            assert keys == h.levels[level - 1][parent]
    for leaf in h.leaves():
        assert len(leaf) <= MAX_SIZE
    assert set(h.digests) == set(kept.adjacency)


def kept_at_their_level(before: Hierarchy, after: Hierarchy) -> int:
    """How many communities below level 0 ``after`` kept from ``before`` at the same level
    (the same member-set object); each must have kept its label too (its subtree stays as
    it was, only its parent link may change)."""
    count = 0
    for level in range(1, min(len(after.levels), len(before.levels))):
        label_of = {id(m): label for label, m in before.levels[level].items()}
        for label, members in after.levels[level].items():
            if (was := label_of.get(id(members))) is not None:
                assert was == label, f"level {level}: kept community relabelled {was} -> {label}"
                count += 1
    return count


def origins_valid(before: Hierarchy, after: Hierarchy) -> int:
    """How many communities of ``after`` name an origin; each must be a member set of
    ``before`` at the same level (the object itself), and a community made this run."""
    sets = {(level, id(m)) for level, lv in enumerate(before.levels) for m in lv.values()}
    for (level, label), was in after.continued().items():
        assert (level, id(was)) in sets, f"level {level}: origin is not a previous community"
        assert after.levels[level][label] is not was, "a kept community has no origin"
    return len(after.continued())


@pytest.mark.parametrize("placing", [False, True], ids=["split-again", "placing"])
@pytest.mark.parametrize(("seed", "firms"), [(s, 14) for s in range(6)] + [(6, 40), (7, 60)])
def test_after_every_change_the_maintained_hierarchy_is_valid_and_its_modularity_exact(
    seed: int, firms: int, placing: bool
) -> None:
    rng = random.Random(seed)
    world = World()
    names = [f"Firm {i}" for i in range(firms)]
    for step in range(firms * 2):  # a graph to start from, deeper than one level
        random_step(world, rng, names, step)
    kept = ClusterInput.build(world.view)
    world.view.take_touched()
    assert kept.take_changes() is None  # a fresh build: what changed is not known
    h = full(kept)
    depth, in_place, continued = len(h.levels), 0, 0
    for step in range(firms * 2, firms * 2 + 40):
        before, h = h, changed_and_maintained((world, rng, names, step), kept, h, placing)
        assert_valid(kept, h)
        assert h.modularity == pytest.approx(modularity(kept, h), abs=1e-9), f"step {step}"
        depth = max(depth, len(h.levels))
        in_place += kept_at_their_level(before, h)
        continued += origins_valid(before, h)
    assert firms < 40 or depth >= 3, "the larger graphs have levels below level 1 to maintain"
    assert firms < 40 or not placing or in_place, "placing keeps sub-communities where they are"
    assert firms < 40 or not placing or continued, "a community changed in place names its origin"


def test_what_the_changes_did_not_reach_keeps_its_member_sets_and_labels() -> None:
    world = base_world()
    kept, h = started(world)
    world.say("doc-new", [("Lyra 0", "Lyra 0 again.")], [("Lyra 0", "Lyra 1", "met again")])
    refresh(kept, world.view)
    changes = kept.take_changes()
    assert changes is not None and changes.dirty
    after = maintained(kept, h, changes)
    assert_valid(kept, after)
    reached = {lab for lab, m in h.levels[0].items() if not m.isdisjoint(changes.dirty)}
    assert reached and len(reached) < len(h.levels[0])
    for label, members in h.levels[0].items():
        if label not in reached:
            assert after.levels[0][label] is members  # the same object: matched by a lookup


def test_no_change_is_a_fixed_point_and_the_same_input_the_same_output() -> None:
    world = base_world()
    kept, h = started(world)
    same = maintained(kept, h, Changes(set(), set(), {}))
    assert same.levels == h.levels and same.parents == h.parents
    assert same.modularity == pytest.approx(modularity(kept, h), abs=1e-9)
    world.say("doc-x", [("Vega B 0", "x.")], [("Vega B 0", "Orion A 1", "a new tie")])
    refresh(kept, world.view)
    changes = kept.take_changes()
    assert changes is not None
    a = maintained(kept, h, changes)
    b = maintained(kept, h, changes)
    assert a.levels == b.levels and a.parents == b.parents


def test_the_clustering_input_names_what_changed_and_what_lost_an_edge() -> None:
    world = base_world()
    kept, _ = started(world)
    rel = sorted(world.view.relationships)[0]
    a, b = sorted(
        (world.view.relationships[rel].source_key, world.view.relationships[rel].target_key)
    )
    weight = kept.weight(a, b)
    assert weight is not None
    world.view.apply(GraphChange("chunk-gone", "doc-x", True, deleted_relationships=(rel,)))
    refresh(kept, world.view)
    changes = kept.take_changes()
    assert changes is not None
    assert {a, b} <= changes.dirty
    after = kept.weight(a, b) or 0.0
    assert changes.deltas[(a, b)] == pytest.approx(after - weight)
    if after == 0.0:
        assert {a, b} <= changes.cut
    assert kept.take_changes() == Changes(set(), set(), {})  # taken: the baseline is now


def test_a_checkpoint_from_before_changes_were_kept_says_they_are_not_known() -> None:
    world = base_world()
    kept = ClusterInput.build(world.view)
    kept.take_changes()
    state = kept.__getstate__()
    for name in ("dirty", "cut", "deltas"):
        state.pop(name)
    old = ClusterInput.__new__(ClusterInput)
    old.__setstate__(state)
    assert old.take_changes() is None  # the next run clusters the whole graph
    assert old.take_changes() == Changes(set(), set(), {})
    assert pickle.loads(pickle.dumps(kept)).take_changes() == Changes(set(), set(), {})


def test_a_previous_hierarchy_that_does_not_cover_the_graph_is_refused() -> None:
    world = base_world()
    kept, h = started(world)
    world.say("doc-y", [("Nova 1", "n."), ("Nova 2", "m.")], [("Nova 1", "Nova 2", "a pair")])
    refresh(kept, world.view)
    kept.take_changes()  # the changes are lost: the hierarchy cannot be brought up to date
    assert (
        maintain(
            kept,
            h,
            Changes(set(), set(), {}),
            max_cluster_size=MAX_SIZE,
            seed=SEED,
            frontier_tolerance=0.0,
        )
        is None
    )


def test_volumes_counted_after_a_whole_graph_run_give_leidens_own_modularity() -> None:
    world = base_world()
    kept, whole = started(world)
    h = with_volumes(kept, whole)
    volumes = h.level_zero_volumes()
    assert volumes is not None and set(volumes) == set(h.levels[0])
    same = maintained(kept, h, Changes(set(), set(), {}))
    assert same.modularity == pytest.approx(h.modularity, abs=1e-9)  # leidenalg's quality()


def test_placed_members_join_the_child_they_are_tied_to_and_strays_form_new_children() -> None:
    """``_place``: a free member joins the child holding most of its weight to members that
    stay (ties to the smaller label), one tied only to free members follows them once they
    are placed, and free members tied to nothing placed form a new child per connected
    group."""
    kids = {1: frozenset({"a", "b"}), 2: frozenset({"c", "d"})}
    edges = {
        ("b", "a"): 1.0,
        ("x", "a"): 1.0,
        ("x", "c"): 2.0,  # x: more weight to child 2
        ("t", "a"): 1.0,
        ("t", "d"): 1.0,  # t: a tie, to the smaller label
        ("y", "x"): 3.0,  # y: only through x, placed first
        ("p", "q"): 1.0,  # p, q: tied to nothing placed
        ("r", "outsider"): 1.0,  # r: its one neighbour is not a member
    }
    adjacency: dict[str, dict[str, float]] = {}
    for (a, b), w in edges.items():
        adjacency.setdefault(a, {})[b] = w
        adjacency.setdefault(b, {})[a] = w
    members = frozenset({"a", "b", "c", "d", "x", "t", "y", "p", "q", "r"})
    free = {"b", "x", "t", "y", "p", "q", "r"}
    joined, fresh = _place(adjacency, members, free, _KidOf([1, 2], kids))
    assert joined == {1: {"b", "t"}, 2: {"x", "y"}}
    assert sorted(sorted(g) for g in fresh) == [["p", "q"], ["r"]]


def made_is_all_that_changed(before: Hierarchy, after: Hierarchy) -> None:
    """Every label ``after`` does not name as placed has, at its level, the member-set object,
    parent label and children labels it had in ``before``; the children index ``after``
    carries is the one a count over its parents gives."""
    made = after.placed()
    assert made is not None
    kids_before, kids_after = before.children_index(), after.children_index()
    assert kids_after == dataclasses.replace(after, kids=None).children_index()
    for level, communities in enumerate(after.levels):
        for label, members in communities.items():
            if (level, label) in made:
                continue
            assert level < len(before.levels) and before.levels[level].get(label) is members
            assert after.parents[level].get(label) == before.parents[level].get(label)
            assert kids_after.get((level, label)) == kids_before.get((level, label))


@pytest.mark.parametrize("placing", [False, True], ids=["split-again", "placing"])
@pytest.mark.parametrize(("seed", "firms"), [(0, 14), (1, 14), (6, 40), (7, 60)])
def test_ids_from_the_placed_labels_alone_are_those_of_the_whole_pass(
    seed: int, firms: int, placing: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run after run, ``assign_community_ids`` given the previous run's communities by label
    visits only the labels the maintained hierarchy placed, and gives what matching every
    community gives: the same communities (the same objects where kept), allocator and
    changes."""
    calls = collections.Counter[str]()
    placed_pass = community_ids._assign_placed

    def counted(*args: object, **kwargs: object) -> community_ids.StableCommunities:
        calls["placed"] += 1
        return placed_pass(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(community_ids, "_assign_placed", counted)
    rng = random.Random(seed)
    world = World()
    names = [f"Firm {i}" for i in range(firms)]
    for step in range(firms * 2):
        random_step(world, rng, names, step)
    kept, h = started(world)
    stable = community_ids.assign_community_ids(h, (), HumanIds.empty())
    assert stable.labelled is not None
    for step in range(firms * 2, firms * 2 + 30):
        before, h = h, changed_and_maintained((world, rng, names, step), kept, h, placing)
        made_is_all_that_changed(before, h)
        previous = stable.communities
        whole = community_ids.assign_community_ids(h, previous, stable.human_ids)
        stable = community_ids.assign_community_ids(
            h, previous, stable.human_ids, since=stable.labelled
        )
        assert stable.communities == whole.communities
        assert stable.human_ids == whole.human_ids
        assert [c.id for c in stable.delta.before] == [c.id for c in whole.delta.before]
        assert stable.delta.after == whole.delta.after
        kept_objects = {id(c) for c in previous}
        assert [id(c) in kept_objects for c in stable.communities] == [
            id(c) in kept_objects for c in whole.communities
        ]
        assert stable.labelled is not None and whole.labelled is not None
        assert stable.labelled.by_label == whole.labelled.by_label
    assert calls["placed"] == 30
