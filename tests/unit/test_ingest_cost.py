"""What ingestion cost: the tokens each chunk's extraction spent, carried to its document's row
and to the version, priced at the chat model's price, and on the worker's Prometheus registry.

Cached answers (the response cache, or an identical request in flight) spent nothing and count
0; a redelivered or re-extracted chunk is counted once in the graph; records written before
tokens were counted read as 0, and graph tables written before the columns existed read them
as 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

import graph.versions.rows
from agents.community.commit import light_commit
from agents.community.state import upgrade_state
from agents.extractor import ExtractionMetrics, build_extractor
from core.settings import Settings, load_settings
from core.settings.llm import LLMSettings, cost_usd
from core.tables import schema
from core.tables.opening import open_graph_store
from graph.extraction.llm import ExtractionFailedError, extract_chunk
from graph.job.state import JobState
from graph.merge.changes import DocumentRemoved, GraphChange, text_unit_added, text_unit_retracted
from graph.merge.view import GraphView
from graph.model import Chunk, ChunkExtraction, EntityMention
from graph.protocols import ChatResult
from graph.versions.model import SnapshotDocument
from streams.codecs import (
    PayloadError,
    decode_extraction_event,
    decode_graph_change,
    encode_change,
    encode_extraction,
)
from tests.unit import stream_codecs_oracle as old_codecs
from tests.unit.test_community_run import Job, World, base_world, settings_for
from tests.unit.test_llm_extraction import PROMPTS, SPEC, answer, claim, ent

# gpt-4o-mini, the default chat model: $0.15 in and $0.60 out per million tokens
MINI = LLMSettings().price()


@dataclass
class Metered:
    """A model that answers from a script, each answer with its usage; the answers whose
    index is in ``cached`` come from the response cache."""

    replies: list[str]
    usage: list[tuple[int, int]]
    cached: set[int] = field(default_factory=set)
    calls: int = 0

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> ChatResult:
        i = min(self.calls, len(self.replies) - 1)  # the last answer repeats
        self.calls += 1
        prompt, completion = self.usage[i]
        return ChatResult(self.replies[i], prompt, completion, cached=i in self.cached)


def a_chunk(doc: str = "doc-1", position: int = 0) -> Chunk:
    return Chunk(
        f"{doc}-c{position}", doc, doc, "1987-03-02T00:00:00Z", position, f"{doc} {position}", 9
    )


def spent(
    doc: str, position: int, prompt: int, completion: int
) -> ChunkExtraction:  # an LLM extraction with its tokens
    return ChunkExtraction(
        a_chunk(doc, position),
        (),
        (),
        mode="llm",
        prompt_tokens=prompt,
        completion_tokens=completion,
    )


# a first answer, a garbled one asked again, gleanings, the YES/NO loop and claims: six calls
CONVERSATION = [
    "this is no record at all",  # garbage: asked again
    answer(ent("ACME")),
    answer(ent("BETA")),  # gleaning 1
    "YES",  # more are missing
    answer(ent("GAMMA")),  # gleaning 2
    answer(claim("ACME")),
]
USAGE = [(100, 1), (200, 2), (300, 4), (400, 8), (500, 16), (600, 32)]


class TestCounting:
    async def test_every_call_of_the_conversation_counts_retries_included(self) -> None:
        llm = Metered(CONVERSATION, USAGE)
        x = await extract_chunk(a_chunk(), llm, PROMPTS, max_gleanings=2, claims=SPEC, attempts=2)
        assert llm.calls == 6 and {e.name for e in x.entities} == {"ACME", "BETA", "GAMMA"}
        assert (x.prompt_tokens, x.completion_tokens) == (2100, 63)

    async def test_a_cached_answer_spent_nothing(self) -> None:
        llm = Metered(CONVERSATION, USAGE, cached={2, 3})
        x = await extract_chunk(a_chunk(), llm, PROMPTS, max_gleanings=2, claims=SPEC, attempts=2)
        assert (x.prompt_tokens, x.completion_tokens) == (2100 - 300 - 400, 63 - 4 - 8)

    async def test_a_replay_answered_from_the_cache_costs_nothing(self) -> None:
        llm = Metered(CONVERSATION, USAGE, cached=set(range(6)))
        x = await extract_chunk(a_chunk(), llm, PROMPTS, max_gleanings=2, claims=SPEC, attempts=2)
        assert x.entities and (x.prompt_tokens, x.completion_tokens) == (0, 0)


def llm_settings(tmp_path: Path, **extraction: Any) -> Settings:
    base = load_settings()
    return base.model_copy(
        update={
            "data_dir": tmp_path,
            "llm": LLMSettings(base_url="http://127.0.0.1:9/v1", model="gpt-4o-mini"),
            "extraction": base.extraction.model_copy(update=extraction),
        }
    )


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


class TestExtractorMetrics:
    async def test_tokens_and_their_price_per_chunk_and_document(self, tmp_path: Path) -> None:
        settings = llm_settings(tmp_path, max_gleanings=1)
        registry = CollectorRegistry()
        model = Metered([answer(ent("ACME")), answer(ent("BETA"))], [(1000, 100), (2000, 200)])
        extract = build_extractor(settings, model, ExtractionMetrics(registry, MINI))
        x = await extract(a_chunk(position=0))
        assert (x.prompt_tokens, x.completion_tokens) == (3000, 300)
        assert sample(registry, "kgrag_extraction_llm_tokens_total", kind="prompt") == 3000
        assert sample(registry, "kgrag_extraction_llm_tokens_total", kind="completion") == 300
        # 3,000 × $0.15 + 300 × $0.60 per million
        assert sample(registry, "kgrag_extraction_llm_cost_usd_total") == pytest.approx(0.00063)
        assert sample(registry, "kgrag_extraction_chunks_total", outcome="extracted") == 1
        assert sample(registry, "kgrag_extraction_documents_total") == 1
        await extract(a_chunk(position=1))  # the same document's second chunk
        assert sample(registry, "kgrag_extraction_documents_total") == 1
        assert sample(registry, "kgrag_extraction_chunks_total", outcome="extracted") == 2

    async def test_a_failed_extraction_was_paid_for(self, tmp_path: Path) -> None:
        settings = llm_settings(tmp_path, max_gleanings=0, parse_attempts=3)
        registry = CollectorRegistry()
        model = Metered(["no records here"], [(70, 7)])
        extract = build_extractor(settings, model, ExtractionMetrics(registry, MINI))
        with pytest.raises(ExtractionFailedError):
            await extract(a_chunk())
        assert model.calls == 3
        assert sample(registry, "kgrag_extraction_llm_tokens_total", kind="prompt") == 210
        assert sample(registry, "kgrag_extraction_chunks_total", outcome="failed") == 1
        assert sample(registry, "kgrag_extraction_chunks_total", outcome="extracted") == 0
        assert sample(registry, "kgrag_extraction_documents_total") == 0

    async def test_offline_extraction_spends_nothing(self, tmp_path: Path) -> None:
        settings = load_settings().model_copy(update={"data_dir": tmp_path})
        assert settings.llm.offline
        registry = CollectorRegistry()
        extract = build_extractor(settings, None, ExtractionMetrics(registry, MINI))
        chunk = replace(a_chunk(), text="Acme Corp bought Beta Inc in Houston, Texas.")
        x = await extract(chunk)
        assert x.mode == "offline" and (x.prompt_tokens, x.completion_tokens) == (0, 0)
        assert sample(registry, "kgrag_extraction_llm_tokens_total", kind="prompt") == 0
        assert sample(registry, "kgrag_extraction_llm_cost_usd_total") == 0
        assert sample(registry, "kgrag_extraction_chunks_total", outcome="extracted") == 1


class TestPricing:
    def test_a_model_not_listed_costs_nothing(self) -> None:
        assert cost_usd(LLMSettings(model="llama-3-8b").price(), 10**6, 10**6) == 0.0

    def test_tokens_at_the_price_of_the_model(self) -> None:
        assert cost_usd(MINI, 2_000_000, 1_000_000) == pytest.approx(0.30 + 0.60)


class TestRecords:
    def test_the_tokens_travel_with_the_extraction(self) -> None:
        x = replace(
            spent("doc-1", 0, 1234, 56), entities=(EntityMention("A", "b", "c", "doc-1-c0"),)
        )
        raw = encode_extraction(x)
        assert orjson.loads(raw)["extraction"]["tokens"] == [1234, 56]
        assert decode_extraction_event(raw) == x

    def test_a_record_without_tokens_is_written_and_read_as_before(self) -> None:
        x = spent("doc-1", 0, 0, 0)
        raw = encode_extraction(x)
        assert raw == old_codecs.encode_extraction(x)  # the bytes of the release before
        assert decode_extraction_event(raw) == x
        older = spent("doc-1", 0, 9, 9)  # what an older worker wrote: no tokens at all
        decoded = decode_extraction_event(old_codecs.encode_extraction(older))
        assert isinstance(decoded, ChunkExtraction)
        assert (decoded.prompt_tokens, decoded.completion_tokens) == (0, 0)

    @pytest.mark.parametrize("tokens", ["12", [12], [12, "3"], [1, 2, 3], None])
    def test_tokens_that_are_not_two_counts_are_a_dead_letter(self, tokens: object) -> None:
        body = orjson.loads(encode_extraction(spent("doc-1", 0, 1, 1)))
        body["extraction"]["tokens"] = tokens
        with pytest.raises(PayloadError):
            decode_extraction_event(orjson.dumps(body))

    def test_the_text_unit_change_carries_them_and_an_older_one_reads_none(self) -> None:
        change = text_unit_added(spent("doc-1", 0, 1234, 56))
        assert change.llm_tokens == (1234, 56)
        assert decode_graph_change(encode_change(change)) == change
        body = orjson.loads(encode_change(change))
        del body["change"]["llm_tokens"]  # written before tokens were counted
        older = decode_graph_change(orjson.dumps(body))
        assert isinstance(older, GraphChange) and older.llm_tokens is None
        assert text_unit_added(spent("doc-1", 0, 0, 0)).llm_tokens is None


def a_view(*changes: GraphChange | DocumentRemoved | dict[str, Any]) -> GraphView:
    view = GraphView()
    for doc in ("doc-1", "doc-2"):
        view.apply({"id": doc, "title": doc, "text": doc, "published_at": "1987-03-02"})
    for change in changes:
        view.apply(change)
    return view


class TestView:
    def test_a_document_costs_what_its_text_units_spent(self) -> None:
        view = a_view(
            text_unit_added(spent("doc-1", 0, 100, 10)),
            text_unit_added(spent("doc-1", 1, 50, 5)),
            text_unit_added(spent("doc-2", 0, 7, 1)),
        )
        assert view.document_tokens("doc-1") == (150, 15)
        assert view.document_tokens("doc-2") == (7, 1)
        assert view.ingest_tokens() == (157, 16)

    def test_a_chunk_extracted_again_is_paid_for_once(self) -> None:
        first = text_unit_added(spent("doc-1", 0, 100, 10))
        from_cache = text_unit_added(spent("doc-1", 0, 0, 0))  # re-extracted after a crash
        orders = [(first, first), (first, from_cache), (from_cache, first)]
        for changes in orders:
            assert a_view(*changes).document_tokens("doc-1") == (100, 10), changes

    def test_retracted_units_and_deleted_documents_cost_nothing_any_more(self) -> None:
        view = a_view(
            text_unit_added(spent("doc-1", 0, 100, 10)),
            text_unit_added(spent("doc-1", 1, 50, 5)),
            text_unit_added(spent("doc-2", 0, 7, 1)),
            text_unit_retracted("doc-1-c1", "doc-1"),  # a corrected article
            DocumentRemoved("doc-2"),
        )
        assert view.document_tokens("doc-1") == (100, 10)
        assert view.ingest_tokens() == (100, 10)

    def test_a_checkpoint_from_before_knows_no_tokens_and_folds_new_ones(self) -> None:
        view = a_view(text_unit_added(spent("doc-1", 0, 100, 10)))
        del view.unit_tokens  # as unpickled from a checkpoint written before tokens were kept
        state = upgrade_state(JobState(view=view))
        assert state.view.document_tokens("doc-1") == (0, 0)
        state.view.apply(text_unit_added(spent("doc-2", 0, 7, 1)))
        assert state.view.ingest_tokens() == (7, 1)


def spend(world: World, doc: str, prompt: int, completion: int) -> None:
    """A document of one chunk whose LLM extraction spent the tokens."""
    world.chunks += 1
    chunk = Chunk(f"chunk-{world.chunks}", doc, doc, "1987-03-03T09:00:00Z", 0, f"{doc} Nova", 3)
    world.view.apply({"id": doc, "title": doc, "text": chunk.text, "published_at": "1987-03-03"})
    x = ChunkExtraction(
        chunk,
        (EntityMention("Nova", "organization", "Nova trades.", chunk.id),),
        (),
        mode="llm",
        prompt_tokens=prompt,
        completion_tokens=completion,
    )
    world.absorb(x)


class TestTables:
    async def test_document_rows_and_versions_say_what_extraction_cost(
        self, tmp_path: Path
    ) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        spend(world, "doc-paid", 10_000, 1_000)
        await job.run(world.view)
        snap = job.snapshot()
        docs = {d.id: d for d in snap.documents}
        assert (docs["doc-paid"].prompt_tokens, docs["doc-paid"].completion_tokens) == (
            10_000,
            1_000,
        )
        assert {
            (d.prompt_tokens, d.completion_tokens) for k, d in docs.items() if k != "doc-paid"
        } == {(0, 0)}
        assert snap.meta.ingest_tokens == {"prompt": 10_000, "completion": 1_000}
        assert snap.meta.ingest_cost_usd == pytest.approx((10_000 * 0.15 + 1_000 * 0.60) / 1e6)

        spend(world, "doc-later", 5_000, 500)  # between runs: a light commit
        store = open_graph_store(job.settings)
        assert light_commit(store, job.state, "llm", MINI) is not None
        light = store.load()
        assert light.meta.kind == "rows"
        assert light.meta.ingest_tokens == {"prompt": 15_000, "completion": 1_500}
        assert light.meta.ingest_cost_usd == pytest.approx(cost_usd(MINI, 15_000, 1_500))
        later = next(d for d in light.documents if d.id == "doc-later")
        assert (later.prompt_tokens, later.completion_tokens) == (5_000, 500)


@dataclass(frozen=True, slots=True)
class DocumentBefore:
    """The documents table's row as it was before the token columns."""

    id: str
    human_readable_id: int
    title: str
    text: str
    text_unit_ids: tuple[str, ...]
    creation_date: str
    raw_data: dict[str, object] = field(default_factory=dict, hash=False, compare=False)


