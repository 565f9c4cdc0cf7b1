"""The query API over HTTP against real Kafka and Weaviate and the scripted OpenAI-compatible
server: uvicorn in a background thread on a free port, httpx as the client.

The index is a hand-built snapshot of three storylines in March 1987: OPEC and oil (steady,
all month), the Federal Reserve (steady), and a satellite launch (a burst of articles in the
last three days). Its entity and text-unit vectors are written to Weaviate with the same
embedder the service uses. Each test asks a question no other test asks, so the service's
LLM response cache never answers in the scripted server's place.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import uvicorn
from aiokafka import AIOKafkaConsumer, TopicPartition

from core.clients import build_embedder
from core.settings import Settings
from core.settings.llm import LLMSettings
from core.settings.serving import ApiSettings
from core.tables.opening import open_graph_store
from core.tables.store import GraphTables
from core.vector_store import WeaviateStore
from graph.versions.model import (
    Snapshot,
    SnapshotCommunity,
    SnapshotEntity,
    SnapshotMeta,
    SnapshotRelationship,
    SnapshotReport,
    SnapshotTextUnit,
)
from kgrag.testing.scripted_llm import FaultConfig, ScriptedLLMServer
from query.api.app import create_app
from query.global_search import NO_DATA_ANSWER
from query.index import QueryIndex
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings, settings_env
from tests.integration.helpers import produce_raw, read_topic
from tests.unit.test_query_support import comm, ent, rel, report, unit

KEY = "integration-key"

# ---- the planted world ------------------------------------------------------------------------

STORIES: dict[str, dict[str, Any]] = {
    "opec": {
        "entities": [
            ("OPEC", "organization", "OPEC is the oil cartel that sets crude output quotas."),
            ("Saudi Arabia", "geo", "Saudi Arabia is the largest OPEC crude producer."),
            ("Oil Prices", "event", "Oil prices firmed after the OPEC quota accord."),
            ("Kuwait", "geo", "Kuwait pumped crude above its OPEC quota."),
        ],
        "text": "OPEC and Saudi Arabia held crude output while Kuwait pumped above quota and "
        "oil prices firmed.",
        "days": range(1, 32, 3),
    },
    "fed": {
        "entities": [
            ("Federal Reserve", "organization", "The Federal Reserve is the US central bank."),
            ("Paul Volcker", "person", "Paul Volcker is chairman of the Federal Reserve."),
            ("Interest Rates", "event", "Interest rates were held steady by the Federal Reserve."),
        ],
        "text": "Paul Volcker said the Federal Reserve would keep interest rates steady to "
        "fight inflation.",
        "days": range(2, 32, 4),
    },
    "launch": {
        "entities": [
            ("Orbital Sciences", "organization", "Orbital Sciences builds the Pegasus rocket."),
            ("Pegasus Rocket", "event", "The Pegasus rocket carried a satellite to orbit."),
            ("Cape Canaveral", "geo", "Cape Canaveral is the launch site of the satellite."),
        ],
        "text": "Orbital Sciences launched a Pegasus rocket from Cape Canaveral carrying a "
        "weather satellite to orbit.",
        "days": [29, 29, 30, 30, 30, 31, 31, 31, 31],
    },
}
# level-0 number, level-1 children as member index groups, report texts per community
HIERARCHY = {
    "opec": (
        1,
        [(4, [0, 1]), (5, [2, 3])],
        ("OPEC and the crude market", "OPEC, Saudi Arabia and Kuwait shape oil prices."),
    ),
    "fed": (2, [(6, [0, 1, 2])], ("The Federal Reserve", "Paul Volcker and interest rates.")),
    "launch": (
        3,
        [(7, [0, 1, 2])],
        ("Satellite launch", "Orbital Sciences launched a Pegasus rocket from Cape Canaveral."),
    ),
}
CHILD_REPORTS = {
    4: ("OPEC quota accord", "OPEC and Saudi Arabia hold the crude quota accord."),
    5: ("Oil prices and Kuwait", "Oil prices firm while Kuwait pumps above quota."),
    6: ("Volcker on interest rates", "Paul Volcker keeps interest rates steady at the Fed."),
    7: ("Pegasus launch", "The Pegasus rocket of Orbital Sciences reached orbit."),
}


def _units_and_entities(
    name: str, story: dict[str, Any], first_unit: int, first_entity: int
) -> tuple[list[SnapshotTextUnit], list[SnapshotEntity]]:
    ids = [f"chunk-{first_unit + i}" for i in range(len(story["days"]))]
    ents = [
        ent(first_entity + i, title, desc, ids, degree=len(story["entities"]) - 1, type=kind)
        for i, (title, kind, desc) in enumerate(story["entities"])
    ]
    units = [
        replace(
            unit(first_unit + i, story["text"], f"1987-03-{day:02d}", ents, doc=f"{name}-{i}"),
            title=f"{name} news {i}",
        )
        for i, day in enumerate(story["days"])
    ]
    return units, ents


def news_world(version: int = 1, newcomers: int = 0) -> Snapshot:
    units: list[SnapshotTextUnit] = []
    entities: list[SnapshotEntity] = []
    rels: list[SnapshotRelationship] = []
    communities: list[SnapshotCommunity] = []
    reports: list[SnapshotReport] = []
    for name, story in STORIES.items():
        us, es = _units_and_entities(name, story, len(units) + 1, len(entities) + 1)
        units += us
        entities += es
        for a, b in itertools.pairwise(es):
            rels.append(rel(len(rels) + 1, a, b, f"{a.title} and {b.title}.", 4, [us[0].id]))
        top, children, (title, summary) = HIERARCHY[name]
        parent = comm(top, 0, es, children=[n for n, _ in children])
        communities.append(parent)
        reports.append(report(parent, title, summary))
        for number, members in children:
            child = comm(number, 1, [es[i] for i in members], parent=top)
            communities.append(child)
            reports.append(report(child, *CHILD_REPORTS[number]))
    entities += [
        ent(100 + i, f"Newcomer {i}", "A newcomer.", [units[0].id]) for i in range(newcomers)
    ]
    return Snapshot(
        meta=SnapshotMeta(
            version=version,
            created_at="2026-01-01T00:00:00Z",
            newest_document_time="1987-03-31T12:00:00Z",
        ),
        entities=tuple(entities),
        relationships=tuple(rels),
        communities=tuple(communities),
        community_reports=tuple(reports),
        text_units=tuple(units),
        documents=(),
    )


async def write_vectors(settings: Settings, snapshot: Snapshot) -> None:
    """Entity, text-unit and report vectors, keyed as the embedder agents and the community
    job key them."""
    embedder = build_embedder(settings)
    ents = snapshot.entities
    evec = await embedder.embed([f"{e.title}: {e.description}" for e in ents])
    units = snapshot.text_units
    uvec = await embedder.embed([f"{u.title}\n{u.text}" for u in units])
    async with WeaviateStore(settings) as store:
        await store.upsert(
            "entity",
            [
                (e.id, v, {"name": e.title, "type": e.type, "description": e.description})
                for e, v in zip(ents, evec, strict=True)
            ],
        )
        await store.upsert(
            "text_unit",
            [
                (
                    u.id,
                    v,
                    {
                        "document_id": u.document_id,
                        "title": u.title,
                        "text": u.text,
                        "published_at": u.published_at,
                        "position": 0,
                        "n_tokens": u.n_tokens,
                    },
                )
                for u, v in zip(units, uvec, strict=True)
            ],
        )
        reports = snapshot.community_reports
        rvec = await embedder.embed([f"{r.title}\n{r.summary}" for r in reports])
        await store.upsert(
            "report",
            [
                (r.id, v, {"level": r.level, "title": r.title, "summary": r.summary})
                for r, v in zip(reports, rvec, strict=True)
            ],
        )
    close = getattr(embedder, "aclose", None)
    if close is not None:  # an OpenAI-compatible embedder's HTTP connections
        await close()


async def drop_vectors(settings: Settings) -> None:
    async with WeaviateStore(settings) as store:
        await store.drop_namespace()


# ---- the running service ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """uvicorn serving ``app`` from a background thread (its own event loop)."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="query-api", daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the query service did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@dataclass
class Api:
    url: str
    settings: Settings
    store: GraphTables
    llm: ScriptedLLMServer
    snapshot: Snapshot

    def client(self, key: str | None = KEY) -> httpx.AsyncClient:
        headers = {"X-API-Key": key} if key else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60)


