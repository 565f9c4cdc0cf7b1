"""docker-compose.yml must parse and match the settings the local launcher uses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def defaults() -> Settings:
    return Settings(_env_file=None)  # type: ignore[call-arg]


def test_docker_compose_config_accepts_the_file() -> None:
    if not shutil.which("docker"):
        pytest.skip("no docker client here; the YAML checks below still run")
    probe = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip("this docker client has no compose plugin; the YAML checks below still run")
    result = subprocess.run(
        ["docker", "compose", "-f", str(ROOT / "docker-compose.yml"), "config", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_same_releases_as_the_launcher(compose: dict[str, Any], defaults: Settings) -> None:
    services = compose["services"]
    assert services["kafka"]["image"] == f"apache/kafka:{defaults.services.kafka_version}"
    assert services["weaviate"]["image"].endswith(f":{defaults.services.weaviate_version}")


def test_same_ports_as_the_settings_defaults(compose: dict[str, Any], defaults: Settings) -> None:
    kafka_port = int(defaults.kafka.bootstrap_servers.rsplit(":", 1)[1])
    kafka = compose["services"]["kafka"]
    assert f"127.0.0.1:{kafka_port}:{kafka_port}" in kafka["ports"]
    env = kafka["environment"]
    assert f"PLAINTEXT://127.0.0.1:{kafka_port}" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert env["KAFKA_NUM_PARTITIONS"] == str(defaults.kafka.partitions)
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"

    weaviate = compose["services"]["weaviate"]
    http, grpc = defaults.weaviate.http_port, defaults.weaviate.grpc_port
    assert f"127.0.0.1:{http}:{http}" in weaviate["ports"]
    assert f"127.0.0.1:{grpc}:{grpc}" in weaviate["ports"]
    wenv = weaviate["environment"]
    assert wenv["GRPC_PORT"] == str(grpc)
    assert wenv["RAFT_PORT"] == str(defaults.services.weaviate_raft_port)
    assert wenv["CLUSTER_GOSSIP_BIND_PORT"] == str(defaults.services.weaviate_gossip_port)
    assert wenv["DEFAULT_VECTORIZER_MODULE"] == "none"
    assert str(http) in weaviate["command"]


def test_worker_points_at_the_compose_services(compose: dict[str, Any]) -> None:
    env = compose["services"]["worker"]["environment"]
    internal = compose["services"]["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert env["KGRAG_KAFKA__BOOTSTRAP_SERVERS"].split("//")[-1] in internal
    assert env["KGRAG_WEAVIATE__URL"].endswith(":18080")


def test_the_query_service_shares_the_worker_settings_and_data(
    compose: dict[str, Any], defaults: Settings
) -> None:
    api, worker = compose["services"]["api"], compose["services"]["worker"]
    assert api["environment"] == worker["environment"]
    assert api["volumes"] == worker["volumes"]
    port = defaults.api.port
    assert f"127.0.0.1:{port}:{port}" in api["ports"]
    assert "api" in api["command"] and str(port) in api["command"]
