"""Light commits: the rows of new articles committed between community runs, in process.

What a reader of the graph tables sees: after a light commit the new article's text unit,
document, entities and relationships are there with the communities and reports of the last
run (and say so in the version's meta); nothing a kept row names is missing; the next run
writes only what the light commit did not already write; retention counts runs.
"""

from __future__ import annotations

import pickle
import queue
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest

import agents.community.inbox as child_inbox
from agents.community.commit import light_commit
from agents.community.feed import Feed
from agents.community.texts import Texts
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from graph.job.run import assign_record_ids
from graph.job.version_tables import ROW_TABLES, assemble, row_tables
from graph.keys import entity_key
from graph.merge.changes import entity_changed, text_unit_retracted
from graph.merge.view import GraphView
from graph.versions.model import SnapshotMeta
from graph.versions.rows import TABLES, row_digests
from query.results import describe_basis, graph_basis
from streams.codecs import encode_change
from tests.unit.test_community_run import Job, World, base_world, settings_for


def store_of(job: Job) -> GraphTables:
    return open_graph_store(job.settings)


def reverse_maps(view: GraphView) -> tuple[object, ...]:
    def nonempty(m: dict[str, set[str]]) -> dict[str, set[str]]:
        return {k: v for k, v in m.items() if v}

    return (
        nonempty(view.unit_entities),
        nonempty(view.unit_relationships),
        nonempty(view.document_units),
    )


class TestView:
    def test_fresh_keys_name_the_rows_an_article_wrote(self) -> None:
        world = base_world()
        world.view.take_fresh()
        world.say("doc-new", [("Nova Trading", "Nova Trading opened.")], [])
        fresh = world.view.take_fresh()
        assert fresh.entities == {entity_key("Nova Trading")}
        assert fresh.documents == {"doc-new"}
        assert fresh.text_units == {f"chunk-{world.chunks}"}
        assert not world.view.take_fresh()  # taken: nothing left

    def test_reverse_maps_follow_additions_retractions_and_deletions(self) -> None:
        world = base_world()
        view = world.view
        world.say("doc-x", [("Orion A 0", "Orion A 0 moved."), ("Zeta", "Zeta came.")], [])
        chunk = f"chunk-{world.chunks}"
        view.apply(text_unit_retracted(chunk, "doc-x"))
        view.apply(
            entity_changed(
                entity_key("Zeta"), None, chunk_id=chunk, document_id="doc-x", retraction=True
            )
        )
        incremental = reverse_maps(view)
        view.rebuild_reverse_maps()
        assert incremental == reverse_maps(view)
        assert entity_key("Zeta") not in {k for keys in view.unit_entities.values() for k in keys}
        assert chunk not in view.document_units.get("doc-x", set())

    def test_subset_rows_equal_the_rows_of_the_whole_graph(self, tmp_path: Path) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        world.view.take_fresh()
        world.say(
            "doc-new",
            [("Orion A 1", "Orion A 1 signed."), ("Nova", "Nova began.")],
            [("Orion A 1", "Nova", "Orion A 1 signed with Nova.")],
        )
        keys = world.view.take_fresh()
        subset = row_tables(world.view, job.state, keys)
        whole = assemble(world.view, job.state, (), SnapshotMeta(1, "", ""))
        for name in ROW_TABLES:  # as stored: the derived degree columns are filled on read
            if name != "claims":  # no claims in this world
                assert subset[name], name
            stored = row_digests(name, getattr(whole, name))
            assert row_digests(name, subset[name]).items() <= stored.items(), name


