"""A real Weaviate server, built from its Go module and run on loopback.

``go install github.com/weaviate/weaviate/cmd/weaviate-server@v<version>`` puts the binary in
``<cache>/bin/weaviate-<version>/``; Go's own module and build caches make a rebuild cheap.
Readiness means usable: ``/v1/.well-known/ready`` can answer before the Raft leader exists,
so we also wait until a schema write (create and delete a collection) succeeds.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from core.settings import Settings
from kgrag.services.process import (
    ServiceRecord,
    ensure_ports_free,
    go_install,
    launch,
    owned_alive,
    pid_alive,
    wait_until,
)

NAME = "weaviate"
MODULE = "github.com/weaviate/weaviate/cmd/weaviate-server"


def binary_path(settings: Settings) -> Path:
    v = settings.services.weaviate_version
    return settings.services.cache_dir / "bin" / f"weaviate-{v}" / "weaviate-server"


def prepare(settings: Settings) -> Path:
    """Build weaviate-server with ``go install`` unless the cached binary exists."""
    return go_install(MODULE, settings.services.weaviate_version, binary_path(settings))


def _state(settings: Settings) -> Path:
    return settings.services_state_dir / NAME


def record(settings: Settings) -> ServiceRecord | None:
    return ServiceRecord.load(_state(settings) / "service.json")


def _env(settings: Settings, data: Path) -> dict[str, str]:
    s = settings.services
    env = {
        **os.environ,
        "PERSISTENCE_DATA_PATH": str(data),
        "DEFAULT_VECTORIZER_MODULE": "none",
        "ENABLE_MODULES": "",
        "CLUSTER_HOSTNAME": "node1",
        "CLUSTER_IN_LOCALHOST": "true",
        "CLUSTER_GOSSIP_BIND_PORT": str(s.weaviate_gossip_port),
        "CLUSTER_DATA_BIND_PORT": str(s.weaviate_gossip_port + 1),
        "RAFT_PORT": str(s.weaviate_raft_port),
        "RAFT_INTERNAL_RPC_PORT": str(s.weaviate_raft_port + 1),
        "RAFT_BOOTSTRAP_EXPECT": "1",
        "RAFT_JOIN": f"node1:{s.weaviate_raft_port}",
        "GRPC_PORT": str(settings.weaviate.grpc_port),
        "DISABLE_TELEMETRY": "true",
        "GO_PROFILING_DISABLE": "true",
        "QUERY_DEFAULTS_LIMIT": "25",
        "LOG_LEVEL": "warning",
    }
    key = settings.weaviate.api_key
    if key:
        env.update(
            {
                "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "false",
                "AUTHENTICATION_APIKEY_ENABLED": "true",
                "AUTHENTICATION_APIKEY_ALLOWED_KEYS": key,
                "AUTHENTICATION_APIKEY_USERS": "kgrag",
                "AUTHORIZATION_ADMINLIST_ENABLED": "true",
                "AUTHORIZATION_ADMINLIST_USERS": "kgrag",
            }
        )
    else:
        env["AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED"] = "true"
    return env


def up(settings: Settings) -> ServiceRecord:
    existing = record(settings)
    log_path = _state(settings) / "weaviate.log"
    if owned_alive(existing):
        assert existing is not None
        _wait_ready(settings, existing.pid, log_path)
        return existing
    s = settings.services
    ensure_ports_free(
        {
            "KGRAG_WEAVIATE__URL": settings.weaviate.http_port,
            "KGRAG_WEAVIATE__GRPC_PORT": settings.weaviate.grpc_port,
            "KGRAG_SERVICES__WEAVIATE_GOSSIP_PORT": s.weaviate_gossip_port,
            "KGRAG_SERVICES__WEAVIATE_GOSSIP_PORT (data port = gossip + 1)": (
                s.weaviate_gossip_port + 1
            ),
            "KGRAG_SERVICES__WEAVIATE_RAFT_PORT": s.weaviate_raft_port,
            "KGRAG_SERVICES__WEAVIATE_RAFT_PORT (internal RPC = raft + 1)": s.weaviate_raft_port
            + 1,
        },
        "Weaviate",
    )
    binary = prepare(settings)
    state = _state(settings)
    data = state / "data"
    data.mkdir(parents=True, exist_ok=True)
    argv = [
        str(binary),
        "--host",
        settings.weaviate.host,
        "--port",
        str(settings.weaviate.http_port),
        "--scheme",
        "http",
    ]
    rec = launch(
        NAME,
        argv,
        state=state,
        log_path=log_path,
        env=_env(settings, data),
        ports={
            "http": settings.weaviate.http_port,
            "grpc": settings.weaviate.grpc_port,
            "gossip": s.weaviate_gossip_port,
            "raft": s.weaviate_raft_port,
        },
        version=s.weaviate_version,
    )
    _wait_ready(settings, rec.pid, log_path)
    return rec


def _headers(settings: Settings) -> dict[str, str]:
    key = settings.weaviate.api_key
    return {"Authorization": f"Bearer {key}"} if key else {}


def ready(settings: Settings) -> bool:
    try:
        r = httpx.get(
            f"{settings.weaviate.url}/v1/.well-known/ready", headers=_headers(settings), timeout=2
        )
    except httpx.HTTPError:
        return False
    return r.status_code == 200


def schema_writable(settings: Settings) -> bool:
    """Create and delete a throw-away collection: proves the Raft leader exists."""
    name = f"Kgrag_health_{os.getpid()}"
    try:
        with httpx.Client(
            base_url=settings.weaviate.url, headers=_headers(settings), timeout=10
        ) as c:
            r = c.post("/v1/schema", json={"class": name, "vectorizer": "none"})
            if r.status_code not in (200, 422):
                return False
            d = c.delete(f"/v1/schema/{name}")
            return d.status_code in (200, 204)
    except httpx.HTTPError:
        return False


def version(settings: Settings) -> str | None:
    try:
        r = httpx.get(f"{settings.weaviate.url}/v1/meta", headers=_headers(settings), timeout=2)
        return str(r.json().get("version")) if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _wait_ready(settings: Settings, pid: int, log_path: Path) -> None:
    timeout = settings.services.start_timeout_s
    wait_until(
        lambda: ready(settings) and schema_writable(settings),
        timeout=timeout,
        what="Weaviate",
        alive=lambda: pid_alive(pid),
        log_path=log_path,
    )
