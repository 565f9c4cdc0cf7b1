"""Deleting documents, the pure pieces: the ``document_removed`` graph change, how the job's
view folds it, the run that tombstones the document's row, what the graph tables then say of
an id (``document_status``, ``plan_deletion``) and that maintenance remembers deletions.
The whole path through Kafka and Weaviate is ``tests/integration/test_deletion.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from agents.community.state import JobState, upgrade_state
from core.publish import plan_deletion
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from graph.keys import entity_key
from graph.merge.changes import DocumentRemoved, entity_changed, text_unit_retracted
from graph.merge.view import GraphView, RemovedKeys
from graph.versions.model import Snapshot, SnapshotDocument, SnapshotMeta
from streams.codecs import PayloadError, decode_graph_change, encode_document_removed
from tests.unit.test_community_run import Job, World, base_world, settings_for


def test_the_removal_of_a_document_round_trips_and_a_bad_one_is_refused() -> None:
    assert decode_graph_change(encode_document_removed("doc-7")) == DocumentRemoved("doc-7")
    for bad in ({"kind": "document_removed"}, {"kind": "document_removed", "id": ""}):
        with pytest.raises(PayloadError):
            decode_graph_change(orjson.dumps(bad))


def say_one(world: World, doc_id: str, name: str) -> str:
    """One document naming ``name`` alone; returns its chunk id."""
    world.say(doc_id, [(name, f"{name} came.")])
    return f"chunk-{world.chunks}"


def retract(view: GraphView, chunk: str, doc_id: str, *names: str) -> None:
    """What the re-keyer and the mergers publish when ``chunk`` goes and it alone backed
    ``names``."""
    view.apply(text_unit_retracted(chunk, doc_id))
    for name in names:
        view.apply(
            entity_changed(
                entity_key(name), None, chunk_id=chunk, document_id=doc_id, retraction=True
            )
        )


class TestView:
    def test_a_removed_document_goes_whichever_comes_first(self) -> None:
        for removal_first in (True, False):
            world = World()
            chunk = say_one(world, "doc-x", "Zeta")
            view = world.view
            view.take_removed()
            if removal_first:
                view.apply(DocumentRemoved("doc-x"))
                assert "doc-x" in view.document_units  # its text unit is not gone yet
            retract(view, chunk, "doc-x", "Zeta")
            if not removal_first:
                view.apply(DocumentRemoved("doc-x"))
            assert "doc-x" not in view.documents and "doc-x" not in view.document_units
            removed = view.take_removed()
            assert removed is not None and removed.documents == {"doc-x"}
            assert removed.text_units == {chunk} and removed.entities == {entity_key("Zeta")}

    def test_publishing_it_again_before_the_run_keeps_it(self) -> None:
        world = World()
        say_one(world, "doc-x", "Zeta")
        world.view.take_removed()
        world.view.apply(DocumentRemoved("doc-x"))
        world.view.apply({"id": "doc-x", "title": "again", "text": "Zeta again."})
        removed = world.view.take_removed()
        assert removed is not None and not removed.documents
        assert world.view.documents["doc-x"]["title"] == "again"

    def test_removing_an_unknown_document_changes_nothing(self) -> None:
        world = World()
        say_one(world, "doc-x", "Zeta")
        world.view.take_removed()
        world.view.apply(DocumentRemoved("doc-never"))
        removed = world.view.take_removed()
        assert removed is not None and not removed.documents
        assert set(world.view.documents) == {"doc-x"}

    def test_a_checkpoint_from_before_deletions_gets_an_empty_set(self) -> None:
        state = JobState()
        state.view.removed = RemovedKeys()
        del vars(state.view.removed)["documents"]
        upgrade_state(state)
        assert state.view.removed is not None and state.view.removed.documents == set()


class TestRun:
    async def test_the_run_tombstones_the_document_and_the_tables_say_so(
        self, tmp_path: Path
    ) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        chunk = say_one(world, "doc-x", "Zeta")
        say_one(world, "doc-y", "Nova")
        await job.run(world.view)
        await job.run(world.view)  # the incremental path from here on
        store = open_graph_store(job.settings)
        assert store.document_status(["doc-x", "doc-y", "doc-z"]) == {
            "doc-x": True,
            "doc-y": True,
        }
        world.view.apply(DocumentRemoved("doc-x"))
        retract(world.view, chunk, "doc-x", "Zeta")
        await job.run(world.view)
        snap = store.load()
        assert "doc-x" not in {d.id for d in snap.documents}
        assert chunk not in {u.id for u in snap.text_units}
        assert entity_key("Zeta") not in {e.id for e in snap.entities}
        assert store.document_status(["doc-x", "doc-y"]) == {"doc-x": False, "doc-y": True}

        plan = plan_deletion(store, ["doc-x", "doc-y", " doc-y ", "doc-z", ""])
        assert (plan.send, plan.already, plan.unknown) == (["doc-y"], ["doc-x"], ["doc-z"])
        forced = plan_deletion(store, ["doc-x", "doc-z"], force=True)
        assert (forced.send, forced.already, forced.unknown) == (["doc-x", "doc-z"], [], [])

        world.view.apply({"id": "doc-x", "title": "back", "text": "Zeta is back."})
        await job.run(world.view)
        assert store.document_status(["doc-x"]) == {"doc-x": True}

    def test_no_graph_yet_knows_no_document(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path)
        assert store.document_status(["doc-x"]) == {}
        assert plan_deletion(store, ["doc-x"]).unknown == ["doc-x"]


def documents(version: int, ids: list[str]) -> Snapshot:
    meta = SnapshotMeta(version=version, created_at="t", newest_document_time="1987-03-02")
    docs = tuple(
        SnapshotDocument(i, n, i, f"text of {i} in v{version}", (), "1987-03-02")
        for n, i in enumerate(ids)
    )
    return Snapshot(meta, (), (), (), (), (), docs)


def test_maintenance_remembers_deleted_documents(tmp_path: Path) -> None:
    """Rows superseded before the oldest kept version are dropped, but a deleted document's
    tombstone stays: deleting it again is "already deleted", not "unknown"."""
    store = GraphTables(tmp_path, keep=2, compact_every=1, vacuum_hours=0)
    store.write(documents(1, ["gone", "kept"]))
    for v in range(2, 30):
        store.write(documents(v, ["kept"]))
    raw = store.read_table("documents", 29)
    assert raw.num_rows < 29  # superseded versions of "kept" were dropped
    assert store.document_status(["gone", "kept"]) == {"gone": False, "kept": True}


def kgrag(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KGRAG_DATA_DIR": str(tmp_path),
        "KGRAG_NAMESPACE": "deletion-cli",
        "KGRAG_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",  # nothing listens there
    }
    return subprocess.run(
        [sys.executable, "-m", "kgrag.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_kgrag_delete_says_what_is_wrong_and_what_to_do(tmp_path: Path) -> None:
    unknown = kgrag(tmp_path, "delete", "doc-x")
    assert unknown.returncode == 1
    assert "not indexed: doc-x" in unknown.stderr and "--force" in unknown.stderr
    down = kgrag(tmp_path, "delete", "doc-x", "--force")
    assert down.returncode == 1
    assert "kgrag services up" in down.stderr
    assert "Traceback" not in unknown.stderr + down.stderr
