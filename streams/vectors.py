"""Writing vectors to Weaviate from a stream: one batch's upserts and deletes, retried for as
long as Weaviate is unreachable.

An agent collects a batch's changes in a :class:`VectorWriter` (last write per key wins) and
flushes it before it asks for the next batch; :func:`until_done` retries a failed write with
backoff without ever giving up, so the agent does not move on, the offsets behind the batch are
not committed and nothing is lost. Upserts replace the object with the same deterministic UUID,
so a retry or a redelivery never adds a second copy.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from tenacity import AsyncRetrying, retry_if_exception, wait_exponential_jitter

from core.vector_store import VectorStoreError, WeaviateStore
from graph.protocols import Embedder

log = logging.getLogger(__name__)
T = TypeVar("T")


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, VectorStoreError) and exc.retryable


async def until_done(what: str, call: Callable[[], Awaitable[T]]) -> T:
    """Retry ``call`` with backoff for as long as Weaviate is unreachable."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(_retryable),
        wait=wait_exponential_jitter(multiplier=0.5, max=15),
        reraise=True,
    ):
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                log.warning("retrying %s (attempt %d)", what, attempt.retry_state.attempt_number)
            return await call()
    raise AssertionError("unreachable")  # pragma: no cover


class VectorWriter:
    """Collects one batch's upserts and deletes per kind, then writes them (last write wins)."""

    def __init__(self, store: Callable[[], Awaitable[WeaviateStore]], embedder: Embedder) -> None:
        self._store = store
        self._embedder = embedder
        self.upserts: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {}
        self.deletes: dict[str, set[str]] = {}

    def upsert(self, kind: str, key: str, text: str, props: dict[str, Any]) -> None:
        self.upserts.setdefault(kind, {})[key] = (text, props)
        self.deletes.get(kind, set()).discard(key)

    def delete(self, kind: str, key: str) -> None:
        self.upserts.get(kind, {}).pop(key, None)
        self.deletes.setdefault(kind, set()).add(key)

    async def flush(self) -> None:
        store = await self._store()
        for kind, rows in self.upserts.items():
            await self._upsert(store, kind, rows)
        for kind, gone in self.deletes.items():
            if gone:
                await self._delete(store, kind, sorted(gone))
        self.upserts.clear()
        self.deletes.clear()

    async def _upsert(
        self, store: WeaviateStore, kind: str, rows: dict[str, tuple[str, dict[str, Any]]]
    ) -> None:
        keys = list(rows)
        vectors = await self._embedder.embed([rows[k][0] for k in keys])
        items = [(k, v, rows[k][1]) for k, v in zip(keys, vectors, strict=True)]

        async def call() -> None:
            await store.upsert(kind, items)

        await until_done(f"{kind} upsert", call)

    async def _delete(self, store: WeaviateStore, kind: str, keys: Sequence[str]) -> None:
        async def call() -> None:
            await store.delete(kind, keys)

        await until_done(f"{kind} delete", call)