class TestOlderTables:
    async def test_tables_written_before_the_columns_read_them_as_zero(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        world, job = base_world(), Job(settings_for(tmp_path))
        with monkeypatch.context() as older:  # an earlier release writes version 1
            older.setitem(graph.versions.rows.TABLES, "documents", DocumentBefore)
            schema.table_schema.cache_clear()
            await job.run(world.view)
        schema.table_schema.cache_clear()
        store = open_graph_store(job.settings)
        first = store.load()
        assert all(type(d) is SnapshotDocument and d.prompt_tokens == 0 for d in first.documents)
        spend(world, "doc-paid", 10_000, 1_000)
        assert light_commit(store, job.state, "llm", MINI) is not None  # this release
        docs = {d.id: d for d in store.load().documents}
        assert docs["doc-paid"].prompt_tokens == 10_000
        assert {d.prompt_tokens for k, d in docs.items() if k != "doc-paid"} == {0}
        assert {d.id for d in store.load(first.meta.version).documents} == {
            d.id for d in first.documents
        }


def test_the_query_service_metrics_show_the_served_versions_ingest_cost(tmp_path: Path) -> None:
    from core.tables.store import GraphTables
    from tests.unit.test_query_service import client_for, versioned, world

    snap = versioned(world(), 1)
    meta = replace(
        snap.meta, ingest_tokens={"prompt": 9000, "completion": 1000}, ingest_cost_usd=0.02
    )
    store = GraphTables(tmp_path / "tables")
    store.write(replace(snap, meta=meta))
    with client_for(tmp_path, store) as client:
        assert client.get("/healthz").status_code == 200  # the gauges follow the served version
        text = client.get("/metrics").text
    assert 'kgrag_ingest_llm_tokens{kind="prompt"} 9000.0' in text
    assert 'kgrag_ingest_llm_tokens{kind="completion"} 1000.0' in text
    assert "kgrag_ingest_llm_cost_usd 0.02" in text
    per_doc = [line for line in text.splitlines()
               if line.startswith("kgrag_ingest_llm_cost_per_document_usd ")]  # fmt: skip
    assert per_doc and float(per_doc[0].split()[1]) == pytest.approx(
        0.02 / max(len(snap.documents), 1)
    )


def test_the_running_ingest_total_equals_the_sum_over_documents_whatever_the_order() -> None:
    """``GraphView.ingest_tokens`` is kept as records fold, not summed per commit: after any
    sequence of documents, units (with and without tokens, redelivered), retractions and
    removals it equals the sum of ``document_tokens`` over the documents."""
    import random

    rng = random.Random(11)
    for trial in range(60):
        view = GraphView()
        for _ in range(40):
            doc = f"d{rng.randrange(4)}"
            unit = f"{doc}-u{rng.randrange(3)}"
            move = rng.randrange(5)
            if move == 0:
                view.apply({"id": doc, "title": doc, "text": "t", "published_at": "1987-03-02"})
            elif move == 1:
                view.apply(DocumentRemoved(doc))
            elif move == 2:
                view.apply(text_unit_retracted(unit, doc))
            else:
                chunk = Chunk(unit, doc, doc, "1987-03-02T09:00:00Z", 0, "text", 3)
                tokens = rng.choice([(0, 0), (100, 20), (250, 40)])
                view.apply(replace(text_unit_added(ChunkExtraction(chunk, (), ())),
                                   llm_tokens=tokens if any(tokens) else None))  # fmt: skip
            summed = [view.document_tokens(d) for d in view.documents]
            expected = (sum(p for p, _ in summed), sum(c for _, c in summed))
            assert view.ingest_tokens() == expected, trial
