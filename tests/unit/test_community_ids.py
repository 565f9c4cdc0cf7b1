"""Stable community ids and the human-readable id allocator."""

from __future__ import annotations

import random
from collections import UserDict

import orjson
import pytest

from graph.communities.human_ids import HumanIds, HumanIdsError
from graph.communities.ids import StableCommunities, assign_community_ids, match_level
from graph.communities.leiden import Hierarchy
from graph.model import Community
from tests.unit.test_leiden import Edge, cliques, modules, nmi, node, run, shuffled


def stable(
    h: Hierarchy, before: StableCommunities | None = None, threshold: float = 0.3
) -> StableCommunities:
    previous = before.communities if before else ()
    humans = before.human_ids if before else HumanIds.empty()
    return assign_community_ids(h, previous, humans, threshold=threshold)


def ids_by_members(s: StableCommunities) -> dict[frozenset[str], str]:
    return {c.entity_keys: c.id for c in s.communities}


def rewired(nodes: list[str], edges: list[Edge], per: int, rng: random.Random) -> list[Edge]:
    """``edges`` with one in ``per`` replaced by an edge between two random nodes."""
    changed = list(edges)
    for _ in range(len(edges) // per):
        changed.pop(rng.randrange(len(changed)))
        a, b = rng.sample(nodes, 2)
        changed.append((a, b, 1.0))
    return changed


def comm(cid: str, keys: str, level: int = 0, parent: str | None = None) -> Community:
    return Community(cid, level, parent, (), frozenset(keys))


class TestStability:
    def test_first_run_numbers_communities_from_the_counter(self) -> None:
        s = stable(run(*cliques(4, 5)))
        assert sorted(c.id for c in s.communities) == ["c-0", "c-1", "c-2", "c-3"]
        assert {s.human_ids.get("community", c.id) for c in s.communities} == {0, 1, 2, 3}

    def test_edge_order_does_not_change_ids(self) -> None:
        nodes, edges = modules(8, 20, 0.4, 30, seed=7)
        a = stable(run(nodes, edges))
        b = stable(run(*shuffled(nodes, edges, 9)))
        assert a == b

    def test_same_graph_again_keeps_every_id(self) -> None:
        nodes, edges = modules(8, 20, 0.4, 30, seed=7)
        first_h = run(nodes, edges)
        first = stable(first_h)
        again = stable(run(nodes, edges, previous=first_h), first)
        assert again.communities == first.communities

    def test_one_percent_edge_change_keeps_most_ids(self) -> None:
        nodes, edges = modules(30, 20, 0.5, 60, seed=11)
        h1 = run(nodes, edges)
        s1 = stable(h1)
        h2 = run(nodes, rewired(nodes, edges, 200, random.Random(4)), previous=h1)
        s2 = stable(h2, s1)
        kept = {c.id for c in s1.communities} & {c.id for c in s2.communities}
        assert len(kept) >= 0.9 * len(s1.communities)
        assert nmi(h1.leaves(), h2.leaves()) > 0.9

    def test_links_are_consistent(self) -> None:
        s = stable(run(*modules(6, 30, 0.5, 20, seed=3)))
        by_id = {c.id: c for c in s.communities}
        assert len(by_id) == len(s.communities)
        for c in s.communities:
            assert (c.parent is None) == (c.level == 0)
            if c.parent is not None:
                assert c.id in by_id[c.parent].children and by_id[c.parent].level == c.level - 1
            if c.children:
                assert frozenset().union(*(by_id[k].entity_keys for k in c.children)) == (
                    c.entity_keys
                )

    def test_ids_of_ended_communities_are_never_reused(self) -> None:
        nodes, edges = cliques(4, 5)
        h1 = run(nodes, edges)
        s1 = stable(h1)
        gone = ids_by_members(s1)[frozenset(node(3, i) for i in range(5))]
        kept_nodes = [n for n in nodes if not n.startswith("k03")]
        kept_edges = [e for e in edges if "k03" not in e[0] + e[1]]
        s2 = stable(run(kept_nodes, kept_edges, previous=h1), s1)
        assert gone not in {c.id for c in s2.communities}
        s3 = stable(run(nodes, edges, previous=h1), s2)  # the same members come back
        back = ids_by_members(s3)[frozenset(node(3, i) for i in range(5))]
        assert back not in {c.id for c in s1.communities} and back == "c-4"


def copied(h: Hierarchy) -> Hierarchy:
    """``h`` with every member set an equal new object (as from a checkpoint that did not
    keep them shared)."""
    levels = tuple({lab: frozenset(set(m)) for lab, m in lv.items()} for lv in h.levels)
    return Hierarchy(levels, h.parents, h.modularity, h.digests)


class TestKeptObjects:
    @pytest.mark.parametrize("seed", range(5))
    def test_kept_member_sets_give_the_ids_equal_ones_would(self, seed: int) -> None:
        """Ids taken at once for member sets the clustering kept (the same objects) are
        those the matching gives to equal sets, and an unchanged community is the previous
        ``Community`` object itself."""
        nodes, edges = modules(20, 15, 0.5, 40, seed=seed)
        h1 = run(nodes, edges)
        s1 = stable(h1)
        h2 = run(nodes, rewired(nodes, edges, 50, random.Random(seed)), previous=h1)
        # h2 reuses h1's objects where a community is unchanged: share them explicitly
        objects = {m: m for lv in h1.levels for m in lv.values()}
        shared = Hierarchy(
            tuple({lab: objects.get(m, m) for lab, m in lv.items()} for lv in h2.levels),
            h2.parents,
            h2.modularity,
            h2.digests,
        )
        fast = stable(shared, s1)
        slow = stable(copied(shared), s1)
        assert [(c.id, c.level, c.parent, c.children) for c in fast.communities] == [
            (c.id, c.level, c.parent, c.children) for c in slow.communities
        ]
        assert fast.human_ids == slow.human_ids
        reused = {c.id for c in s1.communities} & {
            c.id for c in fast.communities if any(c is p for p in s1.communities)
        }
        unchanged = {
            c.id
            for c in fast.communities
            for p in s1.communities
            if p.id == c.id and p == c and p.entity_keys is c.entity_keys
        }
        assert unchanged and reused == unchanged


def moved(h: Hierarchy, rng: random.Random, share: float) -> Hierarchy:
    """``h`` with a share of each level's communities changed in place (same labels, their
    previous member sets as origins): some members moved to another label of the level,
    some removed; the others the same objects."""
    levels = []
    for lv in h.levels:
        out = {lab: set(m) for lab, m in lv.items()}
        labels = sorted(out)
        for lab in labels:
            if len(labels) > 1 and rng.random() < share and out[lab]:
                for key in rng.sample(sorted(out[lab]), rng.randint(1, len(out[lab]))):
                    out[lab].discard(key)
                    if rng.random() < 0.7:
                        out[rng.choice(labels)].add(key)
        levels.append(
            {lab: lv[lab] if out[lab] == lv[lab] else frozenset(m) for lab, m in out.items() if m}
        )
    parents = tuple(
        {lab: p for lab, p in ps.items() if lab in levels[i] and (not i or p in levels[i - 1])}
        for i, ps in enumerate(h.parents)
    )
    origins = {
        (i, lab): h.levels[i][lab]
        for i, lv in enumerate(levels)
        for lab, m in lv.items()
        if lab in h.levels[i] and m is not h.levels[i][lab]
    }
    return Hierarchy(tuple(levels), parents, h.modularity, h.digests, origins=origins)


def without_origins(h: Hierarchy) -> Hierarchy:
    return Hierarchy(h.levels, h.parents, h.modularity, h.digests)


class TestContinuedCommunities:
    @pytest.mark.parametrize("seed", range(12))
    @pytest.mark.parametrize("threshold", [0.3, 0.8])
    def test_a_community_changed_in_place_gets_the_id_matching_gives(
        self, seed: int, threshold: float
    ) -> None:
        """A changed community whose origin (the previous community it continues) shares
        most of their union with it takes its id at once: the same ids (and human ids) as
        the matching alone gives, for small and large changes and thresholds above 1/2."""
        rng = random.Random(seed)
        h1 = run(*modules(20, 15, 0.5, 40, seed=seed))
        s1 = stable(h1, threshold=threshold)
        h2 = moved(h1, rng, share=rng.choice([0.1, 0.5, 0.9]))
        slow = assign_community_ids(
            without_origins(h2), s1.communities, s1.human_ids, threshold=threshold
        )
        fast = assign_community_ids(h2, s1.communities, s1.human_ids, threshold=threshold)
        assert fast == slow
        continued = [  # the case this is about happened
            at
            for at, was in (h2.origins or {}).items()
            if 3 * len(h2.levels[at[0]][at[1]] & was) > len(h2.levels[at[0]][at[1]]) + len(was)
        ]
        assert continued

    def test_an_origin_sharing_less_than_half_leaves_the_id_to_the_better_match(self) -> None:
        """The community continuing A shares a third of their union with it; another shares
        half of its union with A: that one takes A's id, the first a new one."""
        a = frozenset("abcdefghij")
        h1 = Hierarchy(({0: a},), ({},), 0.0, {})
        s1 = stable(h1)
        levels = ({0: frozenset("abcdewxyz"), 1: frozenset("fghij")},)
        h2 = Hierarchy(levels, ({},), 0.0, {}, origins={(0, 0): a})
        fast = assign_community_ids(h2, s1.communities, s1.human_ids)
        assert ids_by_members(fast)[frozenset("fghij")] == ids_by_members(s1)[a]
        assert fast == assign_community_ids(without_origins(h2), s1.communities, s1.human_ids)


class TestMatchLevel:
    def test_threshold_is_inclusive(self) -> None:
        old = [comm("c-old", "abc")]
        # {a,b,c} vs {c,d,e,f,g,h,i,j}: 1/10 ; vs {a,b,c,d,e,f,g,h,i,j}: 3/10
        assert match_level({0: frozenset("abcdefghij")}, {}, old, 0.3) == {0: "c-old"}
        assert match_level({0: frozenset("cdefghij")}, {}, old, 0.3) == {}

    def test_one_to_one_best_jaccard_first(self) -> None:
        old = [comm("c-1", "abcd"), comm("c-2", "efgh")]
        new = {0: frozenset("abcdefgh"), 1: frozenset("abc")}
        # c-1 vs label 1 is 3/4, vs label 0 is 4/8; c-2 vs label 0 is 4/8
        assert match_level(new, {}, old, 0.3) == {1: "c-1", 0: "c-2"}

    def test_ties_break_the_same_way_whatever_the_input_order(self) -> None:
        old = [comm("c-1", "abcd")]
        new = {0: frozenset("ab"), 1: frozenset("cd")}  # both 2/4
        reordered = {1: frozenset("cd"), 0: frozenset("ab")}
        assert match_level(new, {}, old, 0.3) == match_level(reordered, {}, old, 0.3) == {0: "c-1"}

    def test_equal_overlap_prefers_the_matched_parents_lineage(self) -> None:
        old = [comm("c-a", "ab", 1, parent="c-p"), comm("c-b", "ab", 1, parent="c-q")]
        assert match_level({0: frozenset("ab")}, {0: "c-q"}, old, 0.3) == {0: "c-b"}

    def test_a_child_keeps_its_id_when_its_parent_merges_into_another(self) -> None:
        before = Hierarchy.from_paths(
            {**{k: (0, 0) for k in "abcdef"}, **{k: (0, 1) for k in "ghijkl"}}
            | {**{k: (1, 2) for k in "mnopqr"}, **{k: (1, 3) for k in "stuvwx"}}
        )
        s1 = stable(before)
        after = Hierarchy.from_paths(  # both parents' children now under one parent
            {k: (0, i // 6) for i, k in enumerate("abcdefghijklmnopqrstuvwx")}
        )
        s2 = stable(after, s1)
        level1 = lambda s: {c.entity_keys: c.id for c in s.communities if c.level == 1}  # noqa: E731
        assert level1(s2) == level1(s1)


class TestHumanIds:
    def test_ids_survive_and_are_never_reused(self) -> None:
        h = HumanIds.empty().assign("entity", ["a", "b", "c"])
        h = h.assign("entity", ["c", "d"])  # "a" and "b" no longer seen
        h = h.assign("entity", ["e", "a"])
        assert {k: h.get("entity", k) for k in "abcde"} == {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4}

    def test_kinds_have_their_own_counters_and_assign_is_pure(self) -> None:
        empty = HumanIds.empty()
        h = empty.assign("entity", ["x"]).assign("text_unit", ["x"])
        assert (h.get("entity", "x"), h.get("text_unit", "x")) == (0, 0)
        assert empty.get("entity", "x") is None and empty.next_id("entity") == 0

    def test_a_table_on_disk_takes_new_ids_in_place_and_keeps_the_old_ones(self) -> None:
        table = UserDict({"a": 0, "b": 1})  # a mapping that is not a dict, as a DiskMap
        before = HumanIds({"entity": 2}, {"entity": table})
        after = before.assign("entity", ["b", "c"]).adopt("entity", {"d": 7}, None)
        assert after.assigned["entity"] is table  # not copied
        assert dict(table) == {"a": 0, "b": 1, "c": 2, "d": 7}
        assert after.next_id("entity") == 8 and before.next_id("entity") == 2
        assert before.get("entity", "b") == 1  # what the old allocator gave never changes

    def test_state_roundtrips_through_json(self) -> None:
        h = HumanIds.empty().assign("entity", ["a", "b"]).assign("community", ["c-0"])
        assert HumanIds.from_dict(orjson.loads(orjson.dumps(h.to_dict()))) == h

    def test_a_counter_behind_its_ids_is_refused(self) -> None:
        with pytest.raises(HumanIdsError, match="behind"):
            HumanIds.from_dict({"next_ids": {"entity": 1}, "assigned": {"entity": {"a": 3}}})

    def test_adopted_ids_stay_with_their_keys_and_are_never_given_again(self) -> None:
        h = HumanIds.empty().assign("entity", ["a", "b"])  # the checkpoint: a=0, b=1
        # the tables: b=1 as here, c=2 and d=3 from commits the checkpoint missed, and 5 was
        # once given to a row deleted since
        h = h.adopt("entity", {"b": 1, "c": 2, "d": 3, "a": 9}, 5)
        assert {k: h.get("entity", k) for k in "abcd"} == {"a": 0, "b": 1, "c": 2, "d": 3}
        h = h.assign("entity", ["e"])
        assert h.get("entity", "e") == 6
        assert h.adopt("entity", {"b": 1}, 4) is h  # nothing new: the same allocator

    def test_fresh_community_ids_skip_ids_already_in_use(self) -> None:
        # a previous state whose counter was lost must not hand out a duplicate id
        previous = [comm("c-0", "abc"), comm("c-1", "def")]
        h = Hierarchy.from_paths({**dict.fromkeys("abc", 0), **dict.fromkeys("xyz", 1)})
        s = assign_community_ids(h, previous, HumanIds.empty())
        assert sorted(c.id for c in s.communities) == ["c-0", "c-2"]
        numbers = [s.human_ids.get("community", c.id) for c in s.communities]
        assert None not in numbers and len(set(numbers)) == 2
        assert s.human_ids.get("community", "c-2") == 2
        assert s.human_ids.next_id("community") > max(n for n in numbers if n is not None)
