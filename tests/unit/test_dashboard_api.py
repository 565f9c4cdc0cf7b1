"""What the dashboard needs of the API, in process: signing in with a session cookie, the
pages and their security headers, and the routes it reads (references, graph, documents)."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from core.tables.store import GraphTables
from query.api.session import COOKIE, SESSION_TTL_S, sign, valid_session
from tests.unit.test_query_service import KEY, client_for, error, versioned, world


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[TestClient]:
    """A client without the API key header: as a browser arrives."""
    store = GraphTables(tmp_path / "tables")
    store.write(versioned(world(), 1))
    with client_for(tmp_path, store, api_key=KEY) as c:
        c.headers.pop("X-API-Key")
        yield c


def signed_in(c: TestClient) -> TestClient:
    assert c.post("/v1/session", json={"api_key": KEY}).status_code == 200
    return c


class TestSession:
    def test_a_browser_without_a_session_is_told_to_sign_in(self, browser: TestClient) -> None:
        assert browser.get("/v1/session").json() == {"key_required": True, "signed_in": False}
        r = browser.get("/v1/communities")
        assert r.status_code == 401
        assert "POST /v1/session" in error(r)["message"]

    def test_a_wrong_key_is_refused_and_sets_no_cookie(self, browser: TestClient) -> None:
        r = browser.post("/v1/session", json={"api_key": "guess"})
        assert r.status_code == 401 and error(r)["message"] == "that is not the service's API key"
        assert COOKIE not in r.cookies and "set-cookie" not in r.headers

    def test_signing_in_sets_an_httponly_strict_cookie_that_opens_the_api(
        self, browser: TestClient
    ) -> None:
        r = browser.post("/v1/session", json={"api_key": KEY})
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie
        assert "SameSite=strict" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # plain http here; set over https
        assert KEY not in cookie
        assert browser.get("/v1/session").json()["signed_in"] is True
        assert browser.get("/v1/communities").status_code == 200
        assert browser.get("/v1/events", params={"kind": "nope"}).status_code == 422  # past auth

    def test_changes_need_the_header_forms_cannot_send(self, browser: TestClient) -> None:
        signed_in(browser)
        r = browser.post("/v1/query/local", json={"question": "What did OPEC decide?"})
        assert r.status_code == 403 and "X-Requested-With" in error(r)["message"]
        r = browser.post(
            "/v1/query/local",
            json={"question": "What did OPEC decide?"},
            headers={"X-Requested-With": "kgrag-dashboard"},
        )
        assert r.status_code == 200 and r.json()["answer"]

    def test_signing_out_ends_the_session(self, browser: TestClient) -> None:
        signed_in(browser)
        r = browser.delete("/v1/session")
        assert r.json()["signed_in"] is False and 'kgrag_session=""' in r.headers["set-cookie"]
        assert browser.get("/v1/communities").status_code == 401

    def test_an_old_or_forged_cookie_is_refused(self, browser: TestClient) -> None:
        old = sign(KEY, int(time.time()) - SESSION_TTL_S - 10)
        forged = sign("another key", int(time.time()))
        for token in (old, forged, "123.abc", "not-a-token"):
            browser.cookies.set(COOKIE, token)
            r = browser.get("/v1/communities")
            assert r.status_code == 401 and error(r)["code"] == "session_expired", token
        assert valid_session(KEY, sign(KEY, int(time.time())))
        assert not valid_session(KEY, sign(KEY, int(time.time()) + 3600))  # from the future

    def test_the_header_still_works_and_a_wrong_one_wins_over_a_cookie(
        self, browser: TestClient
    ) -> None:
        assert browser.get("/v1/communities", headers={"X-API-Key": KEY}).status_code == 200
        signed_in(browser)
        r = browser.get("/v1/communities", headers={"X-API-Key": "wrong"})
        assert r.status_code == 401

    def test_without_a_key_configured_no_sign_in_is_needed(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path / "tables")
        store.write(versioned(world(), 1))
        with client_for(tmp_path, store) as c:
            assert c.get("/v1/session").json() == {"key_required": False, "signed_in": True}
            assert c.post("/v1/session", json={"api_key": "x"}).json()["signed_in"] is True


class TestPages:
    def test_the_dashboard_is_served_with_a_strict_content_security_policy(
        self, browser: TestClient
    ) -> None:
        page = browser.get("/")  # no key needed to load the page itself
        assert page.status_code == 200 and "<title>kafka-graphrag newsroom</title>" in page.text
        csp = page.headers["content-security-policy"]
        script_src = next(d for d in csp.split(";") if d.strip().startswith("script-src"))
        assert script_src.strip() == "script-src 'self'"  # no inline script, no eval
        assert "default-src 'none'" in csp
        for asset in ("/dashboard/app.js", "/dashboard/style.css",
                      "/dashboard/vendor/cytoscape.min.js"):  # fmt: skip
            r = browser.get(asset)
            assert r.status_code == 200 and r.headers["x-content-type-options"] == "nosniff"
            assert r.headers["content-security-policy"] == csp
        licence = browser.get("/dashboard/vendor/cytoscape.LICENSE")
        assert licence.status_code == 200 and "Cytoscape Consortium" in licence.text

    def test_the_script_never_writes_html(self) -> None:
        script = (Path(__file__).parents[2] / "query/api/static/app.js").read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in script, sink


class TestRoutes:
    def test_references_resolve_citations_and_refuse_what_is_not_an_id(
        self, browser: TestClient
    ) -> None:
        signed_in(browser)
        body = browser.get("/v1/references", params={"entities": "1,2,999"}).json()
        rows = body["references"]["Entities"]
        assert [r["id"] for r in rows] == [1, 2] and all(r["key"] for r in rows)
        r = browser.get("/v1/references", params={"sources": "1,x"})
        assert r.status_code == 422 and "'x'" in error(r)["message"]

    def test_the_graph_of_an_entity_and_of_a_community(self, browser: TestClient) -> None:
        signed_in(browser)
        g = browser.get("/v1/graph", params={"entity": "opec"}).json()
        keys = {n["key"] for n in g["nodes"]}
        assert "opec" in keys and any(n["center"] for n in g["nodes"] if n["key"] == "opec")
        assert g["edges"] and all(e["source"] in keys and e["target"] in keys for e in g["edges"])
        c = browser.get("/v1/communities", params={"sort": "size"}).json()["communities"][0]
        g = browser.get("/v1/graph", params={"community": c["id"], "limit": 3}).json()
        assert 1 <= len(g["nodes"]) <= 3
        r = browser.get("/v1/graph", params={"entity": "opec", "community": c["id"]})
        assert r.status_code == 422
        r = browser.get("/v1/graph", params={"entity": "nobody at all"})
        assert r.status_code == 404 and error(r)["code"] == "unknown_entity"

    def test_communities_with_their_timelines(self, browser: TestClient) -> None:
        signed_in(browser)
        rows = browser.get("/v1/communities", params={"timeline": "true", "sort": "size"})
        assert all(isinstance(r["timeline"], list) for r in rows.json()["communities"])
        plain = browser.get("/v1/communities", params={"sort": "size"}).json()["communities"]
        assert "timeline" not in plain[0]

    def test_a_history_without_kafka_is_a_503_that_leaves_nothing_open(
        self, browser: TestClient
    ) -> None:
        signed_in(browser)
        c = browser.get("/v1/communities", params={"sort": "size"}).json()["communities"][0]
        r = browser.get(f"/v1/communities/{c['id']}/history")
        assert r.status_code == 503 and error(r)["code"] == "kafka_unavailable"
        gc.collect()  # an unclosed consumer would warn here, and warnings are errors
        r = browser.get("/v1/communities/no-such-community/history")
        assert r.status_code == 404 and error(r)["code"] == "unknown_community"

    def test_a_document_with_its_passages_and_text(self, browser: TestClient) -> None:
        signed_in(browser)
        index_docs = browser.get("/v1/references", params={"sources": "1"}).json()
        doc_id = index_docs["references"]["Sources"][0]["document_id"]
        d = browser.get(f"/v1/documents/{doc_id}").json()
        assert d["id"] == doc_id and d["title"] and d["passages"]
        assert d["passages"][0]["text"] and d["title"] == "Article 1"
        assert d["text"] is None  # this world has text units but no document rows
        r = browser.get("/v1/documents/not-a-document")
        assert r.status_code == 404 and error(r)["code"] == "unknown_document"
