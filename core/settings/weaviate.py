"""Weaviate settings: where the vector store listens and how hybrid search weighs its sides."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator


class WeaviateSettings(BaseModel):
    url: str = Field("http://127.0.0.1:18080", description="Weaviate HTTP endpoint")
    grpc_port: int = Field(15051, ge=1, le=65535, description="Weaviate gRPC port")
    api_key: str | None = Field(None, description="API key, when the server requires one")
    batch_size: int = Field(100, ge=1, le=10_000, description="Objects per upsert batch")
    hybrid_alpha: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Weight of the vector side in hybrid search (basic search's text units, "
        "local search's entities and the order of their sources): 0 keywords only (BM25), 1 "
        "vectors only. Unset: 0.1 with the offline hashing embedder, whose vectors only blur "
        "what BM25 already matches, and 0.5 with an embedding model (embeddings.base_url)",
    )
    hybrid_fusion: Literal["relative_score", "ranked"] = Field(
        "relative_score",
        description="How hybrid search fuses its keyword and vector hits: relative_score "
        "(each side's scores scaled to [0, 1], then weighted) or ranked (reciprocal rank)",
    )

    @field_validator("url")
    @classmethod
    def _check_url(cls, v: str) -> str:
        if not re.match(r"^https?://[^:/]+(:\d+)?/?$", v):
            raise ValueError(f"expected http(s)://host[:port], got {v!r}")
        return v.rstrip("/")

    @property
    def host(self) -> str:
        return self.url.split("://", 1)[1].split(":")[0].rstrip("/")

    @property
    def http_port(self) -> int:
        rest = self.url.split("://", 1)[1]
        if ":" in rest:
            return int(rest.split(":")[1].rstrip("/"))
        return 443 if self.url.startswith("https") else 80
