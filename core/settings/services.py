"""Local services settings: versions, ports and directories of ``kgrag services``."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, SecretStr

from core.settings.dirs import default_cache_dir, default_data_dir


class ServicesSettings(BaseModel):
    """How ``kgrag services`` brings up a local Kafka and Weaviate without Docker."""

    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description="Jars and binaries downloaded or built once (outside the repository)",
    )
    state_dir: Path = Field(
        default_factory=lambda: default_data_dir() / "services",
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
