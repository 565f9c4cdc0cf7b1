"""Graph tables: a version commits only the rows that changed, readers see whole versions as of
any kept version, a writer killed mid-commit leaves nothing visible, retention and maintenance
keep the files few, and old snapshot directories convert."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from core.settings import load_settings
from core.tables.codecs import rows_to_arrow
from core.tables.errors import SnapshotNotFoundError, StaleSnapshotError
from core.tables.legacy_snapshots import SnapshotStore
from core.tables.merge_on_read import current_rows
from core.tables.migration import convert_legacy_snapshots, legacy_hint
from core.tables.opening import QUERY_OMITS, open_graph_store
from core.tables.store import GraphTables
from graph.versions.model import Snapshot, SnapshotEntity, SnapshotMeta, SnapshotRelationship
from tests.unit.test_query_support import dated, world

REPO = Path(__file__).resolve().parents[2]


def entity(i: int, said: str) -> SnapshotEntity:
    return SnapshotEntity(
        id=f"e{i}", human_readable_id=i, title=f"E{i}", type="thing", description=said,
        text_unit_ids=(f"c{i}",), frequency=1, degree=0,
    )  # fmt: skip


def graph(
    version: int, entities: dict[int, str], edges: tuple[tuple[int, int], ...] = ()
) -> Snapshot:
    rels = tuple(
        SnapshotRelationship(
            id=f"r{a}-{b}",
            human_readable_id=k,
            source=f"E{a}",
            target=f"E{b}",
            description="linked",
            weight=1.0,
            combined_degree=0,
            text_unit_ids=(),
            source_id=f"e{a}",
            target_id=f"e{b}",
        )
        for k, (a, b) in enumerate(edges)
    )
    meta = SnapshotMeta(version=version, created_at="t", newest_document_time="1987-03-02")
    return Snapshot(
        meta, tuple(entity(i, d) for i, d in sorted(entities.items())), rels, (), (), (), ()
    )


def by_id(rows: tuple[object, ...]) -> dict[str, object]:
    return {r.id: r for r in rows}  # type: ignore[attr-defined]


class TestVersions:
    def test_a_version_commits_only_what_changed_and_reads_back_whole(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path)
        v1 = graph(1, {i: "first" for i in range(50)})
        known = store.write(v1)
        v2 = graph(2, {**{i: "first" for i in range(1, 50)}, 3: "changed", 60: "new"})
        store.write(v2, known)
        info = store.version_infos()[-1]
        assert info.changed == {"entities": 3}  # one changed, one new, one tombstone
        assert by_id(store.load().entities) == by_id(v2.entities)
        assert by_id(store.load(1).entities) == by_id(v1.entities)  # as of version 1

    def test_a_writer_without_memory_reads_the_latest_version_back(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path)
        store.write(graph(1, {1: "a", 2: "b"}))
        store.write(graph(2, {1: "a", 2: "c"}))  # no ``known``: diffed against version 1
        assert store.version_infos()[-1].changed == {"entities": 1}

    def test_versions_only_go_up(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path)
        store.write(graph(3, {1: "a"}))
        with pytest.raises(StaleSnapshotError):
            store.write(graph(3, {1: "b"}))
        assert store.load().entities[0].description == "a"

    def test_rows_of_a_writer_that_lost_the_race_for_a_version_stay_invisible(
        self, tmp_path: Path
    ) -> None:
        """Two leaders took version 2: the one that lost appended its rows, then found the
        version listed by the other. Only the listed commit's rows are version 2, now and
        after maintenance."""
        from deltalake import write_deltalake

        store = GraphTables(tmp_path, keep=5, vacuum_hours=0)
        store.write(graph(1, {1: "a", 2: "b"}))
        store.write(graph(2, {1: "the winner's", 2: "b"}))
        # the loser's append lands after the winner listed version 2, before it notices
        loser = rows_to_arrow("entities", [entity(1, "the loser's")], 2, commit="lost")
        write_deltalake(str(tmp_path / "entities"), loser, mode="append")
        assert {e.description for e in store.load().entities} == {"the winner's", "b"}
        assert store.changes(1, 2)["entities"].upserts[0].description == "the winner's"
        store.maintain()
        assert {e.description for e in store.load().entities} == {"the winner's", "b"}
        assert (
            "the loser's" not in store.read_table("entities", 2).column("description").to_pylist()
        )

    def test_degrees_are_derived_from_the_relationships(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path)
        store.write(graph(1, {1: "a", 2: "b", 3: "c"}, ((1, 2), (1, 3))))
        loaded = store.load()
        assert {e.id: e.degree for e in loaded.entities} == {"e1": 2, "e2": 1, "e3": 1}
        assert {r.id: r.combined_degree for r in loaded.relationships} == {"r1-2": 3, "r1-3": 3}

    def test_a_communitys_mentions_per_day_are_its_members_and_never_stored(
        self, tmp_path: Path
    ) -> None:
        """A member's new mention moves every community above it: the day series is derived
        on reading, so a version in which only that moved commits no community row."""
        first = dated(world())
        store = GraphTables(tmp_path)
        store.write(first)
        days = {e.id: dict(e.mentions_per_day) for e in first.entities}
        for c in store.load().communities:
            summed: Counter[str] = Counter()
            for k in c.entity_ids:
                summed.update(days[k])
            assert dict(c.mentions_per_day) == summed and c.mentions_per_day
        assert "mentions_per_day" not in store.read_table("communities", 1).column_names
        second = replace(
            first,
            meta=replace(first.meta, version=2),
            communities=tuple(
                replace(c, mentions_per_day=(("1987-03-31", 99),)) for c in first.communities
            ),
        )
        store.write(second)
        assert not store.changes(1, 2)["communities"]
        reader = GraphTables(tmp_path, omit=QUERY_OMITS)  # the query service's: left empty
        assert {c.mentions_per_day for c in reader.load().communities} == {()}

    def test_rows_read_slice_by_slice_equal_those_written(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Rows become objects a slice at a time; slices that end inside the table, derived
        columns included, must give the rows back whole and in order."""
        monkeypatch.setattr("core.tables.codecs.ROWS_PER_SLICE", 4)
        store = GraphTables(tmp_path)
        edges = tuple((a, b) for a in range(1, 6) for b in range(a + 1, 8))
        written = graph(1, {i: f"said {i}" for i in range(1, 11)}, edges)
        store.write(written)
        loaded = store.load()
        assert by_id(loaded.entities) == {
            e.id: replace(
                e, degree=sum(e.id in (r.source_id, r.target_id) for r in written.relationships)
            )
            for e in written.entities
        }
        assert [r.id for r in loaded.relationships] == sorted(r.id for r in written.relationships)
        assert len(loaded.relationships) == len(edges) > 4

    def test_every_kgrag_process_reads_arrow_through_the_c_allocator(self) -> None:
        """Set before pyarrow first loads (``core/__init__``); a user's own choice wins."""
        probe = "import kgrag.cli, pyarrow; print(pyarrow.default_memory_pool().backend_name)"
        env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
        run = [sys.executable, "-c", probe]
        assert (
            subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout.strip()
            == "system"
        )
        env["ARROW_DEFAULT_MEMORY_POOL"] = "mimalloc"
        assert (
            subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout.strip()
            == "mimalloc"
        )

    def test_as_of_a_time_and_beyond_retention(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path, keep=2)
        for v in range(1, 5):
            store.write(graph(v, {1: f"v{v}"}))
        assert store.versions() == [3, 4]
        with pytest.raises(SnapshotNotFoundError, match="oldest version kept is 3"):
            store.load(1)
        third = store.version_infos()[0]
        assert store.load(third.committed_at).meta.version == 3
        with pytest.raises(SnapshotNotFoundError, match="oldest version kept is 3"):
            store.load("1987-01-01T00:00:00Z")


