"""The HTTP service in process: keys, limits, JSON errors, the snapshot swap, the views.

The snapshot store is a real one in a temporary directory; the vector store is a dict and the
model is offline or a scripted fake, injected through ``create_app(deps=...)``. Kafka and
Weaviate point at closed ports, so nothing here needs a service.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_type_hints

import orjson
import pytest
from fastapi.testclient import TestClient

from core.job_status import FailedItem, JobStatus, LastRun, write_status
from core.settings import Settings, load_settings
from core.settings.serving import ApiSettings
from core.tables.store import GraphTables
from core.worker_status import WatchdogFigures, WatchdogStatus, write_watchdog_status
from graph.protocols import ChatResult
from graph.versions.model import Snapshot, SnapshotMeta
from query.api.app import create_app
from query.api.state import IndexHolder
from query.citations import cited_ids
from query.deps import QueryDeps
from query.index import QueryIndex
from query.metrics import METRICS, QueryMetrics
from query.offline_answers import OFFLINE_LABEL
from query.sse import answer_pieces
from tests.unit.test_query_support import ScriptedLLM, deps, ent, entity_store, world

KEY = "s3cret"


def settings(tmp: Path, api_key: str | None = None) -> Settings:
    return load_settings(
        data_dir=tmp,
        namespace="unit",
        kafka={"bootstrap_servers": "127.0.0.1:1"},
        weaviate={"url": "http://127.0.0.1:1"},
        api=ApiSettings(api_key=api_key, max_question_chars=200, max_request_bytes=4096),
    )


def versioned(snapshot: Snapshot, version: int) -> Snapshot:
    meta = SnapshotMeta(
        version=version,
        created_at="2026-01-01T00:00:00Z",
        newest_document_time=snapshot.meta.newest_document_time,
    )
    return replace(snapshot, meta=meta)


def grown(version: int) -> Snapshot:
    """The world plus one entity per version, so each version is visibly different."""
    base = world()
    extra = ent(100 + version, f"Newcomer {version}", "A newcomer.", ["chunk-1"])
    return versioned(replace(base, entities=(*base.entities, extra)), version)


def query_deps(llm: Any = None) -> QueryDeps:
    store = asyncio.run(entity_store(QueryIndex.from_snapshot(world())))
    return deps(store, llm)


@pytest.fixture
def store(tmp_path: Path) -> GraphTables:
    return GraphTables(tmp_path / "tables", keep=3)


def client_for(
    tmp: Path, store: GraphTables, *, api_key: str | None = None, llm: Any = None
) -> TestClient:
    app = create_app(
        settings(tmp, api_key), deps=query_deps(llm), graph_store=store, refresh_interval_s=30
    )
    headers = {"X-API-Key": api_key} if api_key else {}
    return TestClient(app, headers=headers)


@pytest.fixture
def client(tmp_path: Path, store: GraphTables) -> Iterator[TestClient]:
    store.write(versioned(world(), 1))
    with client_for(tmp_path, store) as c:
        yield c


def error(response: Any) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert "Traceback" not in response.text
    return dict(body["error"])


LOCAL = "/v1/query/local"
ASK = {"question": "What did OPEC decide about output?"}


class TestApiKey:
    def test_missing_and_wrong_keys_are_refused_with_json(
        self, tmp_path: Path, store: GraphTables
    ) -> None:
        store.write(versioned(world(), 1))
        with client_for(tmp_path, store, api_key=KEY) as c:
            missing = c.post(LOCAL, json=ASK, headers={"X-API-Key": ""})
            wrong = c.post(LOCAL, json=ASK, headers={"X-API-Key": "guess"})
            right = c.post(LOCAL, json=ASK)
            health = c.get("/healthz", headers={"X-API-Key": ""})
        assert missing.status_code == 401 and error(missing)["code"] == "unauthorized"
        assert "X-API-Key" in error(missing)["message"]
        assert wrong.status_code == 401
        assert right.status_code == 200
        assert health.status_code == 200  # probes need no key

    def test_no_key_configured_means_open(self, client: TestClient) -> None:
        assert client.post(LOCAL, json=ASK).status_code == 200


class TestLimitsAndErrors:
    def test_oversized_question_is_refused_with_the_limit(self, client: TestClient) -> None:
        r = client.post(LOCAL, json={"question": "why " * 60})
        assert r.status_code == 413
        assert error(r)["code"] == "question_too_long" and "200" in error(r)["message"]

    def test_oversized_question_on_questions_endpoint(self, client: TestClient) -> None:
        r = client.get("/v1/questions", params={"q": "x" * 201})
        assert r.status_code == 413

    def test_body_over_the_limit_by_content_length(self, client: TestClient) -> None:
        r = client.post(LOCAL, json={"question": "q", "history": [{"content": "x" * 5000}]})
        assert r.status_code == 413 and error(r)["code"] == "request_too_large"

    def test_body_over_the_limit_without_content_length(self, client: TestClient) -> None:
        def chunks() -> Iterator[bytes]:
            yield b'{"question": "q", "history": [{"content": "'
            for _ in range(10):
                yield b"x" * 1000
            yield b'"}]}'

        r = client.post(LOCAL, content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and error(r)["code"] == "request_too_large"

    def test_malformed_json_is_422_and_says_so(self, client: TestClient) -> None:
        r = client.post(
            LOCAL, content=b'{"question": "q",', headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 422 and "not valid JSON" in error(r)["message"]

    def test_unknown_field_and_missing_question_are_named(self, client: TestClient) -> None:
        typo = client.post(LOCAL, json={"questoin": "q"})
        assert typo.status_code == 422
        assert "questoin" in error(typo)["message"] and "question" in error(typo)["message"]

    def test_bad_time_window_is_422_with_the_value(self, client: TestClient) -> None:
        r = client.post(LOCAL, json={**ASK, "since": "next tuesday"})
        assert r.status_code == 422 and "next tuesday" in error(r)["message"]

    def test_openapi_documents_every_endpoint(self, client: TestClient) -> None:
        paths = set(client.get("/openapi.json").json()["paths"])
        assert paths >= {
            "/v1/query/local", "/v1/query/global", "/v1/query/basic", "/v1/questions",
            "/v1/trends", "/v1/entities/{ident}", "/v1/communities", "/v1/communities/{ident}",
            "/v1/events", "/v1/documents", "/healthz", "/metrics",
        }  # fmt: skip
        assert client.get("/docs").status_code == 200

    @pytest.mark.parametrize("path", ["/v1/entities/%00abc", "/v1/communities/a%07b"])
    def test_ids_with_control_characters_are_refused(self, client: TestClient, path: str) -> None:
        r = client.get(path)
        assert r.status_code == 422 and error(r)["code"] == "invalid_id"

    def test_an_unknown_event_kind_is_refused_naming_the_kinds(self, client: TestClient) -> None:
        r = client.get("/v1/events?kind=emerged&kind=exploded")
        assert r.status_code == 422
        body = error(r)
        assert body["code"] == "invalid_kind" and "'exploded'" in body["message"]
        assert "report_updated" in body["message"]

    def test_a_document_id_with_control_characters_is_refused(self, client: TestClient) -> None:
        doc = {"id": "a\u0000b", "text": "x", "published_at": "1987-03-01T00:00:00Z"}
        r = client.post("/v1/documents", json=doc)
        assert r.status_code == 422, r.text
        assert "control characters" in error(r)["message"]

    def test_wrong_method_is_405_with_its_allow_header(self, client: TestClient) -> None:
        r = client.put("/v1/query/local")
        assert r.status_code == 405 and r.headers["allow"] == "POST"
        assert error(r)["code"] == "method_not_allowed"

    def test_openapi_documents_errors_bodies_and_event_streams(self, client: TestClient) -> None:
        paths = client.get("/openapi.json").json()["paths"]
        for path, method in (("/v1/query/local", "post"), ("/v1/entities/{ident}", "get")):
            responses = paths[path][method]["responses"]
            assert {"401", "422", "503"} <= set(responses), (path, sorted(responses))
            assert "ErrorEnvelope" in str(responses["401"])
        body = paths["/v1/documents"]["post"]["requestBody"]["content"]["application/json"]
        assert body["schema"]["required"] == ["id", "text", "published_at"]
        assert (
            "text/event-stream" in paths["/v1/query/basic"]["post"]["responses"]["200"]["content"]
        )
        assert "text/event-stream" in paths["/v1/events"]["get"]["responses"]["200"]["content"]

    def test_unknown_route_is_json_404(self, client: TestClient) -> None:
        r = client.get("/v1/nothing")
        assert r.status_code == 404 and error(r)["code"] == "not_found"


class TestBeforeAnySnapshot:
    def test_queries_answer_503_saying_what_to_do(self, tmp_path: Path, store: GraphTables) -> None:
        with client_for(tmp_path, store) as c:
            answers = [
                c.post(LOCAL, json=ASK),
                c.post("/v1/query/global", json=ASK),
                c.get("/v1/trends"),
                c.get("/v1/entities/1"),
            ]
            health = c.get("/healthz").json()
        for r in answers:
            assert r.status_code == 503
            assert error(r)["code"] == "index_not_built"
            assert "kgrag worker" in error(r)["message"]
        assert health["status"] == "no_snapshot" and health["snapshot"] is None

    def test_first_snapshot_is_served_without_restart(
        self, tmp_path: Path, store: GraphTables
    ) -> None:
        with client_for(tmp_path, store) as c:
            assert c.post(LOCAL, json=ASK).status_code == 503
            store.write(versioned(world(), 1))
            r = c.post(LOCAL, json=ASK)
        assert r.status_code == 200 and r.json()["snapshot_version"] == 1


def context_allows(body: dict[str, Any]) -> None:
    """Every cited id was in the context, and every citation resolves to a record."""
    for dataset, ids in body["citations"].items():
        assert set(ids) <= set(body["context_ids"][dataset])
        assert [r["id"] for r in body["references"][dataset]] == ids


class TestOfflineAnswers:
    @pytest.mark.parametrize("method", ["local", "global", "basic"])
    def test_labelled_cited_answers(self, client: TestClient, method: str) -> None:
        r = client.post(
            f"/v1/query/{method}", json={**ASK, "level": 1} if method != "basic" else ASK
        )
        body = r.json()
        assert r.status_code == 200 and body["mode"] == "offline"
        assert body["answer"].startswith(OFFLINE_LABEL) and body["citations"]
        context_allows(body)
        assert cited_ids(body["answer"]) == body["citations"]

    def test_local_answer_cites_the_source_of_the_question(self, client: TestClient) -> None:
        body = client.post(LOCAL, json=ASK).json()
        sources = body["references"]["Sources"]
        assert any("OPEC" in s["title"] or s["chunk_id"] == "chunk-1" for s in sources)

    def test_stream_chunks_concatenate_to_the_answer(self, client: TestClient) -> None:
        plain = client.post(LOCAL, json=ASK).json()
        with client.stream("POST", LOCAL, json={**ASK, "stream": True}) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            events = parse_sse("".join(r.iter_text()))
        kinds = [k for k, _ in events]
        assert kinds[0] == "status" and kinds[-1] == "done" and "chunk" in kinds
        text = "".join(d["text"] for k, d in events if k == "chunk")
        assert text == plain["answer"]
        assert events[-1][1]["citations"] == plain["citations"]

    def test_questions_name_entities_of_the_context(self, client: TestClient) -> None:
        body = client.get("/v1/questions", params={"q": "OPEC output", "count": 3}).json()
        titles = {"OPEC", "Saudi Arabia", "Oil Prices", "Kuwait"}
        assert body["questions"] and all(any(t in q for t in titles) for q in body["questions"])


def parse_sse(text: str) -> list[tuple[str, Any]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            events.append((fields.get("event", "message"), orjson.loads(fields["data"])))
    return events


class TestGraphViews:
    @pytest.mark.parametrize("ident", ["1", "opec", "OPEC", "the OPEC"])
    def test_entity_by_hrid_key_or_spelling(self, client: TestClient, ident: str) -> None:
        body = client.get(f"/v1/entities/{ident}").json()
        assert body["title"] == "OPEC" and body["id"] == 1
        assert {r["target"] for r in body["relationships"]} >= {"Saudi Arabia", "Oil Prices"}
        assert body["communities"] == {"0": 1, "1": 3}

    @pytest.mark.parametrize("path", ["/v1/entities/%C2%B9", "/v1/communities/-%C2%B2"])
    def test_digits_that_are_not_ascii_are_names_not_numbers(
        self, client: TestClient, path: str
    ) -> None:
        assert client.get(path).status_code == 404  # "¹" passes str.isdigit, not int()

    def test_unknown_entity_is_404_naming_it(self, client: TestClient) -> None:
        r = client.get("/v1/entities/Atlantis")
        assert r.status_code == 404 and "Atlantis" in error(r)["message"]

    def test_community_by_number_or_id_with_report_and_members(self, client: TestClient) -> None:
        by_number = client.get("/v1/communities/5").json()
        by_id = client.get("/v1/communities/c-5").json()
        assert by_number == by_id
        assert by_number["report"]["title"] == "Volcker and rates"
        assert {m["title"] for m in by_number["members"]} == {
            "Federal Reserve",
            "Paul Volcker",
            "Interest Rates",
        }
        assert client.get("/v1/communities/c-404").status_code == 404

    def test_communities_in_a_late_window_put_the_late_storyline_first(
        self, client: TestClient
    ) -> None:
        body = client.get("/v1/communities", params={"since": "last 7 days", "level": 1}).json()
        numbers = [c["community"] for c in body["communities"]]
        assert numbers == [5]  # only the Fed storyline is mentioned in the last week

    def test_trends_rank_the_recent_storyline(self, client: TestClient) -> None:
        body = client.get("/v1/trends", params={"since": "last 7 days"}).json()
        assert body["until"] == "1987-03-31" and body["communities"]
        assert {c["community"] for c in body["communities"]} <= {2, 5}


def refresh(c: TestClient) -> None:
    """Let the service take the newest snapshot now (its refresher would, a little later)."""
    holder: IndexHolder = c.app.state.service.holder  # type: ignore[attr-defined]
    assert c.portal is not None
    c.portal.call(holder.refresh)


class SlowLLM:
    """Answers once ``release`` is set; says when a call has started."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> ChatResult:
        self.started.set()
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        return ChatResult("OPEC held output [Data: Entities (1, 101)].")


