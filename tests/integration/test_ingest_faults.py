"""Nothing is lost or half-done when the outside world fails: a Weaviate that goes away for a
minute mid-stream (with a rebalance while the embedders wait for it), and an LLM that
rate-limits and answers garbage.

The Weaviate test runs its own Weaviate (other ports, its own state directory) so stopping it
never disturbs the session's shared one. The LLM test runs the scripted OpenAI-compatible
server in this process and points a worker at it.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from core.lag import pipeline_lag
from core.publish import publish
from core.settings import Settings
from core.tokenizer import get_encoding
from core.vector_store import WeaviateStore
from graph.extraction.chunking import chunk_document
from graph.extraction.documents import document_from_obj
from kgrag.services import weaviate
from kgrag.services.process import port_open, stop_pid
from kgrag.testing.scripted_llm import FaultConfig, ScriptedLLMServer
from streams.admin import delete_namespace_topics, ensure_topics
from streams.codecs import decode_chunk_event
from tests.conftest import make_settings
from tests.integration.helpers import (
    TunedWorker,
    WorkerProcess,
    fold_until,
    read_all,
    synthetic_documents,
    vector_keys,
    write_jsonl,
)

# ---- Weaviate stopped for 60 s mid-stream ----------------------------------------------------

OWN_WEAVIATE_PORTS = {"http": 28181, "grpc": 25152, "gossip": 27847, "raft": 28401}
OUTAGE_S = 60.0


@pytest.fixture(scope="module")
def own_weaviate(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Settings]:
    """Settings of a namespace whose Weaviate is ours alone to stop and start."""
    p = OWN_WEAVIATE_PORTS
    taken = [
        n
        for n in (p["http"], p["grpc"], p["gossip"], p["gossip"] + 1, p["raft"], p["raft"] + 1)
        if port_open(n)
    ]
    if taken:
        pytest.fail(f"ports {taken} of the private Weaviate are taken")
    base = make_settings(
        service_endpoints, f"{session_namespace}-wvdown", tmp_path_factory.mktemp("wvdown")
    )
    settings = base.model_copy(
        update={
            "weaviate": base.weaviate.model_copy(
                update={"url": f"http://127.0.0.1:{p['http']}", "grpc_port": p["grpc"]}
            ),
            "services": base.services.model_copy(
                update={
                    "state_dir": tmp_path_factory.mktemp("wvdown-services"),
                    "weaviate_gossip_port": p["gossip"],
                    "weaviate_raft_port": p["raft"],
                }
            ),
        }
    )
    weaviate.up(settings)
    yield settings
    rec = weaviate.record(settings)
    if rec is not None:
        stop_pid(rec.pid)


async def test_vectors_written_while_weaviate_was_down_arrive_once_it_is_back(
    own_weaviate: Settings, tmp_path: Path
) -> None:
    settings = own_weaviate
    docs = synthetic_documents(300, seed=11, prefix="wv")
    before, during = docs[:100], docs[100:]
    await ensure_topics(settings)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        await publish(settings, write_jsonl(tmp_path / "before.jsonl", before))
        async with WeaviateStore(settings) as store:
            deadline = time.monotonic() + 120
            while await store.count("text_unit") == 0:
                assert time.monotonic() < deadline, f"no text unit indexed\n{worker.log_tail()}"
                await asyncio.sleep(0.5)
        record = weaviate.record(settings)
        assert record is not None
        stop_pid(record.pid)  # mid-stream: the first documents are still being embedded
        assert not port_open(OWN_WEAVIATE_PORTS["http"])
        down_at = time.monotonic()
        await publish(settings, write_jsonl(tmp_path / "during.jsonl", during))
        # the graph keeps being merged; only the embedders wait, holding their offsets
        merged = await fold_until(
            settings,
            lambda v: len(v.documents) == len(docs) and len(v.text_units) >= len(docs),
            settle=3,
            timeout=OUTAGE_S - 5,
            caught_up=False,
            what=f"the graph to be merged while Weaviate is down\n{worker.log_tail()}",
        )
        # the graph worker's group commits everything: no stage waits for Weaviate but the
        # embedders, whose own group holds its offsets behind the unwritten vectors
        lag = await pipeline_lag(settings)
        while lag["graph"] and time.monotonic() - down_at < OUTAGE_S - 10:
            await asyncio.sleep(1)
            lag = await pipeline_lag(settings)
        assert lag["graph"] == 0, f"the graph stages waited for Weaviate: {lag}"
        assert lag["vectors"] > 0, "offsets were committed past unwritten vectors"
        # a rebalance while the embedders wait (a worker joins, or the stall watchdog's
        # repair): it must end once they are through, not wait for ever on messages that
        # one agent finished and the other had only queued
        os.kill(worker.child_pid("vector-worker"), signal.SIGHUP)
        await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - down_at)))
        assert worker.proc is not None and worker.proc.poll() is None, worker.log_tail()
        weaviate.up(settings)  # the same state directory, so what was written before is there

        # the embedders were stalled, so the group cannot catch up until they have written
        view = await fold_until(
            settings,
            lambda v: len(v.documents) == len(docs),
            timeout=240,
            what=f"the embedders to catch up\n{worker.log_tail()}",
        )
    finally:
        worker.stop()
        await delete_namespace_topics(settings)
    units = vector_keys(settings, "text_unit")
    entities = vector_keys(settings, "entity")
    assert len(units) == len(set(units)), "a text unit was stored twice"
    assert len(entities) == len(set(entities)), "an entity was stored twice"
    assert set(view.entities) == set(merged.entities)
    assert set(units) == set(view.text_units)
    assert set(entities) == set(view.entities)
    async with WeaviateStore(settings) as store:
        assert await store.count("text_unit") == len(view.text_units)
        assert await store.count("entity") == len(view.entities)


# ---- LLM rate limits and garbage --------------------------------------------------------------


@pytest.fixture(scope="module")
def llm_server() -> Iterator[ScriptedLLMServer]:
    faults = FaultConfig(rate_limit=0.2, retry_after_s=0.2, malformed=0.05, seed=1987)
    with ScriptedLLMServer(faults=faults) as server:
        yield server


def chunk_ids(settings: Settings, docs: list[dict[str, object]]) -> dict[str, str]:
    """Chunk id -> document id, cut as the worker cuts them."""
    enc = get_encoding(settings.chunking.encoding)
    out = {}
    for obj in docs:
        doc = document_from_obj(obj, max_chars=settings.chunking.max_document_chars)
        for c in chunk_document(
            doc,
            encode=enc.encode_ordinary,
            decode=enc.decode,
            size=settings.chunking.size,
            overlap=settings.chunking.overlap,
        ):
            out[c.id] = c.document_id
    return out


async def dead_letters(settings: Settings) -> dict[str, str]:
    """Chunk id -> reason, from ``extractions.dlq``."""
    out = {}
    for _, value in await read_all(settings, settings.topic("extractions_dlq")):
        letter = orjson.loads(value)
        assert letter["stage"] == "extractor", letter
        chunk = decode_chunk_event(letter["payload"].encode())
        out[chunk.id] = letter["reason"]  # type: ignore[union-attr]
    return out


async def test_rate_limits_and_garbage_end_merged_or_dead_lettered_never_half_merged(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
) -> None:
    base = make_settings(
        service_endpoints, f"{session_namespace}-llmfault", tmp_path_factory.mktemp("llmfault")
    )
    settings = base.model_copy(
        update={"llm": base.llm.model_copy(update={"base_url": llm_server.base_url})}
    )
    flaky = synthetic_documents(40, seed=5, prefix="flaky")
    throttled = synthetic_documents(1, seed=6, prefix="throttled")
    garbled = synthetic_documents(1, seed=8, prefix="garbled")
    await ensure_topics(settings)
    worker = TunedWorker(
        settings,
        tmp_path / "worker.log",
        {
            "KGRAG_LLM__MAX_RETRIES": "2",
            "KGRAG_LLM__CONCURRENCY": "8",
            # a 429 outlasting max_retries is retried for this long (300 s by default)
            "KGRAG_LLM__RATE_LIMIT_BUDGET_S": "1",
        },
    ).start()
    try:
        await publish(settings, write_jsonl(tmp_path / "flaky.jsonl", flaky))
        await fold_until(
            settings,
            lambda v: len(v.documents) == len(flaky),
            timeout=300,
            what=f"the flaky run\n{worker.log_tail()}",
        )
        faulted = [c for c in llm_server.calls() if c.fault]
        # every call of this document is refused: it must end in the dead-letter topic
        llm_server.set_faults(FaultConfig(rate_limit=1.0, retry_after_s=0.05))
        await publish(settings, write_jsonl(tmp_path / "throttled.jsonl", throttled))
        await fold_until(settings, lambda v: "throttled-0000" in v.documents, timeout=120)
        # every answer ignores the format: after its retries the chunk is dead-lettered
        llm_server.set_faults(FaultConfig(malformed=1.0))
        await publish(settings, write_jsonl(tmp_path / "garbled.jsonl", garbled))
        view = await fold_until(
            settings,
            lambda v: "garbled-0000" in v.documents,
            timeout=120,
            what=f"the garbled document\n{worker.log_tail()}",
        )
        letters = await dead_letters(settings)
    finally:
        worker.stop()
        await delete_namespace_topics(settings)

    assert {c.fault for c in faulted} == {"rate_limit", "malformed"}, "faults were not injected"
    expected = chunk_ids(settings, flaky + throttled + garbled)
    merged = {cid for units in view.entity_units.values() for cid in units}
    for cid, doc_id in expected.items():
        assert (cid in merged) != (cid in letters), f"{doc_id}'s chunk {cid} is not exactly one"
        assert (cid in view.text_units) == (cid in merged)
    half_merged = set(letters) & (merged | set(view.text_units))
    half_merged |= {c for units in view.relationship_units.values() for c in units} & set(letters)
    assert not half_merged, f"dead-lettered chunks with merged contributions: {half_merged}"
    assert set(letters) <= set(expected)

    flaky_chunks = {c for c, d in expected.items() if d.startswith("flaky")}
    assert len(flaky_chunks & merged) >= 0.85 * len(flaky_chunks), "retries rescued too few"
    by_doc = {expected[c]: reason for c, reason in letters.items()}
    assert by_doc["throttled-0000"].startswith("LLM failed after retries"), by_doc
    attempts = re.search(r"after (\d+) attempt\(s\)", by_doc["throttled-0000"])
    assert attempts is not None and int(attempts[1]) >= 3, by_doc["throttled-0000"]
    assert "429" in by_doc["throttled-0000"]
    assert by_doc["garbled-0000"].startswith("extraction output unusable"), by_doc
    assert all(reason for reason in letters.values())
