"""``kgrag status``: the JSON a script reads, with and without Kafka.

Kafka points at a closed loopback port, so the unreachable case is the real one (the client
is refused at once); the case with a backlog hands the command two scripted Kafka samples.
The snapshot and the community job's status file are real files in a temporary data_dir.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from core.job_status import FailedItem, JobStatus, LastRun, write_status
from core.settings import Settings, get_settings
from core.tables.opening import open_graph_store
from kgrag import status_facts
from kgrag.cli import app
from kgrag.cli_status import KafkaUnreachableError
from kgrag.status_facts import KafkaSample
from tests.unit.test_query_support import world

KEYS = {
    "namespace", "checked_at", "documents_indexed", "snapshot", "kafka", "pending",
    "pending_total", "eta", "community_job", "community_job_heard_s_ago", "health", "notes",
    "workers", "ingestion",
}  # fmt: skip


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    monkeypatch.delenv("KGRAG_CONFIG", raising=False)
    monkeypatch.setenv("KGRAG_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KGRAG_NAMESPACE", "clistatus")
    monkeypatch.setenv("KGRAG_KAFKA__BOOTSTRAP_SERVERS", f"127.0.0.1:{closed_port()}")
    monkeypatch.setenv("KGRAG_KAFKA__PARTITIONS", "2")
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


def publish_snapshot(
    settings: Settings, age_s: float, consumed: dict[str, int], *, llm: bool = True
) -> None:
    """Version 3: 5 documents whose extraction spent 40,000 + 5,000 tokens, $0.009 (or, not
    ``llm``, an offline version that spent nothing)."""
    created = datetime.fromtimestamp(time.time() - age_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    base = world()
    meta = replace(
        base.meta,
        version=3,
        created_at=created,
        counts={"documents": 5, "entities": len(base.entities)},
        consumed_offsets=consumed,
        mode="llm" if llm else "offline",
        ingest_tokens={"prompt": 40_000, "completion": 5_000} if llm else {},
        ingest_cost_usd=0.009 if llm else 0.0,
    )
    open_graph_store(settings).write(replace(base, meta=meta))


def a_job(heard_s_ago: float) -> JobStatus:
    now = time.time()
    refused = FailedItem("summary", "e:opec", "HTTP 400: refused", 2, now - 300, now + 60)
    last = LastRun(version=3, finished_at=now - 700, duration_s=1.5, changes=9, events=2,
                   reports_regenerated=1, reports_deferred=7, summaries_written=4, failed_items=1,
                   llm_calls={"community_report": 2},
                   llm_tokens={"prompt": 9000, "completion": 700}, cost_usd=0.00177)  # fmt: skip
    return JobStatus(
        state="waiting",
        pid=31337,
        started_at=now - 3600,
        updated_at=now - heard_s_ago,
        runs=4,
        pool_restarts=1,
        child_recycles=2,
        child_handovers=1,
        last_run=last,
        failed_items_total=1,
        failed_items=(refused,),
        last_save_s=0.42,
    )


def run(*args: str) -> tuple[Any, dict[str, Any] | None]:
    result = CliRunner().invoke(app, ["status", *args])
    body = orjson.loads(result.stdout) if "--json" in args else None
    return result, body


class TestKafkaUnreachable:
    def test_json_still_has_the_job_and_the_snapshot_and_says_why(self, settings: Settings) -> None:
        publish_snapshot(settings, age_s=900, consumed={"0": 7})
        write_status(settings, a_job(heard_s_ago=45))
        started = time.monotonic()
        result, body = run("--json", "--timeout-s", "1")
        assert time.monotonic() - started < 5
        assert result.exit_code == 1 and body is not None
        assert set(body) == KEYS
        kafka = body["kafka"]
        assert kafka["reachable"] is False and kafka["bootstrap_servers"].startswith("127.0.0.1:")
        assert "unreachable" in kafka["error"] and "kgrag services up" in kafka["error"]
        assert "Traceback" not in result.stdout
        job = body["community_job"]
        assert job["pid"] == 31337 and job["alive"] is False and job["restarts"] == 1
        assert job["child_recycles"] == 2 and job["child_handovers"] == 1
        assert job["failed_items"][0]["item"] == "e:opec"
        assert body["community_job_heard_s_ago"] == pytest.approx(45, abs=5)
        assert body["documents_indexed"] == 5
        assert body["ingestion"] == {
            "documents": 5,
            "prompt_tokens": 40_000,
            "completion_tokens": 5_000,
            "cost_usd": 0.009,
            "cost_per_document_usd": pytest.approx(0.0018),
        }
        assert body["snapshot"]["version"] == 3 and body["snapshot"]["age_s"] >= 899
        assert body["pending"] is None and body["pending_total"] is None
        assert body["eta"]["seconds"] is None and body["eta"]["text"] == "unknown"
        health = body["health"]
        assert health["status"] == "degraded"
        assert health["reasons"][0] == kafka["error"]
        assert health["reasons"][1].startswith("1 report(s)/summary(ies) refused by the LLM")

    def test_nothing_yet_is_still_a_json_object(self, settings: Settings) -> None:
        result, body = run("--json", "--timeout-s", "1", "--sample-s", "0")
        assert result.exit_code == 1 and body is not None
        assert body["snapshot"] is None and body["community_job"] is None
        assert body["documents_indexed"] is None and body["ingestion"] is None
        assert body["health"]["status"] == "no_snapshot"
        assert not settings.snapshots_dir.exists()  # a status check creates nothing

    def test_human_form_shows_the_rest_then_fails_with_one_message(
        self, settings: Settings
    ) -> None:
        write_status(settings, a_job(heard_s_ago=1))
        result, _ = run("--timeout-s", "1")
        assert isinstance(result.exception, KafkaUnreachableError)
        assert "kgrag services up" in str(result.exception)
        assert "Community job" in result.stdout and "31337" in result.stdout
        assert "alive" in result.stdout and "e:opec" in result.stdout
        unwrapped = " ".join(result.stdout.replace("│", " ").split())  # long cells wrap
        assert "2 LLM" in unwrapped and "9000+700 tokens, $0.0018" in unwrapped, unwrapped
        assert "last state save 0.42 s (after the last run)" in unwrapped, unwrapped
        assert "1 report(s) regenerated (7 put off to the next runs)" in unwrapped, unwrapped
        assert "2 child(ren) replaced for memory" in unwrapped, unwrapped

    @pytest.mark.parametrize(
        ("llm", "shown"),
        [
            (True, "40000+5000 tokens, $0.0090 for 5 document(s), $0.001800 per document"),
            (False, "no LLM used (offline mode): 0 tokens, $0"),
        ],
    )
    def test_human_form_says_what_extraction_cost(
        self, settings: Settings, llm: bool, shown: str
    ) -> None:
        publish_snapshot(settings, age_s=60, consumed={"0": 7}, llm=llm)
        result, _ = run("--timeout-s", "1")
        said = " ".join(result.stdout.replace("│", " ").split())  # a wrapped cell, unwrapped
        assert f"extraction cost {shown}" in said, said


class TestWithABacklog:
    @pytest.fixture
    def samples(self, monkeypatch: pytest.MonkeyPatch) -> list[KafkaSample]:
        """Two readings 2 s apart: 45 messages drained, 64 left (4 of them vectors)."""
        queue = [
            KafkaSample(
                100.0, {"documents": 10, "chunks": 30, "extractions": 20}, {0: 20, 1: 5}, 9
            ),
            KafkaSample(102.0, {"documents": 0, "chunks": 20, "extractions": 10}, {0: 25, 1: 5}, 4),
        ]
        taken: list[KafkaSample] = []

        async def fake(settings: Settings, timeout_s: float) -> KafkaSample:
            taken.append(queue.pop(0))
            return taken[-1]

        monkeypatch.setattr(status_facts, "sample_kafka", fake)
        return taken

    def test_pending_per_stage_and_eta(
        self, settings: Settings, samples: list[KafkaSample]
    ) -> None:
        publish_snapshot(settings, age_s=30, consumed={"0": 7, "1": 5})
        write_status(settings, a_job(heard_s_ago=1))
        result, body = run("--json", "--sample-s", "0.01")
        assert result.exit_code == 0, result.output
        assert body is not None and len(samples) == 2
        assert body["pending"] == {
            "documents": 0, "chunks": 20, "extractions": 10, "entity_items": 0,
            "relationship_items": 0, "claim_items": 0, "graph_changes": 18, "vectors": 4,
        }  # fmt: skip
        assert body["pending_total"] == 52
        # first total: 60 + 13 pending changes + 9 vectors = 82; second: 52; 30 drained in 2 s
        assert body["eta"]["drained_per_s"] == pytest.approx(15.0)
        assert body["eta"]["seconds"] == pytest.approx(52 / 15.0)
        assert body["kafka"] == {
            "bootstrap_servers": settings.kafka.bootstrap_servers,
            "reachable": True,
            "error": None,
        }
        assert body["health"]["status"] == "degraded"  # the refused summary; not stale (30 s)
        assert len(body["health"]["reasons"]) == 1

    def test_human_form(self, settings: Settings, samples: list[KafkaSample]) -> None:
        result, _ = run("--sample-s", "0.01")
        assert result.exit_code == 0, result.output
        out = result.stdout
        assert "Pending work" in out and "graph_changes (community job)" in out
        assert "ETA" in out and "draining 15.0/s" in out and "vectors (Weaviate)" in out
        assert "none yet" in out  # no snapshot
