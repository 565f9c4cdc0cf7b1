"""Moving plain objects into a ``StateStore`` and out of it: a dict made a map (``to_disk``,
migrating an earlier version's data), and a committed blob read by a process that does not
hold the store (``read_meta``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

from core.state_store import DiskMap, StateStore

V = TypeVar("V")


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
