"""The community job end to end: real Kafka and Weaviate, a real ``kgrag worker`` (which starts
the job as its child), the scripted OpenAI-compatible server as the LLM.

One worker indexes ~200 synthetic articles in five storylines whose entity names never mix
(each storyline has its own pool of names), then the tests run in order against that index:

1. five more articles about one storyline: the LLM is asked for reports (and summaries) of
   that storyline's communities only — every ``community_report`` prompt names only that
   storyline's entities, and every regenerated report belongs to a community holding one of
   the articles' entities;
2. the worker and the job are killed with SIGKILL and restarted; one article of the storyline
   is corrected (same id, new text): the first run after the restart regenerates reports of
   that storyline only, and every other report is the one written before the kill;
3. ``/v1/events`` of the query API streams a ``headline`` when articles of a brand-new
   storyline arrive;

while a reader thread loads the latest snapshot in a loop, from the first snapshot to the
last, and checks that every load decodes and its tables agree with each other. The job's
child process is replaced after most saves (``community.child_regrowth`` near 0), each
retiring child handing its caches to the next, so all of the above holds across that too.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.community.state import read_offsets
from core.job_status import read_status
from core.publish import publish
from core.settings import Settings
from core.settings.llm import LLMSettings
from core.tables.errors import SnapshotNotFoundError
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from graph.keys import entity_key
from graph.versions.model import Snapshot
from kgrag.testing.scripted_contexts import parse_tables
from kgrag.testing.scripted_llm import ScriptedLLMServer
from query.api.app import create_app
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings
from tests.integration.helpers import TunedWorker, run_caught_up, topic_size, write_jsonl
from tests.integration.test_query_api import ServerThread, sse_events

STORYLINES: dict[str, tuple[str, ...]] = {
    "shipping": (
        "Zorblax Shipping", "Quintessa Lines", "Halvard Rotterdam", "Marta Kowalczyk",
        "Dockers Union", "Port Authority", "Jonas Ekholm", "Bluewater Tugs",
        "Elsa Marin", "Harbor Pilots", "Kestrel Cranes", "Northsea Ferries",
    ),
    "banking": (
        "Nordic Reserve Bank", "Tomas Lindqvist", "Karin Berg", "Meridian Capital",
        "Solvik Savings", "Finance Ministry", "Anders Holm", "Krona Clearing",
        "Ingrid Dahl", "Baltic Bourse", "Frost Mortgage", "Vasa Insurance",
    ),
    "energy": (
        "Orinoco Petroleum", "Diego Alvarado", "Caracas Refinery", "Andes Pipeline",
        "Lucia Ferrer", "Gulf Drilling", "Maracaibo Terminal", "Petro Traders",
        "Rafael Ortiz", "Llanos Gas", "Tierra Power", "Carmen Solis",
    ),
    "aviation": (
        "Bluefin Airways", "Hana Sato", "Osaka Airport", "Kansai Jet",
        "Sakura Cargo", "Kenji Mori", "Skyline Leasing", "Aero Engines",
        "Yumi Tanaka", "Pacific Routes", "Haneda Services", "Crane Avionics",
    ),
    "mining": (
        "Kestrel Mining", "Fatima Benali", "Lagos Metals", "Niger Copper",
        "Obi Nwosu", "Savanna Gold", "Delta Smelting", "Ade Bankole",
        "Sahel Minerals", "Volta Bauxite", "Kano Logistics", "Ngozi Eze",
    ),
}  # fmt: skip
NEW_STORYLINE = (
    "Aurora Satellites", "Ilse Varga", "Polar Launch", "Kiruna Spaceport", "Orbit Insurers",
)  # fmt: skip
VERBS = (
    "signed a supply contract with",
    "sued",
    "hired advisers from",
    "bought a stake in",
    "warned investors about",
    "held talks with",
)
TARGET = "energy"
NEWCOMERS = ("Nadia Quintero", "Selva Chemicals", "Paloma Reyes")  # join the energy storyline
N_DOCS = 200


def article(doc_id: str, names: tuple[str, ...], rng: random.Random, day: int) -> dict[str, Any]:
    """Two or three sentences, each relating two names of one storyline."""
    sentences = []
    for _ in range(rng.randint(2, 3)):
        a, b = rng.sample(names, 2)
        sentences.append(f"{a} {rng.choice(VERBS)} {b} for {rng.randint(2, 900)} million.")
    return {
        "id": doc_id,
        "title": f"brief {doc_id}",
        "text": " ".join(sentences),
        "published_at": f"1987-03-{day:02d}T09:00:00Z",
        "source": "synthetic",
    }


def corpus(n: int, seed: int = 11) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    names = list(STORYLINES.items())
    return [
        article(f"{story}-{i:03d}", pool, rng, 1 + i % 20)
        for i in range(n)
        for story, pool in [names[i % len(names)]]
    ]


def keys_of(names: tuple[str, ...]) -> set[str]:
    return {entity_key(n) for n in names}


# ---- a reader that never stops loading ---------------------------------------------------------


def inconsistencies(snap: Snapshot) -> list[str]:
    """What would make a snapshot half-written: ids pointing at records it does not hold."""
    entities = {e.id for e in snap.entities}
    units = {u.id for u in snap.text_units}
    communities = {c.id for c in snap.communities}
    bad = []
    if snap.meta.counts.get("entities") != len(snap.entities):
        bad.append("entity count")
    if snap.meta.counts.get("communities") != len(snap.communities):
        bad.append("community count")
    bad += [f"community {c.id}" for c in snap.communities if not set(c.entity_ids) <= entities]
    bad += [f"report {r.id}" for r in snap.community_reports if r.id not in communities]
    bad += [f"entity {e.id}" for e in snap.entities if not set(e.text_unit_ids) <= units]
    if {r.id for r in snap.community_reports} != communities:
        bad.append("a community without its report")
    return bad


@dataclass
class Reader:
    store: GraphTables
    loads: int = 0
    versions: set[int] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                snap = self.store.load()
            except SnapshotNotFoundError:
                time.sleep(0.2)
                continue
            except Exception as e:  # any failure to load is the finding
                self.failures.append(f"load: {e!r}")
                continue
            self.loads += 1
            self.versions.add(snap.meta.version)
            self.failures += [f"v{snap.meta.version}: {b}" for b in inconsistencies(snap)[:3]]
            time.sleep(0.05)


# ---- the running system -------------------------------------------------------------------------


@dataclass
class System:
    settings: Settings
    llm: ScriptedLLMServer
    store: GraphTables
    reader: Reader
    logs: Path
    worker: TunedWorker
    tmp: Path

    def start_worker(self) -> None:
        env = {
            "KGRAG_COMMUNITY__DEBOUNCE_S": "1",
            "KGRAG_COMMUNITY__MAX_WAIT_S": "8",
            # the job's child replaced after any save that leaves it larger than its first:
            # every claim below holds across replacements and the caches they hand over
            "KGRAG_COMMUNITY__CHILD_REGROWTH": "0.01",
            "KGRAG_COMMUNITY__CHILD_MIN_GROWTH_MIB": "0",
        }
        self.worker = TunedWorker(self.settings, self.logs / "worker.log", env).start()

    async def publish(self, docs: list[dict[str, Any]], name: str) -> None:
        await publish(self.settings, write_jsonl(self.tmp / f"{name}.jsonl", docs))

    async def checkpointed(self, timeout: float = 60.0) -> None:
        """Until the job's checkpoint holds every graph change written so far."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            written = await topic_size(self.settings, self.settings.topic("graph_changes"))
            offsets = read_offsets(self.settings)
            if offsets is not None and sum(offsets.values()) == written:
                return
            await asyncio.sleep(0.5)
        raise AssertionError(f"no checkpoint of every change in {timeout:.0f}s")

    async def caught_up(self, done: Any, *, timeout: float = 240.0) -> Snapshot:
        """The latest snapshot once ``done(snapshot)`` holds and a run caught up with it."""
        snap: Snapshot = await run_caught_up(
            self.settings, self.store, done, timeout=timeout, log_tail=self.worker.log_tail
        )
        return snap