@pytest.fixture(scope="module")
def api(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Api]:
    with ScriptedLLMServer() as llm:
        settings = make_settings(
            service_endpoints,
            f"{session_namespace}-qapi",
            tmp_path_factory.mktemp("query-api"),
            llm=LLMSettings(base_url=llm.base_url, max_retries=1, timeout_s=30),
            api=ApiSettings(api_key=KEY, max_question_chars=300, max_request_bytes=20_000),
        )
        snapshot = news_world()
        store = open_graph_store(settings)
        store.write(snapshot)
        asyncio.run(write_vectors(settings, snapshot))
        asyncio.run(ensure_topics(settings))
        server = ServerThread(create_app(settings, refresh_interval_s=0.2, lag_ttl_s=0)).start()
        try:
            yield Api(f"http://127.0.0.1:{server.port}", settings, store, llm, snapshot)
        finally:
            server.stop()
            asyncio.run(drop_vectors(settings))
            asyncio.run(delete_namespace_topics(settings))


@pytest.fixture
async def client(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with api.client() as c:
        yield c


def assert_cites_existing_records(body: dict[str, Any], index: QueryIndex) -> None:
    lookups: dict[str, dict[int, Any]] = {
        "Entities": index.entity_by_hrid,
        "Relationships": index.relationship_by_hrid,
        "Reports": index.reports,
        "Sources": index.text_unit_by_hrid,
    }
    assert body["citations"], body["answer"]
    for dataset, ids in body["citations"].items():
        assert all(i in lookups[dataset] for i in ids), (dataset, ids)
        assert set(ids) <= set(body["context_ids"][dataset])
        assert [r["id"] for r in body["references"][dataset]] == ids


# ---- answers and citations ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "extra"),
    [
        ("local", {}),
        ("global", {"level": 1}),
        ("basic", {}),
        ("drift", {}),
    ],
)
async def test_answers_cite_records_that_exist(
    api: Api, client: httpx.AsyncClient, method: str, extra: dict[str, Any]
) -> None:
    question = f"What did OPEC and Saudi Arabia decide about crude output? ({method})"
    r = await client.post(f"/v1/query/{method}", json={"question": question, **extra})
    body = r.json()
    assert r.status_code == 200, body
    assert body["mode"] == "llm" and body["llm_calls"] >= 1
    assert_cites_existing_records(body, QueryIndex.from_snapshot(api.snapshot))
    assert "OPEC" in body["answer"] or "crude" in body["answer"].lower()
    # the tokens at the default price of the configured model (gpt-4o-mini: $0.15 / $0.60)
    price = api.settings.llm.price()
    assert price is not None and api.settings.llm.model == "gpt-4o-mini"
    spent = body["prompt_tokens"] * 0.15 + body["completion_tokens"] * 0.60
    assert body["cost_usd"] == pytest.approx(spent / 1e6, abs=1e-6) and body["cost_usd"] > 0
    metrics = (await client.get("/metrics")).text
    assert f'kgrag_query_llm_cost_usd_total{{method="{method}"}}' in metrics