class TestReaders:
    def test_a_reader_for_queries_leaves_the_export_only_columns_unread(
        self, tmp_path: Path
    ) -> None:
        store = GraphTables(tmp_path)
        store.write(graph(1, {1: "a", 2: "b"}))
        store.write(graph(2, {1: "a", 2: "c", 3: "d"}))
        lean = GraphTables(tmp_path, omit={"entities": ("description",)})
        assert {e.description for e in lean.load().entities} == {""}
        assert {e.id for e in lean.changes(1, 2)["entities"].upserts} == {"e2", "e3"}
        assert {e.description for e in lean.changes(1, 2)["entities"].upserts} == {""}
        whole = {e.id: e for e in store.load().entities}
        assert [replace(e, description="") for e in lean.load().entities] == [
            replace(whole[e.id], description="") for e in lean.load().entities
        ]

    def test_a_follow_reads_only_the_tables_the_versions_wrote(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path)
        store.write(graph(1, {1: "a", 2: "b"}, ((1, 2),)))
        store.write(graph(2, {1: "a", 2: "c"}, ((1, 2),)))  # entities only
        read: list[str] = []
        original = store.read_table

        def spy(table: str, *args: object, **kwargs: object) -> object:
            read.append(table)
            return original(table, *args, **kwargs)  # type: ignore[arg-type]

        store.read_table = spy  # type: ignore[method-assign,assignment]
        changes = store.changes(1, 2)
        assert read == ["entities"]
        assert [e.description for e in changes["entities"].upserts] == ["c"]
        assert not changes["relationships"]


class TestCurrentRows:
    def test_the_newest_row_per_id_wins_and_tombstones_hide_it(self) -> None:
        rows = [
            rows_to_arrow("entities", [entity(1, "old"), entity(2, "kept")], 1),
            rows_to_arrow("entities", [entity(1, "new")], 2),
            rows_to_arrow("entities", [], 3, deleted=["e2"]),
        ]
        import pyarrow as pa

        table = pa.concat_tables(rows)
        now = current_rows(table).to_pylist()
        assert [(r["id"], r["description"]) for r in now] == [("e1", "new")]
        then = current_rows(table, as_of=2).to_pylist()
        assert sorted((r["id"], r["description"]) for r in then) == [("e1", "new"), ("e2", "kept")]