@pytest.fixture(scope="module")
def system(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[System]:
    tmp = tmp_path_factory.mktemp("community-job")
    with ScriptedLLMServer() as llm:
        settings = make_settings(
            service_endpoints,
            f"{session_namespace}-cjob",
            tmp,
            llm=LLMSettings(base_url=llm.base_url, max_retries=2, timeout_s=30),
        )
        asyncio.run(ensure_topics(settings))
        store = open_graph_store(settings)
        reader = Reader(open_graph_store(settings))
        thread = threading.Thread(target=reader.run, name="snapshot-reader", daemon=True)
        thread.start()
        running = System(settings, llm, store, reader, tmp, None, tmp)  # type: ignore[arg-type]
        running.start_worker()
        try:
            asyncio.run(running.publish(corpus(N_DOCS), "base"))
            asyncio.run(running.caught_up(lambda s: len(s.documents) == N_DOCS, timeout=420))
            yield running
        finally:
            reader.stop.set()
            thread.join(10)
            running.worker.stop()
            asyncio.run(delete_namespace_topics(settings))


def report_prompt_names(call: Any) -> set[str]:
    """Entity keys in the Entities tables of a report prompt's real data (one community's,
    or several when small communities share a call)."""
    prompt = str(call.messages[-1]["content"])
    real = prompt.split("=== Real data ===")[-1]
    blocks = real.split("\nData:")[1:]
    rows = [r for block in blocks for r in parse_tables(block).get("Entities", [])]
    return {entity_key(r.fields[0]) for r in rows if r.fields}


def assert_only_storyline(
    system: System, before: Snapshot, after: Snapshot, touched: set[str]
) -> set[str]:
    """Every report-LLM call and every regenerated report is about ``touched``'s storyline;
    every other report is the one ``before`` had. Returns the regenerated community ids."""
    story = keys_of(STORYLINES[TARGET] + NEWCOMERS)
    calls = system.llm.calls("community_report") + system.llm.calls("community_reports")
    assert calls, "new facts in the storyline wrote no report"
    for call in calls:
        names = report_prompt_names(call)
        assert names and names <= story, sorted(names - story)
    for call in system.llm.calls("summarize_descriptions"):
        prompt = str(call.messages[-1]["content"])
        assert any(n.upper() in prompt.upper() for n in STORYLINES[TARGET] + NEWCOMERS), prompt[
            :300
        ]
    members = {c.id: set(c.entity_ids) for c in after.communities}
    regenerated = {r.id for r in after.community_reports if r.generated_in > before.meta.version}
    assert regenerated, "no report was regenerated"
    for cid in regenerated:
        assert members[cid] & touched, (cid, sorted(members[cid])[:5])
    old = {r.id: r for r in before.community_reports}
    for r in after.community_reports:
        if r.id not in regenerated and r.id in old:
            assert r.generated_in == old[r.id].generated_in and r.summary == old[r.id].summary
    return regenerated


# ---- the tests, in order -------------------------------------------------------------------------


async def test_index_is_clustered_by_storyline(system: System) -> None:
    snap = system.store.load()
    top = [c for c in snap.communities if c.level == 0 and c.size > 1]
    stories = [keys_of(pool) for pool in STORYLINES.values()]
    for c in top:  # no community mixes two storylines
        assert sum(1 for s in stories if set(c.entity_ids) & s) == 1, c.entity_ids
    assert {r.mode for r in snap.community_reports} == {"llm"}
    assert not system.reader.failures, system.reader.failures[:5]


async def test_five_articles_on_one_storyline_regenerate_only_its_reports(
    system: System,
) -> None:
    before = system.store.load()
    system.llm.clear_calls()
    rng = random.Random(5)
    docs = [article(f"{TARGET}-new-{i}", STORYLINES[TARGET], rng, 21 + i) for i in range(5)]
    for i, doc in enumerate(docs):  # two new names join the storyline
        doc["text"] += f" {NEWCOMERS[i % 2]} {VERBS[i]} {STORYLINES[TARGET][i]} for 5 million."
    pool = STORYLINES[TARGET] + NEWCOMERS
    touched = {entity_key(n) for d in docs for n in pool if n in d["text"]}
    await system.publish(docs, "five")
    after = await system.caught_up(lambda s: len(s.documents) == N_DOCS + 5)
    regenerated = assert_only_storyline(system, before, after, touched)
    assert len(regenerated) < len(after.community_reports) / 2
    job = read_status(system.settings)
    assert job is not None and job.child_recycles >= 1, job
    assert job.child_handovers == job.child_recycles  # each retired child handed its caches over


async def test_after_kill_and_restart_only_the_changed_storyline_is_regenerated(
    system: System,
) -> None:
    # killed idle: every change the earlier tests wrote is in a run's version and in the
    # checkpoint (saved by a forked copy after the version), so what the restarted job
    # regenerates can only come from the correction below, not from replaying the last run
    await system.caught_up(lambda _: True)
    await system.checkpointed()
    system.worker.kill()  # SIGKILL; the job (its child) dies with it
    time.sleep(3)
    before = system.store.load()
    system.llm.clear_calls()
    system.start_worker()
    corrected = {
        "id": f"{TARGET}-new-0",
        "title": "corrected",
        "text": "Carmen Solis sued Tierra Power for 77 million. "
        "Paloma Reyes held talks with Carmen Solis for 12 million.",
        "published_at": "1987-03-21T09:00:00Z",
    }
    await system.publish([corrected], "corrected")

    def done(s: Snapshot) -> bool:
        doc = next((d for d in s.documents if d.id == corrected["id"]), None)
        return doc is not None and doc.title == "corrected"

    after = await system.caught_up(done)
    touched = keys_of(("Carmen Solis", "Tierra Power", "Paloma Reyes"))
    unit_entities = {
        e for u in before.text_units if u.document_id == corrected["id"] for e in u.entity_ids
    }
    assert_only_storyline(system, before, after, touched | unit_entities)


async def test_events_stream_headlines_an_emerged_storyline(system: System) -> None:
    """By default ``/v1/events`` carries headlines only: six articles of a brand-new
    storyline, days after everything else, are one headline saying why."""
    server = ServerThread(create_app(system.settings, refresh_interval_s=0.5)).start()
    rng = random.Random(3)
    docs = [article(f"space-{i}", NEW_STORYLINE, rng, 28) for i in range(6)]
    kinds: list[str] = []
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=60) as c:

            async def listen() -> dict[str, Any]:
                async with c.stream("GET", "/v1/events", params={"from": "latest"}) as r:
                    assert r.status_code == 200
                    async for kind, data in sse_events(r):
                        if kind == "ready":
                            await system.publish(docs, "space")
                            continue
                        kinds.append(kind)
                        if kind == "headline" and set(data["top_entities"]) & {
                            n.upper() for n in NEW_STORYLINE
                        }:
                            return dict(data)
                raise AssertionError("the stream ended without a headline")

            event = await asyncio.wait_for(listen(), 180)

            # both stream workers' watchdogs report in (each checks on its own period),
            # alive and without failures
            async def checked_in() -> list[dict[str, Any]]:
                while True:
                    workers = list((await c.get("/healthz")).json()["workers"])
                    if {w["group"] for w in workers if w["alive"] and w["checks"] > 0} == {
                        "graph",
                        "vectors",
                    }:
                        return workers
                    await asyncio.sleep(1)

            workers = await asyncio.wait_for(checked_in(), 120)
    finally:
        server.stop()
    assert not [w for w in workers if w["failures"]], workers
    assert set(kinds) == {"headline"}, kinds  # no raw lineage events by default
    assert {entity_key(n) for n in event["top_entities"]} <= keys_of(NEW_STORYLINE)
    why = event["why"]
    assert why["documents"] == 6 and why["until"] == "1987-03-28", why
    assert why["mentions_before"] == 0 and why["expected_documents"] == 0, why
    assert {entity_key(e["title"]) for e in event["new_entities"]} <= keys_of(NEW_STORYLINE)
    assert event["new_entities"], event
    assert {d["id"] for d in event["top_documents"]} <= {d["id"] for d in docs}
    assert event["rank"] >= 1 and event["snapshot_version"] > 0


async def test_reader_never_saw_a_half_written_snapshot(system: System) -> None:
    reader = system.reader
    assert reader.loads > 20 and len(reader.versions) >= 3, (reader.loads, reader.versions)
    assert not reader.failures, reader.failures[:5]
