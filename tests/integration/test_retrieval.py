"""Hybrid retrieval end to end: real Kafka and Weaviate, a real ``kgrag worker``, the query
service over HTTP, offline mode.

One person speaks on six topics in six articles that share their title and most of their
words. Asked what she said about one topic, local search must put that topic's article
first among its sources (her six articles all name her: only the question's other words tell
them apart), and basic search must find an article by its topic words however the question
spells them (case, possessives). One article calls her by her surname alone, which the
offline extractor keeps as an entity of its own: asked by her full name about that article's
topic, local search must still read it first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.settings import Settings
from core.tables.opening import open_graph_store
from query.index import QueryIndex
from tests.integration.test_freshness import Fresh, live_service

FIND_TIMEOUT_S = 90.0
PERSON = "Marguerite Olvenhaus"
# topic -> the sentence only its article carries
TOPICS = {
    "sugar": "sugar export quotas would rise by a tenth",
    "coffee": "coffee bean shipments from the highlands had doubled",
    "steel": "steel import tariffs were hurting the shipyards",
    "freight": "freight charter rates on the northern route would fall",
    "wheat": "the wheat harvest forecast had been cut after the frost",
    "bonds": "government bond yields were too high for new borrowers",
}


@pytest.fixture(scope="module")
def service(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Iterator[Fresh]:
    tmp: Path = tmp_path_factory.mktemp("retrieval")
    with live_service(service_endpoints, tmp, f"{session_namespace}-retr", {}) as live:
        yield live


def article(i: int, topic: str) -> dict[str, Any]:
    filler = (
        "Delegates from twelve ports attended the two-day Corvale Trade Forum, which "
        "meets every spring to discuss the regional economy."
    )
    if topic == "bonds":  # the surname alone
        return {
            "id": f"forum-{topic}",
            "title": "Olvenhaus addresses the Corvale Trade Forum",
            "text": (
                f"Finance adviser Olvenhaus told the Corvale Trade Forum on Tuesday that "
                f"{TOPICS[topic]}. {filler} Olvenhaus said the forum would meet again."
            ),
            "published_at": f"1987-03-{10 + i:02d}T09:00:00Z",
        }
    return {
        "id": f"forum-{topic}",
        "title": "Olvenhaus addresses the Corvale Trade Forum",
        "text": (
            f"{PERSON} told the Corvale Trade Forum on Tuesday that {TOPICS[topic]}. "
            f"{filler} {PERSON} said the forum would meet again in the autumn."
        ),
        "published_at": f"1987-03-{10 + i:02d}T09:00:00Z",
    }


async def wait_for_all(
    service: Fresh, count: int = len(TOPICS), question: str = "government bond yields"
) -> int:
    """The graph version that holds every one of ``count`` articles, once basic search (which
    reads the vector store, which may lag the graph snapshot) finds the last one."""
    deadline = time.monotonic() + FIND_TIMEOUT_S
    async with service.client() as c:
        while time.monotonic() < deadline:
            r = await c.post("/v1/query/basic", json={"question": question})
            if r.status_code == 200:
                body = r.json()
                version = body["basis"]["graph_version"]
                found = documents(service.settings, version, body["context_ids"]["Sources"])
                if len(found) == count:
                    return int(version)
            if service.worker.proc is not None and service.worker.proc.poll() is not None:
                raise AssertionError(f"the worker exited\n{service.worker.log_tail()}")
            await asyncio.sleep(0.5)
    raise AssertionError(f"the articles were not indexed in time\n{service.worker.log_tail()}")


def documents(settings: Settings, version: int, source_ids: list[int]) -> list[str]:
    """The distinct documents behind Sources ids, in order, as the given version has them."""
    index = QueryIndex.read(open_graph_store(settings, for_queries=True), version)
    docs: list[str] = []
    for i in source_ids:
        unit = index.text_unit_by_hrid.get(i)
        if unit is not None and unit.document_id not in docs:
            docs.append(unit.document_id)
    return docs


async def first_document(service: Fresh, method: str, question: str) -> str:
    async with service.client() as c:
        r = await c.post(f"/v1/query/{method}", json={"question": question})
    assert r.status_code == 200, r.text
    body = r.json()
    docs = documents(
        service.settings, body["basis"]["graph_version"], body["context_ids"]["Sources"]
    )
    assert docs, body
    return docs[0]


async def test_local_search_orders_a_persons_articles_by_the_topic_asked(
    service: Fresh,
) -> None:
    async with service.client() as c:
        for i, topic in enumerate(TOPICS):
            r = await c.post("/v1/documents", json=article(i, topic))
            assert r.status_code == 202, r.text
    await wait_for_all(service)
    asked = {
        "sugar": "What did Marguerite Olvenhaus say about sugar quotas?",
        "coffee": "What did Olvenhaus say or do about coffee shipments?",
        "steel": "What did Marguerite Olvenhaus say about steel tariffs?",
        "freight": "What did Marguerite Olvenhaus tell the forum about charter rates?",
        "wheat": "What did Marguerite Olvenhaus say about the wheat harvest?",
        "bonds": "What did Marguerite Olvenhaus say about bond yields?",
    }
    for topic, question in asked.items():
        assert await first_document(service, "local", question) == f"forum-{topic}", question


async def test_basic_search_matches_topic_words_whatever_their_spelling(
    service: Fresh,
) -> None:
    await wait_for_all(service)
    asked = {
        "steel": "What is Olvenhaus's view on STEEL import tariffs?",
        "freight": "Freight charter rates: what did the forum hear?",
        "coffee": "who spoke about Coffee Bean shipments",
    }
    for topic, question in asked.items():
        assert await first_document(service, "basic", question) == f"forum-{topic}", question
