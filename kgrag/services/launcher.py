"""``kgrag services up | down | status``: local Kafka, Weaviate and an S3-compatible object
store (versitygw), the same for everyone.

``up`` is idempotent (services we started and that still run are reused); ``down`` stops
exactly the processes recorded in our state directory; ``status`` reports health, version
and ports. With a Docker engine, ``--docker`` hands the same job to docker compose.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from core.errors import ServiceError
from core.settings import Settings
from kgrag.services import kafka, objectstore, weaviate
from kgrag.services.process import (
    ServiceRecord,
    owned_alive,
    port_open,
    stop_pid,
)


@dataclass(frozen=True, slots=True)
class ServiceStatus:
    name: str
    running: bool  # a process we started is alive
    healthy: bool  # it answers on its port(s)
    version: str | None
    ports: dict[str, int]
    pid: int | None
    detail: str


def up(settings: Settings) -> list[ServiceRecord]:
    return [kafka.up(settings), weaviate.up(settings), objectstore.up(settings)]


def down(settings: Settings) -> list[str]:
    """Stop the processes we recorded; return the names of those stopped."""
    stopped = []
    for name, rec in (
        ("object-store", objectstore.record(settings)),
        ("weaviate", weaviate.record(settings)),
        ("kafka", kafka.record(settings)),
    ):
        if owned_alive(rec):
            assert rec is not None
            stop_pid(rec.pid)
            stopped.append(name)
    return stopped


def status(settings: Settings) -> list[ServiceStatus]:
    krec = kafka.record(settings)
    host, _, port = settings.kafka.bootstrap_servers.split(",")[0].rpartition(":")
    k_healthy = port_open(int(port), host)
    wrec = weaviate.record(settings)
    w_healthy = weaviate.ready(settings)
    orec = objectstore.record(settings)
    o_healthy = objectstore.ready(settings)
    return [
        ServiceStatus(
            name="kafka",
            running=owned_alive(krec),
            healthy=k_healthy,
            version=settings.services.kafka_version if krec else None,
            ports=krec.ports if krec else {"broker": int(port)},
            pid=krec.pid if krec and owned_alive(krec) else None,
            detail=settings.kafka.bootstrap_servers,
        ),
        ServiceStatus(
            name="weaviate",
            running=owned_alive(wrec),
            healthy=w_healthy,
            version=weaviate.version(settings) if w_healthy else None,
            ports=wrec.ports if wrec else {"http": settings.weaviate.http_port},
            pid=wrec.pid if wrec and owned_alive(wrec) else None,
            detail=settings.weaviate.url,
        ),
        ServiceStatus(
            name="object-store",
            running=owned_alive(orec),
            healthy=o_healthy,
            version=settings.services.versitygw_version if orec else None,
            ports=orec.ports if orec else {"s3": settings.services.object_store_port},
            pid=orec.pid if orec and owned_alive(orec) else None,
            detail=objectstore.endpoint_url(settings),
        ),
    ]


# ---- docker compose ------------------------------------------------------------------


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        result = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0 and bool(result.stdout.strip())


def compose_file() -> Path:
    return Path(__file__).resolve().parents[2] / "docker-compose.yml"


def docker_up(services: tuple[str, ...] = ("kafka", "weaviate", "object-store")) -> None:
    if not docker_available():
        raise ServiceError(
            "no Docker engine answers here; run 'kgrag services up' without --docker "
            "to start Kafka and Weaviate locally"
        )
    cmd = ["docker", "compose", "-f", str(compose_file()), "up", "-d", "--wait", *services]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ServiceError(f"docker compose up failed:\n{result.stderr[-2000:]}")


def docker_down() -> None:
    if not docker_available():
        raise ServiceError("no Docker engine answers here; nothing to stop with --docker")
    subprocess.run(["docker", "compose", "-f", str(compose_file()), "down"], check=False)
