"""Streaming ingestion through real Kafka and Weaviate, offline extractor: merge, redelivery,
correction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from core.publish import publish
from core.settings import Settings
from graph.merge.view import GraphView
from tests.conftest import make_settings
from tests.integration.helpers import WorkerProcess, fold_until, graph_summary, running_worker

ARTICLES = [
    (
        "oil-1",
        "2026-03-02",
        "OPEC ministers meet in Vienna",
        "Oil Minister Amira Haddad of Qatar said OPEC ministers will meet in Vienna on Monday. "
        "Haddad said OPEC wants to hold output steady. Saudi Arabia backed the plan.",
    ),
    (
        "oil-2",
        "2026-03-03",
        "Vienna talks continue",
        "OPEC ministers continued talks in Vienna. Amira Haddad said Qatar and Saudi Arabia "
        "agreed on quotas. Analysts at Meridian Capital expect prices to rise.",
    ),
    (
        "bank-1",
        "2026-03-04",
        "Central bank holds rates",
        "Governor Tomas Lindqvist of the Nordic Reserve Bank held rates in Stockholm. "
        "Lindqvist said inflation is easing. Finance Minister Karin Berg welcomed it.",
    ),
]


def _write(tmp: Path, docs: list[tuple[str, str, str, str]], name: str = "docs.jsonl") -> Path:
    path = tmp / name
    with open(path, "wb") as fh:
        for doc_id, day, title, text in docs:
            fh.write(
                orjson.dumps(
                    {"id": doc_id, "title": title, "text": text, "published_at": f"{day}T09:00:00Z"}
                )
                + b"\n"
            )
    return path


@pytest.fixture(scope="module")
def settings(
    service_endpoints: dict[str, object],
    tmp_path_factory: pytest.TempPathFactory,
    session_namespace: str,
) -> Settings:
    return make_settings(
        service_endpoints, f"{session_namespace}-ingest", tmp_path_factory.mktemp("ingest")
    )


@pytest.fixture(scope="module")
def worker(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_worker(settings, tmp_path_factory.mktemp("logs")) as w:
        yield w


async def test_articles_merge_into_one_graph_and_republishing_changes_nothing(
    settings: Settings, worker: WorkerProcess, tmp_path: Path
) -> None:
    path = _write(tmp_path, ARTICLES)
    await publish(settings, path)
    view = await fold_until(settings, lambda v: {"oil-1", "oil-2", "bank-1"} <= set(v.documents))
    assert "amira haddad" in view.entities, (sorted(view.entities), worker.log_tail())
    haddad = view.entities["amira haddad"]
    assert haddad.document_count == 2 and haddad.mention_count == 2
    assert view.entities["opec"].document_count == 2
    assert any(
        {r.source_key, r.target_key} == {"amira haddad", "qatar"}
        for r in view.relationships.values()
    )
    assert set(view.documents) == {"oil-1", "oil-2", "bank-1"}
    before = graph_summary(view)
    descriptions = {k: a.descriptions for k, a in view.entities.items()}

    await publish(settings, path)  # the same documents again
    await publish(settings, path)
    again = await fold_until(settings, lambda v: True)
    assert graph_summary(again) == before
    assert {k: a.descriptions for k, a in again.entities.items()} == descriptions


async def test_a_corrected_article_replaces_its_earlier_version(
    settings: Settings, worker: WorkerProcess, tmp_path: Path
) -> None:
    v1 = [
        (
            "fix-1",
            "2026-03-05",
            "Port strike",
            "Union leader Marta Kowalczyk said dockers "
            "at Zorblax Shipping in Rotterdam will strike on Friday.",
        )
    ]
    v2 = [
        (
            "fix-1",
            "2026-03-05",
            "Port strike (corrected)",
            "Union leader Marta Kowalczyk "
            "said dockers at Quintessa Lines in Rotterdam will strike on Friday.",
        )
    ]
    await publish(settings, _write(tmp_path, v1, "v1.jsonl"))
    first = await fold_until(settings, lambda v: "fix-1" in v.documents)
    assert "zorblax shipping" in first.entities, sorted(first.entities)
    await publish(settings, _write(tmp_path, v2, "v2.jsonl"))
    second = await fold_until(
        settings, lambda v: v.documents.get("fix-1", {}).get("title") == "Port strike (corrected)"
    )
    assert "zorblax shipping" not in second.entities
    assert "quintessa lines" in second.entities
    assert second.entities["marta kowalczyk"].mention_count == 1
    assert second.documents["fix-1"]["title"] == "Port strike (corrected)"
    units = [u for u in second.text_units.values() if u.document_id == "fix-1"]
    assert len(units) == 1 and "Quintessa" in units[0].text


async def test_a_correction_in_the_same_batch_as_its_original_leaves_no_orphan(
    settings: Settings, worker: WorkerProcess, tmp_path: Path
) -> None:
    """The original and its correction published back to back reach the chunker in one
    batch: the correction must retract the original's chunk (read from the batch's own
    writes), so only the correction's text unit stays, and a later correction retracts it."""

    def version(n: int, company: str) -> tuple[str, str, str, str]:
        text = f"Harbour master Ines Vaalgard said {company} ships will dock in Gdansk today."
        return ("same-batch-1", "2026-03-06", f"Dock report v{n}", text)

    both = [version(1, "Brightwater Freight"), version(2, "Corvane Maritime")]
    await publish(settings, _write(tmp_path, both, "both.jsonl"))
    second = await fold_until(
        settings,
        lambda v: v.documents.get("same-batch-1", {}).get("title") == "Dock report v2",
    )
    units = [u for u in second.text_units.values() if u.document_id == "same-batch-1"]
    assert [u.text for u in units] == [version(2, "Corvane Maritime")[3]], units
    assert "brightwater freight" not in second.entities
    await publish(settings, _write(tmp_path, [version(3, "Dunmore Tankers")], "v3.jsonl"))
    third = await fold_until(
        settings,
        lambda v: v.documents.get("same-batch-1", {}).get("title") == "Dock report v3",
    )
    units = [u for u in third.text_units.values() if u.document_id == "same-batch-1"]
    assert len(units) == 1 and "Dunmore" in units[0].text, units
    assert not {"brightwater freight", "corvane maritime"} & set(third.entities)