class TestCommits:
    async def test_new_article_is_in_the_tables_before_the_run(self, tmp_path: Path) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        await job.run(world.view)
        run = store_of(job).load()
        world.say(
            "doc-new",
            [("Nova Trading", "Nova Trading opened."), ("Orion A 0", "Orion A 0 joined it.")],
            [("Nova Trading", "Orion A 0", "Orion A 0 joined Nova Trading.")],
        )
        version = light_commit(store_of(job), job.state, "offline")
        assert version == run.meta.version + 1
        light = store_of(job).load()
        assert light.meta.kind == "rows"
        assert light.meta.reports_from == (run.meta.version, run.meta.created_at)
        assert entity_key("Nova Trading") in {e.id for e in light.entities}
        assert "doc-new" in {d.id for d in light.documents}
        new_unit = f"chunk-{world.chunks}"
        unit = next(u for u in light.text_units if u.id == new_unit)
        assert set(unit.entity_ids) == {entity_key("Nova Trading"), entity_key("Orion A 0")}
        # communities follow at the run's pace (their derived text units include the new one)
        assert [(c.id, c.entity_ids, c.title) for c in light.communities] == [
            (c.id, c.entity_ids, c.title) for c in run.communities
        ]
        assert light.community_reports == run.community_reports
        assert light.meta.counts["entities"] == len(light.entities)
        info = store_of(job).version_infos()[-1]
        assert set(info.changed) == {"entities", "relationships", "text_units", "documents"}
        # only the rows the article wrote: its two entities, one relationship, one unit, one doc
        assert info.changed == {
            "entities": 2,
            "relationships": 1,
            "text_units": 1,
            "documents": 1,
        }

    async def test_a_restart_from_an_older_checkpoint_keeps_the_ids_commits_gave(
        self, tmp_path: Path
    ) -> None:
        """Light commits are not checkpointed: a job restarted from the last run's checkpoint
        folds the changes again, maybe in another order. Rows keep the ids the lost commits
        gave them and no id names two rows, in every version, before the replay is over."""
        world, job = base_world(), Job(settings_for(tmp_path))
        await job.run(world.view)
        on_disk = pickle.dumps((world, job.state))  # the checkpoint: the last run's state
        world.say("doc-a", [("Nova", "Nova opened.")], [("Nova", "Orion A 0", "Nova hired.")])
        world.say("doc-b", [("Vela", "Vela opened.")], [("Vela", "Orion A 1", "Vela hired.")])
        assert light_commit(store_of(job), job.state, "offline") is not None
        given = store_of(job).load()
        # the restarted job replays doc-b first (its chunk id is content-derived in the real
        # pipeline; this world numbers chunks, so the counter is set to give the same id)
        world2, state2 = pickle.loads(on_disk)
        world2.chunks += 1
        world2.say("doc-b", [("Vela", "Vela opened.")], [("Vela", "Orion A 1", "Vela hired.")])
        light_commit(store_of(job), state2, "offline")  # its rows compare equal: no commit
        after = store_of(job).load()
        for name in ("entities", "relationships", "text_units", "documents"):
            rows = getattr(after, name)
            hrids = [r.human_readable_id for r in rows]
            assert len(hrids) == len(set(hrids)), f"{name}: an id names two rows"
            before = {r.id: r.human_readable_id for r in getattr(given, name)}
            assert {r.id: r.human_readable_id for r in rows} == before, name

    async def test_nothing_new_commits_nothing(self, tmp_path: Path) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        await job.run(world.view)
        before = store_of(job).latest_version()
        assert light_commit(store_of(job), job.state, "offline") is None
        # the same row written again (a redelivered change) compares equal
        world.view.fresh.entities.add(entity_key("Orion A 0"))
        assert light_commit(store_of(job), job.state, "offline") is None
        assert store_of(job).latest_version() == before

    async def test_the_run_after_writes_only_what_the_light_commit_did_not(
        self, tmp_path: Path
    ) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        await job.run(world.view)
        world.say("doc-new", [("Nova Trading", "Nova Trading opened.")], [])
        light_commit(store_of(job), job.state, "offline")
        await job.run(world.view)
        info = store_of(job).version_infos()[-1]
        assert info.meta.kind == "run"
        assert "documents" not in info.changed and "text_units" not in info.changed
        snap = store_of(job).load()
        assert snap.meta.reports_from == (snap.meta.version, snap.meta.created_at)
        assert any(entity_key("Nova Trading") in c.entity_ids for c in snap.communities) or (
            entity_key("Nova Trading") in {e.id for e in snap.entities}  # an entity without edges
        )

    async def test_before_the_first_run_a_light_commit_says_there_are_no_reports(
        self, tmp_path: Path
    ) -> None:
        world, job = World(), Job(settings_for(tmp_path))
        job.state.view = world.view
        world.say("doc-1", [("Nova", "Nova began."), ("Vela", "Vela joined.")], [])
        assert light_commit(store_of(job), job.state, "offline") == 1
        snap = store_of(job).load()
        assert snap.meta.kind == "rows" and snap.meta.reports_from == (0, "")
        assert {e.id for e in snap.entities} == {entity_key("Nova"), entity_key("Vela")}
        assert snap.communities == () and snap.community_reports == ()
        assert snap.meta.counts["communities"] == 0 and snap.meta.counts["entities"] == 2

    async def test_deleted_rows_wait_for_the_run(self, tmp_path: Path) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        world.say("doc-x", [("Zeta", "Zeta came.")], [])
        await job.run(world.view)
        chunk = f"chunk-{world.chunks}"
        world.view.apply(text_unit_retracted(chunk, "doc-x"))
        world.view.apply(
            entity_changed(
                entity_key("Zeta"), None, chunk_id=chunk, document_id="doc-x", retraction=True
            )
        )
        light_commit(store_of(job), job.state, "offline")
        assert entity_key("Zeta") in {e.id for e in store_of(job).load().entities}
        await job.run(world.view)
        snap = store_of(job).load()
        assert entity_key("Zeta") not in {e.id for e in snap.entities}
        assert chunk not in {u.id for u in snap.text_units}


