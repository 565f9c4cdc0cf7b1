"""One entity per real-world thing, end to end: real Kafka and Weaviate, a real ``kgrag
worker``, the query service over HTTP, offline mode.

A central bank is named three ways in three articles: in full beside its acronym, by the
acronym alone, in full alone. The community job resolves the acronym to the full name
(``graph.aliases.resolution``); the user sees it in ``/v1/entities``, local search asked by one name
reads the article that only uses the other, and the lineage stream carries the merge with its
evidence. A correction that takes away the one article naming both undoes the merge, which
the stream reports too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from query.sse import event_feed
from tests.integration.test_freshness import Fresh, live_service
from tests.integration.test_retrieval import first_document, wait_for_all

TIMEOUT_S = 150.0
FULL = "kessaran monetary authority"
ARTICLES = {
    "kma-1": (
        "The Kessaran Monetary Authority (KMA) said on Monday that it would keep its discount "
        "rate at nine pct. Governor Teodor Vasquell said the KMA expected inflation to ease."
    ),
    "kma-2": (
        "The KMA raised reserve requirements for Lindmark Bank and other commercial banks on "
        "Tuesday, a KMA spokesman said."
    ),
    "kma-3": (
        "The Kessaran Monetary Authority cut its lending rate at the Tuesday auction, dealers "
        "in Porvane said."
    ),
}


@pytest.fixture(scope="module")
def service(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Fresh]:
    tmp: Path = tmp_path_factory.mktemp("aliases")
    env = {"KGRAG_COMMUNITY__DEBOUNCE_S": "1", "KGRAG_COMMUNITY__MAX_WAIT_S": "5"}
    with live_service(service_endpoints, tmp, f"{session_namespace}-alias", env) as live:
        yield live


def article(doc_id: str, text: str) -> dict[str, Any]:
    day = 10 + int(doc_id[-1])
    return {"id": doc_id, "title": "Kessar banking", "text": text, "published_at": f"1987-03-{day}"}


async def entity_when(
    service: Fresh, key: str, ready: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """``/v1/entities/{key}`` once ``ready`` holds for it."""
    deadline = time.monotonic() + TIMEOUT_S
    body: dict[str, Any] = {}
    async with service.client() as c:
        while time.monotonic() < deadline:
            r = await c.get(f"/v1/entities/{key}")
            if r.status_code == 200:
                body = r.json()
                if ready(body):
                    return body
            if service.worker.proc is not None and service.worker.proc.poll() is not None:
                raise AssertionError(f"the worker exited\n{service.worker.log_tail()}")
            await asyncio.sleep(0.5)
    raise AssertionError(f"not reached in time: {body}\n{service.worker.log_tail()}")


async def alias_event(service: Fresh, kind: str) -> dict[str, Any]:
    """The first ``kind`` event about "kma" on the lineage stream, from its beginning."""

    async def find() -> dict[str, Any]:
        feed = event_feed(service.settings, start="earliest", poll_s=0.5)
        async with contextlib.aclosing(feed):  # stops its consumer
            async for batch in feed:
                for e in batch:
                    if e.payload["kind"] == kind and e.payload.get("alias") == "kma":
                        return e.payload
        raise AssertionError("the event stream ended")

    return await asyncio.wait_for(find(), TIMEOUT_S)


async def test_an_acronym_and_its_name_are_one_entity_until_the_evidence_goes(
    service: Fresh,
) -> None:
    async with service.client() as c:
        for doc_id, text in ARTICLES.items():
            r = await c.post("/v1/documents", json=article(doc_id, text))
            assert r.status_code == 202, r.text

    alias = await entity_when(service, "kma", lambda e: e["alias_of"] is not None)
    assert alias["alias_of"]["key"] == FULL and alias["alias_of"]["rule"] == "acronym"
    assert "mentioned together" in alias["alias_of"]["evidence"]
    full = await entity_when(service, FULL, lambda e: bool(e["aliases"]))
    assert [a["key"] for a in full["aliases"]] == ["kma"]
    # the full name's sources include the article that only says "KMA"
    assert len(full["sources"]) == 3

    # asked by one name, local search reads first the article that only uses the other (once
    # the vector store, which local search ranks a name's articles by, holds all three)
    await wait_for_all(service, len(ARTICLES), "the Kessaran Monetary Authority and its rates")
    asked = {
        "kma-3": "What did the KMA do about its lending rate?",
        "kma-2": "What did the Kessaran Monetary Authority say about reserve requirements?",
    }
    for doc_id, question in asked.items():
        assert await first_document(service, "local", question) == doc_id, question

    made = await alias_event(service, "aliased")
    assert made["canonical"] == FULL and made["rule"] == "acronym"
    assert made["title"] == "KMA = Kessaran Monetary Authority" and made["evidence"]

    # a correction takes away the one article naming both: the merge is undone
    async with service.client() as c:
        corrected = "Governor Teodor Vasquell said on Monday that inflation would ease."
        r = await c.post("/v1/documents", json=article("kma-1", corrected))
        assert r.status_code == 202, r.text
    apart = await entity_when(service, "kma", lambda e: e["alias_of"] is None)
    assert apart["aliases"] == []
    undone = await alias_event(service, "unaliased")
    assert undone["canonical"] == FULL
