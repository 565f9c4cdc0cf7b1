"""``graph.job.dailies.Dailies``: over runs that change entities' mentions and move members
between communities, the kept sums and scores equal, at every run, the mentions per day and
emerging scores summed from scratch; it sums again only what changed, and pickles empty."""

from __future__ import annotations

import pickle
import random
from datetime import date

from graph.job.dailies import Dailies, community_daily, emerging
from graph.merge.aggregates import EntityAggregate
from graph.merge.tally import DayWindow, Tally
from graph.merge.view import GraphView
from graph.model import Community

START = date(1987, 3, 1).toordinal()
KEYS = [f"e{i}" for i in range(30)]


def _entity(key: str, rng: random.Random, horizon: int = 40) -> EntityAggregate:
    days = sorted(rng.sample(range(START, START + horizon), rng.randrange(1, 6)))
    window = DayWindow(tuple((d, rng.randrange(1, 9)) for d in days))
    return EntityAggregate(key, Tally(), Tally(), Tally(), window.total, 1, window)


def _communities(rng: random.Random) -> list[Community]:
    groups: dict[int, set[str]] = {}
    for key in KEYS:
        groups.setdefault(rng.randrange(6), set()).add(key)
    return [Community(f"c{g}", 0, None, (), frozenset(m)) for g, m in sorted(groups.items())]


def test_kept_sums_and_scores_equal_a_sum_from_scratch_at_every_run() -> None:
    rng = random.Random(11)
    view = GraphView()
    for key in KEYS:
        view.entities[key] = _entity(key, rng)
    communities = _communities(rng)
    kept = Dailies()
    touched: set[str] | None = None
    for run in range(40):  # the news moves on a day every few runs: every score moves with it
        dailies, scores = kept.update(view, communities, touched)
        scratch = {c.id: community_daily(view, c.entity_keys) for c in communities}
        assert dailies == scratch
        assert scores == {c.id: emerging(scratch).get(c.id, 0.0) for c in communities}
        touched = set(rng.sample(KEYS, rng.randrange(0, 4)))
        for key in touched:
            if rng.random() < 0.2:
                view.entities.pop(key, None)
            else:
                view.entities[key] = _entity(key, rng, 40 + run // 3)
        if rng.random() < 0.3:
            communities = _communities(rng)


def test_only_what_changed_is_summed_again_and_a_pickle_is_empty() -> None:
    rng = random.Random(3)
    view = GraphView()
    for key in KEYS:
        view.entities[key] = _entity(key, rng)
    communities = _communities(rng)
    kept = Dailies()
    kept.update(view, communities, None)
    read: list[str] = []

    class Counting(dict[str, EntityAggregate]):
        def get(self, key: str, default: object = None) -> EntityAggregate | None:  # type: ignore[override]
            read.append(key)
            return super().get(key)

    view.entities = Counting(view.entities)
    first = communities[0]
    key = sorted(first.entity_keys)[0]
    kept.update(view, communities, {key})
    assert sorted(read) == sorted(first.entity_keys)  # its community alone was summed again
    assert pickle.loads(pickle.dumps(kept)).sums == {}
