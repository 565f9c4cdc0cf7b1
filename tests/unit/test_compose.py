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
    versitygw = defaults.services.versitygw_version
    assert services["object-store"]["image"] == f"ghcr.io/versity/versitygw:v{versitygw}"


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


def test_two_query_services_share_nothing_with_the_worker_but_the_bucket(
    compose: dict[str, Any], defaults: Settings
) -> None:
    services = compose["services"]
    worker = services["worker"]
    replicas = [services["api"], services["api-2"]]
    volumes = {v.split(":")[0] for s in (worker, *replicas) for v in s["volumes"]}
    assert len(volumes) == 3, "each process has a data directory of its own"
    for api in replicas:
        assert api["environment"] == worker["environment"]
        assert "api" in api["command"]
    assert worker["environment"]["KGRAG_TABLES__URI"].startswith("s3://")
    host_ports = {p.split(":")[1] for api in replicas for p in api["ports"]}
    assert host_ports == {str(defaults.api.port), str(defaults.api.port + 1)}


def test_the_object_store_matches_the_launcher(compose: dict[str, Any], defaults: Settings) -> None:
    s = defaults.services
    store = compose["services"]["object-store"]
    port = s.object_store_port
    assert f"127.0.0.1:{port}:{port}" in store["ports"]
    assert f":{port}" in store["command"] and "posix" in store["command"]
    assert store["environment"]["ROOT_ACCESS_KEY_ID"] == s.object_store_access_key
    secret = s.object_store_secret_key.get_secret_value()
    assert store["environment"]["ROOT_SECRET_ACCESS_KEY"] == secret
    env = compose["services"]["worker"]["environment"]
    assert env["KGRAG_TABLES__ENDPOINT_URL"].endswith(f":{port}")
    assert env["KGRAG_TABLES__URI"].startswith(f"s3://{s.object_store_bucket}/")
    assert (env["KGRAG_TABLES__ACCESS_KEY_ID"], env["KGRAG_TABLES__SECRET_ACCESS_KEY"]) == (
        s.object_store_access_key,
        secret,
    )
    assert compose["services"]["bucket"]["command"] == ["kgrag", "services", "bucket"]
