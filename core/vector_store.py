"""Weaviate as the vector store for text units, entities, relationships and reports.

One collection per kind and namespace (``TextUnit_<ns>``…), bring-your-own vectors
(``self_provided``, cosine HNSW). Object UUIDs are uuid5 of the record's key, so a
redelivered upsert replaces the same object instead of adding a second one.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import weaviate
from weaviate.classes.config import Configure, DataType, Property, VectorDistances
from weaviate.classes.data import DataObject
from weaviate.classes.init import AdditionalConfig, Auth, Timeout
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery

from core.errors import KgragError
from core.settings import Settings
from graph.protocols import VectorHit

log = logging.getLogger(__name__)

_NS = uuid.UUID("6f1c7a52-4b8e-4d0e-9d7a-2f7c1a9b3e10")
VECTOR = "default"
# Weaviate's gRPC batch refuses a message over about 100 MB; a first community run over a large
# history upserts every report at once, so writes go in parts well under that.
BATCH_BYTES = 16 * 1024 * 1024


def batches_by_size(sizes: Sequence[int], limit: int = BATCH_BYTES) -> list[range]:
    """Consecutive index ranges each summing to at most ``limit`` (one item at the least)."""
    out: list[range] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start and total + size > limit:
            out.append(range(start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


def _estimated_bytes(vector: Sequence[float], props: dict[str, Any]) -> int:
    """A generous estimate of one object's wire size: packed floats, text and key overhead."""
    return 64 + 8 * len(vector) + sum(len(str(k)) + len(str(v)) * 4 for k, v in props.items())


# The text a hybrid search matches its keywords in, per kind (BM25F over several). A text
# unit's keywords are matched in its text alone: headlines are short, so BM25F's length
# normalisation makes a headline word outweigh the body, and one headline naming a person
# beats ten articles on what the question asks (bench/retrieval.py, nDCG@10 on 247 Reuters
# questions: text 0.59, text + title at a quarter weight 0.57, text + title 0.51). The title
# still counts through the unit's vector, which embeds the title and the text.
# Tokenization is Weaviate's "word" (lower-cased runs of letters and digits) on both sides,
# which suits news: "U.S." and "u.s." meet, "Baker's" holds "baker", "money-supply" holds
# "money" and "supply", tickers keep their letters; what the question adds (its frame, its
# stop words) is left out before it is sent (``query.entity_names.keyword_query``).
KEYWORD_PROPERTIES: dict[str, list[str]] = {
    "text_unit": ["text"],
    "entity": ["name", "description"],
    "relationship": ["source", "target", "description"],
    "report": ["title", "summary"],
}

FUSION = {"relative_score": HybridFusion.RELATIVE_SCORE, "ranked": HybridFusion.RANKED}

SCHEMAS: dict[str, list[Property]] = {
    "text_unit": [
        Property(name="key", data_type=DataType.TEXT),
        Property(name="document_id", data_type=DataType.TEXT),
        Property(name="title", data_type=DataType.TEXT),
        Property(name="text", data_type=DataType.TEXT),
        Property(name="published_at", data_type=DataType.DATE),
        Property(name="position", data_type=DataType.INT),
        Property(name="n_tokens", data_type=DataType.INT),
    ],
    "entity": [
        Property(name="key", data_type=DataType.TEXT),
        Property(name="name", data_type=DataType.TEXT),
        Property(name="type", data_type=DataType.TEXT),
        Property(name="description", data_type=DataType.TEXT),
    ],
    "relationship": [
        Property(name="key", data_type=DataType.TEXT),
        Property(name="source", data_type=DataType.TEXT),
        Property(name="target", data_type=DataType.TEXT),
        Property(name="description", data_type=DataType.TEXT),
    ],
    "report": [
        Property(name="key", data_type=DataType.TEXT),
        Property(name="level", data_type=DataType.INT),
        Property(name="title", data_type=DataType.TEXT),
        Property(name="summary", data_type=DataType.TEXT),
    ],
}


