"""The state store's errors, the record of a commit, how a map tells a value that cannot
change in place (``DiskMap.values_frozen``), the reads a frozen map holds, and the views of
its whole passes; apart so ``core.state_store`` and ``core.disk_map`` keep to the store and
its maps."""

from __future__ import annotations

import hashlib
import os
from collections.abc import ItemsView, Iterator, ValuesView
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from core.errors import KgragError


class StateStoreError(KgragError):
    """The state store cannot do what was asked; the message says why."""


class ForkedStoreError(StateStoreError):
    """A store was used in a process other than the one that opened it."""

    def __init__(self, path: Path, owner: int) -> None:
        super().__init__(
            f"{path} was opened by process {owner}, not this one ({os.getpid()}): an SQLite "
            "connection must not be used after fork; open a new StateStore(path) here"
        )
        self.path = path
        self.owner = owner


class CommitError(StateStoreError):
    """A commit failed and was rolled back: the store still holds the previous commit, and the
    uncommitted changes are still pending (``discard`` drops them)."""


class UnpicklableValueError(CommitError):
    """A value could not be pickled at commit; ``map_name`` and ``key`` say which."""

    def __init__(self, map_name: str, key: str, reason: BaseException) -> None:
        super().__init__(f"map {map_name!r}, key {key!r}: cannot pickle its value ({reason})")
        self.map_name = map_name
        self.key = key


@dataclass(frozen=True, slots=True)
class CommitStats:
    """What one commit wrote."""

    rows_written: int  # rows inserted or updated, over every map
    rows_deleted: int
    seconds: float


def digest_of(blob: bytes) -> bytes:
    return hashlib.blake2b(blob, digest_size=16).digest()


READ_DIGEST = b""  # the digest of a value read from a frozen map: it cannot have changed
_IMMUTABLE = (str, bytes, int, float, bool, type(None), tuple, frozenset)


def is_frozen(value: object) -> bool:
    """Whether ``value`` cannot change in place at its top level (its fields are the writer's
    promise: a frozen dataclass holding a list is not checked inside)."""
    if isinstance(value, _IMMUTABLE):
        return True
    params = getattr(type(value), "__dataclass_params__", None)
    return params is not None and bool(params.frozen)


V = TypeVar("V")
V_co = TypeVar("V_co", covariant=True)


class _Passes(Protocol[V_co]):
    def _pairs(self) -> Iterator[tuple[str, V_co]]: ...


class PassItems(ItemsView[str, V]):
    """A ``DiskMap``'s ``items()``, reading the map by batches of rows rather than a query per
    key."""

    _mapping: _Passes[V]

    def __iter__(self) -> Iterator[tuple[str, V]]:
        return self._mapping._pairs()


class PassValues(ValuesView[V]):
    """A ``DiskMap``'s ``values()``, read as ``PassItems`` reads."""

    _mapping: _Passes[V]

    def __iter__(self) -> Iterator[V]:
        return (value for _, value in self._mapping._pairs())


class HeldReads(Generic[V]):
    """The values a frozen map read from its file, the most recent only (kept across commits:
    a write or a removal lets a key's value go): at most
    ``cap`` of them and ``bytes_cap`` bytes of their pickles. A count alone let a map of large
    values (report bases of thousands of fingerprints) hold hundreds of MiB over a large
    run; the oldest read goes first, and is read again from the file if asked."""

    __slots__ = ("_bytes", "_sizes", "_values", "bytes_cap", "cap")

    def __init__(self, cap: int = 20_000, bytes_cap: int = 8 * 2**20) -> None:
        self._values: dict[str, V] = {}
        self._sizes: dict[str, int] = {}
        self._bytes = 0
        self.cap = cap
        self.bytes_cap = bytes_cap

    def __contains__(self, key: str) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __getitem__(self, key: str) -> V:
        return self._values[key]

    @property
    def bytes(self) -> int:
        """The pickled bytes of the values held."""
        return self._bytes

    def keep(self, key: str, value: V, size: int) -> None:
        """Hold ``value`` (``size`` bytes pickled), letting the oldest go past either cap."""
        self.drop(key)
        self._values[key], self._sizes[key] = value, size
        self._bytes += size
        while self._values and (len(self._values) > self.cap or self._bytes > self.bytes_cap):
            self.drop(next(iter(self._values)))

    def drop(self, key: str) -> None:
        """Let go of ``key``'s value, if held."""
        if key in self._values:
            del self._values[key]
            self._bytes -= self._sizes.pop(key)

    def clear(self) -> None:
        self._values.clear()
        self._sizes.clear()
        self._bytes = 0


class ThisProcess:
    """This process's id, set again in a forked child (``os.register_at_fork``): every map
    operation checks that its store was opened here, and an attribute costs less than a
    ``getpid()`` call (a million of them in a +40 run at 100,000 articles)."""

    pid = os.getpid()


def _forked() -> None:
    ThisProcess.pid = os.getpid()


os.register_at_fork(after_in_child=_forked)
