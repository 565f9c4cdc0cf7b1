"""The dashboard in a real browser: Debian's Chromium, headless, driven by Playwright.

Real Kafka and Weaviate, a real worker in LLM mode against the scripted OpenAI-compatible
server, the sample news plus one article whose title and text carry script payloads, and
the query service (with an API key) serving the dashboard. What a user does: signs in (a
wrong key first), reads the storylines, opens one with its report and history, draws its
graph, opens an entity, asks a question and follows a citation to its article, and watches
an event arrive while the page is open. Nothing the news carries runs as script.

Screenshots of each page go to ``tests/artifacts/dashboard`` (``docs/screenshots`` holds a
committed set, copied from there). Playwright's own browser download is not used: the test
launches ``/usr/bin/chromium`` (``KGRAG_CHROMIUM``), which ``make test`` installs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api as playwright_api

from core.publish import publish
from core.settings import Settings
from core.settings.llm import EmbeddingSettings, LLMSettings
from core.settings.serving import ApiSettings
from kgrag.testing.scripted_llm import ScriptedLLMServer
from query.api.app import create_app
from streams.admin import delete_namespace_topics, ensure_topics
from tests.conftest import make_settings
from tests.integration.helpers import TunedWorker, wait_complete_llm_version, write_jsonl
from tests.integration.test_query_api import ServerThread

ROOT = Path(__file__).resolve().parents[2]
NEWS = ROOT / "examples" / "news" / "articles.jsonl"
ARTIFACTS = ROOT / "tests" / "artifacts" / "dashboard"
CHROMIUM = os.environ.get("KGRAG_CHROMIUM", "/usr/bin/chromium")
KEY = "newsroom-key"
# what the probe of this machine found Chromium needs offline and as root
CHROMIUM_ARGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
HOSTILE = {
    "id": "hostile-1",
    "title": "Rotterdam <script>window.__pwned='title'</script> harbour "
    "<img src=x onerror=\"window.__pwned='img'\"> pilots join strike",
    "text": "ROTTERDAM, March 9 - Harbour pilots in Rotterdam joined the dockworkers' strike "
    "on Monday, the Rotterdam Pilots Association said. <script>window.__pwned='text'</script> "
    "<img src=x onerror=\"window.__pwned='onerror'\"> The pilots' union said Nordhavn Line "
    "ships would wait at anchor until the Rotterdam dispute was settled.",
    "published_at": "1987-03-09T10:00:00Z",
}
LATE = {
    "id": "late-1",
    "title": "Quillon Aerospace unveils Merrow jet engine at Tarvonia air show",
    "text": "ALVORA, March 20 - Quillon Aerospace unveiled its Merrow jet engine at the "
    "Tarvonia air show on Friday. Quillon chief engineer Ines Varga said the Merrow engine "
    "burns 14 percent less fuel. Tarvonia Airways said it would test the Merrow engine.",
    "published_at": "1987-03-20T10:00:00Z",
}


@dataclass
class Dashboard:
    url: str
    settings: Settings
    tmp: Path


@pytest.fixture(scope="module")
def dashboard(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Dashboard]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt)")
    tmp = tmp_path_factory.mktemp("dashboard")
    with ScriptedLLMServer() as llm:
        settings = make_settings(
            service_endpoints,
            f"{session_namespace}-dash",
            tmp,
            llm=LLMSettings(base_url=llm.base_url, max_retries=2, timeout_s=30),
            embeddings=EmbeddingSettings(base_url=llm.base_url),
            api=ApiSettings(api_key=KEY),
        )
        asyncio.run(ensure_topics(settings))
        env = {"KGRAG_COMMUNITY__DEBOUNCE_S": "1", "KGRAG_COMMUNITY__MAX_WAIT_S": "10"}
        worker = TunedWorker(settings, tmp / "worker.log", env).start()
        server = None
        try:
            docs = [json.loads(line) for line in NEWS.read_text().splitlines() if line]
            docs.append(HOSTILE)
            asyncio.run(publish(settings, write_jsonl(tmp / "news.jsonl", docs)))
            wait_complete_llm_version(settings, {d["id"] for d in docs}, worker, timeout_s=420)
            server = ServerThread(create_app(settings, refresh_interval_s=0.2, lag_ttl_s=0))
            server.start()
            yield Dashboard(f"http://127.0.0.1:{server.port}", settings, tmp)
        finally:
            if server is not None:
                server.stop()
            worker.stop()
            asyncio.run(delete_namespace_topics(settings))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def page(dashboard: Dashboard, browser: Any) -> Iterator[Any]:
    """One signed-in page for the module's tests, in the order a user would go."""
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on(
        "console",
        lambda m: (
            problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" and "401" not in m.text
            else None
        ),
    )
    page.problems = problems  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)


def no_script_ran(page: Any) -> None:
    assert page.evaluate("window.__pwned === undefined"), page.evaluate("window.__pwned")


