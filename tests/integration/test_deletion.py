"""Deleting published documents, end to end: real Kafka and Weaviate, real workers (offline).

Two namespaces index the same news. ``del`` is published every article, then some are deleted
(while its worker lies killed with SIGKILL, and it is killed again part-way through the
retractions); ``ref`` is only ever published what ``del`` keeps. Afterwards the two must hold
the same graph: every graph table compared by content (ids a run numbers aside) and the same
objects in every Weaviate collection.

What ``del`` deletes:
- a storyline of its own (three articles naming only its own names): its entities lose all
  evidence and go, and its community dissolves (a ``dissolved`` event);
- two ordinary articles, whose names other articles also carry: descriptions and counts shrink;
- an article and, in the same batch, a correction of it sent just before the deletion;
- an article deleted and, in the same batch, published again with new text (``ref`` has only
  the new text).

Then the edges of the interface: deleting again is a no-op, an unknown id a 404 over HTTP and
an error from ``kgrag delete`` (a message, no stack trace).
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from core.publish import delete_documents, plan_deletion, publish
from core.settings import Settings
from core.settings.serving import ApiSettings
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from graph.versions.model import Snapshot
from query.api.app import create_app
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings, settings_env
from tests.integration.helpers import (
    TunedWorker,
    produce_raw,
    read_topic,
    run_caught_up,
    topic_size,
    vector_keys,
    write_jsonl,
)
from tests.integration.test_community_job import NEW_STORYLINE, STORYLINES, article
from tests.integration.test_query_api import ServerThread

KEY = "deletion-test-key"
DOOMED = tuple(f"doomed-{i}" for i in range(3))  # a storyline of its own, all deleted
PLAIN = ("banking-006", "energy-007")  # ordinary articles, deleted
CORRECTED = "shipping-010"  # corrected and deleted in one batch
REBORN = "mining-014"  # deleted and published again in one batch
ENV = {"KGRAG_COMMUNITY__DEBOUNCE_S": "1", "KGRAG_COMMUNITY__MAX_WAIT_S": "8"}


def corpus() -> list[dict[str, Any]]:
    rng = random.Random(5)
    pools = list(STORYLINES.items())
    docs = [
        article(f"{name}-{i:03d}", pool, rng, 1 + i % 20)
        for i in range(40)
        for name, pool in [pools[i % len(pools)]]
    ]
    docs += [article(d, NEW_STORYLINE, rng, 21) for d in DOOMED]
    return docs


def rewritten(doc: dict[str, Any], seed: int) -> dict[str, Any]:
    """The same id with new text from its storyline's names."""
    pool = STORYLINES[doc["id"].split("-")[0]]
    return article(doc["id"], pool, random.Random(seed), 22)


@dataclass
class Namespace:
    settings: Settings
    store: GraphTables
    worker: TunedWorker
    tmp: Path

    @classmethod
    def start(cls, endpoints: dict[str, object], name: str, tmp: Path) -> Namespace:
        settings = make_settings(
            endpoints, name, tmp, api=ApiSettings(api_key=KEY, max_request_bytes=20_000)
        )
        asyncio.run(ensure_topics(settings))
        worker = TunedWorker(settings, tmp / "worker.log", ENV).start()
        return cls(settings, open_graph_store(settings), worker, tmp)

    async def publish(self, docs: list[dict[str, Any]], name: str) -> None:
        await publish(self.settings, write_jsonl(self.tmp / f"{name}.jsonl", docs))

    async def caught_up(self, documents: int, *, timeout: float = 300.0) -> Snapshot:
        """The latest snapshot once it holds ``documents`` documents, a run has caught up with
        every graph change and the worker with every message it consumes."""
        snap: Snapshot = await run_caught_up(
            self.settings,
            self.store,
            lambda s: len(s.documents) == documents,
            timeout=timeout,
            log_tail=self.worker.log_tail,
            idle_pipeline=True,
        )
        return snap


@dataclass
class Pair:
    deleted: Namespace  # saw everything, then the deletions
    reference: Namespace  # only ever saw what ``deleted`` keeps
    before: Snapshot  # ``deleted`` before its deletions
    after: Snapshot
    expected: Snapshot


