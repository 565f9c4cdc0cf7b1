"""A burst of news on a worker whose runs write at most three reports each: the job writes the
rest in the runs that follow at once, with no new article, until every community has its
report, and no run wrote more than its share (``community.reports_per_run``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.job_status import read_status
from core.publish import publish
from core.tables.opening import open_graph_store
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings
from tests.integration.helpers import TunedWorker, run_caught_up, write_jsonl
from tests.integration.test_community_job import corpus

LIMIT = 3


def test_reports_put_off_are_written_by_the_runs_that_follow(
    service_endpoints: dict[str, object], tmp_path: Path, session_namespace: str
) -> None:
    settings = make_settings(service_endpoints, f"{session_namespace}-paced", tmp_path)
    asyncio.run(ensure_topics(settings))
    env = {
        "KGRAG_COMMUNITY__DEBOUNCE_S": "1",
        "KGRAG_COMMUNITY__MAX_WAIT_S": "8",
        "KGRAG_COMMUNITY__REPORTS_PER_RUN": str(LIMIT),
    }
    worker = TunedWorker(settings, tmp_path / "worker.log", env).start()
    store = open_graph_store(settings)
    try:
        asyncio.run(publish(settings, write_jsonl(tmp_path / "burst.jsonl", corpus(60))))
        snap = asyncio.run(
            run_caught_up(
                settings,
                store,
                lambda s: (
                    len(s.documents) == 60
                    and {r.id for r in s.community_reports} == {c.id for c in s.communities}
                ),
                timeout=420,
                log_tail=worker.log_tail,
            )
        )
        assert len(snap.communities) > 2 * LIMIT  # the burst called for several runs' worth
        runs = [v.meta for v in store.version_infos_all() if v.meta.kind == "run"]
        assert max(m.reports_regenerated for m in runs) <= LIMIT
        assert sum(m.reports_regenerated for m in runs) >= len(snap.communities)
        status = read_status(settings)
        assert status is not None and status.last_run is not None
        assert status.last_run.reports_deferred == 0
    finally:
        worker.stop()
        asyncio.run(delete_namespace_topics(settings))
