"""The launcher on its own ports and state directory, beside the session's services."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import Settings, load_settings
from kgrag.services import kafka, launcher, objectstore, weaviate
from kgrag.services.process import ServiceRecord, pid_alive, port_open

PORTS = {
    "kafka": 29092,
    "controller": 29093,
    "http": 28080,
    "grpc": 25051,
    "gossip": 27946,
    "raft": 28300,
    "s3": 29000,
}


@pytest.fixture(scope="module")
def own_settings(
    tmp_path_factory: pytest.TempPathFactory, service_endpoints: dict[str, object]
) -> Iterator[Settings]:
    if any(port_open(p) for p in PORTS.values()):
        pytest.fail(f"one of the launcher test's ports {sorted(PORTS.values())} is taken")
    base = load_settings()
    data_dir = tmp_path_factory.mktemp("launcher")
    s = base.model_copy(
        update={
            "data_dir": data_dir,
            "kafka": base.kafka.model_copy(
                update={"bootstrap_servers": f"127.0.0.1:{PORTS['kafka']}"}
            ),
            "weaviate": base.weaviate.model_copy(
                update={"url": f"http://127.0.0.1:{PORTS['http']}", "grpc_port": PORTS["grpc"]}
            ),
            "services": base.services.model_copy(
                update={
                    "state_dir": data_dir / "services",
                    "kafka_controller_port": PORTS["controller"],
                    "weaviate_gossip_port": PORTS["gossip"],
                    "weaviate_raft_port": PORTS["raft"],
                    "object_store_port": PORTS["s3"],
                }
            ),
        }
    )
    yield s
    launcher.down(s)


def test_up_twice_reuses_status_reports_down_stops_only_ours(
    own_settings: Settings, tmp_path: Path
) -> None:
    first = launcher.up(own_settings)
    second = launcher.up(own_settings)
    assert [r.pid for r in first] == [r.pid for r in second], "second up started new processes"

    statuses = {s.name: s for s in launcher.status(own_settings)}
    assert set(statuses) == {"kafka", "weaviate", "object-store"}
    assert all(s.running and s.healthy for s in statuses.values()), statuses
    assert statuses["weaviate"].version == own_settings.services.weaviate_version
    assert statuses["kafka"].version == own_settings.services.kafka_version
    assert statuses["kafka"].ports["broker"] == PORTS["kafka"]
    assert statuses["object-store"].ports["s3"] == PORTS["s3"]
    assert statuses["object-store"].version == own_settings.services.versitygw_version

    session = load_settings()  # the session's own services must survive our down
    session_kafka = kafka.record(session)
    session_weaviate = weaviate.record(session)
    session_store = objectstore.record(session)

    stopped = launcher.down(own_settings)
    assert sorted(stopped) == ["kafka", "object-store", "weaviate"]
    assert not any(pid_alive(r.pid) for r in first)
    assert not any(port_open(PORTS[p]) for p in ("kafka", "http", "s3"))
    for rec in (session_kafka, session_weaviate, session_store):
        if rec is not None:
            assert pid_alive(rec.pid), f"down stopped the session's {rec.name}"


def test_down_never_kills_a_foreign_process_with_a_recycled_pid(own_settings: Settings) -> None:
    foreign = subprocess.Popen(["sleep", "60"])
    try:
        state = own_settings.services_state_dir / "kafka"
        ServiceRecord(
            name="kafka",
            pid=foreign.pid,
            ports={},
            version="x",
            argv=["/usr/bin/java", "kafka.Kafka"],
            started_at=0.0,
        ).save(state / "service.json")
        assert launcher.down(own_settings) == []
        assert foreign.poll() is None, "down killed a process it did not start"
    finally:
        foreign.kill()
        foreign.wait()


def test_a_taken_port_names_the_setting_that_moves_it(own_settings: Settings) -> None:
    import socket

    from core.errors import PortInUseError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", PORTS["controller"]))
        sock.listen(1)
        with pytest.raises(PortInUseError) as err:
            kafka.up(own_settings)
    assert "KGRAG_SERVICES__KAFKA_CONTROLLER_PORT" in str(err.value)
    assert str(PORTS["controller"]) in str(err.value)