@pytest.fixture(scope="module")
def pair(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Pair]:
    docs = corpus()
    by_id = {d["id"]: d for d in docs}
    gone = {*DOOMED, *PLAIN, CORRECTED}
    correction, rebirth = rewritten(by_id[CORRECTED], 1), rewritten(by_id[REBORN], 2)
    kept = [rebirth if d["id"] == REBORN else d for d in docs if d["id"] not in gone]
    deleted = Namespace.start(
        service_endpoints, f"{session_namespace}-del", tmp_path_factory.mktemp("del")
    )
    reference = Namespace.start(
        service_endpoints, f"{session_namespace}-delref", tmp_path_factory.mktemp("delref")
    )
    try:
        asyncio.run(deleted.publish(docs, "all"))
        asyncio.run(reference.publish(kept, "kept"))
        before = asyncio.run(deleted.caught_up(len(docs)))
        expected = asyncio.run(reference.caught_up(len(kept)))
        reference.worker.stop()

        deleted.worker.kill()  # SIGKILL while idle: the deletions wait on the topic
        plan = plan_deletion(deleted.store, [*DOOMED, *PLAIN, CORRECTED, REBORN])
        assert sorted(plan.send) == sorted([*DOOMED, *PLAIN, CORRECTED, REBORN])
        topic = deleted.settings.topics.documents
        asyncio.run(delete_documents(deleted.settings, [*DOOMED, *PLAIN]))
        asyncio.run(  # a correction and then its deletion; a deletion and then a rebirth
            produce_raw(
                deleted.settings,
                topic,
                [
                    (CORRECTED.encode(), orjson.dumps(correction)),
                    (CORRECTED.encode(), None),
                    (REBORN.encode(), None),
                    (REBORN.encode(), orjson.dumps(rebirth)),
                ],
            )
        )
        changes = asyncio.run(topic_size(deleted.settings, deleted.settings.topic("graph_changes")))
        deleted.worker.start()

        async def part_way() -> None:  # killed again once the retractions are flowing
            deadline = time.monotonic() + 120
            topic = deleted.settings.topic("graph_changes")
            while await topic_size(deleted.settings, topic) < changes + 5:
                assert time.monotonic() < deadline, deleted.worker.log_tail()
                await asyncio.sleep(0.05)

        asyncio.run(part_way())
        deleted.worker.kill()
        deleted.worker.start()
        after = asyncio.run(deleted.caught_up(len(kept)))
        yield Pair(deleted, reference, before, after, expected)
    finally:
        for ns in (deleted, reference):
            ns.worker.stop()
            asyncio.run(delete_namespace_topics(ns.settings))


# ---- the tables compared by content -----------------------------------------------------------


def entity_rows(snap: Snapshot) -> dict[str, tuple[Any, ...]]:
    units = {u.id: u for u in snap.text_units}
    return {
        e.title: (
            e.type,
            e.description,
            e.frequency,
            e.degree,
            sorted(units[u].document_id for u in e.text_unit_ids),
        )
        for e in snap.entities
    }


def relationship_rows(snap: Snapshot) -> dict[tuple[str, str], tuple[Any, ...]]:
    return {
        (r.source, r.target): (r.description, r.weight, len(r.text_unit_ids))
        for r in snap.relationships
    }


def clustered(snap: Snapshot) -> dict[int, set[str]]:
    """Per level, the titles of the entities its communities hold."""
    titles = {e.id: e.title for e in snap.entities}
    out: dict[int, set[str]] = {}
    for c in snap.communities:
        out.setdefault(c.level, set()).update(titles[e] for e in c.entity_ids)
    return out


