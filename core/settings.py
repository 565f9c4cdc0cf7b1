"""One settings tree for every process kafka-graphrag starts.

Values come, highest priority first, from keyword arguments, environment variables
(``KGRAG_`` prefix, ``__`` between nested names, e.g. ``KGRAG_KAFKA__PARTITIONS=16``), an
optional YAML file (``KGRAG_CONFIG=path.yaml``) and the defaults below. Each function is
handed only the section it needs; nothing reads ``os.environ`` at import time.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from core.errors import ConfigError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-graphrag"


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kafka-graphrag"


class TopicNames(BaseModel):
    """Base topic names; the namespace is prepended to each (see ``Settings.topic``)."""

    documents: str = Field("documents", description="Incoming articles, keyed by document id")
    documents_dlq: str = Field("documents.dlq", description="Documents that could not be processed")
    chunks: str = Field("chunks", description="Text units cut from documents")
    extractions: str = Field("extractions", description="Per-chunk extraction results")
    extractions_dlq: str = Field("extractions.dlq", description="Chunks whose extraction failed")
    entity_items: str = Field("entity-items", description="Extraction items keyed by entity")
    relationship_items: str = Field(
        "relationship-items", description="Extraction items keyed by relationship"
    )
    claim_items: str = Field("claim-items", description="Claims keyed by subject entity")
    graph_changes: str = Field("graph-changes", description="Merged graph deltas for the job")
    community_events: str = Field("community-events", description="Community lineage events")


class KafkaSettings(BaseModel):
    bootstrap_servers: str = Field(
        "127.0.0.1:19092", description="Comma-separated host:port list of Kafka brokers"
    )
    partitions: int = Field(
        8,
        ge=1,
        le=1024,
        description="Partitions per topic; faust tables cannot be repartitioned, so choose "
        "room for as many workers as you will ever run",
    )
    replication_factor: int = Field(1, ge=1, description="Replication factor for new topics")
    topics: TopicNames = Field(default_factory=lambda: TopicNames())
    max_message_bytes: int = Field(1_000_000, ge=1024, description="Largest message accepted")
    processing_guarantee: Literal["at_least_once", "exactly_once"] = Field(
        "at_least_once", description="faust processing guarantee"
    )
    batch_within_s: float = Field(
        0.1,
        gt=0,
        le=10,
        description="Longest a stream agent waits to fill a batch before processing what it "
        "has: each stage adds up to this to an article's way to search; under load batches "
        "fill to their size first",
    )
    instance_id: str | None = Field(
        None,
        description="This worker's static group membership id (Kafka group.instance.id), "
        "unique per worker and stable across its restarts (e.g. a StatefulSet pod name): a "
        "worker restarted after a crash takes its partitions back at once instead of after "
        "the dead member's session times out. Unset: dynamic membership",
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _check_servers(cls, v: str) -> str:
        for part in v.split(","):
            host, sep, port = part.strip().rpartition(":")
            if not sep or not host or not (port.isascii() and port.isdigit()):
                raise ValueError(f"expected host:port[,host:port...], got {part!r}")
        return v


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


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    input_per_million: float = Field(0.0, ge=0)
    output_per_million: float = Field(0.0, ge=0)


def cost_usd(price: ModelPrice | None, prompt_tokens: int, completion_tokens: int) -> float:
    """What the tokens cost at ``price`` (None: not priced, 0), in US dollars."""
    if price is None:
        return 0.0
    total = prompt_tokens * price.input_per_million + completion_tokens * price.output_per_million
    return round(total / 1_000_000, 6)


# list prices of common OpenAI models (USD per million tokens); any other model (a local one)
# costs 0 unless ``llm.prices`` names it. A dated snapshot ("gpt-4o-2024-08-06") takes the
# price of its longest listed prefix.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o": ModelPrice(input_per_million=2.50, output_per_million=10.00),
    "gpt-4o-mini": ModelPrice(input_per_million=0.15, output_per_million=0.60),
    "gpt-4.1": ModelPrice(input_per_million=2.00, output_per_million=8.00),
    "gpt-4.1-mini": ModelPrice(input_per_million=0.40, output_per_million=1.60),
    "gpt-4.1-nano": ModelPrice(input_per_million=0.10, output_per_million=0.40),
    "o3-mini": ModelPrice(input_per_million=1.10, output_per_million=4.40),
    "text-embedding-3-small": ModelPrice(input_per_million=0.02),
    "text-embedding-3-large": ModelPrice(input_per_million=0.13),
}


class LLMSettings(BaseModel):
    base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint; unset means offline mode"
    )
    api_key: str | None = Field(None, description="API key for the endpoint")
    model: str = Field("gpt-4o-mini", description="Chat model name")
    concurrency: int = Field(8, ge=1, le=512, description="Concurrent LLM requests per process")
    max_retries: int = Field(6, ge=0, le=50, description="Retries on 429/5xx/timeouts")
    rate_limit_budget_s: float = Field(
        300.0,
        ge=0,
        description="A request still rate-limited (429) after max_retries is retried until "
        "this many seconds have passed since its first attempt (honouring Retry-After), so "
        "a burst of rate limits delays a chunk instead of dead-lettering it; 0: no more",
    )
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout")
    temperature: float = Field(0.0, ge=0, le=2)
    cache_dir: Path | None = Field(
        None, description="Response cache directory (default: <data_dir>/llm-cache)"
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES),
        description="USD per million input and output tokens, by model name (JSON); models "
        "not listed (local ones) cost 0",
    )

    @property
    def offline(self) -> bool:
        return not self.base_url

    def price(self, model: str | None = None) -> ModelPrice | None:
        """The price of ``model`` (default: the chat model): listed exactly, else by its
        longest listed prefix; None when not listed."""
        name = model or self.model
        if name in self.prices:
            return self.prices[name]
        prefixes = [k for k in self.prices if name.startswith(f"{k}-")]
        return self.prices[max(prefixes, key=len)] if prefixes else None


class EmbeddingSettings(BaseModel):
    base_url: str | None = Field(
        None, description="OpenAI-compatible /embeddings endpoint; unset means offline hashing"
    )
    api_key: str | None = None
    model: str = Field("text-embedding-3-small", description="Embedding model name")
    dimensions: int = Field(1024, ge=8, le=8192, description="Vector size of the offline embedder")
    embed_relationships: bool = Field(False, description="Also embed relationships")


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


class CommunitySettings(BaseModel):
    debounce_s: float = Field(5.0, gt=0, description="Run after the graph is quiet this long")
    max_wait_s: float = Field(60.0, gt=0, description="Run at the latest this long after a change")
    max_cluster_size: int = Field(10, ge=2, description="Re-partition communities larger than this")
    seed: int = Field(0xDEADBEEF, description="Leiden seed")
    jaccard_threshold: float = Field(
        0.3, gt=0, le=1, description="Minimum member overlap for a community to keep its id"
    )
    materiality_threshold: float = Field(
        0.2, gt=0, le=1, description="Share of new evidence that makes a report stale"
    )
    membership_tolerance: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="Member drift (Jaccard distance) a report tolerates before membership "
        "alone makes it stale; within it, new members count as unreflected evidence",
    )
    frontier_tolerance: float = Field(
        0.25,
        ge=0,
        lt=1,
        description="Share of its weighted degree an entity's links must change by (since it "
        "was last placed) before re-clustering may move it; below it the entity keeps its "
        "community, so a hub touched by every article does not reshuffle its neighbourhood "
        "(0: any change)",
    )
    drift_check_every: int = Field(
        10,
        ge=0,
        description="Every this many runs, compare the maintained clustering with a fresh one "
        "of the same graph (level-0 modularity); 0: never",
    )
    resolve_aliases: bool = Field(
        True,
        description="Resolve which entity names are one thing (acronyms, spellings, "
        "surnames; the aliases table) and cluster them together",
    )
    confirm_aliases: int = Field(
        20,
        ge=0,
        description="In LLM mode, alias decisions resting on weak evidence the model is asked "
        "to confirm per run, at most (each once; the rest wait for later runs); 0: never ask",
    )
    headlines_per_run: int = Field(
        10,
        ge=0,
        description="Headline events a community run publishes at most: the storylines that "
        "emerged or surged in the headline window, best first; 0: none",
    )
    headline_window_days: int = Field(
        3,
        ge=1,
        description="The days of document time, ending at the newest document, that headlines "
        "compare with everything before",
    )
    headline_min_documents: int = Field(
        3, ge=1, description="Documents in the headline window a storyline needs to be a headline"
    )
    headline_min_ratio: float = Field(
        1.5,
        gt=1.0,
        description="How many times what its earlier share of the news predicts a storyline's "
        "documents in the window must be to be a headline (one new in the window always is)",
    )
    headline_min_significance: float = Field(
        10.83,
        ge=0.0,
        description="How unlikely by chance a storyline's surge must be to be a headline: the "
        "Poisson likelihood-ratio statistic of its documents against expected (10.83: p < "
        "0.001); headlines are ranked by it",
    )
    headline_regrowth: float = Field(
        0.5,
        ge=0.0,
        description="A storyline headlined before is headlined again once its documents in the "
        "window have grown by this share since",
    )
    aliases_full_every: int = Field(
        20,
        ge=1,
        description="Every this many runs, resolve every name afresh rather than around what "
        "changed (refreshes decisions resting on which entities are hubs)",
    )
    rebalance_gap: float = Field(
        0.005,
        gt=0,
        lt=1,
        description="Relative modularity shortfall against a fresh clustering beyond which a "
        "run re-balances (frees every entity, warm-started)",
    )
    keep_snapshots: int = Field(
        5,
        ge=1,
        description="Community runs whose graph versions stay readable, with the light "
        "commits between them (as-of questions reach back this far)",
    )
    compact_every: int = Field(
        20,
        ge=1,
        description="Graph-table maintenance (compaction of small files, dropping row "
        "versions older than retention, vacuum) once this many versions were committed: "
        "then each commit maintains one table",
    )
    fresh_commit_s: float = Field(
        1.0,
        ge=0,
        description="Between community runs, commit the rows of new articles (entities, "
        "relationships, text units, documents, claims) at most this long after they were "
        "merged, so they are searchable before the next run; 0: only runs commit",
    )
    report_max_tokens: int = Field(8000, ge=200, description="Token budget of a report context")
    summary_join_max_tokens: int = Field(
        200,
        ge=0,
        description="Description sets up to this many tokens are shown joined as they are; "
        "only longer ones are summarised by the LLM (0: always, as GraphRAG does)",
    )
    summary_new_share: float = Field(
        0.5,
        gt=0,
        le=10,
        description="Re-summarise a description set once its descriptions not yet summarised "
        "reach this share of the ones the summary was written from",
    )
    summary_max_age_s: float = Field(
        3600.0,
        gt=0,
        description="...or once a summary missing any new description is this old (wall time)",
    )
    report_batch_size: int = Field(
        5,
        ge=1,
        le=20,
        description="Reports of small communities written per LLM call (1: one call each)",
    )
    report_batch_context_tokens: int = Field(
        1500,
        ge=0,
        description="A community whose report context is at most this many tokens is small "
        "enough to share a call with others",
    )
    retry_base_s: float = Field(
        30.0, gt=0, description="First wait before a report or summary the LLM refused is retried"
    )
    retry_max_s: float = Field(
        3600.0, gt=0, description="Longest wait between retries of a refused report or summary"
    )
    stale_after_s: float = Field(
        300.0,
        gt=0,
        description="/healthz is degraded when graph changes are pending and the newest version "
        "is older than this",
    )

    @model_validator(mode="after")
    def _wait_after_debounce(self) -> CommunitySettings:
        if self.max_wait_s < self.debounce_s:
            raise ValueError(
                f"max_wait_s ({self.max_wait_s}) must be >= debounce_s ({self.debounce_s})"
            )
        return self


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


class TablesSettings(BaseModel):
    """Where the graph tables live: a local directory (the default) or an S3-compatible bucket
    that query services on other machines read (``core.object_store``)."""

    uri: str = Field(
        "",
        description="Empty: <data_dir>/<namespace>/tables on the local disk. Or a bucket URI "
        "s3://bucket/prefix (the namespace is appended), or a local directory",
    )
    endpoint_url: str = Field(
        "",
        description="S3-compatible endpoint, e.g. http://127.0.0.1:19000 (versitygw, MinIO); "
        "empty: AWS S3 (or AWS_ENDPOINT_URL)",
    )
    region: str = Field("", description="Empty: AWS_REGION, else us-east-1")
    access_key_id: str = Field("", description="Empty: the standard AWS environment variables")
    secret_access_key: SecretStr | None = Field(None, description="With access_key_id")
    timeout_s: float = Field(10.0, gt=0, description="One request to the object store")
    max_retries: int = Field(2, ge=0, description="Retries of a failed request")
    retry_timeout_s: float = Field(20.0, gt=0, description="Give up retrying after this")

    @field_validator("uri")
    @classmethod
    def _check_uri(cls, v: str) -> str:
        v = v.strip()
        if "://" in v and not v.startswith(("s3://", "file://")):
            raise ValueError(
                "use s3://bucket/prefix for an S3-compatible object store, or a local directory"
            )
        if v.startswith("s3://") and not v[5:].split("/", 1)[0]:
            raise ValueError("the URI names no bucket (s3://bucket/prefix)")
        return v.rstrip("/")

    @field_validator("endpoint_url")
    @classmethod
    def _check_endpoint(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if v and not v.startswith(("http://", "https://")):
            raise ValueError("the endpoint is an http:// or https:// URL")
        return v

    @property
    def remote(self) -> bool:
        return self.uri.startswith("s3://")


class ServicesSettings(BaseModel):
    """How ``kgrag services`` brings up a local Kafka and Weaviate without Docker."""

    cache_dir: Path = Field(
        default_factory=_default_cache_dir,
        description="Jars and binaries downloaded or built once (outside the repository)",
    )
    state_dir: Path = Field(
        default_factory=lambda: _default_data_dir() / "services",
        description="Logs, pids and data of the local services; shared by every namespace "
        "and data dir, so one Kafka and one Weaviate serve them all",
    )
    kafka_version: str = Field("4.1.1", description="Apache Kafka release (Maven Central)")
    kafka_controller_port: int = Field(19093, ge=1, le=65535)
    kafka_heap: str = Field("768m", description="Broker JVM heap")
    weaviate_version: str = Field("1.39.0", description="Weaviate release (Go module)")
    weaviate_gossip_port: int = Field(17946, ge=1, le=65534, description="data port is +1")
    weaviate_raft_port: int = Field(18300, ge=1, le=65534, description="internal RPC port is +1")
    versitygw_version: str = Field("1.8.0", description="S3-compatible object store (Go module)")
    object_store_port: int = Field(19000, ge=1, le=65535, description="versitygw's S3 port")
    object_store_bucket: str = Field("kgrag", description="Bucket created by `services up`")
    object_store_access_key: str = Field("kgrag", description="versitygw's root access key")
    object_store_secret_key: SecretStr = Field(
        SecretStr("kgrag-local-secret"), description="versitygw's root secret (loopback only)"
    )
    start_timeout_s: float = Field(120.0, gt=0)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="KGRAG_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    namespace: str = Field(
        "kgrag", description="Prefix of topics, the faust app id and Weaviate collections"
    )
    data_dir: Path = Field(default_factory=_default_data_dir, description="State and snapshots")
    kafka: KafkaSettings = Field(default_factory=lambda: KafkaSettings())
    weaviate: WeaviateSettings = Field(default_factory=lambda: WeaviateSettings())
    llm: LLMSettings = Field(default_factory=lambda: LLMSettings())
    embeddings: EmbeddingSettings = Field(default_factory=lambda: EmbeddingSettings())
    chunking: ChunkingSettings = Field(default_factory=lambda: ChunkingSettings())
    extraction: ExtractionSettings = Field(default_factory=lambda: ExtractionSettings())
    community: CommunitySettings = Field(default_factory=lambda: CommunitySettings())
    api: ApiSettings = Field(default_factory=lambda: ApiSettings())
    worker: WorkerSettings = Field(default_factory=lambda: WorkerSettings())
    drift: DriftSettings = Field(default_factory=lambda: DriftSettings())
    tables: TablesSettings = Field(default_factory=lambda: TablesSettings())
    services: ServicesSettings = Field(default_factory=lambda: ServicesSettings())

    @field_validator("namespace")
    @classmethod
    def _check_namespace(cls, v: str) -> str:
        if not _NAME_RE.match(v) or len(v) > 60:
            raise ValueError("use letters, digits, '.', '_' or '-' (at most 60 characters)")
        return v

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        config_file = os.environ.get("KGRAG_CONFIG")
        if config_file:
            if not Path(config_file).is_file():
                raise ConfigError(f"KGRAG_CONFIG points to {config_file!r}, which is not a file")
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=config_file))
        return tuple(sources)

    def child_json(self) -> str:
        """These settings as JSON for a child process, secrets included (``model_dump_json``
        masks ``SecretStr`` values); read back with ``Settings.model_validate_json``."""

        def reveal(value: Any) -> Any:
            if isinstance(value, SecretStr):
                return value.get_secret_value()
            if isinstance(value, Path):
                return str(value)
            raise TypeError(f"not JSON: {type(value).__name__}")

        return orjson.dumps(self.model_dump(), default=reveal).decode()

    # ---- derived names -------------------------------------------------------------
    @property
    def topics(self) -> TopicNames:
        """Every topic's full name (the namespace prepended), as typed fields:
        ``settings.topics.graph_changes``."""
        base = self.kafka.topics
        return TopicNames(
            **{n: f"{self.namespace}.{getattr(base, n)}" for n in TopicNames.model_fields}
        )

    def topic(self, name: str) -> str:
        """Full topic name for a field name of ``kafka.topics``, for code that is generic over
        topics (lag per topic, creating all of them); elsewhere use ``topics``."""
        return f"{self.namespace}.{getattr(self.kafka.topics, name)}"

    def all_topics(self) -> list[str]:
        return [self.topic(n) for n in TopicNames.model_fields]

    @property
    def app_id(self) -> str:
        return f"{self.namespace}-worker"

    @property
    def vector_app_id(self) -> str:
        """The embedders' consumer group: their own, so a Weaviate outage holds back only
        their offsets (see ``kgrag.worker``). Under ``app_id``'s prefix, so a namespace reset
        removes its internal topics with the worker's."""
        return f"{self.app_id}-vectors"

    def collection(self, kind: str) -> str:
        """Weaviate collection name: must start with a capital letter, no dots or dashes."""
        ns = re.sub(r"[^A-Za-z0-9]", "_", self.namespace)
        camel = "".join(part.capitalize() for part in kind.split("_"))
        return f"{camel}_{ns}"

    @property
    def services_state_dir(self) -> Path:
        return self.services.state_dir

    @property
    def llm_cache_dir(self) -> Path:
        return self.llm.cache_dir or (self.data_dir / "llm-cache")

    @property
    def snapshots_dir(self) -> Path:
        """Where releases before the graph tables kept JSON-lines snapshots (read to convert)."""
        return self.data_dir / self.namespace / "snapshots"

    @property
    def namespace_uri(self) -> str:
        """What the namespace shares with other machines: its graph tables and the community
        job's status (a local directory, or a prefix in a bucket: ``tables.uri``)."""
        base = self.tables.uri.removeprefix("file://")
        if not base:
            return str(self.data_dir / self.namespace)
        return f"{base}/{self.namespace}"

    @property
    def hybrid_alpha(self) -> float:
        """``weaviate.hybrid_alpha``, or its default for the embedder in use."""
        if self.weaviate.hybrid_alpha is not None:
            return self.weaviate.hybrid_alpha
        return 0.5 if self.embeddings.base_url else 0.1

    @property
    def tables_uri(self) -> str:
        """The namespace's graph tables (Delta Lake, ``core.tables``)."""
        return f"{self.namespace_uri}/tables"


def _format_validation_error(err: ValidationError) -> str:
    lines = ["invalid settings:"]
    for e in err.errors():
        path = "__".join(str(p) for p in e["loc"])
        env = f"KGRAG_{path.upper()}" if path else "KGRAG_*"
        lines.append(f"  {path or '<root>'} ({env}): {e['msg']}; got {e.get('input')!r}")
    return "\n".join(lines)


def load_settings(**overrides: Any) -> Settings:
    """Build settings, turning validation errors into a ConfigError naming each setting."""
    try:
        return Settings(**overrides)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e)) from e


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once (tests call ``get_settings.cache_clear()``)."""
    return load_settings()