class TestIncrementalRun:
    async def test_a_run_after_light_commits_and_deletions_commits_the_whole_graph(
        self, tmp_path: Path
    ) -> None:
        """The run writes only what changed since the last commit, yet the tables then hold
        exactly the rows a whole assembly of the job's view gives."""
        world, job = base_world(), Job(settings_for(tmp_path))
        world.say("doc-x", [("Zeta", "Zeta came."), ("Orion A 0", "Orion A 0 met Zeta.")], [])
        await job.run(world.view)
        await job.run(world.view)  # the second run takes the incremental path
        world.say(
            "doc-y",
            [("Nova", "Nova began."), ("Orion A 1", "Orion A 1 hired Nova.")],
            [("Nova", "Orion A 1", "Orion A 1 hired Nova.")],
        )
        light_commit(store_of(job), job.state, "offline")
        chunk = "chunk-" + str(world.chunks - 1)  # doc-x's chunk
        world.view.apply(text_unit_retracted(chunk, "doc-x"))
        world.view.apply(
            entity_changed(
                entity_key("Zeta"), None, chunk_id=chunk, document_id="doc-x", retraction=True
            )
        )
        world.say("doc-z", [("Vela", "Vela joined Nova.")], [("Vela", "Nova", "Vela joined.")])
        await job.run(world.view)
        info = store_of(job).version_infos()[-1]
        assert info.changed["entities"] < len(world.view.entities)  # not every row again
        loaded = store_of(job).load()
        whole = assemble(world.view, job.state, job.state.communities, loaded.meta)
        for name in TABLES:
            assert row_digests(name, getattr(loaded, name)) == row_digests(
                name, getattr(whole, name)
            ), name
        assert entity_key("Zeta") not in {e.id for e in loaded.entities}


