"""Snapshot store: versions only go up, readers never see half a snapshot, pruning keeps the
pointer's target, corruption is named, and the watcher swaps snapshots without restarting."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.tables.errors import SnapshotCorruptError, SnapshotNotFoundError, StaleSnapshotError
from core.tables.legacy_snapshots import SnapshotStore, SnapshotWatcher
from graph.versions.model import Snapshot, SnapshotEntity, SnapshotMeta

REPO = Path(__file__).resolve().parents[2]


def snap(version: int, n_entities: int | None = None) -> Snapshot:
    """A snapshot whose every row says which version it belongs to (for torn-read checks)."""
    n = version if n_entities is None else n_entities
    entities = tuple(
        SnapshotEntity(id=f"e{i}", human_readable_id=i, title=f"E{i}", type="thing",
                       description=f"written by v{version}", text_unit_ids=(f"c{i}",),
                       frequency=1, degree=0)
        for i in range(n)
    )  # fmt: skip
    meta = SnapshotMeta(version=version, created_at="t", newest_document_time="d",
                        counts={"entities": n})  # fmt: skip
    return Snapshot(meta=meta, entities=entities, relationships=(), communities=(),
                    community_reports=(), text_units=(), documents=())  # fmt: skip


def assert_whole(s: Snapshot) -> None:
    assert len(s.entities) == s.meta.counts["entities"]
    assert {e.description for e in s.entities} <= {f"written by v{s.meta.version}"}


def hidden_entries(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith((".tmp-", ".trash-")))


class TestWriteAndLoad:
    def test_round_trip_through_the_directory(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        path = store.write(snap(3))
        assert path == tmp_path / "v000000003"
        assert (tmp_path / "LATEST").read_text() == "3\n"
        assert store.load() == snap(3)
        assert store.load(3) == snap(3)
        assert hidden_entries(tmp_path) == []

    def test_empty_store(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        assert store.latest_version() is None
        assert store.versions() == []
        assert store.next_version() == 1
        with pytest.raises(SnapshotNotFoundError):
            store.load()

    def test_versions_and_next_version(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        for v in (1, 2, 5):
            store.write(snap(v))
        assert store.versions() == [1, 2, 5]
        assert store.latest_version() == 5
        assert store.next_version() == 6

    @pytest.mark.parametrize("keep", [0, -1])
    def test_keep_must_leave_the_pointer_a_target(self, tmp_path: Path, keep: int) -> None:
        with pytest.raises(ConfigError):
            SnapshotStore(tmp_path, keep=keep)


class TestVersionsOnlyGoUp:
    @pytest.mark.parametrize("late", [1, 4])
    def test_older_or_equal_write_loses(self, tmp_path: Path, late: int) -> None:
        store = SnapshotStore(tmp_path)
        store.write(snap(4))
        with pytest.raises(StaleSnapshotError) as info:
            store.write(snap(late, n_entities=1))
        assert (info.value.version, info.value.current) == (late, 4)
        assert store.latest_version() == 4
        assert store.load() == snap(4)
        assert hidden_entries(tmp_path) == []

    def test_writer_in_another_process_wins_with_the_newer_version(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        stale = snap(store.next_version())  # this leader prepared v1 ...
        _run_writer(tmp_path, [1, 2])  # ... but another leader published v1 and v2 meanwhile
        with pytest.raises(StaleSnapshotError):
            store.write(stale)
        assert store.latest_version() == 2

    def test_compare_and_swap_waits_for_the_lock(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        writer = threading.Thread(target=store.write, args=(snap(1),))
        with store._locked():
            writer.start()
            writer.join(timeout=0.5)
            assert writer.is_alive(), "the writer moved the pointer without the lock"
            assert store.latest_version() is None
        writer.join(timeout=30)
        assert store.latest_version() == 1

    def test_racing_processes_never_move_the_pointer_back(self, tmp_path: Path) -> None:
        seen: list[int] = []
        store = SnapshotStore(tmp_path, keep=3)
        with _writers(tmp_path, list(range(1, 41, 2)), list(range(2, 41, 2))) as procs:
            while any(p.poll() is None for p in procs):
                v = store.latest_version()
                if v is not None:
                    seen.append(v)
        assert seen == sorted(seen)
        assert store.latest_version() == 40
        assert store.load() == snap(40)


class TestReadersNeverSeeHalfASnapshot:
    def test_reader_loops_while_another_process_writes_20_versions(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path, keep=2)  # pruning races the reader too
        store.write(snap(1, n_entities=1))
        loaded: list[int] = []
        with _writers(tmp_path, list(range(2, 22)), n_entities=400) as (writer,):
            while writer.poll() is None:
                s = store.load()
                assert_whole(s)
                loaded.append(s.meta.version)
        assert loaded == sorted(loaded)
        assert store.load().meta.version == 21

    def test_crashed_writer_leftover_above_the_pointer_is_replaced(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        store.write(snap(1))
        (tmp_path / "v000000002").mkdir()  # renamed into place, pointer never moved
        (tmp_path / "v000000002" / "junk").write_text("x")
        assert store.load() == snap(1)
        assert store.next_version() == 3
        store.write(snap(2))
        assert store.load() == snap(2)
        assert not (tmp_path / "v000000002" / "junk").exists()


class TestPruning:
    def test_keeps_the_newest_keep_versions(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path, keep=3)
        for v in range(1, 9):
            store.write(snap(v, n_entities=1))
        assert store.versions() == [6, 7, 8]
        assert hidden_entries(tmp_path) == []

    def test_keep_one_keeps_the_pointers_target(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path, keep=1)
        for v in range(1, 4):
            store.write(snap(v, n_entities=1))
        assert store.versions() == [3]
        assert store.load().meta.version == 3

    def test_versions_above_the_pointer_do_not_push_its_target_out(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path, keep=2)
        for v in range(1, 4):
            store.write(snap(v, n_entities=1))
        for orphan in (10, 11, 12):
            (tmp_path / f"v{orphan:09d}").mkdir()
        assert store.prune() == []
        assert store.versions() == [2, 3, 10, 11, 12]
        assert store.load().meta.version == 3

    def test_pruned_version_is_not_found(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path, keep=1)
        store.write(snap(1))
        store.write(snap(2))
        with pytest.raises(SnapshotNotFoundError):
            store.load(1)

    def test_sweeps_only_old_leftovers(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path, stale_tmp_s=60)
        old, fresh = tmp_path / ".tmp-old", tmp_path / ".tmp-fresh"
        old.mkdir()
        fresh.mkdir()
        os.utime(old, (0, 0))
        store.write(snap(1))
        assert hidden_entries(tmp_path) == [".tmp-fresh"]


class TestCorruption:
    def test_damaged_table_names_the_table_and_directory(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        path = store.write(snap(2))
        (path / "entities.jsonl").write_bytes(b'{"id": "e0", "human_readable_id": \n')
        with pytest.raises(SnapshotCorruptError) as info:
            store.load()
        assert info.value.table == "entities"
        assert "entities line 1" in str(info.value)
        assert str(path) in str(info.value)

    def test_missing_file(self, tmp_path: Path) -> None:
        path = SnapshotStore(tmp_path).write(snap(2))
        (path / "communities.jsonl").unlink()
        with pytest.raises(SnapshotCorruptError, match=r"communities\.jsonl is missing"):
            SnapshotStore(tmp_path).load()

    def test_directory_holding_another_version(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        store.write(snap(2))
        os.rename(tmp_path / "v000000002", tmp_path / "v000000005")
        (tmp_path / "LATEST").write_text("5\n")
        with pytest.raises(SnapshotCorruptError, match="version 2"):
            store.load()

    def test_garbage_pointer(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        (tmp_path / "LATEST").write_text("seven")
        with pytest.raises(SnapshotCorruptError, match="LATEST"):
            store.latest_version()


class CountingStore(SnapshotStore):
    loads = 0

    def load(self, version: int | None = None) -> Snapshot:
        self.loads += 1
        return super().load(version)


class TestWatcher:
    def test_none_until_the_first_snapshot(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path)
        watcher = SnapshotWatcher(store)
        assert watcher.current() is None
        store.write(snap(1))
        assert watcher.current() == snap(1)
        assert watcher.version == 1

    def test_reloads_only_when_the_pointer_moves(self, tmp_path: Path) -> None:
        store = CountingStore(tmp_path)
        store.write(snap(1))
        watcher = SnapshotWatcher(store)
        first = watcher.current()
        assert watcher.current() is first
        assert store.loads == 1
        store.write(snap(2))
        assert watcher.current() == snap(2)
        assert watcher.current() is watcher.current()
        assert store.loads == 2

    def test_broken_snapshot_keeps_the_previous_one_in_service(self, tmp_path: Path) -> None:
        store = CountingStore(tmp_path)
        store.write(snap(1))
        watcher = SnapshotWatcher(store)
        assert watcher.current() == snap(1)
        assert watcher.version == 1
        path = store.write(snap(2))
        (path / "meta.json").write_bytes(b"{")
        assert watcher.current() == snap(1)
        assert isinstance(watcher.last_error, SnapshotCorruptError)
        loads = store.loads
        watcher.current()
        assert store.loads == loads, "a broken snapshot is not retried on every call"
        store.write(snap(3))
        assert watcher.current() == snap(3)
        assert watcher.last_error is None

    def test_threads_share_one_watcher_while_a_writer_publishes(self, tmp_path: Path) -> None:
        store = SnapshotStore(tmp_path, keep=2)
        store.write(snap(1))
        watcher = SnapshotWatcher(store)
        done = threading.Event()
        failures: list[str] = []

        def read() -> None:
            last = 0
            while not done.is_set():
                s = watcher.current()
                if s is None or s.meta.version < last:
                    failures.append(f"went from {last} to {s and s.meta.version}")
                    return
                assert_whole(s)
                last = s.meta.version

        readers = [threading.Thread(target=read) for _ in range(3)]
        for t in readers:
            t.start()
        for v in range(2, 12):
            store.write(snap(v, n_entities=50))
        done.set()
        for t in readers:
            t.join(timeout=30)
        assert failures == []
        assert watcher.current() == snap(11, n_entities=50)


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from core.tables.legacy_snapshots import SnapshotStore
    from core.tables.errors import StaleSnapshotError
    from tests.unit.test_legacy_snapshots import snap

    root, n = Path(sys.argv[1]), int(sys.argv[2])
    store = SnapshotStore(root, keep=int(sys.argv[3]))
    for v in map(int, sys.argv[4:]):
        try:
            store.write(snap(v, n_entities=n if n >= 0 else None))
        except StaleSnapshotError:
            pass
    """
)


def _start_writer(
    root: Path, versions: list[int], n_entities: int = -1, keep: int = 2
) -> subprocess.Popen[str]:
    args = [str(root), str(n_entities), str(keep), *map(str, versions)]
    return subprocess.Popen(
        [sys.executable, "-c", _WRITER, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_writer(root: Path, versions: list[int]) -> None:
    with _writers(root, versions):
        pass


@contextmanager
def _writers(
    root: Path, *version_lists: list[int], n_entities: int = -1
) -> Iterator[list[subprocess.Popen[str]]]:
    """Writer processes, one per version list; waited for and checked on exit."""
    procs = [_start_writer(root, versions, n_entities) for versions in version_lists]
    try:
        yield procs
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
