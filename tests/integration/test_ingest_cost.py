"""What ingestion cost, end to end: a real ``kgrag worker`` in LLM mode (the scripted
OpenAI-compatible server as the model), real Kafka and Weaviate.

The tokens the extraction calls spent, as the server reported them in each answer's usage,
must be what a user reads: ``kgrag status --json`` (the graph version's sums), the documents'
rows, and the worker's Prometheus metrics (``KGRAG_WORKER__METRICS_PORT``), priced at the
chat model's price.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.publish import publish
from core.settings import Settings
from core.settings.llm import LLMSettings, cost_usd
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from graph.versions.model import Snapshot
from kgrag.testing.scripted_llm import ScriptedLLMServer
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings, settings_env
from tests.integration.helpers import TunedWorker, run_caught_up, synthetic_documents, write_jsonl

N_DOCS = 8
EXTRACTION_KINDS = ("extract_graph", "glean_continue", "glean_loop", "extract_claims")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Indexed:
    settings: Settings
    llm: ScriptedLLMServer
    worker: TunedWorker
    metrics_url: str
    snapshot: Snapshot


@pytest.fixture(scope="module")
def indexed(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Indexed]:
    tmp = tmp_path_factory.mktemp("ingest-cost")
    with ScriptedLLMServer() as llm:
        settings = make_settings(
            service_endpoints,
            f"{session_namespace}-cost",
            tmp,
            llm=LLMSettings(base_url=llm.base_url, max_retries=2, timeout_s=30),
        )
        asyncio.run(ensure_topics(settings))
        port = free_port()
        env = {
            "KGRAG_WORKER__METRICS_PORT": str(port),
            "KGRAG_COMMUNITY__DEBOUNCE_S": "1",
            "KGRAG_COMMUNITY__MAX_WAIT_S": "8",
        }
        worker = TunedWorker(settings, tmp / "worker.log", env).start()
        try:
            docs = synthetic_documents(N_DOCS, seed=11, prefix="cost")
            asyncio.run(publish(settings, write_jsonl(tmp / "docs.jsonl", docs)))
            wanted = {d["id"] for d in docs}
            store: GraphTables = open_graph_store(settings)
            snapshot = asyncio.run(
                run_caught_up(
                    settings,
                    store,
                    lambda s: wanted <= {d.id for d in s.documents},
                    timeout=300,
                    log_tail=worker.log_tail,
                    idle_pipeline=True,
                )
            )
            yield Indexed(settings, llm, worker, f"http://127.0.0.1:{port}/metrics", snapshot)
        finally:
            worker.stop()
            asyncio.run(delete_namespace_topics(settings))


def served(llm: ScriptedLLMServer) -> tuple[int, int]:
    """(prompt, completion) tokens the server reported in its extraction answers."""
    calls = [c for c in llm.calls() if c.kind in EXTRACTION_KINDS and c.status == 200]
    assert calls, "the worker extracted with the LLM"
    return sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls)


def status_json(settings: Settings) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "kgrag.cli", "status", "--json", "--sample-s", "0"],
        env=settings_env(settings),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr.decode()
    return dict(json.loads(out.stdout))


def test_status_says_what_the_server_served_for_extraction(indexed: Indexed) -> None:
    prompt, completion = served(indexed.llm)
    shown = status_json(indexed.settings)["ingestion"]
    assert (shown["prompt_tokens"], shown["completion_tokens"]) == (prompt, completion)
    assert shown["documents"] == N_DOCS
    price = indexed.settings.llm.price()  # gpt-4o-mini's
    assert price is not None and shown["cost_usd"] > 0
    assert shown["cost_usd"] == pytest.approx(cost_usd(price, prompt, completion))
    assert shown["cost_per_document_usd"] == pytest.approx(shown["cost_usd"] / N_DOCS)


def test_each_document_row_says_what_its_extraction_spent(indexed: Indexed) -> None:
    docs = indexed.snapshot.documents
    assert len(docs) == N_DOCS and all(d.prompt_tokens > 0 for d in docs)
    assert (
        sum(d.prompt_tokens for d in docs),
        sum(d.completion_tokens for d in docs),
    ) == served(indexed.llm)


def test_the_worker_metrics_count_the_same_tokens(indexed: Indexed) -> None:
    prompt, completion = served(indexed.llm)
    text = httpx.get(indexed.metrics_url, timeout=10).text
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    tokens = "kgrag_extraction_llm_tokens_total"
    assert samples[(tokens, (("kind", "prompt"),))] == prompt
    assert samples[(tokens, (("kind", "completion"),))] == completion
    price = indexed.settings.llm.price()
    chunks = samples[("kgrag_extraction_chunks_total", (("outcome", "extracted"),))]
    assert chunks >= N_DOCS
    assert samples[("kgrag_extraction_llm_cost_usd_total", ())] == pytest.approx(
        cost_usd(price, prompt, completion),
        abs=1e-6 * chunks,  # each chunk's cost is rounded
    )
    assert samples[("kgrag_extraction_documents_total", ())] == N_DOCS
    assert samples[("kgrag_llm_calls_total", ())] > 0  # the LLM client's counters beside them


def test_the_demo_line_reads_the_same_figures(indexed: Indexed) -> None:
    from kgrag.status_facts import latest_snapshot
    from kgrag.status_render import describe_ingestion

    facts = latest_snapshot(indexed.settings)
    assert facts is not None
    prompt, completion = served(indexed.llm)
    assert describe_ingestion(facts.ingestion(), "llm").startswith(
        f"{prompt}+{completion} tokens, $"
    )