class TestRetention:
    async def test_retention_counts_runs_and_keeps_the_light_commits_between(
        self, tmp_path: Path
    ) -> None:
        world, job = base_world(), Job(settings_for(tmp_path, keep_snapshots=2))
        kinds = []
        for i in range(3):
            await job.run(world.view)
            kinds.append("run")
            for j in range(2):
                world.say(f"doc-{i}-{j}", [(f"Nova {i} {j}", "Nova began.")], [])
                light_commit(store_of(job), job.state, "offline")
                kinds.append("rows")
        infos = store_of(job).version_infos()
        # the last two runs (versions 4 and 7) and every light commit after the older one
        assert [(v.version, v.meta.kind) for v in infos] == [
            (4, "run"),
            (5, "rows"),
            (6, "rows"),
            (7, "run"),
            (8, "rows"),
            (9, "rows"),
        ]
        assert kinds == [v.meta.kind for v in store_of(job).version_infos_all()]


class TestCadence:
    def test_a_light_commit_waits_for_a_pause_or_at_most_fresh_s(self) -> None:
        feed = Feed()
        assert not feed.fresh_due(1.0, now=time.monotonic())  # nothing pending
        feed.add(0, 0, b"x")
        t0 = time.monotonic()
        assert not feed.fresh_due(1.0, now=t0 + 0.1)  # rows of the article still arriving
        assert feed.fresh_due(1.0, now=t0 + 0.25)  # a pause: commit
        assert not feed.fresh_due(0.0, now=t0 + 5)  # 0: light commits are off
        for i in range(1, 12):  # a steady stream without pauses: at most fresh_s waited
            feed.last_at = t0 + 0.1 * i
        assert not feed.fresh_due(1.0, now=t0 + 0.95)
        assert feed.fresh_due(1.0, now=t0 + 1.0)

    def test_a_light_commit_leaves_the_run_due(self) -> None:
        feed = Feed()
        feed.add(0, 7, b"x")
        changes, offsets = feed.take_pending()
        assert changes == [b"x"] and offsets == {0: 8}
        assert not feed.fresh_due(1.0, now=time.monotonic() + 10)
        assert feed.due(debounce_s=5, max_wait_s=60, now=time.monotonic() + 6)
        assert feed.take() == ([], {0: 8})
        assert not feed.due(debounce_s=5, max_wait_s=60, now=time.monotonic() + 6)


class TestBasis:
    def test_an_answer_says_which_version_and_which_run_it_rests_on(self) -> None:
        run = SnapshotMeta(9, "2026-12-01T10:00:00Z", "", kind="run")
        rows = SnapshotMeta(
            12, "2026-12-01T10:00:40Z", "", kind="rows", reports_version=9,
            reports_at="2026-12-01T10:00:00Z",
        )  # fmt: skip
        basis = graph_basis(rows)
        assert basis["graph_version"] == 12 and basis["reports_version"] == 9
        assert basis["reports_age_s"] - basis["graph_age_s"] == 40
        assert "reports of v9" in describe_basis(basis)
        assert "same run" in describe_basis(graph_basis(run))
        first = SnapshotMeta(1, "2026-12-01T10:00:00Z", "", kind="rows")  # before any run
        assert "no community reports yet" in describe_basis(graph_basis(first))


