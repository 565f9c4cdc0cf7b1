"""An on-disk home for the community job's big maps, so memory follows what a run touches and a
save writes only the rows that changed.

A ``StateStore`` is one SQLite file (stdlib ``sqlite3``, write-ahead log, ``synchronous=NORMAL``),
a table per named map (rows ``(key, pickled value)``) and a ``meta`` table of pickled blobs. A
``DiskMap`` is a ``MutableMapping[str, V]`` over one table that code for a dict can keep using:

- **Order.** Keys iterate in first-insertion order, as a dict's do: stored rows in ``rowid``
  order (an update is an upsert, which keeps the row's ``rowid``), then the keys added since the
  last commit in the order they came. Deleting a key and adding it again moves it to the end.
- **In-place mutation.** Code does ``m[key].add(x)`` on a set held in the map. Every value read
  or written since the last commit is held in ``_loaded`` with a digest of its pickle taken when
  it was read; ``commit`` stores the written values and every read value whose pickle changed,
  then empties ``_loaded``. Values are pickled one by one (two that shared an object no longer
  do once read back).
- **Frozen values.** A map whose values cannot change in place (``values_frozen``: strings,
  numbers, tuples, frozensets and frozen dataclasses, checked as each value is written) skips
  that digest: a read value is only unpickled, and a commit pickles the values written, not
  the values read. Reading then costs one unpickle instead of an unpickle and two pickles,
  which is most of what a run over a large graph spends in the store. The values read are
  kept apart from the written ones, the most recent only (``HeldReads``: a count and a byte
  budget), so a run that reads a large part of the graph holds a bounded part of it.
- **Changed keys.** ``take_changes`` of a frozen map gives the keys written or removed since its
  previous call, so a reader that copies the map somewhere (the job's commit to the graph
  tables) can copy those alone; ``None`` when not known (the first call, or after a ``clear``
  or a ``discard``: copy everything).
- **Read-only use.** ``items()`` and ``values()`` behave as a dict's (each value read is held,
  since the caller may mutate it); ``scan()`` walks every pair in order without holding any, in
  batches, seeing uncommitted changes; ``peek()`` reads one key without holding it.

``StateStore.commit`` writes every map's pending rows and the meta puts in one SQLite
transaction, so a crash or an error mid-commit leaves the previous commit whole;
``StateStore.discard`` drops what was not committed (after a failed run, the next read sees the
last commit).

One thread: a store and its maps belong to the thread that opened the store (``sqlite3``
enforces it for the connection). One process: an SQLite connection must not be carried across
``fork``, so a store used in a forked child raises ``ForkedStoreError`` (a child opens its own).
Neither a store nor a map pickles: a whole-state pickle that reached one would miss its rows.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from core.disk_map import DiskMap as DiskMap
from core.state_parts import CommitError as CommitError
from core.state_parts import CommitStats as CommitStats
from core.state_parts import ForkedStoreError as ForkedStoreError
from core.state_parts import StateStoreError as StateStoreError
from core.state_parts import ThisProcess
from core.state_parts import UnpicklableValueError as UnpicklableValueError

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_JOURNAL_LIMIT = 64 * 1024 * 1024  # bytes the write-ahead log keeps after a checkpoint
_STREAM_CHUNK = 1 << 20  # bytes per write of a blob streamed into the database


class _BlobReader(io.RawIOBase):
    """An SQLite blob read as a raw stream (``io.BufferedReader`` adds what pickle needs)."""

    def __init__(self, blob: sqlite3.Blob) -> None:
        self._blob = blob

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._blob.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._blob.close()
        super().close()


class StateStore:
    """One SQLite file holding named maps (``map``) and small pickled blobs (``get_meta``).
    ``cache_mib``: SQLite's page cache, resident memory (hot index pages, recent rows)."""

    def __init__(self, path: Path, *, cache_mib: int = 16) -> None:
        self.path = Path(path)
        self._pid = os.getpid()
        self._conn: sqlite3.Connection | None = sqlite3.connect(self.path, isolation_level=None)
        self._conn.executescript(
            f"PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit "
            f"= {_JOURNAL_LIMIT}; PRAGMA cache_size = {-1024 * cache_mib}; CREATE TABLE IF NOT "
            "EXISTS meta (name TEXT PRIMARY KEY, value BLOB)"
        )
        self._maps: dict[str, DiskMap[Any]] = {}
        self._meta: dict[str, bytes] = {}
        self._meta_files: dict[str, Path] = {}  # large blobs written to a file, streamed in

    def _db(self) -> sqlite3.Connection:
        """The connection, once it is known to be open and this process's own."""
        if self._pid != ThisProcess.pid:
            raise ForkedStoreError(self.path, self._pid)
        if self._conn is None:
            raise StateStoreError(f"{self.path}: the store is closed")
        return self._conn

    def map(self, name: str) -> DiskMap[Any]:
        """The map ``name`` (its table made when new); the same object on every call."""
        db = self._db()
        if name in self._maps:
            return self._maps[name]
        if not _NAME.match(name) or name == "meta" or name.startswith("sqlite_"):
            raise StateStoreError(
                f"{name!r} cannot name a map: use lower-case letters, digits and '_', starting "
                "with a letter (not 'meta', not 'sqlite_…')"
            )
        db.execute(
            f'CREATE TABLE IF NOT EXISTS "{name}" (key TEXT PRIMARY KEY, value BLOB NOT NULL)'
        )
        self._maps[name] = DiskMap(self, name)
        return self._maps[name]

    def get_meta(self, name: str) -> bytes | None:
        """The blob last put under ``name`` (committed or not), else None."""
        db = self._db()
        if name in self._meta:
            return self._meta[name]
        if name in self._meta_files:
            return self._meta_files[name].read_bytes()
        row = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    def put_meta(self, name: str, blob: bytes) -> None:
        """Keep ``blob`` under ``name``; it is written by the next commit."""
        self._db()
        self._drop_meta_file(name)
        self._meta[name] = bytes(blob)

    @contextlib.contextmanager
    def meta_file(self, name: str) -> Iterator[BinaryIO]:
        """A file to write a large blob into (``pickle.dump``), kept under ``name`` by the next
        commit, which streams it into the database: the blob is never whole in memory, as a
        ``pickle.dumps`` of the job's state at 100,000 articles (165 MB, in a buffer grown by
        doubling) was. The file is removed at that commit, or at a discard."""
        self._db()
        self._meta.pop(name, None)
        self._drop_meta_file(name)
        path = self.path.with_name(f"{self.path.name}.{name}.pending")
        try:
            with open(path, "wb") as fh:
                yield fh
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        self._meta_files[name] = path

    def _drop_meta_file(self, name: str) -> None:
        path = self._meta_files.pop(name, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def open_meta(self, name: str) -> BinaryIO | None:
        """The committed blob ``name`` as a buffered stream read from the database piece by
        piece (``pickle.load`` takes it without the blob whole in memory), else None. Read it
        to the end and close it before the next commit, which may rewrite the row."""
        db = self._db()
        row = db.execute("SELECT rowid FROM meta WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        return io.BufferedReader(_BlobReader(db.blobopen("meta", "value", row[0], readonly=True)))

    def _write_meta_files(self, db: sqlite3.Connection) -> None:
        for name, path in self._meta_files.items():
            size = path.stat().st_size
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, zeroblob(?))", (name, size))
            (rowid,) = db.execute("SELECT rowid FROM meta WHERE name = ?", (name,)).fetchone()
            with db.blobopen("meta", "value", rowid) as blob, open(path, "rb") as fh:
                while chunk := fh.read(_STREAM_CHUNK):
                    blob.write(chunk)

    def commit(self) -> CommitStats:
        """Write every map's pending changes and the meta puts in one transaction, then clear
        the buffers. On an error the transaction is rolled back (the file keeps the previous
        commit), the changes stay pending and ``CommitError`` is raised."""
        db = self._db()
        started = time.perf_counter()
        written = deleted = 0
        db.execute("BEGIN IMMEDIATE")
        try:
            for each in self._maps.values():
                w, d = each._flush(db)
                written, deleted = written + w, deleted + d
            db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", self._meta.items())
            self._write_meta_files(db)
            db.execute("COMMIT")
        except BaseException as e:
            if db.in_transaction:
                db.execute("ROLLBACK")
            if isinstance(e, CommitError) or not isinstance(e, Exception):
                raise
            raise CommitError(f"{self.path}: commit rolled back: {e}") from e
        for each in self._maps.values():
            each._committed()
        self._meta.clear()
        for name in list(self._meta_files):
            self._drop_meta_file(name)
        return CommitStats(written, deleted, time.perf_counter() - started)

    def discard(self) -> None:
        """Drop every uncommitted change and every held value: the next read sees the last
        commit."""
        self._db()
        for each in self._maps.values():
            each._discard(keep_reads=True)  # values read from the file, which still holds them
            each._changes = None  # what changed since a take is not known any more
        self._meta.clear()
        for name in list(self._meta_files):
            self._drop_meta_file(name)

    def close(self) -> None:
        """Close the file; uncommitted changes are dropped. Closing twice is harmless."""
        if self._conn is not None:
            self._db().close()
            self._conn = None

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"a StateStore ({self.path}) cannot be pickled: keep its path instead")
