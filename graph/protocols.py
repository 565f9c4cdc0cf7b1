"""Small I/O protocols the pure logic is written against.

Concrete clients (the ``openai`` client, Weaviate, the snapshot directory) are built once at
start-up and passed in, so ``graph/`` never imports a network library.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from graph.versions.model import Snapshot

V = TypeVar("V")
D = TypeVar("D")


def peek(mapping: Mapping[str, V], key: str, default: D) -> V | D:
    """``mapping[key]``, else ``default``, for a caller that only reads the value: a map that
    offers ``peek`` (the job's on-disk ``core.disk_map.DiskMap``) then does not hold it until
    its next commit, so a read-only walk over much of the graph costs no lasting memory. The
    caller must not change the value in place."""
    look = getattr(mapping, "peek", None)
    return mapping.get(key, default) if look is None else look(key, default)


def values_at(mapping: Mapping[str, V], keys: Iterable[str]) -> dict[str, V]:
    """``mapping``'s value of each of ``keys`` it holds: by chunks of keys from a map that
    offers ``get_many`` (the job's on-disk ``DiskMap``), else key by key."""
    get_many = getattr(mapping, "get_many", None)
    if get_many is not None:
        return dict(get_many(keys))
    return {k: mapping[k] for k in keys if k in mapping}


class Peeked(Mapping[str, V]):
    """A read-only view of a mapping whose values are read with ``peek`` and remembered here
    while the view lives (one piece of work, then dropped): what it reads is neither held
    by the map until its commit nor read from disk twice."""

    def __init__(self, mapping: Mapping[str, V]) -> None:
        self._mapping = mapping
        self._read: dict[str, V] = {}

    def __getitem__(self, key: str) -> V:
        if key in self._read:
            return self._read[key]
        value = peek(self._mapping, key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        self._read[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._read or key in self._mapping

    def __iter__(self) -> Iterator[str]:
        return iter(self._mapping)

    def __len__(self) -> int:
        return len(self._mapping)


_ABSENT: Any = object()


@dataclass(frozen=True, slots=True)
class ChatResult:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # served from the persistent response cache, or shared with an identical request already
    # in flight: no model was asked for it, so its tokens were not spent again
    cached: bool = False


class LLM(Protocol):
    """A chat model. Implementations retry transient failures themselves and raise
    ``core.llm.LLMError`` when they give up."""

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> ChatResult: ...


class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension."""

    @property
    def dimensions(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class VectorHit:
    key: str  # the record's own id (chunk id, entity key, community id)
    distance: float
    properties: dict[str, Any]


class VectorStore(Protocol):
    """Upserts and nearest-neighbour search over one kind of record."""

    async def upsert(
        self, kind: str, items: Sequence[tuple[str, list[float], dict[str, Any]]]
    ) -> None: ...

    async def delete(self, kind: str, keys: Sequence[str]) -> None: ...

    async def search(
        self,
        kind: str,
        vector: list[float],
        limit: int,
        filters: dict[str, Any] | None = None,
        *,
        text: str | None = None,
    ) -> list[VectorHit]:
        """The nearest ``limit`` records; with ``text``, hybrid: the keyword (BM25) matches
        of ``text`` fused with the vector's neighbours."""
        ...


class SnapshotStore(Protocol):
    """Versioned, immutable graph versions: the graph tables (``core.tables``), and the
    snapshot directories of earlier releases (``core.tables.legacy_snapshots``, read to convert).

    Versions only go up: ``write`` of a version at or below the pointer's raises instead of
    moving the pointer back. ``load`` never returns a half-written snapshot.
    """

    def write(self, snapshot: Snapshot) -> object: ...

    def load(self, version: int | None = None) -> Snapshot: ...

    def latest_version(self) -> int | None: ...

    def next_version(self) -> int: ...

    def versions(self) -> list[int]: ...

    def pointer_stamp(self) -> tuple[int, int, int] | None: ...
