"""A run's commit writes only the community and report rows that changed since the last one
(``graph.job.committed``), on the job's state as it keeps it (the reports in ``state.sqlite``),
and the graph tables then hold exactly what a whole assembly of the state gives: new, grown,
merged and dissolved communities, regenerated and kept reports, a newer news day."""

from __future__ import annotations

import pickle
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agents.community.runner import Runner
from agents.community.state import close_state, forget_state, load_state, save_state
from core.settings import Settings
from core.state_store import DiskMap
from core.tables.opening import open_graph_store
from graph.aliases.view import KeptNames
from graph.job.committed import Committed
from graph.job.dailies import Dailies
from graph.job.state import JobState
from graph.job.version_tables import assemble
from graph.keys import entity_key
from graph.merge.changes import entity_changed, text_unit_retracted
from graph.versions.rows import TABLES, KnownRows, row_digests
from tests.unit.test_community_run import World, base_world, settings_for


async def _run(settings: Settings, state: JobState) -> None:
    await Runner(settings, state, write_vectors=False).run()
    save_state(settings, state)


def _tables_match_a_whole_assembly(settings: Settings, state: JobState) -> None:
    loaded = open_graph_store(settings).load()
    whole = assemble(state.view, state, state.communities, loaded.meta)
    for name in TABLES:
        assert row_digests(name, getattr(loaded, name)) == row_digests(
            name, getattr(whole, name)
        ), name
    state.committed.rows = None  # the assembly re-summed every community: start again


def _changed(settings: Settings, table: str) -> int:
    return open_graph_store(settings).version_infos()[-1].changed.get(table, 0)


@dataclass
class Started:
    """A job's settings, its world, and the database's state after one run and its save."""

    settings: Settings
    world: World
    state: JobState


@pytest.fixture
async def started(tmp_path: Path) -> AsyncIterator[Started]:
    settings, world = settings_for(tmp_path), base_world()
    try:
        state = load_state(settings)
        state.view = world.view
        await _run(settings, state)
        yield Started(settings, world, state)
    finally:
        close_state(settings)


def _restarted(settings: Settings, world: World) -> JobState:
    """The state as a restarted job loads it from its database, its view the world's."""
    forget_state(settings)
    state = load_state(settings)
    world.view = state.view
    return state


async def test_commits_write_the_changed_community_rows_and_match_a_whole_assembly(
    started: Started,
) -> None:
    settings, world = started.settings, started.world
    state = _restarted(settings, world)
    await _run(settings, state)  # a restarted job commits every row once
    assert state.committed.known()
    _tables_match_a_whole_assembly(settings, state)
    await _run(settings, state)

    # a new member of one desk: its communities change, the others' rows are not written
    world.say("doc-new", [("Orion A 8", "Orion A 8 joined.")], [])
    world.say("doc-new-2", [], [("Orion A 8", "Orion A 0", "Orion A 8 reports to Orion A 0.")])
    await _run(settings, state)
    assert 0 < _changed(settings, "communities") < len(state.communities)
    _tables_match_a_whole_assembly(settings, state)
    await _run(settings, state)

    # news on a later day: every emerging score moves with the newest day
    world.say("doc-later", [("Vega A 0", "Vega A 0 spoke again.")], [], day="1987-03-09")
    await _run(settings, state)
    _tables_match_a_whole_assembly(settings, state)
    await _run(settings, state)

    # a group's documents retracted: its communities dissolve, their rows and reports go
    before = {c.id for c in state.communities}
    _retract(state, world.chunks, "doc-Lyra")
    await _run(settings, state)
    assert before - {c.id for c in state.communities}  # some communities dissolved
    assert not any(entity_key("Lyra 0") in c.entity_keys for c in state.communities)
    _tables_match_a_whole_assembly(settings, state)


def _retract(state: JobState, chunks: int, prefix: str) -> None:
    """Retract every document whose id starts with ``prefix``."""
    for i in range(1, chunks + 1):
        unit = state.view.text_units.get(f"chunk-{i}")
        if unit is None or not unit.document_id.startswith(prefix):
            continue
        for key in list(state.view.unit_entities.get(unit.id, ())):
            state.view.apply(
                entity_changed(
                    key, None, chunk_id=unit.id, document_id=unit.document_id, retraction=True
                )
            )
        state.view.apply(text_unit_retracted(unit.id, unit.document_id))


async def test_a_restarted_job_commits_what_differs_and_drops_what_dissolved(
    started: Started,
) -> None:
    settings, world, state = started.settings, started.world, started.state
    await _run(settings, state)
    before = {c.id for c in state.communities}
    state = _restarted(settings, world)  # what the last commit wrote is not known
    _retract(state, world.chunks, "doc-Lyra")
    await _run(settings, state)
    assert before - {c.id for c in state.communities}  # some communities dissolved
    assert state.committed.known()
    assert _changed(settings, "community_reports") < len(state.reports)  # not all again
    _tables_match_a_whole_assembly(settings, state)  # their reports' rows went too


async def test_a_discarded_store_commits_every_row_again(started: Started) -> None:
    settings, world, state = started.settings, started.world, started.state
    await _run(settings, state)
    assert state.committed.known()
    state.reports[next(iter(state.reports))] = next(iter(state.reports.values()))
    state = _restarted(settings, world)  # a failed run: the copy is dropped
    state.committed.take_reports(state.reports)
    assert not state.committed.known()
    world.say("doc-new", [("Vega A 9", "Vega A 9 joined.")], [])
    await _run(settings, state)
    assert state.committed.known()
    _tables_match_a_whole_assembly(settings, state)


def test_a_state_saved_before_the_memory_caches_loads_with_empty_ones() -> None:
    old = JobState()
    for name in ("dailies", "committed", "kept_names"):
        del old.__dict__[name]  # as a state pickled before it had them
    loaded = pickle.loads(pickle.dumps(old))
    assert isinstance(loaded.dailies, Dailies) and not loaded.dailies.sums
    assert isinstance(loaded.committed, Committed) and not loaded.committed.known()
    assert isinstance(loaded.kept_names, KeptNames) and not loaded.kept_names


async def test_the_row_digests_live_in_the_state_database_and_follow_each_commit(
    started: Started,
) -> None:
    settings, world, state = started.settings, started.world, started.state
    for step in range(2):
        world.say(f"doc-new-{step}", [(f"Vega A {step}", f"Vega A {step} joined.")], [])
        await _run(settings, state)
        state = _restarted(settings, world)
        known = state.tables_known
        assert known is not None
        assert all(isinstance(t, DiskMap) for t in known.digests.values())
        latest = open_graph_store(settings).load()
        assert known.version == latest.meta.version
        held = {name: dict(table.items()) for name, table in known.digests.items()}
        assert held == KnownRows.of(latest).digests  # updated in place, saved, loaded
