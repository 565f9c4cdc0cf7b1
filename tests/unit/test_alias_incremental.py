"""Resolving around what changed (``graph.aliases.view.resolve_view`` with the kept state) decides
as resolving the whole graph afresh does, change after change: acronyms introduced and
retracted, spellings, surnames of one person and of several, entities and relationships
deleted; the entities it kept from earlier runs are, every time, what the view says now."""

from __future__ import annotations

import itertools
import random

import pytest

from graph.aliases.indexes import AliasState, Related, degree_class
from graph.aliases.resolution import Resolution
from graph.aliases.view import KeptNames, ViewNames, resolve_view
from graph.merge.changes import GraphChange
from graph.model import Chunk, ChunkExtraction, EntityMention, RelationshipMention
from tests.unit.test_community_run import World

NAMES = [
    ("Orion Trade Council", "organization"),
    ("OTC", "organization"),
    ("Vega Savings Bank", "organization"),
    ("Vega Savings Banks", "organization"),
    ("VSB", "organization"),
    ("Lyra Labour Party", "organization"),
    ("Lyra Labor Party", "organization"),
    ("LLP", "organization"),
    ("Teodor Vasquell", "person"),
    ("Vasquell", "person"),
    ("James Baker", "person"),
    ("Howard Baker", "person"),
    ("Baker", "person"),
    ("Porvane", "geo"),
    ("Porvane Orion Trade Council", "organization"),  # a place-qualified variant
    ("Lyr", "organization"),  # a clipped one
]


class Newsroom(World):
    def tell(self, doc_id: str, names: list[tuple[str, str]], edges: list[tuple[str, str]]) -> None:
        """One document of one chunk naming ``names`` (name, type) related by ``edges``."""
        self.chunks += 1
        text = " ".join(n for n, _ in names)
        chunk = Chunk(f"chunk-{self.chunks}", doc_id, doc_id, "1987-03-02T09:00:00Z", 0, text, 9)
        extraction = ChunkExtraction(
            chunk,
            tuple(EntityMention(n, t, f"{n} was named.", chunk.id) for n, t in names),
            tuple(RelationshipMention(a, b, f"{a} and {b}.", 1.0, chunk.id) for a, b in edges),
        )
        self.view.apply({"id": doc_id, "title": doc_id, "text": text, "published_at": "1987-03-02"})
        self.absorb(extraction)


def step(world: Newsroom, rng: random.Random, i: int) -> None:
    view = world.view
    roll = rng.random()
    if roll < 0.8 or not view.entities:
        names = rng.sample(NAMES, rng.randint(1, 4))
        edges = [(a[0], b[0]) for a, b in itertools.pairwise(names)]
        world.tell(f"doc-{i % 9}" if rng.random() < 0.3 else f"doc-{i}", names, edges)
    elif roll < 0.9:
        gone = rng.choice(sorted(view.entities))
        view.apply(GraphChange(f"chunk-x{i}", "doc-x", True, deleted_entities=(gone,)))
    elif view.relationships:
        gone = rng.choice(sorted(view.relationships))
        view.apply(GraphChange(f"chunk-x{i}", "doc-x", True, deleted_relationships=(gone,)))


def decisions(res: Resolution) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    return (
        {a: m.canonical for a, m in res.merges.items()},
        {k: u.canonical for k, u in res.unit_aliases.items()},
    )


@pytest.mark.parametrize("seed", range(12))
def test_resolving_around_changes_decides_as_resolving_afresh(seed: int) -> None:
    rng = random.Random(seed)
    world = Newsroom()
    resolution: Resolution | None = None
    kept: AliasState | None = None
    names = KeptNames()  # the entities read, kept between runs as the job keeps them
    merged = 0
    for i in range(80):
        step(world, rng, i)
        touched = world.view.take_touched()
        assert touched is not None
        rels = {s[2:] for s in touched.slots if s.startswith("r:")}
        resolution, kept, decided = resolve_view(
            world.view, resolution, kept, touched.entities, rels, full_every=10**6, names_kept=names
        )
        afresh, _, _ = resolve_view(world.view, None, None, None, (), full_every=1)
        assert decisions(resolution) == decisions(afresh), f"step {i}"
        now = ViewNames(world.view)
        assert all(n == now[k] for k, n in names.items() if k in world.view.entities), i
        assert i == 0 or decided <= len(world.view.entities)
        merged += len(resolution.merges) + len(resolution.unit_aliases)
    assert merged, "the sequence never merged anything"


def test_a_change_away_from_people_leaves_the_names_they_share_alone() -> None:
    """A name several people share ("Baker") is re-decided when it, one of its people, or the
    weight of one of their neighbours changes; not when news elsewhere arrives."""
    world = Newsroom()
    world.tell("doc-1", [("James Baker", "person"), ("Baker", "person")], [])
    world.tell("doc-2", [("Howard Baker", "person"), ("Porvane", "geo")], [])
    world.tell("doc-3", [("Baker", "person"), ("Porvane", "geo")], [("Baker", "Porvane")])
    touched = world.view.take_touched()
    assert touched is not None
    resolution, kept, _ = resolve_view(world.view, None, None, None, (), full_every=10**6)
    assert resolution.unit_aliases  # "baker" decided unit by unit

    world.tell("doc-4", [("Quill Harbour Authority", "organization")], [])
    touched = world.view.take_touched()
    assert touched is not None
    resolution, kept, decided = resolve_view(
        world.view, resolution, kept, touched.entities, (), full_every=10**6
    )
    assert decided == 1  # the new name alone

    world.tell("doc-5", [("Howard Baker", "person")], [])
    touched = world.view.take_touched()
    assert touched is not None
    _, _, decided = resolve_view(
        world.view, resolution, kept, touched.entities, (), full_every=10**6
    )
    assert decided == 2  # Howard Baker, and "baker", which may name him


def test_related_says_whose_weight_as_a_neighbour_moved() -> None:
    world = Newsroom()
    world.tell("doc-1", [("Porvane", "geo"), ("OTC", "organization")], [("Porvane", "OTC")])
    related = Related()
    ends, moved = related.update(world.view, world.view.relationships)
    assert ends == {"porvane", "otc"} and moved == set()  # degree 0 -> 1: one class
    world.tell("doc-2", [("Porvane", "geo"), ("VSB", "organization")], [("Porvane", "VSB")])
    ends, moved = related.update(world.view, [k for k in world.view.relationships if "vsb" in k])
    assert ends == {"porvane", "vsb"} and moved == {"porvane"}  # 1 -> 2 crosses a class
    assert [degree_class(d) for d in (0, 1, 2, 5, 6, 14)] == [2, 2, 3, 3, 4, 5]