async def test_made_up_citation_is_removed_and_counted(api: Api, client: httpx.AsyncClient) -> None:
    api.llm.script("local_search", "Volcker spoke. [Data: Entities (9999); Sources (8888)]")
    r = await client.post("/v1/query/local", json={"question": "Who chairs the Fed board?"})
    body = r.json()
    assert body["removed_citations"] == 2 and body["citations"] == {}
    assert "9999" not in body["answer"] and "8888" not in body["answer"]
    metrics = (await client.get("/metrics")).text
    assert 'kgrag_query_removed_citations_total{method="local"} 2.0' in metrics


async def streamed(
    client: httpx.AsyncClient, path: str, ask: dict[str, Any]
) -> tuple[str, dict[str, Any] | None]:
    """The concatenated ``chunk`` texts of a streamed answer and its ``done`` event."""
    pieces, done = [], None
    async with client.stream("POST", path, json={**ask, "stream": True}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        async for kind, data in sse_events(r):
            if kind == "chunk":
                pieces.append(data["text"])
            elif kind == "done":
                done = data
    return "".join(pieces), done


async def test_streamed_answer_is_the_same_answer(client: httpx.AsyncClient) -> None:
    ask = {"question": "Where did the Pegasus rocket launch from?"}
    plain = (await client.post("/v1/query/basic", json=ask)).json()
    text, done = await streamed(client, "/v1/query/basic", ask)
    assert text == plain["answer"] and done is not None
    assert done["citations"] == plain["citations"]


# ---- DRIFT search ------------------------------------------------------------------------------


async def test_drift_goes_from_the_reports_down_to_local_detail(
    api: Api, client: httpx.AsyncClient
) -> None:
    api.llm.clear_calls()
    ask = {"question": "What did OPEC decide about crude output?", "followups": 2, "depth": 2}
    r = await client.post("/v1/query/drift", json=ask)
    body = r.json()
    assert r.status_code == 200, body
    steps = body["extra"]["steps"]
    assert [s["depth"] for s in steps][:1] == [0] and {1, 2} <= {s["depth"] for s in steps}
    assert len(api.llm.calls("drift_primer")) == 1
    assert 2 < len(api.llm.calls("drift_local")) <= 4  # two steps of at most two follow-ups
    assert len(api.llm.calls("drift_reduce")) == 1
    assert body["llm_calls"] == len(api.llm.calls()) <= 1 + 2 * 2 + 1
    # the answer holds both the reports' overview and the articles' detail
    assert body["citations"].get("Reports") and body["citations"].get("Sources"), body["answer"]
    assert_cites_existing_records(body, QueryIndex.from_snapshot(api.snapshot))
    follow_up_questions = {c.messages[-1]["content"] for c in api.llm.calls("drift_local")}
    primer = json.loads(api.llm.calls("drift_primer")[0].response)
    assert set(primer["follow_up_queries"]) & follow_up_questions


async def test_drift_streams_the_same_answer(client: httpx.AsyncClient) -> None:
    ask = {"question": "Where did the Pegasus rocket launch from?", "depth": 1}
    plain = (await client.post("/v1/query/drift", json=ask)).json()
    text, done = await streamed(client, "/v1/query/drift", ask)
    assert text == plain["answer"] and done is not None
    assert done["citations"] == plain["citations"] and done["method"] == "drift"


async def test_a_drift_answer_that_is_not_its_json_is_asked_once_more(
    api: Api, client: httpx.AsyncClient
) -> None:
    api.llm.clear_calls()
    api.llm.script("drift_primer", "Sure! Here are my thoughts, in prose.")
    r = await client.post(
        "/v1/query/drift", json={"question": "What did OPEC decide about crude output?"}
    )
    assert r.status_code == 200, r.text
    assert len(api.llm.calls("drift_primer")) == 2  # the prose, then the JSON
    assert r.json()["citations"].get("Reports")


async def test_drift_settings_out_of_bounds_are_a_422(client: httpx.AsyncClient) -> None:
    r = await client.post("/v1/query/drift", json={"question": "OPEC?", "depth": 9})
    assert r.status_code == 422 and "depth" in r.text


# ---- global search -----------------------------------------------------------------------------

SMALL_BATCHES = {"level": 1, "batch_max_tokens": 60}


async def test_global_search_makes_one_call_per_batch_plus_reduce(
    api: Api, client: httpx.AsyncClient
) -> None:
    api.llm.clear_calls()
    r = await client.post(
        "/v1/query/global",
        json={"question": "How did oil prices and Kuwait quotas move?", **SMALL_BATCHES},
    )
    body = r.json()
    batches = body["extra"]["batches"]
    assert batches >= 2, body["extra"]
    assert len(api.llm.calls("global_map")) == batches
    assert len(api.llm.calls("global_reduce")) == 1
    assert body["llm_calls"] == batches + 1
    assert body["citations"]["Reports"]


async def test_global_search_without_relevant_points_makes_only_the_map_calls(
    api: Api, client: httpx.AsyncClient
) -> None:
    probe = (
        await client.post(
            "/v1/query/global",
            json={"question": "Which storylines ran in March?", **SMALL_BATCHES},
        )
    ).json()
    batches = probe["extra"]["batches"]
    api.llm.clear_calls()
    zero = orjson.dumps({"points": [{"description": "Nothing relevant.", "score": 0}]}).decode()
    api.llm.script("global_map", zero, times=batches)
    body = (
        await client.post(
            "/v1/query/global",
            json={"question": "What did the weather do in Tokyo?", **SMALL_BATCHES},
        )
    ).json()
    assert len(api.llm.calls("global_map")) == batches
    assert api.llm.calls("global_reduce") == []
    assert body["answer"] == NO_DATA_ANSWER and body["llm_calls"] == batches


async def test_dynamic_selection_reads_one_storyline_with_fewer_map_calls(
    client: httpx.AsyncClient,
) -> None:
    ask = {"question": "What did Paul Volcker say about interest rates?", **SMALL_BATCHES}
    static = (await client.post("/v1/query/global", json=ask)).json()
    dynamic = (await client.post("/v1/query/global", json={**ask, "dynamic": True})).json()
    assert dynamic["extra"]["map_calls"] < static["extra"]["map_calls"]
    assert dynamic["citations"]["Reports"] == static["citations"]["Reports"] == [6]
    rated = dynamic["extra"]["ratings"]
    assert set(rated) == {"1", "2", "3", "6"}  # the OPEC and launch subtrees were not entered


# ---- questions, trends, graph ------------------------------------------------------------------


async def test_generated_questions_name_entities_of_the_context(
    api: Api, client: httpx.AsyncClient
) -> None:
    r = await client.get("/v1/questions", params={"q": "Tell me about the satellite launch"})
    body = r.json()
    index = QueryIndex.from_snapshot(api.snapshot)
    titles = [index.entity_by_hrid[i].title for i in body["context_ids"]["Entities"]]
    assert body["mode"] == "llm" and body["questions"] and titles
    for q in body["questions"]:
        assert any(t in q for t in titles), (q, titles)


async def test_trends_rank_the_planted_burst_first(client: httpx.AsyncClient) -> None:
    body = (await client.get("/v1/trends", params={"level": 0})).json()
    first = body["communities"][0]
    # an offline graph version titles a storyline by what its articles share
    assert first["community"] == 3 and first["title"] == "Cape Canaveral, Orbital Sciences"
    assert first["documents"] == 9 and len(first["top_documents"]) == 5
    assert all(d["id"].startswith("launch-") for d in first["top_documents"])
    assert first["earlier"] == 0 and first["recent"] > 0
    assert {e["title"] for e in body["new_entities"]} >= {"Orbital Sciences", "Cape Canaveral"}


async def test_trends_show_each_storyline_once(client: httpx.AsyncClient) -> None:
    """Communities 3 and 7 (its child, with all of its members) are one storyline: one row,
    the other level reachable from it, and no two rows share a member."""
    body = (await client.get("/v1/trends", params={"since": "1987-01-01"})).json()
    rows = body["communities"]
    launch = [r for r in rows if r["community"] in (3, 7)]
    assert len(launch) == 1 and len(launch[0]["folded"]) == 1
    members = []
    for r in rows:
        view = (await client.get(f"/v1/communities/{r['community']}")).json()
        members.append({m["key"] for m in view["members"]})
    assert all(a.isdisjoint(b) for i, a in enumerate(members) for b in members[i + 1 :])
    listed = (await client.get("/v1/communities", params={"since": "1987-01-01"})).json()
    assert [c["community"] for c in listed["communities"]] == [r["community"] for r in rows]
    every = (
        await client.get("/v1/communities", params={"since": "1987-01-01", "fold": "false"})
    ).json()
    assert {c["community"] for c in every["communities"]} >= {3, 7}


async def test_entity_and_community_views(client: httpx.AsyncClient) -> None:
    volcker = (await client.get("/v1/entities/Paul Volcker")).json()
    assert volcker["type"] == "person" and volcker["communities"] == {"0": 2, "1": 6}
    community = (await client.get("/v1/communities/6")).json()
    assert community["report"]["title"] == "Volcker on interest rates"
    missing = await client.get("/v1/entities/Atlantis")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_entity"


# ---- protection ------------------------------------------------------------------------------


async def test_key_size_and_json_errors(api: Api) -> None:
    async with api.client(key=None) as anonymous:
        r = await anonymous.post("/v1/query/local", json={"question": "OPEC?"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    async with api.client() as c:
        long = await c.post("/v1/query/local", json={"question": "why " * 100})
        assert long.status_code == 413 and "300" in long.json()["error"]["message"]
        bad = await c.post(
            "/v1/query/global",
            content=b'{"question": ',
            headers={"Content-Type": "application/json"},
        )
        assert bad.status_code == 422 and "not valid JSON" in bad.json()["error"]["message"]
        huge = await c.post("/v1/documents", json={"id": "x", "text": "y" * 30_000})
        assert huge.status_code == 413


# ---- kafka: documents, events, operations ------------------------------------------------------


async def test_posted_document_is_published_keyed_by_id(
    api: Api, client: httpx.AsyncClient
) -> None:
    doc = {"id": "api-doc-1", "text": "OPEC met again.", "published_at": "1987-04-01"}
    r = await client.post("/v1/documents", json=doc)
    assert r.status_code == 202 and r.json()["id"] == "api-doc-1"
    bad = await client.post("/v1/documents", json={"id": "api-doc-2", "text": "no date"})
    assert bad.status_code == 422 and "published_at" in bad.json()["error"]["message"]
    got = await read_topic(api.settings, api.settings.topic("documents"), expect=1, timeout=30)
    assert [d["id"] for d in got] == ["api-doc-1"]
    assert got[0]["published_at"] == "1987-04-01T00:00:00Z"


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    kind, data = "message", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif not line and data:
            yield kind, orjson.loads(data)
            kind, data = "message", ""


async def test_events_stream_delivers_a_produced_community_event(
    api: Api, client: httpx.AsyncClient
) -> None:
    event = {
        "kind": "emerged",
        "community_id": "c-test-1",
        "level": 0,
        "title": "Satellite launch",
        "size": 3,
        "snapshot_version": 2,
    }
    topic = api.settings.topic("community_events")

    async def listen() -> dict[str, Any]:
        params = {"from": "latest", "raw": "true"}  # lineage events, not headlines only
        async with client.stream("GET", "/v1/events", params=params) as r:
            assert r.status_code == 200
            async for kind, data in sse_events(r):
                if kind == "ready":
                    await produce_raw(api.settings, topic, [(b"c-test-1", b"not json")])
                    await produce_raw(api.settings, topic, [(b"c-test-1", orjson.dumps(event))])
                elif kind == "emerged":
                    return dict(data)
        raise AssertionError("the stream ended without the event")

    assert await asyncio.wait_for(listen(), 60) == event


async def test_health_and_metrics_describe_the_service(api: Api, client: httpx.AsyncClient) -> None:
    await client.post("/v1/query/local", json={"question": "What is Cape Canaveral?"})
    health = (await client.get("/healthz")).json()
    assert health["kafka"]["reachable"] and health["weaviate"]["reachable"]
    assert health["snapshot"]["version"] >= 1 and health["mode"] == "llm"
    await commit_worker_offset(api.settings, "documents")
    await commit_worker_offset(api.settings, "chunks", api.settings.vector_app_id)
    metrics = (await client.get("/metrics")).text
    for series in (
        'kgrag_query_latency_seconds_count{method="local"}',
        "kgrag_snapshot_version ",
        "kgrag_snapshot_age_seconds ",
        'kgrag_version_swap_seconds_count{how="whole"}',
        "kgrag_llm_calls_total ",
        'kgrag_query_llm_tokens_total{kind="prompt",method="local"}',
        "kgrag_documents_published_total 1.0",
    ):
        assert series in metrics, series
    documents, chunks = api.settings.topic("documents"), api.settings.topic("chunks")
    assert f'kgrag_consumer_lag{{group="graph",topic="{documents}"}}' in metrics
    assert f'kgrag_consumer_lag{{group="vectors",topic="{chunks}"}}' in metrics


async def commit_worker_offset(settings: Settings, topic: str, group_id: str = "") -> None:
    """Commit offset 0 on every partition of ``topic`` for a worker group (the graph
    worker's by default), as a worker that has read nothing yet would have (so the lag is
    everything published)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        group_id=group_id or settings.app_id,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        parts = [TopicPartition(settings.topic(topic), p) for p in range(settings.kafka.partitions)]
        consumer.assign(parts)
        await consumer.commit({tp: 0 for tp in parts})
    finally:
        await consumer.stop()


# ---- snapshots change under load ----------------------------------------------------------------


async def test_queries_keep_succeeding_while_snapshots_are_published(
    api: Api, client: httpx.AsyncClient
) -> None:
    first = api.store.latest_version() or 1
    last = first + 8
    stop = threading.Event()

    def publish() -> None:
        for version in range(first + 1, last + 1):
            api.store.write(news_world(version, newcomers=version))
            time.sleep(0.1)
        stop.set()

    writer = threading.Thread(target=publish)
    writer.start()
    versions: list[int] = []
    try:
        while not stop.is_set() or len(versions) < 10:
            r = await client.post(
                "/v1/query/local", json={"question": "Is Kuwait above its OPEC quota?"}
            )
            assert r.status_code == 200, r.text
            versions.append(r.json()["snapshot_version"])
    finally:
        writer.join(30)
    assert versions == sorted(versions) and versions[0] >= first
    deadline = time.monotonic() + 30
    while (await client.get("/healthz")).json()["snapshot"]["version"] != last:
        assert time.monotonic() < deadline, "the last snapshot was never served"
        await asyncio.sleep(0.1)
    newest = (await client.get(f"/v1/entities/Newcomer {last - 1}")).json()
    assert newest["snapshot_version"] == last


# ---- the CLI beside the API ----------------------------------------------------------------------


def kgrag_cli(api: Api, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kgrag.cli", *args],
        env=settings_env(api.settings),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_the_cli_takes_a_conversation_and_suggests_questions(api: Api, tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_text(
        json.dumps(
            [
                {"role": "user", "content": "What did OPEC decide about quotas?"},
                {"role": "assistant", "content": "OPEC held its output ceiling."},
            ]
        ),
        encoding="utf-8",
    )
    api.llm.clear_calls()
    local = kgrag_cli(api, "query", "local", "--json", "--history", str(history), "And Kuwait?")
    assert local.returncode == 0, local.stderr
    assert json.loads(local.stdout)["method"] == "local"
    [call] = api.llm.calls("local_search")
    assert "What did OPEC decide about quotas?" in call.messages[0]["content"]
    asked = kgrag_cli(
        api, "questions", "--json", "--count", "3", "--history", str(history), "What did OPEC do?"
    )
    assert asked.returncode == 0, asked.stderr
    body = json.loads(asked.stdout)
    assert len(body["questions"]) == 3 and body["llm_calls"] == 1
    [call] = api.llm.calls("question_generation")
    assert "What did OPEC decide about quotas?" in str(call.messages)
    history.write_text('[{"role": "system", "content": "x"}]', encoding="utf-8")
    bad = kgrag_cli(api, "query", "basic", "--history", str(history), "Kuwait?")
    said = " ".join(bad.stderr.split())  # the console wraps long lines
    assert bad.returncode == 1 and "turn 1 must be an object with role" in said
    assert "Traceback" not in bad.stderr


async def test_a_streamed_answer_arrives_as_the_model_writes_it(
    api: Api, client: httpx.AsyncClient
) -> None:
    """The scripted model writes a word every 50 ms: the first words reach the client long
    before the answer is complete, and the checked answer is what the words make."""
    api.llm.set_faults(FaultConfig(stream_piece_s=0.05))
    try:
        ask = {"question": "What did OPEC and Saudi Arabia decide about crude output?"}
        arrived: list[tuple[float, str, Any]] = []
        started = time.monotonic()
        async with client.stream("POST", "/v1/query/local", json={**ask, "stream": True}) as r:
            async for kind, data in sse_events(r):
                arrived.append((time.monotonic() - started, kind, data))
    finally:
        api.llm.set_faults(FaultConfig())
    chunks = [(t, d["text"]) for t, k, d in arrived if k == "chunk"]
    [(done_at, _, done)] = [a for a in arrived if a[1] == "done"]
    assert len(chunks) > 10, chunks
    assert chunks[0][0] < done_at - 0.4  # the first words came while the rest was written
    text = "".join(c for _, c in chunks)
    assert done.get("answer", text) == text and done["citations"], done
    assert done["llm_calls"] == 1 and done["prompt_tokens"] > 0  # usage of the stream counted
