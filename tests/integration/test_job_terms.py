"""A community job starting a term (a restart, or leadership regained) owes a run for what
light commits folded: real Kafka, the job in this process, its child as in a worker.

Light commits fold changes into the job's state and move its offsets past them, and a run's
checkpoint carries the light commits made while it worked. A job that starts from such a state
reads nothing new from ``graph-changes``, yet the graph holds changes no run has clustered or
reported; it must run without waiting for another article.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from agents.community.job import CommunityJob
from agents.community.state import save_state
from core.job_status import read_status
from core.settings.community import CommunitySettings
from core.settings.llm import LLMSettings
from graph.job.state import JobState
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings
from tests.unit.test_community_run import base_world


async def test_a_job_started_on_folded_changes_runs_without_a_new_one(
    service_endpoints: dict[str, object], session_namespace: str, tmp_path: Path
) -> None:
    settings = make_settings(
        service_endpoints,
        f"{session_namespace}-terms",
        tmp_path,
        llm=LLMSettings(base_url=None),
        community=CommunitySettings(debounce_s=0.5, max_wait_s=5.0),
    )
    await ensure_topics(settings)
    state = JobState()
    state.view = base_world().view  # folded by light commits; no run has taken it in
    state.offsets = {p: 0 for p in range(settings.kafka.partitions)}  # the topic is empty
    save_state(settings, state)
    job = CommunityJob(settings, poll_s=0.1)
    task = asyncio.ensure_future(job.run_forever())
    try:
        deadline = time.monotonic() + 90
        status = None
        while time.monotonic() < deadline and not task.done():
            status = read_status(settings)
            if status is not None and status.runs >= 1:
                break
            await asyncio.sleep(0.2)
        assert not task.done(), task.exception() if task.done() else ""
        assert status is not None and status.runs == 1, status
        assert status.last_run is not None and status.last_run.changes == 0
        assert status.last_run.reports_regenerated > 0  # the folded storylines, clustered
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await delete_namespace_topics(settings)
