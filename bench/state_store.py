"""SQLite (``core.state_store``) against RocksDB (``rocksdict``) holding the community job's maps.

Rows are shaped like the job's entity rows: keyed ``e:<16 hex>``, each a dict with a name, a
type, a list of descriptions (about 300 characters in all) and a set of 5 text-unit ids, built
from its index alone (the same rows for both stores and every repeat). Values are pickled with
the highest protocol by both; RocksDB is an ``Rdict`` with default options, given the pickles as
bytes. The quick run holds 50,000 rows, ``--full`` 500,000.

Figures, for each store (each timed one a median of ``--repeat`` repeats, 5, with min and max):

- ``load_s``: a bulk load of every row into a new database, by chunks of 10,000 rows (SQLite: a
  ``DiskMap.update`` and a commit per chunk; RocksDB: a ``WriteBatch`` per chunk);
- ``size_mib``: the database's files on disk after that load, once closed;
- ``read_us``: one of 1,000 random keys read by itself, unpickling included (SQLite's read also
  takes the digest that lets a commit see in-place changes; each repeat starts from nothing held);
- ``commit_s``: writing 2,000 rows changed in place (a text unit added to each row's set), their
  pickling included (SQLite: ``StateStore.commit``; RocksDB: one ``WriteBatch``);
- ``pass_s`` and ``pass_rss_growth_mib``: a whole pass unpickling every value (SQLite:
  ``DiskMap.scan`` in insertion order; RocksDB: ``items()``, in key order, since RocksDB keeps
  no insertion order), and how far the process's peak RSS rose above its RSS before the pass
  (the peak is reset first through ``/proc/self/clear_refs``, so Linux only). The passes come
  right after the load, before anything is read; memory the load freed is reused first, so a
  pass that held its values would still show (at 50,000 rows ``items()`` adds ~140 MiB).

Neither store syncs to disk at a commit (SQLite's write-ahead log with ``synchronous=NORMAL``,
RocksDB's default write options); both keep their log. Targets (full run): an SQLite read by key
within 100 µs, a commit of 2,000 changed rows within 0.5 s, and a whole pass that raises peak
RSS by at most 64 MiB. Writes its run into ``bench/results/state_store.json`` (``bench.record``).

Usage: ``.venv/bin/python bench/state_store.py [--full] [--rows N] [--repeat R] [--dir DIR]
[--out PATH]``
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import pickle
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any, Protocol

from rocksdict import Rdict, WriteBatch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Target, mode_argument, ratio, record, timing
from core.state_store import DiskMap, StateStore

ROWS = {"quick": 50_000, "full": 500_000}
REPEAT = 5
READS = 1_000
CHANGED = 2_000
LOAD_CHUNK = 10_000
TYPES = ("organization", "person", "geo", "event", "commodity")
WORDS = "rates bank said oil prices quarter shares rose fell market trade deal talks".split()
MEASURES = ("core/state_store.py", "core/disk_map.py", "core/state_parts.py")
MIB = 1024 * 1024

TARGETS = {
    "sqlite_read_us": Target("/sqlite/read_us/median", "<=", 100),
    "sqlite_commit_2000_s": Target("/sqlite/commit_s/median", "<=", 0.5),
    "sqlite_pass_rss_growth_mib": Target("/sqlite/pass_rss_growth_mib/median", "<=", 64),
}


# ---- rows ----


def key_of(i: int) -> str:
    return "e:" + hashlib.blake2b(i.to_bytes(8, "big"), digest_size=8).hexdigest()


def row_of(i: int) -> dict[str, Any]:
    """Entity row ``i``: the same on every call."""
    rng = random.Random(i)
    descriptions: list[str] = []
    while sum(map(len, descriptions)) < 300:
        descriptions.append(" ".join(rng.choices(WORDS, k=14)).capitalize() + ".")
    return {
        "name": f"Entity {i}",
        "type": TYPES[i % len(TYPES)],
        "descriptions": descriptions,
        "text_units": {f"chunk-{rng.getrandbits(64):016x}" for _ in range(5)},
    }


def chunks(n: int) -> Iterator[dict[str, dict[str, Any]]]:
    for start in range(0, n, LOAD_CHUNK):
        yield {key_of(i): row_of(i) for i in range(start, min(n, start + LOAD_CHUNK))}


def dumps(value: Any) -> bytes:
    return pickle.dumps(value, pickle.HIGHEST_PROTOCOL)


# ---- the two stores ----


class Engine(Protocol):
    """One store, as each figure uses it."""

    def load(self, rows: dict[str, dict[str, Any]]) -> None: ...
    def read(self, key: str) -> Any: ...
    def forget(self) -> None: ...
    def commit_changed(self, keys: list[str], tag: str) -> float: ...
    def scan(self) -> int: ...
    def close(self) -> None: ...


class Sqlite:
    def __init__(self, folder: Path) -> None:
        self.store = StateStore(folder / "state.db")
        self.map: DiskMap[dict[str, Any]] = self.store.map("entities")

    def load(self, rows: dict[str, dict[str, Any]]) -> None:
        self.map.update(rows)
        self.store.commit()

    def read(self, key: str) -> Any:
        return self.map[key]

    def forget(self) -> None:
        self.store.discard()  # reads only: nothing to write, and nothing held afterwards

    def commit_changed(self, keys: list[str], tag: str) -> float:
        for value in self.map.get_many(keys).values():
            value["text_units"].add(tag)
        started = time.perf_counter()
        stats = self.store.commit()
        seconds = time.perf_counter() - started
        assert stats.rows_written == len(keys), stats
        return seconds

    def scan(self) -> int:
        return sum(1 for _ in self.map.scan())

    def close(self) -> None:
        self.store.close()


class Rocks:
    def __init__(self, folder: Path) -> None:
        self.db = Rdict(str(folder / "rocks"))

    def load(self, rows: dict[str, dict[str, Any]]) -> None:
        batch = WriteBatch()
        for key, value in rows.items():
            batch.put(key, dumps(value))
        self.db.write(batch)

    def read(self, key: str) -> Any:
        blob = self.db[key]
        assert blob is not None, key
        return pickle.loads(blob)

    def forget(self) -> None:
        pass

    def commit_changed(self, keys: list[str], tag: str) -> float:
        changed = {key: self.read(key) for key in keys}
        for value in changed.values():
            value["text_units"].add(tag)
        started = time.perf_counter()
        batch = WriteBatch()
        for key, value in changed.items():
            batch.put(key, dumps(value))
        self.db.write(batch)
        return time.perf_counter() - started

    def scan(self) -> int:
        return sum(1 for _, blob in self.db.items() if pickle.loads(blob) is not None)

    def close(self) -> None:
        self.db.flush()
        self.db.close()


OPEN: dict[str, type[Sqlite] | type[Rocks]] = {"sqlite": Sqlite, "rocksdb": Rocks}


# ---- figures ----


def _status_kib(field: str) -> int:
    line = next(
        ln for ln in Path("/proc/self/status").read_text().splitlines() if ln.startswith(field)
    )
    return int(line.split()[1])


def _folder_mib(folder: Path) -> float:
    return round(sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / MIB, 1)


def load(engine: str, folder: Path, n: int) -> float:
    """Seconds to load ``n`` rows into a new database in ``folder`` (row building not timed)."""
    store: Engine = OPEN[engine](folder)
    seconds = 0.0
    for rows in chunks(n):
        started = time.perf_counter()
        store.load(rows)
        seconds += time.perf_counter() - started
    store.close()
    return seconds


def reads(store: Engine, n: int, seed: int) -> float:
    """Microseconds per read of ``READS`` random keys, one by one."""
    keys = [key_of(i) for i in random.Random(seed).sample(range(n), READS)]
    started = time.perf_counter()
    for key in keys:
        store.read(key)
    seconds = time.perf_counter() - started
    store.forget()
    return seconds / READS * 1e6


def one_pass(store: Engine, n: int) -> tuple[float, float]:
    """Seconds of a whole pass and the peak RSS growth during it, in MiB."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from now
    before = _status_kib("VmRSS")
    started = time.perf_counter()
    seen = store.scan()
    seconds = time.perf_counter() - started
    assert seen == n, (seen, n)
    return seconds, (_status_kib("VmHWM") - before) / 1024


