"""Checkpoints pickled before a module of graph/ moved still load (``graph.moved``).

This file names old module paths on purpose: the regroup script leaves its text alone.
"""

from __future__ import annotations

import pickle
from pathlib import Path

from agents.community.state import CHECKPOINT, forget_state, job_dir, load_state
from graph.job.state import JobState
from graph.moved import MODULES, NAMES, moved
from graph.versions.rows import KnownRows
from tests.unit.test_community_run import base_world, settings_for


def test_a_moved_module_or_name_resolves_to_where_it_is_now() -> None:
    assert moved("graph.community_run", "JobState") == JobState.__module__
    assert moved("graph.snapshots", "KnownRows") == KnownRows.__module__
    for old, new in MODULES.items():
        assert moved(old, "AnyName") == new
    assert moved("graph.model", "Community") == "graph.model"  # not moved: as it is
    assert moved("builtins", "set") == "builtins"


def _as_written_before(data: bytes) -> bytes:
    """A protocol-0 pickle with every moved class named by its old path."""
    for (old, name), new in NAMES.items():
        data = data.replace(f"c{new}\n{name}\n".encode(), f"c{old}\n{name}\n".encode())
    for old, new in MODULES.items():
        data = data.replace(f"c{new}\n".encode(), f"c{old}\n".encode())
    return data


def test_a_checkpoint_naming_old_module_paths_still_loads(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    view = base_world().view
    written = JobState(view=view, offsets={0: 7}, tables_known=KnownRows(3, {"entities": {}}))
    old = _as_written_before(pickle.dumps(written, protocol=0))
    assert b"cgraph.community_run\nJobState\n" in old
    assert b"cgraph.snapshots\nKnownRows\n" in old
    for new in MODULES.values():
        assert f"c{new}\n".encode() not in old
    job_dir(settings).mkdir(parents=True)
    (job_dir(settings) / CHECKPOINT).write_bytes(old)
    forget_state(settings)
    state = load_state(settings)
    assert type(state) is JobState and state.offsets == {0: 7}
    assert state.tables_known == written.tables_known
    assert state.view.entities == view.entities


def test_a_checkpoint_naming_the_old_modules_of_moved_classes_still_loads(
    tmp_path: Path,
) -> None:
    from graph.aliases.indexes import AliasState, NameIndexes, Related
    from graph.aliases.resolution import Named
    from graph.aliases.rules import resolve
    from graph.communities.human_ids import HumanIds

    settings = settings_for(tmp_path)
    named = {
        "imf": Named("imf", "IMF", "organization", 2, frozenset({"u1", "u2"})),
        "international monetary fund": Named(
            "international monetary fund",
            "International Monetary Fund",
            "organization",
            3,
            frozenset({"u1", "u2"}),
        ),
    }
    indexes = NameIndexes.build(named)
    related = Related({"imf": {"international monetary fund"}})
    written = JobState(
        offsets={0: 7},
        human_ids=HumanIds.empty().assign("entity", ["imf"]),
        resolution=resolve(named, {"u1": set(named), "u2": set(named)}, {}),
        aliases=AliasState(indexes, related, 3),
    )
    old = pickle.dumps(written, protocol=0)
    old = _as_written_before(old)
    for module in ("graph.aliases\nAliasState", "graph.community_ids\nHumanIds"):
        assert module.encode() in old
    job_dir(settings).mkdir(parents=True)
    (job_dir(settings) / CHECKPOINT).write_bytes(old)
    forget_state(settings)
    state = load_state(settings)
    assert state.human_ids == written.human_ids
    assert state.resolution == written.resolution and state.resolution is not None
    assert state.resolution.canonical("imf") == "international monetary fund"
    assert state.aliases is not None and state.aliases.runs_since_full == 3
    assert state.aliases.indexes == indexes and state.aliases.related == related
