"""The clustering graph kept between runs (``graph.communities.cluster_input``) is, after any
sequence of changes, exactly the graph, digests and weighted degrees a rebuild from the whole view
gives: a run that refreshes only what changed clusters the same graph as one that rebuilds it."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest

from core.state_pickle import to_disk
from core.state_store import StateStore
from graph.communities.cluster_input import GLUE, ClusterInput, glue_edges, glue_weight
from graph.communities.leiden import _strengths
from graph.communities.leiden_graph import WeightedGraph, node_digests
from graph.job.run import clustering_graph, whole_aliases
from graph.keys import entity_key
from graph.merge.changes import GraphChange
from graph.merge.view import GraphView
from tests.unit.test_community_run import Job, World, base_world, make_settings

Stats = tuple[WeightedGraph, list[int], list[float]]


def rebuilt(view: GraphView, aliases: dict[str, str] | None = None) -> Stats:
    graph = clustering_graph(view, aliases)
    source = [a for a, _ in graph.edges]
    target = [b for _, b in graph.edges]
    return (
        graph,
        node_digests(graph.nodes, source, target, graph.weights),
        _strengths(graph, source, target),
    )


def refresh(kept: ClusterInput, view: GraphView) -> None:
    touched = view.take_touched()
    assert touched is not None
    rels = [s[2:] for s in touched.slots if s.startswith("r:")]
    kept.refresh(view, rels, touched.entities)


def random_step(world: World, rng: random.Random, names: list[str], step: int) -> None:
    view = world.view
    roll = rng.random()
    if roll < 0.6 or not view.relationships:
        people = rng.sample(names, 4)
        edges = [(rng.choice(people), rng.choice(people), f"deal {step}") for _ in range(3)]
        world.say(f"doc-{step}", [(p, f"{p} in story {step}.") for p in people[:2]], edges)
    elif roll < 0.8 and view.entities:
        gone = rng.choice(sorted(view.entities))
        view.apply(GraphChange(f"chunk-x{step}", "doc-x", True, deleted_entities=(gone,)))
    else:
        gone = rng.choice(sorted(view.relationships))
        view.apply(GraphChange(f"chunk-x{step}", "doc-x", True, deleted_relationships=(gone,)))


@pytest.mark.parametrize("seed", range(8))
def test_refreshed_after_every_change_it_equals_a_rebuild(seed: int) -> None:
    rng = random.Random(seed)
    world = World()
    names = [f"Firm {i}" for i in range(12)]
    kept = ClusterInput.build(world.view)
    world.view.take_touched()
    for step in range(60):
        random_step(world, rng, names, step)
        refresh(kept, world.view)
        assert kept.graph() == rebuilt(world.view), f"step {step}"
    assert kept.graph()[0].edges, "the sequence left a graph with edges"


@pytest.mark.parametrize("seed", range(3))
def test_its_maps_kept_as_tables_refresh_as_the_dicts_do(seed: int, tmp_path: Path) -> None:
    """As the job keeps it: ``counted``, ``pairs`` and ``ends`` in a state database, committed
    now and then (values read back from the file, changed in place, written again)."""
    rng = random.Random(seed)
    world = World()
    names = [f"Firm {i}" for i in range(12)]
    kept = ClusterInput.build(world.view)
    world.view.take_touched()
    with StateStore(tmp_path / "state.sqlite") as store:
        for name in ("counted", "pairs", "ends"):
            setattr(kept, name, to_disk(store, f"cluster_{name}", getattr(kept, name)))
        store.map("cluster_counted").values_frozen = True
        for step in range(60):
            random_step(world, rng, names, step)
            refresh(kept, world.view)
            assert kept.graph() == rebuilt(world.view), f"step {step}"
            if step % 3 == 0:
                store.commit()
        assert dict(kept.pairs.items()) == dict(ClusterInput.build(world.view).pairs)


def test_an_entity_that_goes_and_comes_back_takes_its_relationships_along() -> None:
    world = base_world()
    kept = ClusterInput.build(world.view)
    world.view.take_touched()
    hub = entity_key("Orion A 0")
    degree = len(kept.adjacency[hub])
    assert degree >= 3
    world.view.apply(GraphChange("chunk-gone", "doc-x", True, deleted_entities=(hub,)))
    refresh(kept, world.view)
    assert hub not in kept.adjacency and kept.graph() == rebuilt(world.view)
    world.say("doc-back", [("Orion A 0", "Orion A 0 is back.")])
    refresh(kept, world.view)
    assert len(kept.adjacency[hub]) == degree and kept.graph() == rebuilt(world.view)


def test_refreshing_more_than_changed_changes_nothing_and_a_pickle_keeps_it() -> None:
    world = base_world()
    kept = ClusterInput.build(world.view)
    before = kept.graph()
    kept.refresh(world.view, world.view.relationships, world.view.entities)
    assert kept.graph() == before
    again = pickle.loads(pickle.dumps(kept))
    assert again.graph() == before


def test_a_checkpoint_that_kept_each_edge_twice_loads_with_the_same_graph() -> None:
    world = base_world()
    kept = ClusterInput.build(world.view)
    before = kept.graph()
    older = dict(vars(kept), weights=dict(kept.edge_weights()))  # as checkpoints held it
    loaded = ClusterInput.__new__(ClusterInput)
    loaded.__setstate__(older)
    assert "weights" not in vars(loaded)
    assert loaded.graph() == before
    assert dict(loaded.edge_weights()) == older["weights"] and older["weights"]


async def test_the_job_keeps_it_equal_to_a_rebuild_run_after_run(tmp_path: Path) -> None:
    world = base_world()
    job = Job(make_settings(tmp_path))
    rng = random.Random(5)
    names = [f"Orion A {i}" for i in range(8)] + [f"Vega B {i}" for i in range(8)]
    await job.run(world.view)
    for step in range(6):
        for sub in range(3):
            random_step(world, rng, names, 10 * step + sub)
        await job.run(world.view)
        kept = job.state.cluster_input
        aliases = whole_aliases(job.state)
        assert kept is not None and kept.graph() == rebuilt(world.view, aliases), f"run {step}"


@pytest.mark.parametrize("seed", range(4))
def test_alias_glue_made_and_undone_keeps_it_equal_to_a_rebuild(seed: int) -> None:
    """Glue edges (an alias tied to the name it resolves to) come and go, their weights move
    with the alias's mentions, and an end may vanish: the kept graph stays the rebuild's."""
    rng = random.Random(seed)
    world = World()
    names = [f"Firm {i}" for i in range(10)]
    kept = ClusterInput.build(world.view)
    world.view.take_touched()
    aliases: dict[str, str] = {}
    glued = 0
    for step in range(40):
        random_step(world, rng, names, step)
        refresh(kept, world.view)
        keys = sorted(world.view.entities)
        if len(keys) >= 2 and rng.random() < 0.5:
            alias, canonical = rng.sample(keys, 2)
            if alias not in aliases.values() and canonical not in aliases:
                aliases[alias] = canonical
        if aliases and rng.random() < 0.2:
            del aliases[rng.choice(sorted(aliases))]
        kept.set_glue(world.view, glue_edges(world.view, aliases))
        assert kept.graph() == rebuilt(world.view, aliases), f"step {step}"
        glued += sum(k.startswith(GLUE) for k in kept.counted)
    assert glued, "no glue edge was ever counted"


def test_glue_ties_an_alias_even_where_a_relationship_joins_the_same_pair() -> None:
    world = base_world()
    a, b = entity_key("Orion A 0"), entity_key("Orion A 1")
    kept = ClusterInput.build(world.view)
    before = kept.adjacency[a].get(b, 0.0)
    kept.set_glue(world.view, glue_edges(world.view, {a: b}))
    weight = glue_weight(world.view.entities[a].mention_count)
    assert [glue_weight(n) for n in (0, 1, 2, 3, 7, 8, 9)] == [1, 1, 2, 2, 4, 8, 8]
    assert kept.adjacency[a][b] == before + weight
    assert kept.graph() == rebuilt(world.view, {a: b})
    kept.set_glue(world.view, {})
    assert kept.adjacency[a].get(b, 0.0) == before
    assert kept.graph() == rebuilt(world.view)
