"""Moving plain objects into a ``StateStore`` and back: a dict made a map (``to_disk``), and an
object holding ``DiskMap``s pickled with the maps by reference, their rows left in the store.

The community job keeps its large maps as tables of a ``StateStore`` and the rest of its state
as one pickled blob beside them. Pickle's persistent ids carry that: a map met while pickling
is written as its name, and an unpickler given the store puts the store's map of that name
back in its place, wherever the map was held (a field of the state, of its graph view, or
deeper). A map of another store, or an object refusing to pickle, fails loudly: a blob that
silently copied a map's rows would drift from the table.
"""

from __future__ import annotations

import io
import pickle
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from core.state_store import DiskMap, StateStore, StateStoreError

V = TypeVar("V")
_TAG = "diskmap"


class _MapPickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.store: StateStore | None = None

    def persistent_id(self, obj: Any) -> tuple[str, str] | None:
        if not isinstance(obj, DiskMap):
            return None
        if self.store is None:
            self.store = obj._store
        elif obj._store is not self.store:
            raise StateStoreError(f"map {obj.name!r} belongs to another store than the others")
        return (_TAG, obj.name)


def dumps_with_maps(obj: Any) -> bytes:
    """``obj`` pickled with every ``DiskMap`` it holds written as its name."""
    buffer = io.BytesIO()
    _MapPickler(buffer).dump(obj)
    return buffer.getvalue()


class StoreUnpickler(pickle.Unpickler):
    """Reads what ``dumps_with_maps`` wrote, with ``store``'s maps in place of their names;
    subclasses may override ``find_class`` (classes that moved module)."""

    def __init__(self, file: io.BytesIO, store: StateStore) -> None:
        super().__init__(file)
        self.store = store

    def persistent_load(self, pid: Any) -> DiskMap[Any]:
        if not (isinstance(pid, tuple) and len(pid) == 2 and pid[0] == _TAG):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        return self.store.map(str(pid[1]))


def read_meta(path: Path, name: str) -> bytes | None:
    """The committed blob ``name`` of the store at ``path``, read by a process that does not
    hold the store (read-only; the writer may be committing meanwhile)."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
    except sqlite3.OperationalError:  # no meta table yet: the store was never opened
        return None
    finally:
        conn.close()
    return None if row is None else bytes(row[0])


def to_disk(store: StateStore, name: str, mapping: Mapping[str, V]) -> DiskMap[V]:
    """The map ``name`` of ``store`` made to hold ``mapping`` alone, in its order (migrating a
    plain dict); written by the store's next commit, so several maps migrate in one."""
    disk: DiskMap[V] = store.map(name)
    disk.replace_all(mapping)
    return disk