class TestSnapshotSwap:
    def test_request_in_flight_keeps_its_snapshot_while_the_next_gets_the_new_one(
        self, tmp_path: Path, store: GraphTables
    ) -> None:
        store.write(versioned(world(), 1))
        llm = SlowLLM()
        with client_for(tmp_path, store, llm=llm) as c, ThreadPoolExecutor(1) as pool:
            in_flight = pool.submit(c.post, LOCAL, json=ASK)
            assert llm.started.wait(30)
            store.write(grown(2))
            refresh(c)
            newer = c.get("/v1/entities/newcomer 2")
            llm.release.set()
            old = in_flight.result(30)
        assert newer.status_code == 200 and newer.json()["snapshot_version"] == 2
        body = old.json()
        assert old.status_code == 200 and body["snapshot_version"] == 1
        # entity 101 exists in no snapshot the request saw: removed and counted
        assert body["citations"] == {"Entities": [1]} and body["removed_citations"] == 1

    def test_every_query_succeeds_while_snapshots_are_published(
        self, tmp_path: Path, store: GraphTables
    ) -> None:
        store.write(grown(1))
        seen = []
        with client_for(tmp_path, store) as c:
            for version in range(2, 8):
                store.write(grown(version))
                r = c.post(LOCAL, json=ASK)
                assert r.status_code == 200, r.text
                seen.append(r.json()["snapshot_version"])
            refresh(c)
            final = c.post(LOCAL, json=ASK).json()["snapshot_version"]
        assert seen == sorted(seen) and all(1 <= v <= 7 for v in seen)
        assert final == 7

    def test_a_version_that_cannot_be_followed_is_read_whole(
        self, tmp_path: Path, store: GraphTables, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import query.api.state as state

        def broken(*_: object) -> None:
            raise KeyError("a defect in following")

        store.write(grown(1))
        with client_for(tmp_path, store) as c:
            refresh(c)
            monkeypatch.setattr(state, "follow", broken)
            store.write(grown(2))
            refresh(c)
            assert c.get("/v1/entities/newcomer 2").json()["snapshot_version"] == 2
            monkeypatch.undo()
            store.write(grown(3))
            refresh(c)
            assert c.get("/v1/entities/newcomer 3").json()["snapshot_version"] == 3
            metrics = c.get("/metrics").text
        assert 'kgrag_version_swap_seconds_count{how="whole"} 2.0' in metrics  # first, broken
        assert 'kgrag_version_swap_seconds_count{how="followed"} 1.0' in metrics

    def test_a_full_disk_for_the_index_text_keeps_the_version_in_service(
        self, tmp_path: Path, store: GraphTables, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import query.api.state as state

        def full(*_: object) -> None:
            raise OSError(28, "No space left on device")

        store.write(grown(1))
        with client_for(tmp_path, store) as c:
            refresh(c)
            monkeypatch.setattr(state, "follow", full)
            monkeypatch.setattr(state.QueryIndex, "read", full)
            store.write(grown(2))
            refresh(c)
            assert c.get("/v1/entities/newcomer 1").json()["snapshot_version"] == 1
            health = c.get("/healthz").json()
            assert "No space left on device" in str(health) and "data_dir" in str(health)
            older = c.post(LOCAL, json={**ASK, "as_of": 2})
            assert older.status_code == 503, older.text
            assert "No space left on device" in error(older)["message"]
            monkeypatch.undo()
            refresh(c)
            assert c.get("/v1/entities/newcomer 2").json()["snapshot_version"] == 2

    def test_as_of_answers_from_what_the_graph_knew_then(
        self, tmp_path: Path, store: GraphTables
    ) -> None:
        for version in range(1, 6):  # keep=3: versions 3, 4 and 5 stay readable
            store.write(grown(version))
        with client_for(tmp_path, store) as c:
            refresh(c)
            then = c.post(LOCAL, json={**ASK, "as_of": 3})
            assert then.status_code == 200 and then.json()["snapshot_version"] == 3
            assert c.post(LOCAL, json=ASK).json()["snapshot_version"] == 5
            at_time = store.version_infos()[1].committed_at  # version 4
            trends = c.get("/v1/trends", params={"as_of": at_time})
            assert trends.status_code == 200, trends.text
            gone = c.post(LOCAL, json={**ASK, "as_of": "1"})
            assert gone.status_code == 404
            assert "oldest version kept is 3" in error(gone)["message"]
            bad = c.get("/v1/trends", params={"as_of": "last tuesday"})
            assert bad.status_code == 422 and "ISO time" in error(bad)["message"]
            # the same trend question from version 3 beside the answer now (version 5)
            both = c.get("/v1/trends", params={"compare": 3}).json()
            assert both["snapshot_version"] == 5 and both["compared"]["snapshot_version"] == 3
            assert both["communities"]
            assert set(both["compared"]["then"]) == {row["id"] for row in both["communities"]}
            assert all(t["existed"] for t in both["compared"]["then"].values())
            old = c.get("/v1/trends", params={"compare": 1})
            assert old.status_code == 404 and "oldest version kept is 3" in error(old)["message"]

    def test_scripted_llm_answers_use_the_llm_path(
        self, tmp_path: Path, store: GraphTables
    ) -> None:
        store.write(versioned(world(), 1))
        llm = ScriptedLLM(lambda call: "OPEC [Data: Entities (1); Sources (77)].")
        with client_for(tmp_path, store, llm=llm) as c:
            body = c.post(LOCAL, json=ASK).json()
        assert body["mode"] == "llm" and body["removed_citations"] == 1
        assert body["references"]["Entities"][0]["title"] == "OPEC"


class TestAnswerPieces:
    @pytest.mark.parametrize(
        "text", ["", "one", "  lead and trail  ", "a\n\nb [Data: Entities (1, 2)]\n" * 20]
    )
    def test_pieces_concatenate_to_the_text(self, text: str) -> None:
        pieces = list(answer_pieces(text, size=16))
        assert "".join(pieces) == text
        assert all(p for p in pieces)


# ==== /healthz and /metrics: the community job ==================================================


def aged(version: int, age_s: float, consumed: dict[str, int]) -> Snapshot:
    """The world as ``version``, written ``age_s`` ago, having read graph_changes up to
    ``consumed`` (partition -> next offset)."""
    created = datetime.fromtimestamp(time.time() - age_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = replace(versioned(world(), version).meta, created_at=created, consumed_offsets=consumed)
    return replace(world(), meta=meta)


def job_status(*, heard_s_ago: float, failed: int = 0, **changes: Any) -> JobStatus:
    now = time.time()
    items = tuple(
        FailedItem("report", f"c{i}", "HTTP 400: content filter", 1, now - 60, now + 30)
        for i in range(failed)
    )
    last = LastRun(version=1, finished_at=now - 600, duration_s=2.5, changes=4, events=1,
                   reports_regenerated=2, summaries_written=3, failed_items=failed)  # fmt: skip
    base = JobStatus(
        state="waiting",
        pid=4242,
        started_at=now - 3600,
        updated_at=now - heard_s_ago,
        runs=1,
        supervisor_restarts=1,
        pool_restarts=1,
        last_run=last,
        failed_items_total=failed,
        failed_items=items,
    )
    return replace(base, **changes)


@pytest.fixture
def end_offsets(monkeypatch: pytest.MonkeyPatch) -> dict[int, int]:
    """graph_changes end offsets as the service's probe will read them (no Kafka needed)."""
    ends = {0: 10, 1: 2}

    async def fake(settings: Settings, timeout_s: float) -> dict[int, int]:
        return dict(ends)

    monkeypatch.setattr("core.lag.graph_end_offsets", fake)
    return ends


UNREACHABLE = (
    "Kafka is not reachable: 127.0.0.1:1",
    "Weaviate is not reachable: http://127.0.0.1:1",
)


def community_reasons(body: dict[str, Any]) -> list[str]:
    """The reasons besides the unreachable services every test here lacks."""
    reasons = body["reasons"]
    unreachable = [r for r in reasons if r.startswith(UNREACHABLE)]
    assert len(unreachable) == 2, reasons
    return [r for r in reasons if r not in unreachable]


@pytest.fixture
def no_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    """/metrics also reads the worker group's lag; answer it without a broker."""

    async def fake(settings: Settings, **kw: Any) -> dict[str, int]:
        return {}

    monkeypatch.setattr("query.kafka_probes.consumer_lag", fake)


class TestHealthCommunityJob:
    def test_pending_changes_on_a_stale_version_name_the_silent_job(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        store.write(aged(1, 600, {"0": 4, "1": 0}))
        write_status(settings(tmp_path), job_status(heard_s_ago=45))
        with client_for(tmp_path, store) as c:
            body = c.get("/healthz").json()
        assert body["status"] == "degraded" and body["pending_changes"] == 8
        stale = community_reasons(body)
        assert len(stale) == 1, body["reasons"]
        assert stale[0].startswith("8 graph change(s) pending and the newest version (v1) is 10")
        assert "(stale after 5 min)" in stale[0]
        # written 45 s before the request; a busy machine may take a second or more to serve it
        silent = re.search(r"; community job not heard from for (\d+) s$", stale[0])
        assert silent is not None and 45 <= int(silent.group(1)) <= 60, stale[0]
        job = body["community_job"]
        assert job["alive"] is False and job["state"] == "waiting" and job["restarts"] == 2
        assert job["last_run"]["version"] == 1

    def test_last_error_of_a_live_job_is_quoted(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        store.write(aged(1, 900, {}))
        status = job_status(heard_s_ago=1, state="running", last_error="HTTP 503 from the LLM")
        write_status(settings(tmp_path), status)
        with client_for(tmp_path, store) as c:
            body = c.get("/healthz").json()
        stale = community_reasons(body)
        assert len(stale) == 1 and stale[0].startswith("12 graph change(s) pending")
        assert stale[0].endswith(
            "community job is running; community job last error: HTTP 503 from the LLM"
        )
        assert body["community_job"]["alive"] is True

    def test_failed_items_are_a_reason_even_when_fresh(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        store.write(aged(1, 5, {"0": 10, "1": 2}))
        write_status(settings(tmp_path), job_status(heard_s_ago=1, failed=3))
        with client_for(tmp_path, store) as c:
            body = c.get("/healthz").json()
        assert body["pending_changes"] == 0
        community = community_reasons(body)
        assert len(community) == 1
        assert community[0].startswith("3 report(s)/summary(ies) refused by the LLM, retrying: ")
        assert body["community_job"]["failed_items_total"] == 3
        assert len(body["community_job"]["failed_items"]) == 3

    def test_fresh_version_with_pending_changes_is_not_stale(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        store.write(aged(1, 5, {}))
        with client_for(tmp_path, store) as c:
            body = c.get("/healthz").json()
        assert body["pending_changes"] == 12 and body["community_job"] is None
        assert community_reasons(body) == []

    def test_kafka_failure_leaves_healthz_answering(
        self, tmp_path: Path, store: GraphTables
    ) -> None:
        store.write(aged(1, 3600, {}))  # stale, but the pending figure cannot be read
        write_status(settings(tmp_path), job_status(heard_s_ago=45))
        with client_for(tmp_path, store) as c:
            r = c.get("/healthz")
        body = r.json()
        assert r.status_code == 200 and body["status"] == "degraded"
        assert body["pending_changes"] is None and body["kafka"]["reachable"] is False
        assert community_reasons(body) == []
        assert body["community_job"]["pid"] == 4242

    def test_end_offsets_are_read_once_per_few_seconds(
        self, tmp_path: Path, store: GraphTables, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        calls: list[float] = []

        async def counting(settings: Settings, timeout_s: float) -> dict[int, int]:
            calls.append(timeout_s)
            return {0: 1}

        monkeypatch.setattr("core.lag.graph_end_offsets", counting)
        store.write(aged(1, 5, {}))
        with client_for(tmp_path, store) as c:
            for _ in range(3):
                assert c.get("/healthz").json()["pending_changes"] == 1
        assert len(calls) == 1

    @pytest.mark.usefixtures("no_lag")
    def test_metrics_expose_the_community_gauges(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        store.write(aged(1, 600, {"0": 4}))
        status = job_status(heard_s_ago=45, failed=2)
        write_status(settings(tmp_path), status)
        with client_for(tmp_path, store) as c:
            text = c.get("/metrics").text
        assert status.last_run is not None
        gauges = {
            "kgrag_community_job_alive": 0.0,
            "kgrag_community_job_restarts": 2.0,
            "kgrag_community_failed_items": 2.0,
            "kgrag_community_last_run_timestamp_seconds": status.last_run.finished_at,
            "kgrag_community_pending_changes": 8.0,
        }
        values = {
            line.split()[0]: float(line.split()[1])
            for line in text.splitlines()
            if line.startswith("kgrag_community_")
        }
        for name, value in gauges.items():
            assert values[name] == pytest.approx(value), name

    @pytest.mark.usefixtures("no_lag")
    def test_metrics_without_a_status_file(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        store.write(aged(1, 5, {}))
        with client_for(tmp_path, store) as c:
            text = c.get("/metrics").text
        assert "kgrag_community_job_alive 0.0" in text
        assert "kgrag_community_pending_changes 12.0" in text


class TestHealthWorkers:
    """Each stream worker's stall watchdog, from its status file (``core.worker_status``)."""

    def test_a_failing_watchdog_degrades_the_service_with_its_reason(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        now = time.time()
        store.write(aged(1, 5, {"0": 12}))
        write_status(settings(tmp_path), job_status(heard_s_ago=1))
        healthy = WatchdogStatus(
            "graph", "w1", 11, now - 600, now - 3, WatchdogFigures(checks=60, repairs=1)
        )
        failing = WatchdogStatus(
            "vectors", "w1", 12, now - 600, now - 4,
            WatchdogFigures(
                checks=60, failures=3, last_failure_at=now - 20,
                last_failure="check: AttributeError: 'Consumer' object has no attribute "
                "'_committed_offset'",
            ),
        )  # fmt: skip
        for w in (healthy, failing):
            write_watchdog_status(settings(tmp_path), w)
        with client_for(tmp_path, store) as c:
            body = c.get("/healthz").json()
        assert body["status"] == "degraded"
        [reason] = [r for r in body["reasons"] if "watchdog" in r]
        assert reason.startswith("the stall watchdog of the vectors worker w1 failed 3 time(s)")
        assert "_committed_offset" in reason
        assert [(w["group"], w["alive"], w["repairs"]) for w in body["workers"]] == [
            ("graph", True, 1),
            ("vectors", True, 0),
        ]

    def test_an_old_failure_or_a_dead_worker_is_shown_but_does_not_degrade(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        now = time.time()
        store.write(aged(1, 5, {"0": 12}))
        write_status(settings(tmp_path), job_status(heard_s_ago=1))
        old = WatchdogStatus(
            "graph", "w2", 13, now - 7200, now - 300,
            WatchdogFigures(failures=1, last_failure="check: boom", last_failure_at=now - 3600),
        )  # fmt: skip
        write_watchdog_status(settings(tmp_path), old)
        with client_for(tmp_path, store) as c:
            body = c.get("/healthz").json()
        assert not [r for r in body["reasons"] if "watchdog" in r], body["reasons"]
        assert [(w["name"], w["alive"], w["failures"]) for w in body["workers"]] == [
            ("w2", False, 1)
        ]

    @pytest.mark.usefixtures("no_lag")
    def test_metrics_expose_each_workers_watchdog(
        self, tmp_path: Path, store: GraphTables, end_offsets: dict[int, int]
    ) -> None:
        now = time.time()
        store.write(aged(1, 5, {}))
        write_watchdog_status(
            settings(tmp_path),
            WatchdogStatus(
                "vectors", "w1", 12, now - 60, now - 2, WatchdogFigures(repairs=2, failures=1)
            ),
        )
        with client_for(tmp_path, store) as c:
            text = c.get("/metrics").text
        labels = '{group="vectors",worker="w1"}'
        assert f"kgrag_worker_alive{labels} 1.0" in text
        assert f"kgrag_watchdog_repairs{labels} 2.0" in text
        assert f"kgrag_watchdog_failures{labels} 1.0" in text


def test_every_declared_metric_is_a_typed_attribute() -> None:
    """``METRICS`` (the table) and ``QueryMetrics``'s annotations name the same attributes,
    each built as the kind its annotation says."""
    metrics = QueryMetrics()
    annotated = get_type_hints(QueryMetrics)
    assert [s.attr for s in METRICS] == list(annotated)
    for spec in METRICS:
        assert isinstance(getattr(metrics, spec.attr), annotated[spec.attr])
        assert spec.kind is annotated[spec.attr]
