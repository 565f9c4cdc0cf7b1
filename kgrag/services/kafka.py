"""A real single-node Apache Kafka (KRaft) from Maven Central, on loopback.

The broker jars are resolved once with Maven into ``<cache>/kafka-<version>/libs`` (a
throw-away pom naming ``org.apache.kafka:kafka_2.13`` plus the log4j SLF4J binding), the
KRaft storage is formatted with ``--standalone`` and ``kafka.Kafka`` runs as a detached JVM.
Replication factors and min ISR are 1 so transactions (faust ``exactly_once``) work.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from pathlib import Path

from core.errors import ServiceError
from core.settings import Settings
from kgrag.services.process import (
    ServiceRecord,
    ensure_ports_free,
    launch,
    owned_alive,
    port_open,
    require_tool,
    wait_until,
)

NAME = "kafka"
# slf4j-api 1.7 is what kafka_2.13 4.x resolves to, so the matching Log4j2 binding is the
# 1.x-style log4j-slf4j-impl.
_LOG4J_VERSION = "2.24.3"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-graphrag.local</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version></dependency>
  </dependencies>
</project>
"""

_LOG4J2 = """status = error
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
"""


def _ports(settings: Settings) -> tuple[str, int]:
    first = settings.kafka.bootstrap_servers.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return host, int(port)


def libs_dir(settings: Settings) -> Path:
    return settings.services.cache_dir / f"kafka-{settings.services.kafka_version}" / "libs"


def prepare(settings: Settings) -> Path:
    """Resolve the broker jars with Maven (once); return the libs directory."""
    libs = libs_dir(settings)
    marker = libs.parent / ".complete"
    if marker.exists():
        return libs
    require_tool("java", "install a JDK 17 or newer (e.g. apt-get install openjdk-17-jre-headless)")
    mvn = require_tool("mvn", "install Apache Maven (e.g. apt-get install maven)")
    libs.parent.mkdir(parents=True, exist_ok=True)
    pom = libs.parent / "pom.xml"
    pom.write_text(_POM.format(version=settings.services.kafka_version, log4j=_LOG4J_VERSION))
    cmd = [
        mvn,
        "-q",
        "-B",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={libs}",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ServiceError(
            f"Maven could not fetch Kafka {settings.services.kafka_version}:\n"
            f"{(result.stdout + result.stderr)[-2000:]}"
        )
    marker.write_text(time.strftime("%Y-%m-%dT%H:%M:%S"))
    return libs


def _state(settings: Settings) -> Path:
    return settings.services_state_dir / NAME


def record(settings: Settings) -> ServiceRecord | None:
    return ServiceRecord.load(_state(settings) / "service.json")


def _write_config(settings: Settings, state: Path) -> Path:
    host, port = _ports(settings)
    ctrl = settings.services.kafka_controller_port
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"{host}:{ctrl}",
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{ctrl}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(state / "data"),
        "num.partitions": str(settings.kafka.partitions),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "10",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        "message.max.bytes": str(settings.kafka.max_message_bytes + 65536),
        "log.retention.hours": "-1",
    }
    path = state / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    (state / "log4j2.properties").write_text(_LOG4J2)
    return path


def _java_base(settings: Settings, state: Path) -> list[str]:
    java = require_tool(
        "java", "install a JDK 17 or newer (e.g. apt-get install openjdk-17-jre-headless)"
    )
    return [
        java,
        f"-Xmx{settings.services.kafka_heap}",
        f"-Xms{settings.services.kafka_heap}",
        "-XX:+UseG1GC",
        f"-Dlog4j2.configurationFile=file:{state / 'log4j2.properties'}",
        "-cp",
        f"{libs_dir(settings)}/*",
    ]


def _format_storage(settings: Settings, state: Path, config: Path) -> None:
    if (state / "data" / "meta.properties").exists():
        return
    cluster_id = _random_cluster_id()
    cmd = [
        *_java_base(settings, state),
        "kafka.tools.StorageTool",
        "format",
        f"--cluster-id={cluster_id}",  # "=": an id may start with "-", which argparse would misread
        "-c",
        str(config),
        "--standalone",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ServiceError(f"formatting Kafka storage failed:\n{result.stdout}{result.stderr}")


def _random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def up(settings: Settings) -> ServiceRecord:
    """Start the broker unless our own is already running; wait until it is usable."""
    existing = record(settings)
    if owned_alive(existing):
        assert existing is not None
        _wait_ready(settings, existing.pid, _state(settings) / "kafka.log")
        return existing
    _, port = _ports(settings)
    ensure_ports_free(
        {
            "KGRAG_KAFKA__BOOTSTRAP_SERVERS": port,
            "KGRAG_SERVICES__KAFKA_CONTROLLER_PORT": settings.services.kafka_controller_port,
        },
        "Kafka",
    )
    prepare(settings)
    state = _state(settings)
    state.mkdir(parents=True, exist_ok=True)
    config = _write_config(settings, state)
    _format_storage(settings, state, config)
    argv = [*_java_base(settings, state), "kafka.Kafka", str(config)]
    log_path = state / "kafka.log"
    rec = launch(
        NAME,
        argv,
        state=state,
        log_path=log_path,
        env=os.environ,
        ports={"broker": port, "controller": settings.services.kafka_controller_port},
        version=settings.services.kafka_version,
    )
    _wait_ready(settings, rec.pid, log_path)
    return rec


def _wait_ready(settings: Settings, pid: int, log_path: Path) -> None:
    from kgrag.services.process import pid_alive

    host, port = _ports(settings)
    timeout = settings.services.start_timeout_s
    wait_until(
        lambda: port_open(port, host),
        timeout=timeout,
        what="Kafka",
        alive=lambda: pid_alive(pid),
        log_path=log_path,
    )
    asyncio.run(round_trip(settings.kafka.bootstrap_servers, timeout=timeout))


async def round_trip(bootstrap: str, *, timeout: float = 60.0) -> None:
    """Usable means a produce/consume round trip on a health topic succeeds."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import KafkaError, TopicAlreadyExistsError

    topic = "_kgrag_health"
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            try:
                await admin.create_topics([NewTopic(topic, 1, 1)])
            except TopicAlreadyExistsError:
                pass
            finally:
                await admin.close()
            marker = uuid.uuid4().hex.encode()
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
            await producer.start()
            try:
                meta = await producer.send_and_wait(topic, marker)
            finally:
                await producer.stop()
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
            await consumer.start()
            try:
                from aiokafka import TopicPartition

                tp = TopicPartition(topic, meta.partition)
                consumer.assign([tp])
                consumer.seek(tp, meta.offset)
                msg = await asyncio.wait_for(consumer.getone(), timeout=10)
                if msg.value == marker:
                    return
            finally:
                await consumer.stop()
        except (KafkaError, OSError, TimeoutError) as e:
            last = e
        await asyncio.sleep(1.0)
    raise ServiceError(
        f"Kafka at {bootstrap} did not complete a produce/consume round trip: {last}"
    )
