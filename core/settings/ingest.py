"""Ingest settings: how documents are cut into chunks and what extraction looks for."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, field_validator, model_validator


class ChunkingSettings(BaseModel):
    size: int = Field(600, ge=16, le=32_000, description="Tokens per chunk")
    overlap: int = Field(100, ge=0, description="Tokens shared by consecutive chunks")
    encoding: str = Field("o200k_base", description="tiktoken encoding")
    max_document_chars: int = Field(
        500_000, ge=100, description="Documents longer than this go to the dead-letter topic"
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkingSettings:
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, v: str) -> str:
        if v not in {"o200k_base", "cl100k_base"}:
            raise ValueError("encoding must be o200k_base or cl100k_base (shipped offline)")
        return v


class ExtractionSettings(BaseModel):
    entity_types: list[str] = Field(
        default_factory=lambda: ["organization", "person", "geo", "event"],
        description="Entity types the extractor looks for",
    )
    max_gleanings: int = Field(1, ge=0, le=10, description="Gleaning rounds after the first")
    parse_attempts: int = Field(
        5,
        ge=1,
        le=10,
        description="Times a turn of a chunk's extraction is asked while the answer does not "
        "parse (garbled output); a first answer still garbled then sends the chunk to the "
        "dead-letter topic, a gleaning counts as nothing more. A model garbling one answer "
        "in twenty loses a turn once in 3.2 million with 5",
    )
    claims_enabled: bool = Field(False, description="Extract claims (covariates)")
    claim_entity_specification: str = Field(
        "organization, person", description="Which entities claims are about"
    )
    claim_description: str = Field(
        "Any claims or facts that could be relevant to information discovery.",
        description="What counts as a claim",
    )
    prompts_dir: Path | None = Field(
        None, description="Directory whose <name>.txt files override the shipped prompts"
    )
    max_descriptions: int = Field(
        12, ge=1, le=1000, description="Distinct descriptions kept per entity/relationship"
    )
    batch_size: int = Field(
        32, ge=1, le=10_000, description="Chunks extracted concurrently per batch"
    )