def test_deleted_documents_leave_the_graph_the_rest_would_have_built(pair: Pair) -> None:
    got, want = pair.after, pair.expected
    assert {d.id: (d.title, d.text) for d in got.documents} == {
        d.id: (d.title, d.text) for d in want.documents
    }
    assert {u.id: (u.text, u.document_id) for u in got.text_units} == {
        u.id: (u.text, u.document_id) for u in want.text_units
    }
    assert entity_rows(got) == entity_rows(want)
    assert relationship_rows(got) == relationship_rows(want)
    assert {c.id: c.description for c in got.claims} == {c.id: c.description for c in want.claims}
    # Communities are not compared one for one: maintenance keeps an earlier partition where
    # a change does not call for a new one, so a namespace with a history need not cut the
    # one a fresh namespace cuts. They must cluster the same entities, name no deleted one,
    # none may be empty, and every community has its report and no other report is left.
    live = {e.id for e in got.entities}
    assert all(c.entity_ids and set(c.entity_ids) <= live for c in got.communities)
    assert clustered(got)[0] == clustered(want)[0]
    assert {r.id for r in got.community_reports} == {c.id for c in got.communities}
    for name in ("entities", "relationships", "text_units", "documents", "claims"):
        assert got.meta.counts[name] == want.meta.counts[name], name


def test_what_only_the_deleted_storyline_named_is_gone(pair: Pair) -> None:
    doomed = set(NEW_STORYLINE)
    assert doomed <= {e.title for e in pair.before.entities}
    assert not doomed & {e.title for e in pair.after.entities}
    for report in pair.after.community_reports:
        text = f"{report.title} {report.summary} {report.full_content}"
        assert not [name for name in doomed if name in text], report.title
    plain = {d.id for d in pair.after.documents}
    assert not {*DOOMED, *PLAIN, CORRECTED} & plain
    reborn = next(d for d in pair.after.documents if d.id == REBORN)
    assert reborn.text == next(d for d in pair.expected.documents if d.id == REBORN).text


def test_the_deleted_storylines_communities_dissolve(pair: Pair) -> None:
    doomed = {e.id for e in pair.before.entities if e.title in set(NEW_STORYLINE)}
    theirs = {c.id for c in pair.before.communities if set(c.entity_ids) <= doomed}
    assert theirs, "the deleted storyline had communities of its own"
    settings = pair.deleted.settings
    events = asyncio.run(
        read_topic(settings, settings.topics.community_events, expect=10**6, timeout=10)
    )
    dissolved = {e.get("community_id") for e in events if e.get("kind") == "dissolved"}
    assert theirs <= dissolved, (theirs, dissolved)


def test_weaviate_holds_what_the_reference_holds(pair: Pair) -> None:
    for kind in ("text_unit", "entity", "relationship"):
        got = sorted(vector_keys(pair.deleted.settings, kind))
        want = sorted(vector_keys(pair.reference.settings, kind))
        assert got == want, kind
    reports = vector_keys(pair.deleted.settings, "report")
    assert sorted(reports) == sorted(c.id for c in pair.after.communities)


def test_deleting_again_is_a_no_op_and_an_unknown_id_a_404(pair: Pair) -> None:
    settings = pair.deleted.settings
    server = ServerThread(create_app(settings, refresh_interval_s=0.2, lag_ttl_s=0)).start()
    try:
        base = f"http://127.0.0.1:{server.port}/v1/documents"
        with httpx.Client(headers={"X-API-Key": KEY}, timeout=30) as http:
            again = http.delete(f"{base}/{PLAIN[0]}")
            assert again.status_code == 200, again.text
            assert again.json()["status"] == "already_deleted"
            unknown = http.delete(f"{base}/no-such-article")
            assert unknown.status_code == 404
            body = unknown.json()["error"]
            assert body["code"] == "unknown_document" and "no-such-article" in body["message"]
            forced = http.delete(f"{base}/{PLAIN[1]}", params={"force": "true"})
            assert forced.status_code == 202, forced.text
    finally:
        server.stop()
    # the forced second tombstone reached the worker and changed nothing
    changes = asyncio.run(topic_size(settings, settings.topic("graph_changes")))
    time.sleep(8)
    assert asyncio.run(topic_size(settings, settings.topic("graph_changes"))) == changes
    cli = subprocess.run(
        [sys.executable, "-m", "kgrag.cli", "delete", "no-such-article", PLAIN[0]],
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1
    assert "not indexed: no-such-article" in cli.stderr
    assert f"already deleted, nothing to do: {PLAIN[0]}" in cli.stdout
    assert "Traceback" not in cli.stderr + cli.stdout
