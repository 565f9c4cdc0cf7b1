"""The state store's maps behave as dicts (order, length, in-place changes, deletion and
re-insertion) across commits, discards and reopening; a commit is whole or absent; what a map
holds in memory is what was touched since the last commit; a map refuses to be pickled or used
from a forked child."""

from __future__ import annotations

import copy
import os
import pickle
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from core import disk_map
from core.state_pickle import to_disk
from core.state_store import (
    CommitError,
    DiskMap,
    ForkedStoreError,
    StateStore,
    StateStoreError,
    UnpicklableValueError,
)
from graph.protocols import Peeked, peek

KEYS = [f"e:{i:02x}" for i in range(24)]
Rows = dict[str, set[int]]
Op = Callable[[DiskMap[set[int]], Rows, random.Random], None]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches and key chunks of a few rows, so a dozen rows cross their boundaries."""
    monkeypatch.setattr(disk_map, "_BATCH", 5)
    monkeypatch.setattr(disk_map, "_CHUNK", 3)


def _filled(path: Path, rows: dict[str, object], name: str = "rows") -> StateStore:
    store = StateStore(path)
    store.map(name).update(rows)
    store.commit()
    return store


# ---- dict parity under random operations ----


def _set(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    key, value = rng.choice(KEYS), {rng.randrange(100)}
    m[key], d[key] = set(value), set(value)


def _mutate(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    if d:
        key, x = rng.choice(list(d)), rng.randrange(100)
        held = m[key] if rng.random() < 0.7 else m.get_many([key])[key]
        held.add(x)
        d[key].add(x)


def _delete(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    key = rng.choice(KEYS)
    if key in d:
        del m[key], d[key]
    else:
        with pytest.raises(KeyError):
            del m[key]


def _reinsert(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    if d:
        key = rng.choice(list(d))
        value = m.pop(key)
        assert value == d.pop(key)
        m[key], d[key] = value, set(value)


def _read(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    key = rng.choice(KEYS)
    assert (key in m) == (key in d)
    assert m.get(key) == d.get(key)
    assert m.pop(key + "-absent", None) is None


def _setdefault(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    key = rng.choice(KEYS)
    assert m.setdefault(key, {-1}) == d.setdefault(key, {-1})


def _update(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    pairs = {k: {rng.randrange(100)} for k in rng.sample(KEYS, 4)}
    m.update({k: set(v) for k, v in pairs.items()})
    d.update({k: set(v) for k, v in pairs.items()})


def _popitem(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    if d:
        assert m.popitem() == d.popitem()
    else:
        with pytest.raises(KeyError):
            m.popitem()


def _clear(m: DiskMap[set[int]], d: Rows, rng: random.Random) -> None:
    m.clear()
    d.clear()


OPS: list[tuple[Op, int]] = [
    (_set, 16),
    (_mutate, 14),
    (_delete, 8),
    (_reinsert, 6),
    (_read, 6),
    (_setdefault, 4),
    (_update, 4),
    (_popitem, 3),
    (_clear, 1),
]


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize("seed", range(6))
def test_random_operations_keep_a_dicts_contents_order_and_length(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    path = tmp_path / "state.db"
    store = StateStore(path)
    m: DiskMap[set[int]] = store.map("rows")
    d: Rows = {}
    committed: Rows = {}
    ops, weights = zip(*OPS, strict=True)
    for step in range(500):
        roll = rng.random()
        if roll < 0.06:
            store.commit()
            committed = copy.deepcopy(d)
            assert not m._loaded
        elif roll < 0.08:
            store.discard()
            d = copy.deepcopy(committed)
        elif roll < 0.10:  # closing drops what was not committed
            store.close()
            store = StateStore(path)
            m, d = store.map("rows"), copy.deepcopy(committed)
        else:
            rng.choices(ops, weights)[0](m, d, rng)
        assert list(m) == list(d), f"step {step}"
        assert len(m) == len(d), f"step {step}"
        if step % 25 == 0:
            assert m.to_dict() == d
            assert list(m.items()) == list(d.items())
            assert list(m.scan()) == list(d.items())
    store.commit()
    store.close()
    with StateStore(path) as again:
        reopened = again.map("rows")
        assert list(reopened.items()) == list(d.items())
        assert len(reopened) == len(d)


# ---- order and in-place changes ----


def test_an_update_keeps_a_keys_place_and_a_reinsertion_moves_it_to_the_end(
    tmp_path: Path,
) -> None:
    store = _filled(tmp_path / "s.db", {"a": 1, "b": 2, "c": 3})
    m = store.map("rows")
    m["a"] = 10
    del m["b"]
    m["b"] = 20
    m["d"] = 4
    assert list(m) == ["a", "c", "b", "d"]
    store.commit()
    store.close()
    with StateStore(tmp_path / "s.db") as again:
        assert list(again.map("rows").items()) == [("a", 10), ("c", 3), ("b", 20), ("d", 4)]


def test_a_commit_writes_the_rows_written_or_changed_in_place_and_no_row_only_read(
    tmp_path: Path,
) -> None:
    store = _filled(tmp_path / "s.db", {k: {i} for i, k in enumerate(KEYS)})
    m = store.map("rows")
    for key in KEYS[:12]:
        assert m[key] is not None  # read, not changed
    m[KEYS[0]].add(100)
    m[KEYS[1]].discard(1)
    m[KEYS[20]] = {7}
    del m[KEYS[21]]
    stats = store.commit()
    assert (stats.rows_written, stats.rows_deleted) == (3, 1)
    assert m[KEYS[0]] == {0, 100} and m[KEYS[1]] == set() and m[KEYS[20]] == {7}
    assert KEYS[21] not in m


@dataclass(frozen=True)
class _Row:
    name: str
    count: int


@dataclass
class _Loose:
    name: str


def test_a_frozen_map_reads_without_pickling_and_commits_only_what_was_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _filled(tmp_path / "s.db", {k: _Row(k, i) for i, k in enumerate(KEYS)})
    m = store.map("rows")
    m.values_frozen = True
    pickled: list[object] = []
    dumps = pickle.dumps

    def counting(value: object, *args: object) -> bytes:
        pickled.append(value)
        return dumps(value, *args)

    monkeypatch.setattr(disk_map.pickle, "dumps", counting)
    read = [m[k] for k in KEYS[:10]] + list(m.get_many(KEYS[10:14]).values())
    assert [r.count for r in read] == list(range(14))
    assert pickled == []  # a read pickles nothing
    m[KEYS[3]] = _Row("changed", 99)
    m["new"] = (1, "a")
    stats = store.commit()
    assert (stats.rows_written, stats.rows_deleted) == (2, 0)
    assert pickled == [_Row("changed", 99), (1, "a")]  # the two written, no read one
    assert m[KEYS[3]] == _Row("changed", 99) and m["new"] == (1, "a") and m[KEYS[4]].count == 4


def test_a_frozen_map_holds_only_its_most_recent_reads(tmp_path: Path) -> None:
    rows = {k: _Row(k, i) for i, k in enumerate(KEYS)}
    store = _filled(tmp_path / "s.db", rows)
    m = store.map("rows")
    m.values_frozen, m._read.cap = True, 3
    assert [m[k] for k in KEYS[:10]] == [rows[k] for k in KEYS[:10]]
    assert list(m._read) == KEYS[7:10] and m._loaded == {}  # the oldest reads were let go
    assert m.get_many(KEYS[:12]) == {k: rows[k] for k in KEYS[:12]}  # all, whatever the cap
    assert len(m._read) == 3 and KEYS[0] in m and m[KEYS[0]] == rows[KEYS[0]]
    m[KEYS[1]] = _Row("changed", -1)  # a key read, let go, then written
    m[KEYS[11]] = _Row("changed", -2)  # a key still held as read
    del m[KEYS[2]]
    stats = store.commit()
    assert (stats.rows_written, stats.rows_deleted) == (2, 1)
    # the reads outlive the commit, but none of a key written or removed
    held = list(m._read)
    assert held and m._loaded == {} and not {KEYS[1], KEYS[11], KEYS[2]} & set(held)
    assert all(m._read[k] == rows[k] for k in held)
    assert m[KEYS[1]].count == -1 and m[KEYS[11]].count == -2 and KEYS[2] not in m
    assert len(m) == len(KEYS) - 1


def test_held_reads_survive_a_discard_as_the_file_has_them(tmp_path: Path) -> None:
    rows = {k: _Row(k, i) for i, k in enumerate(KEYS)}
    store = _filled(tmp_path / "s.db", rows)
    m = store.map("rows")
    m.values_frozen = True
    assert m[KEYS[0]] == rows[KEYS[0]] and KEYS[0] in m._read
    m[KEYS[0]] = _Row("changed", -1)
    m[KEYS[1]] = _Row("changed", -2)
    store.discard()  # a failed run: its writes forgotten
    assert m[KEYS[0]] == rows[KEYS[0]] and m[KEYS[1]] == rows[KEYS[1]]
    m.clear()
    assert KEYS[0] not in m._read
    store.discard()
    assert m[KEYS[0]] == rows[KEYS[0]] and len(m) == len(KEYS)


def test_a_frozen_map_holds_reads_up_to_a_byte_budget(tmp_path: Path) -> None:
    rows = {k: ("x" * 1000, i) for i, k in enumerate(KEYS)}  # about 1 KB pickled each
    store = _filled(tmp_path / "s.db", rows)
    m = store.map("rows")
    m.values_frozen, m._read.bytes_cap = True, 3500
    assert [m[k] for k in KEYS[:10]] == [rows[k] for k in KEYS[:10]]
    assert list(m._read) == KEYS[7:10] and 3000 < m._read.bytes <= 3500
    m[KEYS[9]] = ("y", 0)  # a held read written: let go, its bytes with it
    assert list(m._read) == KEYS[7:9] and 2000 < m._read.bytes <= 2400
    assert m[KEYS[0]] == rows[KEYS[0]] and list(m._read) == [KEYS[7], KEYS[8], KEYS[0]]


def test_peek_reads_without_holding_and_sees_what_is_held(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s.db", {"a": {1}, "b": {2}})
    m = store.map("rows")
    assert m.peek("a") == {1} and m._loaded == {}  # read, not held: no digest, no commit
    assert m.peek("gone", ()) == () and peek(m, "gone", 0) == 0 and peek({"x": 1}, "x", 0) == 1
    m["b"].add(3)  # held by the ordinary read, changed in place
    assert m.peek("b") == {2, 3}
    del m["a"]
    assert m.peek("a") is None
    stats = store.commit()
    assert (stats.rows_written, stats.rows_deleted) == (1, 1) and m.peek("b") == {2, 3}
    frozen = _filled(tmp_path / "f.db", {"r": _Row("r", 1)}).map("rows")
    frozen.values_frozen = True
    assert frozen.peek("r") == _Row("r", 1) and list(frozen._read) == ["r"]  # held as reads are


def test_a_peeked_view_reads_each_key_once_and_holds_nothing_in_the_map(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s.db", {"a": {1}, "b": {2}})
    m = store.map("rows")
    view = Peeked(m)
    assert view["a"] == {1} and view["a"] is view["a"] and m._loaded == {}
    assert "b" in view and "gone" not in view and view.get("gone") is None
    with pytest.raises(KeyError):
        view["gone"]
    assert list(view) == ["a", "b"] and len(view) == 2 and m._loaded == {}


@pytest.mark.parametrize("value", [{1}, {"a": 1}, [1], _Loose("x")])
def test_a_frozen_map_refuses_a_value_that_can_change_in_place(
    tmp_path: Path, value: object
) -> None:
    store = _filled(tmp_path / "s.db", {"a": _Row("a", 1)})
    m = store.map("rows")
    m.values_frozen = True
    for write in (
        lambda: m.__setitem__("a", value),
        lambda: m.__setitem__("b", value),
        lambda: m.update({"c": value}),
        lambda: m.replace_all({"d": value}),
    ):
        with pytest.raises(TypeError, match=r"map 'rows' holds frozen values; key '[a-d]'"):
            write()
    store.discard()
    assert dict(m.scan()) == {"a": _Row("a", 1)}


def test_after_a_commit_the_map_holds_no_value(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s.db", {k: {i} for i, k in enumerate(KEYS)})
    m = store.map("rows")
    m.get_many(KEYS[:5])
    m[KEYS[9]].add(1)
    m["new"] = {0}
    assert set(m._loaded) == {*KEYS[:5], KEYS[9], "new"}
    store.commit()
    assert m._loaded == {}
    assert "new" in m and not m._loaded  # a membership test unpickles nothing
    dict(m.items())  # items() holds what it read, as values a caller may change
    assert len(m._loaded) == len(KEYS) + 1
    store.commit()
    assert m._loaded == {}


@pytest.mark.usefixtures("small_batches")
def test_iteration_sees_every_key_once_across_value_updates_and_commits(tmp_path: Path) -> None:
    rows = {f"k{i:02d}": i for i in range(23)}
    store = _filled(tmp_path / "s.db", rows)
    m = store.map("rows")
    seen = []
    for i, key in enumerate(m):
        seen.append(key)
        m[key] = -i
        if i % 4 == 0:
            store.commit()
    assert seen == list(rows)
    assert m.to_dict() == {k: -i for i, k in enumerate(rows)}


@pytest.mark.usefixtures("small_batches")
@pytest.mark.parametrize(
    "change",
    [
        lambda m, k: m.__setitem__(k + "-new", 0),
        lambda m, k: m.__delitem__(k),
        lambda m, k: m.clear(),
    ],
    ids=["insert", "delete", "clear"],
)
def test_changing_the_keys_while_iterating_raises_as_a_dict_does(
    tmp_path: Path, change: Callable[[DiskMap[int], str], None]
) -> None:
    m = _filled(tmp_path / "s.db", {f"k{i:02d}": i for i in range(12)}).map("rows")
    with pytest.raises(RuntimeError, match="changed its keys during iteration"):
        for key in m:
            change(m, key)


# ---- whole passes and many keys ----


@pytest.mark.usefixtures("small_batches")
def test_scan_sees_pending_changes_and_holds_no_value(tmp_path: Path) -> None:
    rows = {f"k{i:02d}": {i} for i in range(17)}
    store = _filled(tmp_path / "s.db", rows)
    m = store.map("rows")
    assert list(m.scan()) == list(rows.items())
    assert m._loaded == {}
    m["k03"].add(99)
    m["k04"] = {-4}
    del m["k05"]
    m["k01"] = m.pop("k01")
    m["fresh"] = {0}
    held = set(m._loaded)
    expected = {k: set(v) for k, v in rows.items() if k not in ("k05", "k01")}
    expected.update({"k03": {3, 99}, "k04": {-4}, "k01": {1}, "fresh": {0}})
    assert list(m.scan()) == list(expected.items())
    assert set(m._loaded) == held


@pytest.mark.usefixtures("small_batches")
def test_a_pass_sees_values_committed_while_it_runs(tmp_path: Path) -> None:
    rows = {f"k{i:02d}": i for i in range(12)}
    store = _filled(tmp_path / "s.db", rows)
    m = store.map("rows")
    seen = {}
    for key, value in m.scan():
        seen[key] = value
        if key == "k00":
            m["k03"] = -3  # in the batch the pass has already read
            m["k09"] = -9
            store.commit()
    assert seen == rows | {"k03": -3, "k09": -9}
    assert list(seen) == list(rows)


def test_get_many_reads_by_chunks_in_the_order_asked_with_pending_changes(
    tmp_path: Path,
) -> None:
    rows = {f"k{i:04d}": i for i in range(1200)}  # more keys than one IN (...) query takes
    m = _filled(tmp_path / "s.db", rows).map("rows")
    del m["k0005"]
    m["k0006"] = -6
    m["new"] = 1
    asked = ["new", "k1199", "k0005", "absent", "k0006", *rows, "k1199"]
    got = m.get_many(asked)
    rest = [k for k in rows if k not in {"k0005", "k0006", "k1199"}]
    assert list(got) == ["new", "k1199", "k0006", *rest]  # each once, absent ones left out
    assert got["k0006"] == -6 and got["k0000"] == 0 and got["new"] == 1


# ---- commit, discard, meta ----


def test_discard_drops_every_uncommitted_change(tmp_path: Path) -> None:
    rows = {k: {i} for i, k in enumerate(KEYS)}
    store = _filled(tmp_path / "s.db", rows)
    store.put_meta("cursor", b"committed")
    store.commit()
    m = store.map("rows")
    m[KEYS[0]].add(50)
    m[KEYS[1]] = {-1}
    del m[KEYS[2]]
    m["new"] = {0}
    store.put_meta("cursor", b"pending")
    assert store.get_meta("cursor") == b"pending"
    store.discard()
    assert m._loaded == {}
    assert m.to_dict() == rows and list(m) == KEYS and len(m) == len(KEYS)
    assert store.get_meta("cursor") == b"committed"
    m.clear()
    store.discard()
    assert len(m) == len(KEYS) and m[KEYS[3]] == {3}


def test_a_failed_commit_leaves_the_previous_commit_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = StateStore(path)
    first, second = store.map("first"), store.map("second")
    first.update({"a": 1, "b": 2})
    second["x"] = [1]
    store.put_meta("cursor", b"1")
    store.commit()
    first.clear()  # flushed before the failing map: its DELETE must be rolled back too
    first["c"] = 3
    second["x"].append(2)
    second["lock"] = threading.Lock()
    store.put_meta("cursor", b"2")
    with pytest.raises(UnpicklableValueError, match="'second', key 'lock'") as failed:
        store.commit()
    assert isinstance(failed.value, CommitError)
    with StateStore(path) as reader:
        assert reader.map("first").to_dict() == {"a": 1, "b": 2}
        assert reader.map("second").to_dict() == {"x": [1]}
        assert reader.get_meta("cursor") == b"1"
    assert first.to_dict() == {"c": 3}  # still pending: the caller decides
    del second["lock"]
    store.commit()
    store.close()
    with StateStore(path) as reader:
        assert reader.map("first").to_dict() == {"c": 3}
        assert reader.map("second").to_dict() == {"x": [1, 2]}
        assert reader.get_meta("cursor") == b"2"


def test_meta_blobs_round_trip_through_a_commit(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    assert store.get_meta("small") is None
    blob = pickle.dumps({"offsets": {0: 12}})
    store.put_meta("small", blob)
    store.commit()
    store.put_meta("other", b"x")
    store.put_meta("other", b"y")
    store.commit()
    store.close()
    with StateStore(tmp_path / "s.db") as again:
        assert again.get_meta("small") == blob and again.get_meta("other") == b"y"


def test_a_large_blob_streams_in_through_a_file_and_out_through_a_reader(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    value = {"rows": [bytes([i % 256]) * 1000 for i in range(3000)]}  # 3 MB: several chunks
    assert store.open_meta("state") is None
    with store.meta_file("state") as fh:
        pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
    pending = list(tmp_path.glob("*.pending"))
    assert len(pending) == 1 and store.open_meta("state") is None  # written at the commit
    assert pickle.loads(store.get_meta("state") or b"") == value  # the last put, pending
    store.commit()
    assert not list(tmp_path.glob("*.pending"))
    reader = store.open_meta("state")
    assert reader is not None
    with reader:
        assert pickle.load(reader) == value
    assert pickle.loads(store.get_meta("state") or b"") == value
    with store.meta_file("state") as fh:  # a newer one, dropped by a discard
        pickle.dump({"rows": []}, fh)
    store.discard()
    assert not list(tmp_path.glob("*.pending"))
    with pytest.raises(TypeError, match="pickle"), store.meta_file("state") as fh:
        pickle.dump(threading.Lock(), fh)
    assert not list(tmp_path.glob("*.pending"))  # a failed write leaves nothing to commit
    store.put_meta("other", b"x")
    store.commit()
    store.close()
    with StateStore(tmp_path / "s.db") as again:
        reader = again.open_meta("state")
        assert reader is not None
        with reader:
            assert pickle.load(reader) == value


def test_migrating_a_dict_keeps_its_order_and_replaces_what_was_there(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s.db", {"old": 0, "b": -1})
    old = {f"k{i}": {i} for i in (5, 3, 9, 1)} | {"b": {2}}
    m = to_disk(store, "rows", old)
    assert m is store.map("rows") and list(m) == list(old) and len(m) == len(old)
    store.commit()
    store.close()
    with StateStore(tmp_path / "s.db") as again:
        assert again.map("rows").to_dict() == old
        assert list(again.map("rows")) == list(old)


# ---- what a store refuses ----


def test_a_map_or_a_store_refuses_to_be_pickled(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db")
    m = store.map("rows")
    with pytest.raises(TypeError, match="DiskMap 'rows' cannot be pickled"):
        pickle.dumps({"view": m})
    with pytest.raises(TypeError, match="StateStore"):
        pickle.dumps(store)


@pytest.mark.parametrize("name", ["Rows", "1st", "meta", "sqlite_x", 'a"; DROP TABLE', ""])
def test_a_map_name_outside_the_pattern_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(StateStoreError, match="cannot name a map"):
        StateStore(tmp_path / "s.db").map(name)


def test_a_closed_store_refuses_reads(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s.db", {"a": 1})
    m = store.map("rows")
    store.close()
    with pytest.raises(StateStoreError, match="closed"):
        m["a"]


def test_a_store_used_under_another_pid_refuses(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s.db", {"a": 1})
    m = store.map("rows")
    store._pid += 1  # as after fork: the store was opened by another process
    for use in (lambda: m["a"], lambda: len(m), lambda: list(m), store.commit, store.discard):
        with pytest.raises(ForkedStoreError, match="open a new StateStore"):
            use()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_must_open_its_own_store(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s.db", {"a": 1})
    m = store.map("rows")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what each use did, then leave without cleanup
        try:
            os.close(read_end)
            outcomes = []
            for use in (lambda: m["a"], lambda: "a" in m, store.commit):
                try:
                    use()
                    outcomes.append("used")
                except ForkedStoreError:
                    outcomes.append("refused")
            with StateStore(tmp_path / "s.db") as own:
                outcomes.append(repr(own.map("rows")["a"]))
            os.write(write_end, ",".join(outcomes).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        report = fh.read().decode()
    os.waitpid(pid, 0)
    assert report == "refused,refused,refused,1"
    assert m["a"] == 1


def test_take_changes_names_the_keys_written_or_removed_since_the_last_take(
    tmp_path: Path,
) -> None:
    store = _filled(tmp_path / "s.sqlite", {"a": 1, "b": 2, "c": 3})
    m = store.map("rows")
    m.values_frozen = True
    assert m.take_changes() is None  # the first take: what came before is not known
    _ = m["a"], m.get("b"), "c" in m, list(m.items())
    assert m.take_changes() == set()  # reads are not changes
    m["a"] = 10
    del m["b"]
    m.update({"c": 30, "d": 4})
    m.setdefault("e", 5)
    assert m.take_changes() == {"a", "b", "c", "d", "e"}
    m["f"] = 6
    store.commit()  # a commit of the store is not a take: the change stays to be taken
    assert m.take_changes() == {"f"}
    m["a"] = 11
    store.discard()
    assert m.take_changes() is None  # a discard forgets what was taken since
    m.clear()
    assert m.take_changes() is None
    mutable = store.map("other")
    mutable["x"] = 1
    assert mutable.take_changes() is None and mutable.take_changes() is None
