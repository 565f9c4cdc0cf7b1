"""One settings tree for every process kafka-graphrag starts.

Values come, highest priority first, from keyword arguments, environment variables
(``KGRAG_`` prefix, ``__`` between nested names, e.g. ``KGRAG_KAFKA__PARTITIONS=16``), an
optional YAML file (``KGRAG_CONFIG=path.yaml``) and the defaults below. Each function is
handed only the section it needs; nothing reads ``os.environ`` at import time.

This module holds the root ``Settings``, which composes one section per concern, and the
loaders; each section lives in its own module beside it (``kafka``, ``weaviate``, ``llm``,
``ingest``, ``community``, ``serving``, ``store``, ``services``), where code needing only that
section imports it from.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from core.errors import ConfigError
from core.settings.community import CommunitySettings
from core.settings.dirs import default_data_dir
from core.settings.ingest import ChunkingSettings, ExtractionSettings
from core.settings.kafka import KafkaSettings, TopicNames
from core.settings.llm import EmbeddingSettings, LLMSettings
from core.settings.services import ServicesSettings
from core.settings.serving import ApiSettings, DriftSettings, WorkerSettings
from core.settings.store import TablesSettings
from core.settings.weaviate import WeaviateSettings

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


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
    data_dir: Path = Field(default_factory=default_data_dir, description="State and snapshots")
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