class TestDuringARun:
    """Changes the leader hands over while a run works become light commits between the
    run's phases; a light commit made after the run picked its version moves the run up."""

    @staticmethod
    def tapped(world: World, doc_id: str, name: str) -> list[bytes]:
        """The graph changes of one new article, encoded as on the topic, not folded."""
        changes: list[Any] = []
        view, world.view = world.view, cast(GraphView, SimpleNamespace(apply=changes.append))
        try:
            world.say(doc_id, [(name, f"{name} arrived."), ("Orion A 0", f"Orion A 0 met {name}.")])
        finally:
            world.view = view
        return [
            orjson.dumps({"kind": "document", "document": c})
            if isinstance(c, dict)
            else encode_change(c)
            for c in changes
        ]

    async def test_handed_over_changes_are_committed_before_the_run(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        await job.run(world.view)
        inbox: queue.Queue[Any] = queue.Queue()
        inbox.put((self.tapped(world, "doc-new", "Nova Trading"), {0: 99}))
        monkeypatch.setattr(child_inbox, "_INBOX", inbox)
        result = await job.run(world.view)
        [light] = result.light_commits
        assert light < result.version
        rows = store_of(job).load(light)
        assert rows.meta.kind == "rows" and entity_key("Nova Trading") in {
            e.id for e in rows.entities
        }
        assert job.state.offsets == {0: 99}
        snap = store_of(job).load()
        assert entity_key("Nova Trading") in {e.id for e in snap.entities}

    async def test_a_light_commit_during_the_reports_moves_the_run_up(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        await job.run(world.view)
        world.group("Draco")  # a new storyline: its communities get reports in this run
        inbox: queue.Queue[Any] = queue.Queue()
        monkeypatch.setattr(child_inbox, "_INBOX", inbox)
        reports = Texts.reports

        async def reports_then_hand_over(self: Texts, *args: Any) -> set[str]:
            done = await reports(self, *args)
            inbox.put((TestDuringARun.tapped(world, "doc-b", "Vela Shipping"), {0: 5}))
            return done

        monkeypatch.setattr(Texts, "reports", reports_then_hand_over)
        result = await job.run(world.view)
        [light] = result.light_commits
        assert result.version == light + 1
        snap = store_of(job).load()
        regenerated = {r.id for r in snap.community_reports if r.generated_in == snap.meta.version}
        assert regenerated and result.regenerated == len(regenerated)
        assert not [r for r in snap.community_reports if r.generated_in == light]


async def test_every_row_has_a_human_id_after_runs_and_light_commits(tmp_path: Path) -> None:
    """A run numbers only the rows written since the last commit: with light commits
    between runs or without, every row the view holds has its id after each run (the scan
    of every row would number nothing more)."""
    world, job = base_world(), Job(settings_for(tmp_path))
    await job.run(world.view)
    for i in range(4):
        world.say(
            f"doc-{i}",
            [(f"Nova {i}", f"Nova {i} opened."), ("Orion A 0", f"Orion A 0 met Nova {i}.")],
            [(f"Nova {i}", "Orion A 0", f"Nova {i} hired Orion A 0.")],
        )
        if i % 2:
            assert light_commit(store_of(job), job.state, "offline") is not None
        await job.run(world.view)
        ids = job.state.human_ids
        assert assign_record_ids(world.view, ids) is ids, f"run {i}: a row without an id"
        rows = store_of(job).load()
        for name in ("entities", "relationships", "text_units", "documents"):
            hrids = [r.human_readable_id for r in getattr(rows, name)]
            assert len(hrids) == len(set(hrids)), f"{name}: an id names two rows"


class TestNewTerm:
    """A leadership term (or a restart) starts from the state's offsets; changes that light
    commits folded past those offsets are still owed a run."""

    async def test_a_term_knows_a_run_is_owed_for_what_light_commits_folded(
        self, tmp_path: Path
    ) -> None:
        from agents.community.state import _STATE, job_dir, lead_start

        world, job = base_world(), Job(settings_for(tmp_path))
        await job.run(world.view)
        _STATE[job_dir(job.settings)] = job.state
        try:
            as_json = job.settings.model_dump_json()
            assert not lead_start(as_json).run_due  # the run took in everything
            job.state.offsets = {0: 12}
            world.say("doc-late", [("Zeta", "Zeta came.")], [])  # a light commit's fold
            start = lead_start(as_json)
            assert start.run_due and start.offsets == {0: 12}
        finally:
            _STATE.pop(job_dir(job.settings), None)

    def test_a_feed_marked_dirty_runs_after_the_debounce(self) -> None:
        feed = Feed(offsets={0: 12})
        now = time.monotonic()
        assert not feed.due(debounce_s=5, max_wait_s=60, now=now + 100)
        feed.mark_dirty(now)
        assert not feed.due(debounce_s=5, max_wait_s=60, now=now + 1)
        assert feed.due(debounce_s=5, max_wait_s=60, now=now + 6)
        assert feed.take() == ([], {0: 12})
