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
    """Two levels: leaves (level 1) grouping the entities, and parents (level 0) over them,
    most the union of their leaves, some with a member of their own (not partitioned)."""
    groups: dict[int, set[str]] = {}
    for key in KEYS:
        groups.setdefault(rng.randrange(8), set()).add(key)
    leaves = [(f"c1-{g}", frozenset(m)) for g, m in sorted(groups.items())]
    parents: dict[int, list[tuple[str, frozenset[str]]]] = {}
    for leaf in leaves:
        parents.setdefault(rng.randrange(3), []).append(leaf)
    out = []
    for p, kids in sorted(parents.items()):
        members = frozenset().union(*(m for _, m in kids))
        if rng.random() < 0.3:
            members |= {rng.choice(KEYS)}
        pid = f"c0-{p}"
        out.append(Community(pid, 0, None, tuple(k for k, _ in kids), members))
        out.extend(Community(k, 1, pid, (), m) for k, m in kids)
    return out


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
    leaf = next(c for c in communities if c.level == 1)
    key = sorted(leaf.entity_keys)[0]
    parent = next(c for c in communities if c.id == leaf.parent)
    kept.update(view, communities, {key})
    unpartitioned = parent.entity_keys - frozenset().union(
        *(c.entity_keys for c in communities if c.parent == parent.id)
    )
    # its leaf alone read its entities; the parent added its leaves up, unless it has a
    # member of its own (then it read its members)
    expected = sorted(leaf.entity_keys) + (sorted(parent.entity_keys) if unpartitioned else [])
    assert sorted(read) == sorted(expected)
    assert pickle.loads(pickle.dumps(kept)).sums == {}
