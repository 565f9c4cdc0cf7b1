"""Shared fixtures.

Services are found in this order: endpoints given by environment variables
(``KGRAG_KAFKA__BOOTSTRAP_SERVERS`` and ``KGRAG_WEAVIATE__URL`` with ``KGRAG_TEST_SERVICES=env``);
else testcontainers when a Docker engine answers; else the project's own launcher. The S3-compatible
object store (versitygw) always comes from the launcher (or ``KGRAG_TEST_OBJECT_STORE_URL``
with ``env``), since no test container of it is pinned. Integration tests never fall back to
fakes. Every session gets its own namespace, so topics, the faust app id
and Weaviate collections of an earlier run never leak into a result.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import Settings, load_settings
from core.tokenizer import ensure_offline_bpe

ensure_offline_bpe()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def session_namespace() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def _docker_engine() -> bool:
    """True when a Docker engine answers /_ping (probed with a plain socket, closed after)."""
    import socket

    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return True  # a remote engine was configured on purpose; let testcontainers try it
    path = host.removeprefix("unix://")
    if not os.path.exists(path):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(3)
        try:
            sock.connect(path)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in sock.recv(64)
        except OSError:
            return False


@pytest.fixture(scope="session")
def service_endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """Kafka and Weaviate endpoints for the whole session (see the module docstring)."""
    from kgrag.services import launcher, objectstore

    mode = os.environ.get("KGRAG_TEST_SERVICES", "auto")
    base = load_settings()
    s = base.services
    store = {
        "object_store.url": objectstore.endpoint_url(base),
        "object_store.bucket": s.object_store_bucket,
        "object_store.access_key": s.object_store_access_key,
        "object_store.secret_key": s.object_store_secret_key.get_secret_value(),
    }
    if mode == "env":
        yield {
            "kafka.bootstrap_servers": base.kafka.bootstrap_servers,
            "weaviate.url": base.weaviate.url,
            "weaviate.grpc_port": base.weaviate.grpc_port,
            **store,
            "object_store.url": os.environ.get(
                "KGRAG_TEST_OBJECT_STORE_URL", store["object_store.url"]
            ),
        }
        return
    if mode in ("auto", "docker") and _docker_engine():
        from testcontainers.community.kafka import KafkaContainer
        from testcontainers.community.weaviate import WeaviateContainer

        objectstore.up(base)
        with KafkaContainer().with_kraft() as kafka, WeaviateContainer() as wv:
            host = wv.get_container_host_ip()
            yield {
                "kafka.bootstrap_servers": kafka.get_bootstrap_server(),
                "weaviate.url": f"http://{host}:{wv.get_exposed_port(8080)}",
                "weaviate.grpc_port": int(wv.get_exposed_port(50051)),
                **store,
            }
        return
    launcher.up(base)  # idempotent: reuses services `make test` already started
    yield {
        "kafka.bootstrap_servers": base.kafka.bootstrap_servers,
        "weaviate.url": base.weaviate.url,
        "weaviate.grpc_port": base.weaviate.grpc_port,
        **store,
    }


def make_settings(
    endpoints: dict[str, object], namespace: str, data_dir: Path, **overrides: object
) -> Settings:
    base = load_settings()
    kafka = base.kafka.model_copy(
        update={"bootstrap_servers": endpoints["kafka.bootstrap_servers"]}
    )
    weav = base.weaviate.model_copy(
        update={"url": endpoints["weaviate.url"], "grpc_port": endpoints["weaviate.grpc_port"]}
    )
    return base.model_copy(
        update={
            "namespace": namespace,
            "data_dir": data_dir,
            "kafka": kafka,
            "weaviate": weav,
            **overrides,
        }
    )


def settings_env(settings: Settings) -> dict[str, str]:
    """Environment for a subprocess (a worker) that must see the same settings."""
    env = dict(os.environ)
    env.update(
        {
            "KGRAG_NAMESPACE": settings.namespace,
            "KGRAG_DATA_DIR": str(settings.data_dir),
            "KGRAG_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
            "KGRAG_KAFKA__PARTITIONS": str(settings.kafka.partitions),
            "KGRAG_WEAVIATE__URL": settings.weaviate.url,
            "KGRAG_WEAVIATE__GRPC_PORT": str(settings.weaviate.grpc_port),
            "TIKTOKEN_CACHE_DIR": os.environ["TIKTOKEN_CACHE_DIR"],
        }
    )
    if settings.llm.base_url:
        env["KGRAG_LLM__BASE_URL"] = settings.llm.base_url
    if settings.embeddings.base_url:
        env["KGRAG_EMBEDDINGS__BASE_URL"] = settings.embeddings.base_url
    if settings.kafka.instance_id:
        env["KGRAG_KAFKA__INSTANCE_ID"] = settings.kafka.instance_id
    t = settings.tables
    if t.uri:
        env["KGRAG_TABLES__URI"] = t.uri
        env["KGRAG_TABLES__ENDPOINT_URL"] = t.endpoint_url
        env["KGRAG_TABLES__ACCESS_KEY_ID"] = t.access_key_id
        env["KGRAG_TABLES__TIMEOUT_S"] = str(t.timeout_s)
        env["KGRAG_TABLES__MAX_RETRIES"] = str(t.max_retries)
        env["KGRAG_TABLES__RETRY_TIMEOUT_S"] = str(t.retry_timeout_s)
        if t.secret_access_key is not None:
            env["KGRAG_TABLES__SECRET_ACCESS_KEY"] = t.secret_access_key.get_secret_value()
    return env
