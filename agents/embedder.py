"""Embedder agent: text units into Weaviate, in batches, with deterministic UUIDs.

If Weaviate is unreachable the batch is retried with backoff until it succeeds; the agent
does not move on, so the offsets behind the batch are not committed and nothing is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception, wait_exponential_jitter

from graph.hashing_embedding import HashingEmbedder
from graph.protocols import Embedder
from kgrag.vector_store import VectorStoreError, WeaviateStore
from streams.app import Topology
from streams.records import ChunkRecord

log = logging.getLogger(__name__)


def build_embedder(topo: Topology) -> Embedder:
    cfg = topo.settings.embeddings
    if cfg.base_url:
        from kgrag.llm import OpenAIEmbedder

        embedder: Embedder = OpenAIEmbedder(cfg)
        return embedder
    return HashingEmbedder(cfg.dimensions)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, VectorStoreError) and exc.retryable


async def upsert_text_units(
    store: WeaviateStore, embedder: Embedder, chunks: Sequence[ChunkRecord]
) -> None:
    unique = {c.id: c for c in chunks}
    records = list(unique.values())
    vectors = await embedder.embed([f"{c.title}\n{c.text}" for c in records])
    items = [
        (
            c.id,
            v,
            {
                "document_id": c.document_id,
                "title": c.title,
                "text": c.text,
                "published_at": c.published_at,
                "position": c.position,
                "n_tokens": c.n_tokens,
            },
        )
        for c, v in zip(records, vectors, strict=True)
    ]
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(_retryable),
        wait=wait_exponential_jitter(multiplier=0.5, max=15),
        reraise=True,
    ):
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                log.warning(
                    "retrying text-unit upsert (attempt %d)", attempt.retry_state.attempt_number
                )
            await store.upsert("text_unit", items)


def register(topo: Topology) -> None:
    state: dict[str, Any] = {}

    async def store() -> WeaviateStore:
        if "store" not in state:
            s = WeaviateStore(topo.settings)
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_retryable),
                wait=wait_exponential_jitter(multiplier=0.5, max=15),
                reraise=True,
            ):
                with attempt:
                    await s.connect()
            state["store"] = s
        store_: WeaviateStore = state["store"]
        return store_

    embedder = build_embedder(topo)

    @topo.app.agent(topo.chunks, name=f"{topo.settings.namespace}.embedder")
    async def embed_text_units(stream: Any) -> None:
        async for batch in stream.take(topo.settings.weaviate.batch_size, within=1.0):
            await upsert_text_units(await store(), embedder, batch)