class VectorStoreError(KgragError):
    """Weaviate refused or could not be reached; ``retryable`` tells whether to wait and retry."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def object_uuid(kind: str, key: str) -> str:
    return str(uuid.uuid5(_NS, f"{kind}:{key}"))


class WeaviateStore:
    """graph.protocols.VectorStore over an async Weaviate client."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        w = settings.weaviate
        auth = Auth.api_key(w.api_key) if w.api_key else None
        self._client = weaviate.use_async_with_local(
            host=w.host,
            port=w.http_port,
            grpc_port=w.grpc_port,
            auth_credentials=auth,
            additional_config=AdditionalConfig(timeout=Timeout(init=10, query=30, insert=60)),
            skip_init_checks=True,
        )
        self._ready: set[str] = set()
        self._lock = asyncio.Lock()

    async def connect(self) -> None:
        try:
            await self._client.connect()
        except Exception as e:  # the client raises several unrelated types here
            await self._client.close()  # half-open: closed, or it warns when collected
            raise VectorStoreError(
                f"cannot reach Weaviate at {self._settings.weaviate.url}: {e}", retryable=True
            ) from e

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> WeaviateStore:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def collection_name(self, kind: str) -> str:
        if kind not in SCHEMAS:
            raise ValueError(f"unknown vector kind {kind!r}; expected one of {sorted(SCHEMAS)}")
        return self._settings.collection(kind)

    async def ensure_collection(self, kind: str) -> None:
        name = self.collection_name(kind)
        if name in self._ready:
            return
        async with self._lock:
            if name in self._ready:
                return
            try:
                if not await self._client.collections.exists(name):
                    await self._client.collections.create(
                        name,
                        properties=SCHEMAS[kind],
                        vector_config=Configure.Vectors.self_provided(
                            name=VECTOR,
                            vector_index_config=Configure.VectorIndex.hnsw(
                                distance_metric=VectorDistances.COSINE
                            ),
                        ),
                    )
            except Exception as e:
                if "already exists" not in str(e):
                    raise VectorStoreError(
                        f"creating collection {name}: {e}", retryable=True
                    ) from e
            self._ready.add(name)

    async def upsert(
        self, kind: str, items: Sequence[tuple[str, list[float], dict[str, Any]]]
    ) -> None:
        if not items:
            return
        await self.ensure_collection(kind)
        col = self._client.collections.get(self.collection_name(kind))
        objects = [
            DataObject(
                uuid=object_uuid(kind, key),
                properties={**props, "key": key},
                vector={VECTOR: vector},
            )
            for key, vector, props in items
        ]
        sizes = [_estimated_bytes(vector, props) for _, vector, props in items]
        for part in batches_by_size(sizes):
            try:
                result = await col.data.insert_many(objects[part.start : part.stop])
            except Exception as e:
                raise VectorStoreError(f"upsert into {col.name} failed: {e}", retryable=True) from e
            if result.errors:
                first = next(iter(result.errors.values()))
                raise VectorStoreError(
                    f"{len(result.errors)} of {len(objects)} objects rejected by {col.name}: "
                    f"{first.message}",
                    retryable=False,
                )

    async def delete(self, kind: str, keys: Sequence[str]) -> None:
        if not keys:
            return
        await self.ensure_collection(kind)
        col = self._client.collections.get(self.collection_name(kind))
        ids = [object_uuid(kind, k) for k in keys]
        try:
            await col.data.delete_many(where=Filter.by_id().contains_any(ids))
        except Exception as e:
            raise VectorStoreError(f"delete from {col.name} failed: {e}", retryable=True) from e

    async def search(
        self,
        kind: str,
        vector: list[float],
        limit: int,
        filters: dict[str, Any] | None = None,
        *,
        text: str | None = None,
    ) -> list[VectorHit]:
        await self.ensure_collection(kind)
        col = self._client.collections.get(self.collection_name(kind))
        where = _filters(filters)
        try:
            if text is not None and text.strip():
                res = await col.query.hybrid(
                    query=text,
                    vector=vector,
                    alpha=self._settings.hybrid_alpha,
                    fusion_type=FUSION[self._settings.weaviate.hybrid_fusion],
                    query_properties=KEYWORD_PROPERTIES[kind],
                    target_vector=VECTOR,
                    limit=limit,
                    filters=where,
                    return_metadata=MetadataQuery(score=True),
                )
                return [
                    VectorHit(
                        key=str(o.properties.get("key")),
                        # a fused score in [0, 1], best 1: as a distance, best 0
                        distance=1.0 - float(o.metadata.score or 0.0),
                        properties=dict(o.properties),
                    )
                    for o in res.objects
                ]
            res = await col.query.near_vector(
                near_vector=vector,
                target_vector=VECTOR,
                limit=limit,
                filters=where,
                return_metadata=MetadataQuery(distance=True),
            )
        except Exception as e:
            if "non-existing index" in str(e):
                # created moments ago (by this search or a writer) and its shard not loaded
                # yet: there is nothing in it to find
                return []
            raise VectorStoreError(f"search in {col.name} failed: {e}", retryable=True) from e
        return [
            VectorHit(
                key=str(o.properties.get("key")),
                distance=float(o.metadata.distance if o.metadata.distance is not None else 1.0),
                properties=dict(o.properties),
            )
            for o in res.objects
        ]

    async def count(self, kind: str) -> int:
        await self.ensure_collection(kind)
        col = self._client.collections.get(self.collection_name(kind))
        agg = await col.aggregate.over_all(total_count=True)
        return int(agg.total_count or 0)

    async def keys(self, kind: str) -> list[str]:
        """Every object's ``key`` in a kind's collection, duplicates kept (a list, not a set):
        for audits that compare what Weaviate holds with the graph."""
        await self.ensure_collection(kind)
        col = self._client.collections.get(self.collection_name(kind))
        return [str(o.properties["key"]) async for o in col.iterator(return_properties=["key"])]

    async def vectors(self, kind: str) -> dict[str, list[float]]:
        """Every object's vector by its ``key`` (exports: the last written of duplicates)."""
        await self.ensure_collection(kind)
        col = self._client.collections.get(self.collection_name(kind))
        out: dict[str, list[float]] = {}
        try:
            async for o in col.iterator(include_vector=True, return_properties=["key"]):
                vector: Any = o.vector.get(VECTOR) if isinstance(o.vector, dict) else o.vector
                if vector:
                    out[str(o.properties["key"])] = [float(x) for x in vector]
        except Exception as e:
            raise VectorStoreError(f"reading vectors of {col.name}: {e}", retryable=True) from e
        return out

    async def drop_namespace(self) -> None:
        """Delete every collection of this namespace (tests and demo resets)."""
        for kind in SCHEMAS:
            name = self.collection_name(kind)
            if await self._client.collections.exists(name):
                await self._client.collections.delete(name)
        self._ready.clear()


def _filters(filters: dict[str, Any] | None) -> Any:
    """``{"published_at": (since, until), "document_id": "x"}`` → a Weaviate filter."""
    if not filters:
        return None
    parts = []
    for name, value in filters.items():
        prop = Filter.by_property(name)
        if isinstance(value, tuple):
            lo, hi = value
            if lo is not None:
                parts.append(prop.greater_or_equal(lo))
            if hi is not None:
                parts.append(prop.less_or_equal(hi))
        elif isinstance(value, list):
            parts.append(prop.contains_any(value))
        else:
            parts.append(prop.equal(value))
    if not parts:
        return None
    return Filter.all_of(parts) if len(parts) > 1 else parts[0]
