"""A child retired for its memory hands its in-memory caches to the next one with its save
(``graph.job.warm``, ``agents.community.state.hand_over``): the next child's first commit
writes only what changed, as the retired child's would have, and the tables still hold what a
whole assembly gives. Caches handed over with another save, or from a state that moved on
since its save, are never taken."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.community import runner
from agents.community.child import Child
from agents.community.state import hand_over, load_state
from core.settings import Settings
from core.settings.community import CommunitySettings
from core.tables.opening import open_graph_store
from graph.job.version_tables import assemble
from graph.versions.rows import TABLES, row_digests
from tests.unit.test_committed_rows import Started, _changed, _restarted, _run
from tests.unit.test_committed_rows import started as started  # the fixture
from tests.unit.test_community_run import settings_for

MIN_GROWTH_MIB = CommunitySettings().child_min_growth_mib


@pytest.fixture
async def warm(started: Started) -> Started:
    """A job after two runs and their saves: every cache filled."""
    await _run(started.settings, started.state)
    assert started.state.committed.known() and started.state.dailies.sums
    return started


async def test_the_next_child_takes_over_the_caches_and_commits_only_the_change(
    warm: Started,
) -> None:
    settings, world, before = warm.settings, warm.world, warm.state
    rows = dict(before.committed.rows or {})
    sums = {cid: daily for cid, (_, daily) in before.dailies.sums.items()}
    names = dict(before.kept_names)
    assert hand_over(settings.child_json())

    state = _restarted(settings, world)
    assert state is not before
    assert state.committed.known() and state.committed.rows == rows
    assert state.committed.communities == {c.id: c for c in state.communities}
    assert {cid: daily for cid, (_, daily) in state.dailies.sums.items()} == sums
    # the member sets are the loaded communities' own, not copies
    assert all(state.dailies.sums[c.id][0] is c.entity_keys for c in state.communities)
    assert dict(state.kept_names) == names

    world.say("doc-new", [("Orion A 8", "Orion A 8 joined.")], [])
    world.say("doc-new-2", [], [("Orion A 8", "Orion A 0", "Orion A 8 reports to Orion A 0.")])
    await _run(settings, state)
    assert 0 < _changed(settings, "communities") < len(state.communities)
    loaded = open_graph_store(settings).load()
    whole = assemble(state.view, state, state.communities, loaded.meta)
    for name in TABLES:
        assert row_digests(name, getattr(loaded, name)) == row_digests(
            name, getattr(whole, name)
        ), name


async def test_caches_handed_over_with_another_save_are_not_taken(warm: Started) -> None:
    settings, world = warm.settings, warm.world
    assert hand_over(settings.child_json())
    world.say("doc-new", [("Vega A 9", "Vega A 9 joined.")], [])
    await _run(settings, warm.state)  # a later save than the caches'
    state = _restarted(settings, world)
    assert not state.committed.known() and not state.dailies.sums and not state.kept_names
    await _run(settings, state)  # a cold child derives every row once, and keeps them
    assert state.committed.known()


async def test_a_state_that_moved_on_since_its_save_hands_nothing_over(warm: Started) -> None:
    settings, world = warm.settings, warm.world
    world.say("doc-new", [("Vega A 9", "Vega A 9 joined.")], [])  # folded, not saved
    assert not hand_over(settings.child_json())
    state = _restarted(settings, world)
    assert not state.committed.known()


async def test_a_retired_child_hands_its_caches_to_the_next_process(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    child = Child(settings.child_json(), 1.5, MIN_GROWTH_MIB)
    try:
        first = await child.call(_score_and_save, settings.child_json())
        assert not await child.saved(400.0)  # the floor
        assert await child.saved(400.0 + MIN_GROWTH_MIB + 1)  # retired, after handing over
        assert child.recycled == 1 and child.handed_over == 1
        assert await child.call(_scores, settings.child_json()) == {"Orion": 0.5}
        assert await child.call(os.getpid) != first
    finally:
        child.shutdown()


def _score_and_save(settings_json: str) -> int:
    """In the child: a state with a cached score, saved as after a run."""
    settings = Settings.model_validate_json(settings_json)
    state = load_state(settings)
    state.dailies.scores = {"Orion": 0.5}
    runner.save(settings_json)
    return os.getpid()


def _scores(settings_json: str) -> dict[str, float]:
    """In the child: the cached scores of the state it loaded."""
    return dict(load_state(Settings.model_validate_json(settings_json)).dailies.scores)