class TestMaintenance:
    def test_frequent_commits_do_not_pile_up_files_or_row_versions(self, tmp_path: Path) -> None:
        """Files no Delta version needs are vacuumed once ``vacuum_hours`` passed (0 here;
        1 by default, for readers part-way through an older one)."""
        store = GraphTables(tmp_path, keep=3, compact_every=10, vacuum_hours=0)
        for v in range(1, 31):
            store.write(graph(v, {i: f"v{v}" if i < 5 else "same" for i in range(40)}))
        data = list((tmp_path / "entities").glob("*.parquet"))
        # 30 without maintenance; with it, those since the table's last turn (one table per
        # commit once compact_every commits were made) and fewer than COMPACT_FILES before
        assert len(data) <= 12, len(data)
        raw = store.read_table("entities", 30)
        assert raw.num_rows < 40 + 5 * 20  # superseded row versions were dropped
        assert store.load(28).entities[0].description == "v28"
        assert store.load().entities[0].description == "v30"

    def test_maintenance_reads_only_key_columns_when_nothing_is_worth_dropping(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Row versions outnumber the live rows, but every reader still needs them (a long
        retention): deciding so reads the id, version, tombstone and commit columns, never
        the text, and the rows stay."""
        from deltalake import DeltaTable

        store = GraphTables(tmp_path, keep=1000, compact_every=1000, vacuum_hours=0)
        for v in range(1, 9):
            store.write(graph(v, {i: f"v{v} " + "long text " * 50 for i in range(40)}))
        before = store.read_table("entities", 8).num_rows
        assert before > 2 * 40  # worth a look, by the file statistics
        read: list[list[str] | None] = []
        whole = DeltaTable.to_pyarrow_table

        def spy(dt: DeltaTable, *args: object, **kwargs: object) -> object:
            read.append(kwargs.get("columns"))  # type: ignore[arg-type]
            return whole(dt, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(DeltaTable, "to_pyarrow_table", spy)
        assert store.maintain("entities") == {}
        assert read and all(cols is not None and "description" not in cols for cols in read)
        monkeypatch.undo()
        assert store.read_table("entities", 8).num_rows == before
        assert store.load(3).entities[0].description.startswith("v3 ")


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from tests.unit.test_graph_tables import graph
    from core.tables.store import GraphTables
    store = GraphTables({root!r}, keep=1000, compact_every=1000)
    v = (store.latest_listed() or 0) + 1
    while True:
        store.write(graph(v, {{i: f"written by v{{v}}" for i in range(200)}}))
        v += 1
    """
)


class TestKilledWriter:
    def test_a_reader_never_sees_a_torn_version_when_the_writer_is_killed(
        self, tmp_path: Path
    ) -> None:
        """A writer commits whole versions in a loop and is killed with SIGKILL at random
        points, three times; every version read says one version in every row."""
        root = str(tmp_path / "tables")
        script = WRITER.format(repo=str(REPO), root=root)
        store = GraphTables(root, keep=1000)
        checked = 0
        for round_ in range(3):
            had = store.latest_listed() or 0
            proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)
            try:
                # the writer's first version of this round (starting it takes seconds on a
                # busy machine), then a window that ends at a different point each round
                started = time.monotonic() + 60
                while (store.latest_listed() or 0) <= had and time.monotonic() < started:
                    time.sleep(0.05)
                deadline = time.monotonic() + 2.0 + round_ * 0.37
                while time.monotonic() < deadline:
                    snap = store.load()
                    said = {e.description for e in snap.entities}
                    assert said == {f"written by v{snap.meta.version}"}, said
                    checked += 1
            finally:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        assert checked > 3
        latest = store.latest_listed()
        assert latest is not None
        store.write(graph(latest + 1, {1: "after the kills"}))
        assert [e.description for e in store.load().entities] == ["after the kills"]


class TestConversion:
    def test_old_snapshots_convert_once_and_are_named_until_then(self, tmp_path: Path) -> None:
        settings = load_settings().model_copy(update={"data_dir": tmp_path, "namespace": "old"})
        old = graph(7, {1: "from the old format"})
        SnapshotStore(settings.snapshots_dir).write(old)
        store = open_graph_store(settings)
        hint = legacy_hint(settings, store)
        assert hint is not None and "kgrag migrate" in hint
        assert convert_legacy_snapshots(settings, store) == 7
        assert legacy_hint(settings, store) is None
        assert convert_legacy_snapshots(settings, store) is None  # once
        assert by_id(store.load().entities) == by_id(old.entities)
        writer = open_graph_store(settings, convert=True)
        writer.write(replace(old, meta=replace(old.meta, version=8)))
        assert writer.versions() == [7, 8]