def engine_figures(engine: str, root: Path, n: int, repeat: int) -> dict[str, Any]:
    load_s = []
    for r in range(repeat):  # each into a new database; the last one is kept
        folder = root / f"{engine}-{r}"
        shutil.rmtree(root / f"{engine}-{r - 1}", ignore_errors=True)
        folder.mkdir()
        load_s.append(load(engine, folder, n))
        print(f"[{engine}] load {load_s[-1]:.2f} s", flush=True)
    size_mib = _folder_mib(folder)
    store: Engine = OPEN[engine](folder)
    passes = [one_pass(store, n) for _ in range(repeat)]  # first: nothing read yet
    read_us = [reads(store, n, seed) for seed in range(repeat)]
    commit_s = []
    for r in range(repeat):
        keys = [key_of(i) for i in random.Random(1000 + r).sample(range(n), CHANGED)]
        commit_s.append(store.commit_changed(keys, f"chunk-changed-{r}"))
    store.close()
    shutil.rmtree(folder)
    out = {
        "load_s": timing(load_s),
        "size_mib": size_mib,
        "read_us": timing(read_us, 1),
        "commit_s": timing(commit_s),
        "pass_s": timing([s for s, _ in passes]),
        "pass_rss_growth_mib": timing([g for _, g in passes], 1),
    }
    print(f"[{engine}] {out}", flush=True)
    return out


def figures(root: Path, n: int, repeat: int) -> dict[str, Any]:
    sample = [len(dumps(row_of(i))) for i in range(1000)]
    out: dict[str, Any] = {"rows": n, "row_pickle_bytes": round(sum(sample) / len(sample))}
    for engine in OPEN:
        out[engine] = engine_figures(engine, root, n, repeat)
    sqlite, rocks = out["sqlite"], out["rocksdb"]
    out["sqlite_over_rocksdb"] = {
        k: ratio(sqlite[k], rocks[k]) if rocks[k]["min"] > 0 else None
        for k in ("load_s", "read_us", "commit_s", "pass_s")
    }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode_argument(parser)
    parser.add_argument(
        "--rows", type=int, default=None, help="default: 50,000 quick, 500,000 full"
    )
    parser.add_argument("--repeat", type=int, default=REPEAT, help="repeats of each timed step")
    parser.add_argument("--dir", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    mode = "full" if args.full else "quick"
    n = args.rows or ROWS[mode]
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="state-store-") as tmp:
        result = figures(Path(tmp), n, args.repeat)
    settings = {
        "rows": n,
        "row": "name, type, ~300 characters of descriptions, a set of 5 text-unit ids",
        "repeat": args.repeat,
        "reads": READS,
        "changed_rows": CHANGED,
        "load_chunk": LOAD_CHUNK,
        "sqlite": sqlite3.sqlite_version,
        "rocksdict": version("rocksdict"),
        "rocksdb_options": "defaults",
    }
    record("state_store", mode, result, TARGETS, settings, MEASURES, path=args.out)


if __name__ == "__main__":
    main()
