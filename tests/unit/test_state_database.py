"""The community job's state in its database (``agents.community.state``): a save writes what
changed, a load gives back the state saved, a failed run's changes are dropped, and a data
directory of an earlier version (a whole-state pickle) moves in."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from agents.community import state as state_module
from agents.community.state import (
    CHECKPOINT,
    DISK_MAPS,
    STATE_BLOB,
    STATE_DB,
    close_state,
    forget_state,
    job_dir,
    load_state,
    read_offsets,
    save_state,
)
from core.settings import Settings
from core.state_store import DiskMap
from graph.job.state import JobState
from graph.keys import entity_key
from tests.unit.test_community_run import Job, World, base_world, settings_for


def _owner(state: JobState, holder: str) -> object:
    return {
        "view": state.view,
        "state": state,
        "evidence": state.evidence,
        "cluster_input": state.cluster_input,
        "alias_indexes": state.aliases and state.aliases.indexes,
        "alias_related": state.aliases and state.aliases.related,
    }[holder]


def _maps(state: JobState) -> dict[str, dict[str, object]]:
    return {
        table: dict(getattr(_owner(state, holder), attribute).items())
        for table, holder, attribute in DISK_MAPS
    }


async def _ran(settings: Settings) -> tuple[Job, World]:
    """A job whose state is the database's, after one run over the base world."""
    world = base_world()
    state = load_state(settings)
    state.view = world.view
    job = Job(settings, state)
    await job.run(world.view)
    save_state(settings, state)
    return job, world


async def test_a_saved_state_loads_back_whole(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    try:
        job, _ = await _ran(settings)
        job.state.offsets = {0: 41, 1: 7}
        save_state(settings, job.state)
        saved_maps, communities = _maps(job.state), job.state.communities
        human_ids, hierarchy = job.state.human_ids.to_dict(), job.state.hierarchy
        close_state(settings)
        loaded = load_state(settings)
        assert loaded is not job.state
        assert loaded.offsets == {0: 41, 1: 7}
        assert read_offsets(settings) == {0: 41, 1: 7}
        assert _maps(loaded) == saved_maps and saved_maps["view_entities"]
        assert loaded.communities == communities and loaded.human_ids.to_dict() == human_ids
        assert all(isinstance(t, DiskMap) for t in loaded.human_ids.assigned.values())
        assert loaded.hierarchy == hierarchy
        assert saved_maps["evidence_entity_facts"] and saved_maps["evidence_by_pair"]
        assert all(isinstance(getattr(_owner(loaded, h), a), DiskMap) for _, h, a in DISK_MAPS)
    finally:
        close_state(settings)


async def test_a_save_writes_the_rows_that_changed_not_the_graph(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    try:
        job, world = await _ran(settings)
        rows = sum(len(m) for m in _maps(job.state).values())
        assert save_state(settings, job.state).rows_written == 0  # nothing changed
        world.say("doc-late", [("Zeta", "Zeta came to Orion.")], [("Zeta", "Orion A 0", "met")])
        await job.run(world.view)
        stats = save_state(settings, job.state)
        assert 0 < stats.rows_written < rows / 4, (stats, rows)
        close_state(settings)
        assert entity_key("Zeta") in load_state(settings).view.entities
    finally:
        close_state(settings)


async def test_changes_of_a_failed_run_are_forgotten(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    try:
        job, world = await _ran(settings)
        before = pickle.loads(pickle.dumps(_maps(job.state)))  # not the objects held
        world.say("doc-late", [("Zeta", "Zeta came.")], [])
        job.state.view.entity_units[entity_key("Orion A 0")].add("chunk-bogus")  # in place
        forget_state(settings)  # the run raised: nothing it changed was saved
        loaded = load_state(settings)
        assert entity_key("Zeta") not in loaded.view.entities
        assert _maps(loaded) == before
    finally:
        close_state(settings)


def test_an_earlier_versions_checkpoint_moves_in(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    view = base_world().view
    written = JobState(view=view, offsets={0: 7})
    job_dir(settings).mkdir(parents=True)
    (job_dir(settings) / CHECKPOINT).write_bytes(pickle.dumps(written))
    try:
        state = load_state(settings)
        assert state.offsets == {0: 7}
        assert dict(state.view.entities.items()) == view.entities
        assert not (job_dir(settings) / CHECKPOINT).exists()
        assert (job_dir(settings) / STATE_DB).exists()
        close_state(settings)
        assert dict(load_state(settings).view.relationships.items()) == view.relationships
    finally:
        close_state(settings)


def test_no_offsets_before_the_first_save(tmp_path: Path) -> None:
    assert read_offsets(settings_for(tmp_path)) is None


async def test_a_whole_pass_over_the_graph_holds_nothing(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    try:
        await _ran(settings)
        close_state(settings)
        state = load_state(settings)
        entities, relationships = state.view.entities, state.view.relationships
        assert isinstance(entities, DiskMap) and isinstance(relationships, DiskMap)
        assert sum(1 for _ in entities.values()) == len(entities) > 0
        assert sum(1 for _ in relationships.items()) == len(relationships)
        assert not entities._loaded and not relationships._loaded  # nothing held
        state.view.entity_units[entity_key("Orion A 0")].add("chunk-late")  # read by key
        assert save_state(settings, state).rows_written == 1
    finally:
        close_state(settings)


async def test_an_evidence_index_an_earlier_version_kept_in_the_blob_moves_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database written before the evidence index's maps were tables: its blob holds them
    as dicts (relationship keys by (a, b) tuples); they load whole and move in at the save."""
    settings = settings_for(tmp_path)
    try:
        job, _ = await _ran(settings)
        ev = job.state.evidence
        assert ev is not None
        before = {a: dict(getattr(ev, a).items()) for _, h, a in DISK_MAPS if h == "evidence"}
        ev.entity_facts = dict(before["entity_facts"])
        ev.edge_facts = dict(before["edge_facts"])
        ev._relationships = dict(before["_relationships"])
        ev._by_pair = {tuple(k.split("\x00")): v for k, v in before["_by_pair"].items()}  # type: ignore[misc]
        store = state_module._store(settings)
        earlier = tuple(m for m in DISK_MAPS if m[1] != "evidence")
        with monkeypatch.context() as m:
            m.setattr(state_module, "DISK_MAPS", earlier)
            with state_module._maps_named(job.state):
                store.put_meta(STATE_BLOB, pickle.dumps(job.state, pickle.HIGHEST_PROTOCOL))
        for table, holder, _ in DISK_MAPS:
            if holder == "evidence":
                store.map(table).clear()
        store.commit()
        close_state(settings)
        loaded = load_state(settings).evidence
        assert loaded is not None and isinstance(loaded._by_pair, DiskMap)
        assert {a: dict(getattr(loaded, a).items()) for a in before} == before
        save_state(settings, load_state(settings))
        close_state(settings)
        again = load_state(settings).evidence
        assert again is not None
        assert {a: dict(getattr(again, a).items()) for a in before} == before
    finally:
        close_state(settings)
