"""Basic search: hybrid (keyword and vector) search over text units (GraphRAG's baseline RAG)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graph.protocols import Embedder, VectorStore
from query.entity_names import keyword_query


@dataclass(frozen=True, slots=True)
class SourceHit:
    chunk_id: str
    document_id: str
    title: str
    text: str
    published_at: str
    distance: float


async def search_text_units(
    question: str,
    *,
    embedder: Embedder,
    store: VectorStore,
    limit: int = 10,
    filters: dict[str, Any] | None = None,
) -> list[SourceHit]:
    """The text units that best match the question, best first: Weaviate's hybrid search
    (BM25 over their titles and text fused with the vectors; ``weaviate.hybrid_alpha``), so
    a rare name or phrase finds its passage even where the embedding blurs it."""
    if not question.strip():
        raise ValueError("the question is empty")
    [vector] = await embedder.embed([question])
    keywords = keyword_query(question) or question
    hits = await store.search("text_unit", vector, limit, filters, text=keywords)
    return [
        SourceHit(
            chunk_id=h.key,
            document_id=str(h.properties.get("document_id", "")),
            title=str(h.properties.get("title", "")),
            text=str(h.properties.get("text", "")),
            published_at=str(h.properties.get("published_at", "")),
            distance=h.distance,
        )
        for h in hits
    ]