def test_a_wrong_key_is_told_and_the_right_one_signs_in(dashboard: Dashboard, page: Any) -> None:
    page.goto(dashboard.url + "/")
    page.wait_for_selector("#login:not([hidden])")
    page.fill("#api-key", "not-the-key")
    page.click("#login-form button[type=submit]")
    message = page.wait_for_selector("#login-message:has-text('not valid')")
    assert "That API key is not valid" in message.inner_text()
    shot(page, "sign-in")
    page.fill("#api-key", KEY)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#login", state="hidden")
    cookie = next(c for c in page.context.cookies() if c["name"] == "kgrag_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert "kgrag_session" not in page.evaluate("document.cookie")  # scripts cannot read it


def test_the_storylines_list_real_rows_with_sparklines(dashboard: Dashboard, page: Any) -> None:
    page.goto(dashboard.url + "/#/?since=last+30+days")
    page.wait_for_selector("#storylines tbody tr")
    rows = page.locator("#storylines tbody tr")
    assert rows.count() >= 3
    titles = [t.strip() for t in page.locator("a.storyline").all_inner_texts()]
    assert all(titles) and len(set(titles)) == len(titles)
    assert page.locator("#storylines svg.spark polyline").count() >= 3
    page.wait_for_selector("#status:has-text('graph v')")
    status = page.inner_text("#status")
    assert "LLM mode" in status and "documents" in status
    shot(page, "storylines")
    no_script_ran(page)


def test_a_storyline_opens_with_its_report_and_history(dashboard: Dashboard, page: Any) -> None:
    page.goto(dashboard.url + "/#/?since=last+30+days")
    page.wait_for_selector("a.storyline")
    first = page.locator("a.storyline").first
    title = first.inner_text().strip()
    first.click()
    page.wait_for_selector("#community-title")
    assert page.inner_text("#community-title").strip() == title
    assert page.locator("#findings .finding").count() >= 1
    page.wait_for_selector("#lineage li")
    history = page.inner_text("#lineage")
    assert re.search(r"(bootstrap|emerged|appeared|grew|split|merged)", history, re.I), history
    assert re.search(r"report", history, re.I), history
    shot(page, "community")
    no_script_ran(page)


def test_the_graph_view_draws_the_community(dashboard: Dashboard, page: Any) -> None:
    page.click("text=Draw its graph")
    page.wait_for_selector("#graph[data-nodes]:not([data-nodes='0'])")
    drawn = page.evaluate("window.kgragGraph.nodes().length")
    edges = page.evaluate("window.kgragGraph.edges().length")
    assert drawn > 1 and edges >= 1
    assert f"{drawn} entities" in page.inner_text("#graph-caption")
    assert page.locator("#graph canvas").count() >= 1
    page.wait_for_timeout(500)
    shot(page, "graph")
    # clicking a node opens that entity
    key = page.evaluate("window.kgragGraph.nodes()[0].id()")
    page.evaluate("window.kgragGraph.nodes()[0].emit('tap')")
    page.wait_for_selector("#entity-title")
    assert key in page.url.replace("%20", " ")


def test_an_entity_page(dashboard: Dashboard, page: Any) -> None:
    page.goto(dashboard.url + "/#/entity/rotterdam")
    # the page may still show the entity the graph test opened: wait for this one's title
    page.wait_for_selector("#entity-title:has-text('rotterdam')")
    assert "ROTTERDAM" in page.inner_text("#entity-title").upper()
    assert page.locator("text=Documents").count() >= 1
    assert page.locator("a[href^='#/document/']").count() >= 2
    shot(page, "entity")
    no_script_ran(page)


def test_a_question_gets_an_answer_whose_citations_open_their_sources(
    dashboard: Dashboard, page: Any
) -> None:
    page.goto(dashboard.url + "/#/ask")
    page.fill("#question", "Why did the Rotterdam dockworkers strike?")
    page.select_option("#method", "local")
    page.click("#ask-form button[type=submit]")
    page.wait_for_selector("#answer-meta:has-text('LLM calls')", timeout=60_000)
    meta = page.inner_text("#answer-meta")
    assert re.search(r"graph v\d+ · 1 LLM calls · [\d,]+ tokens · \$", meta), meta
    assert "rotterdam" in page.inner_text("#answer").lower()
    citations = page.locator("#answer a.citation")
    assert citations.count() >= 1
    shot(page, "ask")
    source = page.locator("#references a.citation[href^='#/cite/Sources/']").first
    source.click()
    page.wait_for_selector("#document-title")
    assert page.locator(".passage.cited").count() == 1
    no_script_ran(page)


def test_news_text_is_shown_as_text_and_never_runs(dashboard: Dashboard, page: Any) -> None:
    page.goto(dashboard.url + "/#/document/hostile-1")
    page.wait_for_selector("#document-title")
    assert "<script>window.__pwned='title'</script>" in page.inner_text("#document-title")
    assert "onerror=" in page.inner_text(".article")
    assert page.locator("main script, main img").count() == 0
    page.goto(dashboard.url + "/#/entity/rotterdam")
    # the page may still show the entity the graph test opened: wait for this one's title
    page.wait_for_selector("#entity-title:has-text('rotterdam')")
    page.goto(dashboard.url + "/#/?since=last+30+days")
    page.wait_for_selector("#storylines tbody tr")
    no_script_ran(page)
    assert not page.problems, page.problems  # type: ignore[attr-defined]


def test_an_event_appears_while_the_page_is_open(dashboard: Dashboard, page: Any) -> None:
    page.goto(dashboard.url + "/#/?since=last+30+days")
    page.wait_for_selector("#storylines tbody tr")
    before = page.locator("#live-feed li.new").count()
    page.evaluate("window.__sameDocument = true")  # a reload would forget it
    late = write_jsonl(dashboard.tmp / "late.jsonl", [LATE])
    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
        pool.submit(asyncio.run, publish(dashboard.settings, late)).result(timeout=60)
    page.wait_for_selector("#live-feed li.new", timeout=120_000)
    assert page.locator("#live-feed li.new").count() > before
    assert page.evaluate("window.__sameDocument === true")
    shot(page, "live")
