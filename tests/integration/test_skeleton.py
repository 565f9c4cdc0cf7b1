"""Walking skeleton through real Kafka and Weaviate: publish → worker → basic query."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import orjson
import pytest

from core.publish import publish
from core.settings import Settings
from core.vector_store import WeaviateStore
from offline.embedding import HashingEmbedder
from query.basic import search_text_units
from tests.conftest import make_settings
from tests.integration.helpers import (
    WorkerProcess,
    eventually,
    produce_raw,
    read_topic,
    running_worker,
)

TOPICS = [
    "harbour",
    "vineyard",
    "glacier",
    "orchestra",
    "satellite",
    "bakery",
    "railway",
    "volcano",
    "library",
    "marathon",
    "submarine",
    "beekeeping",
    "telescope",
    "ferry",
    "quarry",
    "lighthouse",
    "carnival",
    "observatory",
    "tannery",
    "aqueduct",
]


def _documents(tmp: Path) -> Path:
    path = tmp / "docs.jsonl"
    with open(path, "wb") as fh:
        for i, word in enumerate(TOPICS):
            doc = {
                "id": f"doc-{i:02d}",
                "title": f"News about the {word}",
                "text": (
                    f"Officials in the town of Example{i} said on Monday that the {word} "
                    f"project will continue. The {word} committee met for the {i}th time. "
                    f"Residents welcomed the decision about the {word}."
                ),
                "published_at": f"1987-03-{(i % 28) + 1:02d}T10:00:00Z",
                "source": "test",
            }
            fh.write(orjson.dumps(doc) + b"\n")
    return path


@pytest.fixture(scope="module")
def settings(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Settings:
    return make_settings(
        service_endpoints, f"{session_namespace}-skel", tmp_path_factory.mktemp("skel")
    )


@pytest.fixture(scope="module")
def worker(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_worker(settings, tmp_path_factory.mktemp("logs")) as w:
        yield w


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[WeaviateStore]:
    async with WeaviateStore(settings) as s:
        yield s


async def test_published_documents_are_found_by_basic_query(
    settings: Settings, worker: WorkerProcess, store: WeaviateStore, tmp_path: Path
) -> None:
    summary = await publish(settings, _documents(tmp_path))
    assert summary.sent == 20 and not summary.bad
    embedder = HashingEmbedder(settings.embeddings.dimensions)

    async def all_indexed() -> bool:
        return await store.count("text_unit") >= 20

    await eventually(all_indexed, timeout=120, what=f"20 text units\n{worker.log_tail()}")
    for i in (3, 11, 17):
        hits = await search_text_units(
            f"the {TOPICS[i]} committee", embedder=embedder, store=store, limit=3
        )
        assert hits, "basic query returned nothing"
        assert hits[0].document_id == f"doc-{i:02d}", [h.document_id for h in hits]


async def test_malformed_messages_go_to_the_dead_letter_topic_and_good_ones_still_flow(
    settings: Settings, worker: WorkerProcess, store: WeaviateStore
) -> None:
    good = {
        "id": "after-the-bad-ones",
        "title": "Zeppelin festival",
        "text": "The zeppelin festival drew large crowds to the airfield.",
        "published_at": "1987-03-20",
    }
    bad: list[tuple[bytes | None, bytes]] = [
        (b"k1", b"this is not json"),
        (b"k2", b"\xff\xfe\x00garbage"),
        (b"k3", orjson.dumps({"id": "no-text", "published_at": "1987-03-01"})),
        (b"k4", orjson.dumps({"id": 42, "text": "x", "published_at": "1987-03-01"})),
        (b"k5", orjson.dumps({"id": "empty", "text": "   ", "published_at": "1987-03-01"})),
        (
            b"k6",
            orjson.dumps({"id": "huge", "text": "word " * 200_000, "published_at": "1987-03-01"}),
        ),
    ]
    await produce_raw(
        settings, settings.topic("documents"), [*bad, (b"after-the-bad-ones", orjson.dumps(good))]
    )
    letters = await read_topic(settings, settings.topic("documents_dlq"), expect=6, timeout=90)
    reasons = {d["key"]: d["reason"] for d in letters}
    assert set(reasons) == {"k1", "k2", "k3", "k4", "k5", "k6"}, reasons
    assert "not JSON" in reasons["k1"]
    assert "not UTF-8" in reasons["k2"]
    assert "missing required field 'text'" in reasons["k3"]
    assert "'id' must be a string" in reasons["k4"]
    assert "'text' is empty" in reasons["k5"]
    assert "more than the limit" in reasons["k6"]
    undecodable = next(d for d in letters if d["key"] == "k2")
    assert undecodable["payload_encoding"] == "base64"
    huge = next(d for d in letters if d["key"] == "k6")
    assert huge["payload_truncated"] and huge["payload_bytes"] > 1_000_000
    assert (huge["source_topic"], huge["offset"]) == (settings.topic("documents"), huge["offset"])
    embedder = HashingEmbedder(settings.embeddings.dimensions)

    async def good_indexed() -> bool:
        hits = await search_text_units(
            "zeppelin festival airfield", embedder=embedder, store=store, limit=1
        )
        return bool(hits) and hits[0].document_id == "after-the-bad-ones"

    await eventually(good_indexed, timeout=90, what=f"the good document\n{worker.log_tail()}")


async def test_topics_and_table_changelogs_are_made_before_the_worker_starts(
    service_endpoints: dict[str, object], tmp_path: Path, session_namespace: str
) -> None:
    """Every topic of the namespace and every changelog of the worker's tables exists with
    the configured partitions before a worker runs (the changelogs compacted, as faust
    makes them): a worker on a fresh broker then never meets a changelog faust created a
    moment before that has no partitions yet."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    from streams.admin import delete_namespace_topics, ensure_topics
    from streams.topology import changelog_topics

    settings = make_settings(service_endpoints, f"{session_namespace}-topics", tmp_path)
    created = await ensure_topics(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        changelogs = changelog_topics(settings)
        assert set(created) == {*settings.all_topics(), *changelogs}
        described = await admin.describe_topics(created)
        assert {len(t["partitions"]) for t in described} == {settings.kafka.partitions}
        configs = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in changelogs[:2]]
        )
        policies = {
            entry[0]: entry[1]
            for response in configs
            for resource in response.resources
            for entry in resource[4]
            if entry[0] == "cleanup.policy"
        }
        assert policies == {"cleanup.policy": "compact"}, configs
        assert await ensure_topics(settings) == []  # a second call creates nothing
    finally:
        await admin.close()
        await delete_namespace_topics(settings)
