"""The view keeps the newest text-unit time, each unit's document and the units of each day as
units fold, retract and come back with another time, equal at every step to a pass over every
unit; a view that does not know them (an older state) finds them by that pass."""

from __future__ import annotations

import random

from graph.merge.changes import text_unit_added, text_unit_retracted
from graph.merge.view import GraphView
from graph.model import Chunk, ChunkExtraction


def _unit(i: int, day: int) -> Chunk:
    return Chunk(f"u{i}", f"d{i % 7}", "t", f"1987-03-{day:02d}T00:00:00Z", 0, f"text {i}", 5)


def _scanned(view: GraphView) -> str:
    return max((u.published_at for u in view.text_units.values()), default="")


def test_the_newest_time_follows_every_fold_and_retraction() -> None:
    rng = random.Random(7)
    view = GraphView()
    assert view.newest_time() == ""
    for _ in range(600):
        i = rng.randrange(40)
        if rng.random() < 0.35:
            view.apply(text_unit_retracted(f"u{i}", f"d{i % 7}"))
        else:  # a new unit, or one already there coming back with another time
            unit = _unit(i, rng.randrange(1, 29))
            view.apply(text_unit_added(ChunkExtraction(unit, (), ())))
        if rng.random() < 0.5:  # asked now and then, as runs ask
            assert view.newest_time() == _scanned(view)
    assert view.newest_time() == _scanned(view)


def test_a_view_that_does_not_know_it_finds_it() -> None:
    view = GraphView()
    for i, day in enumerate((3, 9, 5)):
        view.apply(text_unit_added(ChunkExtraction(_unit(i, day), (), ())))
    view.newest_unit_time = None  # as a state saved before the view kept it
    assert view.newest_time() == "1987-03-09T00:00:00Z"
    view.apply(text_unit_added(ChunkExtraction(_unit(9, 20), (), ())))
    assert view.newest_time() == "1987-03-20T00:00:00Z"


def test_each_units_document_and_day_follow_every_fold_and_retraction() -> None:
    rng = random.Random(11)
    view = GraphView()
    assert view.unit_documents() == {}
    for step in range(600):
        i = rng.randrange(40)
        if rng.random() < 0.35:
            view.apply(text_unit_retracted(f"u{i}", f"d{i % 7}"))
        else:
            view.apply(text_unit_added(ChunkExtraction(_unit(i, rng.randrange(1, 29)), (), ())))
        if step == 300:
            view.unit_document = None  # as a state saved before the view kept it: a pass
        if step == 450:
            view.unit_days = None
        if rng.random() < 0.5:
            scanned = {k: u.document_id for k, u in view.text_units.items()}
            assert view.unit_documents() == scanned
            first, last = sorted(f"1987-03-{rng.randrange(1, 29):02d}" for _ in range(2))
            between = sorted(
                (k, u.published_at[:10])
                for k, u in view.text_units.items()
                if first <= u.published_at[:10] <= last
            )
            assert sorted(view.units_between(first, last)) == between
