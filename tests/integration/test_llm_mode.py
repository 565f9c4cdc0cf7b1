"""LLM mode end to end on real news, with an LLM that refuses and garbles some answers.

Real Kafka and Weaviate, a real ``kgrag worker`` (its community job a supervised child), the
scripted OpenAI-compatible server as the model, and the first 300 Reuters dev articles of
``../shared/data`` (skipped without them: the file stays outside the project). The server
answers some report and summary calls with a 400 (as a content filter or an over-long context
does), a 429 with Retry-After, or output that is not the requested JSON. What a user sees:

1. every article becomes searchable in a version whose every community has an LLM-written
   report, the refused items having been retried in later runs, and the job was never
   restarted for it; ``kgrag status --json`` says so;
2. the community job process is killed; the worker restarts it, ``kgrag status`` counts the
   restart, and three more articles still reach a complete version.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from core.job_status import JobStatus, read_status
from core.lag import reflects_everything
from core.publish import publish
from core.settings import Settings
from core.settings.llm import LLMSettings
from core.tables.errors import SnapshotStoreError
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from graph.versions.model import Snapshot
from kgrag.testing.scripted_llm import FaultConfig, ScriptedLLMServer
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings, settings_env
from tests.integration.helpers import TunedWorker, write_jsonl

DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "reuters-1987-dev.jsonl"
N_DOCS = 300
REPORT_KINDS = ["community_report", "community_reports", "summarize_descriptions"]

pytestmark = pytest.mark.skipif(not DEV.exists(), reason=f"{DEV} not found (dev data)")


def dev_articles(start: int, count: int) -> list[dict[str, Any]]:
    out = []
    with DEV.open() as fh:
        for i, line in enumerate(fh):
            if i >= start + count:
                break
            if i >= start:
                out.append(json.loads(line))
    return out


@dataclass
class LLMSystem:
    settings: Settings
    llm: ScriptedLLMServer
    store: GraphTables
    worker: TunedWorker
    tmp: Path

    async def complete(self, wanted: set[str]) -> Snapshot | None:
        """The latest version when a run wrote it, it holds every wanted document with
        everything extracted from it, and every community has an LLM-written report; else
        None."""
        try:
            snap = self.store.load()
        except SnapshotStoreError:
            return None
        if snap.meta.kind != "run":  # a light commit: communities wait for the run
            return None
        modes = {r.id: r.mode for r in snap.community_reports}
        if not wanted <= {d.id for d in snap.documents}:
            return None
        if any(modes.get(c.id) != "llm" for c in snap.communities):
            return None
        if not await reflects_everything(self.settings, snap.meta.consumed_offsets):
            return None
        return snap

    async def wait_complete(self, wanted: set[str], timeout: float) -> Snapshot:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (snap := await self.complete(wanted)) is not None:
                return snap
            if self.worker.proc is not None and self.worker.proc.poll() is not None:
                raise AssertionError(f"the worker exited\n{self.worker.log_tail()}")
            await asyncio.sleep(1)
        status = read_status(self.settings)
        raise AssertionError(
            f"no complete version in {timeout:.0f}s; job: {status}\n{self.worker.log_tail(60)}"
        )

    def status_json(self) -> dict[str, Any]:
        """What ``kgrag status --json`` prints for this namespace."""
        out = subprocess.run(
            [sys.executable, "-m", "kgrag.cli", "status", "--json", "--sample-s", "0.5"],
            env=settings_env(self.settings),
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr.decode()
        return dict(json.loads(out.stdout))

    def job_status(self, until: Any, timeout: float = 60) -> JobStatus:
        deadline = time.monotonic() + timeout
        status = read_status(self.settings)
        while time.monotonic() < deadline:
            status = read_status(self.settings)
            if status is not None and until(status):
                return status
            time.sleep(0.5)
        raise AssertionError(f"job status never matched: {status}")


@pytest.fixture(scope="module")
def system(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[LLMSystem]:
    tmp = tmp_path_factory.mktemp("llm-mode")
    faults = FaultConfig(
        bad_request=0.04,
        rate_limit=0.04,
        retry_after_s=0.2,
        malformed=0.04,
        kinds=REPORT_KINDS,
        seed=5,
    )
    with ScriptedLLMServer(faults=faults) as llm:
        settings = make_settings(
            service_endpoints,
            f"{session_namespace}-llm",
            tmp,
            llm=LLMSettings(base_url=llm.base_url, max_retries=2, timeout_s=30),
        )
        asyncio.run(ensure_topics(settings))
        env = {
            "KGRAG_LLM__MAX_RETRIES": "2",
            "KGRAG_COMMUNITY__DEBOUNCE_S": "1",
            "KGRAG_COMMUNITY__MAX_WAIT_S": "10",
            "KGRAG_COMMUNITY__RETRY_BASE_S": "2",
        }
        worker = TunedWorker(settings, tmp / "worker.log", env).start()
        running = LLMSystem(settings, llm, open_graph_store(settings), worker, tmp)
        try:
            yield running
        finally:
            worker.stop()
            asyncio.run(delete_namespace_topics(settings))


async def test_300_articles_reach_llm_reports_through_refusals(system: LLMSystem) -> None:
    docs = dev_articles(0, N_DOCS)
    await publish(system.settings, write_jsonl(system.tmp / "first.jsonl", docs))
    snap = await system.wait_complete({d["id"] for d in docs}, timeout=480)

    calls = system.llm.calls()
    refused = [c for c in calls if c.kind in REPORT_KINDS and c.status == 400]
    garbled = [c for c in calls if c.fault == "malformed"]
    assert refused and garbled, "the faults were injected"
    assert len(snap.communities) > 50 and len(snap.entities) > 1000
    assert {r.mode for r in snap.community_reports} == {"llm"}
    assert all(r.title and r.summary for r in snap.community_reports)

    version = snap.meta.version  # the status is written just after the snapshot
    status = system.job_status(lambda s: s.last_run is not None and s.last_run.version >= version)
    assert status.restarts == 0 and status.last_error is None
    assert status.runs >= 2, "refused items were retried in a later run"
    shown = system.status_json()
    assert shown["documents_indexed"] >= N_DOCS
    assert shown["community_job"]["alive"] is True
    assert shown["community_job"]["restarts"] == 0
    assert shown["kafka"]["reachable"] is True


async def test_a_killed_job_is_restarted_and_keeps_indexing(system: LLMSystem) -> None:
    before = system.job_status(lambda s: s.state == "waiting")
    os.kill(before.pid, signal.SIGKILL)
    after = system.job_status(lambda s: s.pid != before.pid and s.state == "waiting", timeout=90)
    assert after.supervisor_restarts == 1

    more = dev_articles(N_DOCS, 3)
    await publish(system.settings, write_jsonl(system.tmp / "more.jsonl", more))
    wanted = {d["id"] for d in dev_articles(0, N_DOCS + 3)}
    snap = await system.wait_complete(wanted, timeout=240)
    assert len(snap.documents) == N_DOCS + 3
    shown = system.status_json()
    assert shown["community_job"]["restarts"] == 1
    assert shown["community_job"]["pid"] == after.pid
