"""Serving settings: the query service, DRIFT search's budgets and the worker's metrics."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DriftSettings(BaseModel):
    """DRIFT search (``query.drift_search``): how wide and how deep it goes, and its budgets.
    A question costs at most ``primer_folds + depth * followups + 1`` LLM calls."""

    primer_k: int = Field(5, ge=1, le=50, description="Community reports the primer reads")
    primer_folds: int = Field(
        1, ge=1, le=10, description="Primer calls the matched reports are split over"
    )
    followups: int = Field(
        3, ge=1, le=20, description="Follow-up questions answered per step (breadth)"
    )
    depth: int = Field(2, ge=0, le=5, description="Steps of follow-ups (0: the primer alone)")
    primer_max_tokens: int = Field(
        8_000, ge=200, description="Report tokens given to each primer call"
    )
    local_max_tokens: int = Field(
        8_000, ge=200, description="Local-search context tokens of each follow-up"
    )
    reduce_max_tokens: int = Field(
        8_000, ge=200, description="Intermediate-answer tokens given to the reduce call"
    )
    max_answer_tokens: int = Field(
        1_500, ge=50, description="Longest answer of the primer and of each follow-up"
    )
    concurrency: int = Field(4, ge=1, le=64, description="Follow-ups answered at once")


class ApiSettings(BaseModel):
    host: str = Field("127.0.0.1", description="Query service bind address")
    port: int = Field(8000, ge=1, le=65535, description="Query service port")
    api_key: str | None = Field(None, description="Require this key in X-API-Key when set")
    max_question_chars: int = Field(4000, ge=10, description="Longest question accepted")
    max_request_bytes: int = Field(1_000_000, ge=1024, description="Largest request body")
    malloc_arenas: int = Field(
        2,
        ge=0,
        description="glibc malloc arenas for the query service (core/malloc.py); 0 leaves the "
        "C library's default (8 per core), which keeps more freed pages",
    )


class WorkerSettings(BaseModel):
    metrics_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Serve the stream worker's Prometheus metrics (GET /metrics: extraction "
        "tokens and cost, LLM calls) on this port; unset: not served. One port per worker on "
        "a host",
    )
    metrics_host: str = Field("127.0.0.1", description="Bind address of the worker's metrics")
