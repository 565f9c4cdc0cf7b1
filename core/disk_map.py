"""``DiskMap``: one map of a ``core.state_store.StateStore``, a table of ``(key, pickled value)``
rows that code written against a dict can keep using. The module docstring of
``core.state_store`` says how it keeps order, in-place changes, frozen values, changed keys
and read-only use; this module is the map, that one the file and its commit."""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import ItemsView, Iterable, Iterator, Mapping, MutableMapping, ValuesView
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

from core.state_parts import (
    READ_DIGEST,
    HeldReads,
    PassItems,
    PassValues,
    UnpicklableValueError,
    digest_of,
    is_frozen,
)

V = TypeVar("V")


class Store(Protocol):
    """What a map needs of its store (``core.state_store.StateStore``): the file's path and
    the connection, checked open and this process's own."""

    path: Path

    def _db(self) -> sqlite3.Connection: ...


_PROTOCOL = pickle.HIGHEST_PROTOCOL
_BATCH = 1000  # rows per query of a whole pass
_CHUNK = 500  # keys per ``IN (...)`` query (SQLite allows 32,766 parameters; old builds 999)


class DiskMap(MutableMapping[str, V]):
    """A dict-like map whose rows live in one table of a ``StateStore``; see the module's
    docstring for order, in-place mutation and whole passes. Keys are strings."""

    def __init__(self, store: Store, name: str) -> None:
        self.name = name
        self._store = store
        self._t = f'"{name}"'
        # every value read or written since the last commit, with the digest of its pickle
        # when read (None: written, stored at commit whatever it holds)
        self._loaded: dict[str, tuple[V, bytes | None]] = {}
        self._read: HeldReads[V] = HeldReads()  # of a frozen map: the latest values read
        self._new: dict[str, None] = {}  # keys appended since the last commit, in order
        self._deleted: set[str] = set()  # stored keys removed (some appended again since)
        self._cleared = False  # every stored row removed
        self._stored_count: int | None = None  # rows at the last commit, once counted
        self._delta = 0  # rows added minus rows removed since then (since the clear if cleared)
        self._version = 0  # bumped by every change of the key set, as a dict's iterators check
        self._commits = 0  # commits that wrote this map's rows: a pass re-reads after one
        # False: ``items()`` and ``values()`` read as ``scan()`` does, holding nothing (a map
        # whose whole passes only read: a pass costs no memory and adds nothing to a commit)
        self.passes_hold = True
        # True: values never change in place (see the module docstring); set before use
        self.values_frozen = False
        # keys written or removed since the last ``take_changes`` (None: not tracked since)
        self._changes: set[str] | None = None

    # ---- single keys ----

    def _in_db(self, key: str) -> bool:
        """Whether ``key`` is stored and not removed since (the key index only)."""
        if self._cleared or key in self._deleted:
            return False
        sql = f"SELECT 1 FROM {self._t} WHERE key = ?"
        return self._store._db().execute(sql, (key,)).fetchone() is not None

    def _keep(self, key: str, blob: bytes) -> V:
        """``blob`` unpickled and held with the digest of its pickle, so a later in-place
        change is seen at commit."""
        value: V = pickle.loads(blob)
        if self.values_frozen:
            self._read.keep(key, value, len(blob))
            return value
        self._loaded[key] = (value, digest_of(pickle.dumps(value, _PROTOCOL)))
        return value

    def _held(self, key: str) -> bool:
        return key in self._loaded or key in self._read

    def _changed(self, key: str) -> None:
        if self._changes is not None:
            self._changes.add(key)

    def take_changes(self) -> set[str] | None:
        """The keys written or removed since the previous call, and start collecting afresh;
        None when not known: the first call, after ``clear`` or the store's ``discard``, or a
        map whose values may change in place (a change by mutation has no key to record)."""
        changes = self._changes if self.values_frozen else None
        self._changes = set() if self.values_frozen else None
        return changes

    def _check_frozen(self, key: str, value: V) -> None:
        if self.values_frozen and not is_frozen(value):
            raise TypeError(
                f"map {self.name!r} holds frozen values; key {key!r} was given a "
                f"{type(value).__name__}, which can change in place"
            )

    def _add(self, key: str, value: V) -> None:
        """``key``, absent now, added at the end."""
        if not isinstance(key, str):
            raise TypeError(f"map {self.name!r} takes str keys, not {type(key).__name__}")
        self._check_frozen(key, value)
        self._changed(key)
        self._new[key] = None
        self._loaded[key] = (value, None)
        self._delta += 1
        self._version += 1

    def __contains__(self, key: object) -> bool:
        self._store._db()
        if not isinstance(key, str):
            return False
        return self._held(key) or self._in_db(key)

    def __getitem__(self, key: str) -> V:
        return self._get(key, hold=True)

    def peek(self, key: str, default: Any = None) -> Any:
        """``key``'s value, else ``default``, for a caller that only reads it: a map whose
        values change in place does not hold it until the commit (nor digest it), so a
        read-only walk over much of the graph costs no memory past its own use."""
        try:
            return self._get(key, hold=self.values_frozen)
        except KeyError:
            return default

    def _get(self, key: str, *, hold: bool) -> V:
        db = self._store._db()
        if key in self._loaded:
            return self._loaded[key][0]
        if key in self._read:
            return self._read[key]
        if not isinstance(key, str) or self._cleared or key in self._deleted:
            raise KeyError(key)
        row = db.execute(f"SELECT value FROM {self._t} WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return self._keep(key, row[0]) if hold else pickle.loads(row[0])

    def __setitem__(self, key: str, value: V) -> None:
        self._store._db()
        self._check_frozen(key, value)
        if self._held(key) or (isinstance(key, str) and self._in_db(key)):
            self._read.drop(key)
            self._loaded[key] = (value, None)
            self._changed(key)
        else:
            self._add(key, value)

    def __delitem__(self, key: str) -> None:
        self._store._db()
        if key in self._new:
            del self._new[key]
        elif self._held(key) or (isinstance(key, str) and self._in_db(key)):
            self._deleted.add(key)
        else:
            raise KeyError(key)
        self._changed(key)
        self._loaded.pop(key, None)
        self._read.drop(key)
        self._delta -= 1
        self._version += 1

    def __len__(self) -> int:
        db = self._store._db()
        if self._cleared:
            return self._delta
        if self._stored_count is None:
            self._stored_count = int(db.execute(f"SELECT COUNT(*) FROM {self._t}").fetchone()[0])
        return self._stored_count + self._delta

    # ---- many keys ----

    def _stored_of(self, keys: list[str]) -> Iterator[tuple[str, bytes]]:
        """(key, pickle) of those of ``keys`` that are stored and not removed, by chunks."""
        if self._cleared:
            return
        keys = [k for k in keys if isinstance(k, str) and k not in self._deleted]
        db = self._store._db()
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i : i + _CHUNK]
            sql = f"SELECT key, value FROM {self._t} WHERE key IN ({','.join('?' * len(chunk))})"
            yield from db.execute(sql, chunk)

    def get_many(self, keys: Iterable[str]) -> dict[str, V]:
        """The values of those of ``keys`` present (absent ones left out), in the order asked,
        each held like a value read by ``m[key]``; read by chunks of keys, not key by key."""
        self._store._db()
        wanted = list(dict.fromkeys(keys))
        out = {k: self[k] for k in wanted if self._held(k)}
        for key, blob in self._stored_of([k for k in wanted if k not in out]):
            out[key] = self._keep(key, blob)  # kept here too: the cap may drop it meanwhile
        return {k: out[k] for k in wanted if k in out}

    def update(self, other: Any = (), /, **kwds: V) -> None:
        """As ``dict.update`` (a mapping or pairs, then keywords), looking up which keys are
        stored by chunks of keys."""
        self._store._db()
        pairs = list(other.items() if isinstance(other, Mapping) else other) + list(kwds.items())
        unknown = [k for k, _ in pairs if not self._held(k)]
        stored = {k for k, _ in self._stored_of(unknown)} if unknown else set()
        for key, value in pairs:
            self._check_frozen(key, value)
            if self._held(key) or key in stored:
                self._read.drop(key)
                self._loaded[key] = (value, None)
                self._changed(key)
            else:
                self._add(key, value)

    def clear(self) -> None:
        self._store._db()
        self._discard()
        self._changes = None
        self._cleared = True
        self._version += 1

    def replace_all(self, mapping: Mapping[str, V]) -> None:
        """Make the map hold ``mapping``'s pairs alone, in its order (written at commit)."""
        self.clear()
        for key, value in mapping.items():
            self._add(key, value)

    def popitem(self) -> tuple[str, V]:
        """Remove and return the last pair, as ``dict.popitem`` does."""
        self._store._db()
        key = next(reversed(self._new)) if self._new else self._last_stored()
        value = self[key]
        del self[key]
        return key, value

    def _last_stored(self) -> str:
        if not self._cleared:
            rows = self._store._db().execute(f"SELECT key FROM {self._t} ORDER BY rowid DESC")
            for (key,) in rows:  # stepped lazily: stops at the first key not removed
                if key not in self._deleted:
                    return str(key)
        raise KeyError(f"popitem(): map {self.name!r} is empty")

    # ---- whole passes ----

    def _walk(self, values: bool) -> Iterator[tuple[str, bytes | None]]:
        """Every present key in order, with its stored pickle when ``values`` and the value is
        not held (a held value wins: it may be newer). Reads by batches of rows; raises
        RuntimeError, as a dict's iterator does, once the key set changes between steps."""
        version = self._version
        column = "value" if values else "NULL"
        last = 0
        while not self._cleared:
            sql = (
                f"SELECT rowid, key, {column} FROM {self._t} WHERE rowid > ? "
                f"ORDER BY rowid LIMIT {_BATCH}"
            )
            rows = self._store._db().execute(sql, (last,)).fetchall()
            commits = self._commits
            for rowid, key, blob in rows:
                if self._commits != commits:
                    break  # a commit may have rewritten the rest of this batch: read it again
                last = rowid
                if key not in self._deleted:
                    yield key, (None if key in self._loaded else blob)
                    self._unchanged(version)
            else:
                if len(rows) < _BATCH:
                    break
        for key in self._new:
            yield key, None
            self._unchanged(version)

    def _unchanged(self, version: int) -> None:  # a dict's iterator checks the same
        if self._version != version:
            raise RuntimeError(f"map {self.name!r} changed its keys during iteration")

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._walk(values=False))

    def _pairs(self) -> Iterator[tuple[str, V]]:
        """Every pair in order, each value held as ``m[key]`` holds it (unless not
        ``passes_hold``)."""
        if not self.passes_hold:
            yield from self.scan()
            return
        for key, blob in self._walk(values=True):
            yield key, (self._loaded[key][0] if blob is None else self._keep(key, blob))

    def scan(self) -> Iterator[tuple[str, V]]:
        """Every pair in order, uncommitted changes included, holding none of the values it
        unpickles: for read-only passes over the whole map. A value changed in place through
        ``scan`` is not seen by commit; read it with ``m[key]`` to change it."""
        for key, blob in self._walk(values=True):
            yield key, (self._loaded[key][0] if blob is None else pickle.loads(blob))

    def items(self) -> ItemsView[str, V]:
        return PassItems(self)

    def values(self) -> ValuesView[V]:
        return PassValues(self)

    def to_dict(self) -> dict[str, V]:
        """A plain dict of every pair, in order (values held since the last commit are the
        same objects; the others are fresh copies)."""
        return dict(self.scan())

    # ---- commit ----

    def _pickle(self, key: str, value: V) -> bytes:
        try:
            return pickle.dumps(value, _PROTOCOL)
        except Exception as e:
            raise UnpicklableValueError(self.name, key, e) from e

    def _updates(self) -> Iterator[tuple[str, bytes]]:
        """Stored keys whose value was written, or changed in place since it was read."""
        for key, (value, digest) in self._loaded.items():
            if key not in self._new and digest != READ_DIGEST:
                blob = self._pickle(key, value)
                if digest is None or digest_of(blob) != digest:
                    yield key, blob

    def _flush(self, db: sqlite3.Connection) -> tuple[int, int]:
        """Write the pending changes inside the store's transaction: (rows written, deleted)."""
        deleted = 0
        if self._cleared:
            deleted = db.execute(f"DELETE FROM {self._t}").rowcount
        elif self._deleted:
            sql = f"DELETE FROM {self._t} WHERE key = ?"
            deleted = db.executemany(sql, ((k,) for k in self._deleted)).rowcount
        upsert = (
            f"INSERT INTO {self._t} (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        )
        written = db.executemany(upsert, self._updates()).rowcount
        inserts = ((k, self._pickle(k, self._loaded[k][0])) for k in self._new)
        sql = f"INSERT INTO {self._t} (key, value) VALUES (?, ?)"
        written += db.executemany(sql, inserts).rowcount
        return written, deleted

    def _committed(self) -> None:
        if self._cleared:
            self._stored_count = self._delta
        elif self._stored_count is not None:
            self._stored_count += self._delta
        self._commits += 1
        self._discard(keep_reads=True)

    def _discard(self, *, keep_reads: bool = False) -> None:
        """Forget what changed since the last commit. ``keep_reads``: the values of a frozen
        map read from its file stay held (they are what the file holds: a write or a removal
        lets a key's go), so the next run reads a hub's facts once, not once per run."""
        if self._cleared or self._new or self._deleted:
            self._version += 1
        self._loaded.clear()
        if not keep_reads:
            self._read.clear()
        self._new.clear()
        self._deleted.clear()
        self._cleared = False
        self._delta = 0

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            f"DiskMap {self.name!r} cannot be pickled: its rows live in {self._store.path}; "
            "commit the store and keep its path, or pickle to_dict() for a plain copy"
        )