async def test_corrections_that_remove_kept_descriptions_refill_the_sample_from_the_evidence(
    settings: Settings, worker: WorkerProcess, tmp_path: Path
) -> None:
    """An entity named by more chunks than ``max_descriptions`` keeps a sample of their
    descriptions. Corrections that take kept descriptions away must refill the sample from
    the chunks still live (as a fresh index of the same articles would), not leave the places
    empty while left-out descriptions are still there."""
    cap = settings.extraction.max_descriptions
    n = cap + 2

    def article(i: int, mentioned: bool = True) -> tuple[str, str, str, str]:
        subject = "Zephyrine Holdings" if mentioned else "A shipping firm"
        text = f"{subject} reported {1000 + i} new orders from buyers in Tallinn this week."
        return (f"zeph-{i}", "2026-03-07", f"Orders {i}", text)

    def numbers(view: GraphView) -> tuple[set[int], int]:
        tally = view.entities["zephyrine holdings"].descriptions
        found = {int(w) - 1000 for d in tally.values() for w in d.split() if w.isdigit()}
        return found, tally.overflow

    await publish(settings, _write(tmp_path, [article(i) for i in range(n)], "zeph.jsonl"))
    first = await fold_until(
        settings,
        lambda v: (
            "zephyrine holdings" in v.entities
            and v.entities["zephyrine holdings"].mention_count == n
        ),
    )
    kept, overflow = numbers(first)
    assert len(kept) == cap and overflow == 2, (kept, overflow)
    gone = sorted(kept)[:2]
    await publish(settings, _write(tmp_path, [article(i, False) for i in gone], "zeph-fix.jsonl"))
    second = await fold_until(
        settings, lambda v: v.entities["zephyrine holdings"].mention_count == n - 2
    )
    kept_after, overflow_after = numbers(second)
    assert kept_after == set(range(n)) - set(gone), worker.log_tail()
    assert overflow_after == 0
