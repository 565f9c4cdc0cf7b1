"""The errors of the graph store: graph tables and the legacy snapshot directories alike.

One base (``SnapshotStoreError``) so a reader catches every store failure in one clause; the
legacy snapshot store raised the same classes, so callers need not tell the two apart.
"""

from __future__ import annotations

import functools
import typing
from pathlib import Path
from typing import Any, Protocol

from core.errors import KgragError
from core.object_store import one_line


class SnapshotStoreError(KgragError):
    """Base of the graph store's errors."""


class StaleSnapshotError(SnapshotStoreError):
    """A write would not move the pointer forward; the pointer was left where it was."""

    def __init__(self, version: int, current: int) -> None:
        super().__init__(
            f"snapshot version {version} is not newer than the published version {current}; "
            "another writer has moved on (take next_version() and rebuild)"
        )
        self.version = version
        self.current = current


class SnapshotNotFoundError(SnapshotStoreError):
    """No snapshot has been published yet, or the requested version was pruned."""


class SnapshotCorruptError(SnapshotStoreError):
    """A published snapshot or the pointer cannot be read back; names the file."""

    def __init__(self, path: Path, reason: str, table: str | None = None) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.table = table


class GraphTablesError(SnapshotStoreError):
    """A graph-table operation that cannot be done; says what to do."""


class GraphStoreUnavailableError(SnapshotStoreError):
    """The tables' storage could not be reached or refused a request (network, credentials)."""


def reject_stale(version: int, current: int | None) -> None:
    """Raise ``StaleSnapshotError`` unless ``version`` is above the ``current`` one."""
    if current is not None and version <= current:
        raise StaleSnapshotError(version, current)


class _Rooted(Protocol):
    root: str


_F = typing.TypeVar("_F", bound=typing.Callable[..., Any])


def storage_io(method: _F) -> _F:
    """Turn the ``OSError`` delta-rs and pyarrow raise for storage failures into a
    ``GraphStoreUnavailableError`` naming the tables and the reason in one line."""

    @functools.wraps(method)
    def wrapper(self: _Rooted, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OSError as err:
            raise GraphStoreUnavailableError(
                f"graph tables at {self.root} not reachable: {one_line(err)}"
            ) from err

    return typing.cast(_F, wrapper)
