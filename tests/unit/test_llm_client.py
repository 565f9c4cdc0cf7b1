"""OpenAILLM / OpenAIEmbedder against the scripted server over loopback HTTP: retries,
give-up, the persistent cache, the concurrency bound, and prompt overrides reaching the wire."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import prompts as p
from core.errors import LLMError
from core.llm import OpenAIEmbedder, OpenAILLM
from core.llm_cache import ResponseCache
from core.llm_calls import is_retryable
from core.settings.llm import EmbeddingSettings, LLMSettings
from graph.protocols import ChatResult
from kgrag.testing.scripted_llm import FaultConfig, ScriptedLLMServer

LIB = p.PromptLibrary()
CHUNK = (
    "Harborview Shipping Ltd agreed to buy Coastal Freight Co. Maria Lindqvist spoke in Rotterdam."
)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(server: ScriptedLLMServer) -> Iterator[None]:
    server.set_faults(FaultConfig())
    server.clear_calls()
    yield


@pytest.fixture
async def make_llm(server: ScriptedLLMServer, tmp_path: Path) -> AsyncIterator[Any]:
    made: list[OpenAILLM] = []

    def make(
        cache_dir: Path | None = tmp_path / "cache",
        registry: CollectorRegistry | None = None,
        **overrides: Any,
    ) -> OpenAILLM:
        settings = LLMSettings(
            base_url=server.base_url,
            api_key="k",
            model="scripted",
            **{"max_retries": 3, "timeout_s": 5.0, **overrides},
        )
        llm = OpenAILLM(
            settings, cache_dir, registry=registry or CollectorRegistry(), backoff_base_s=0.01
        )
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()


def extraction(chunk: str = CHUNK, lib: p.PromptLibrary = LIB) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": p.render_extract_graph(
                lib, entity_types=["organization", "person", "geo"], input_text=chunk
            ),
        }
    ]


class TestRetries:
    async def test_rate_limits_are_retried_after_the_asked_delay(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        server.set_faults({"rate_limit": 1.0, "max_faults": 2, "retry_after_s": 0.3})
        llm = make_llm()
        result = await llm.chat(extraction())
        assert "<|COMPLETE|>" in result.text
        calls = server.calls()
        assert [c.status for c in calls] == [429, 429, 200]
        gaps = [b.timestamp - a.timestamp for a, b in itertools.pairwise(calls)]
        assert min(gaps) >= 0.29  # backoff alone would be ~0.01-0.02 s
        assert llm.stats().retries == 2 and llm.stats().failures == 0

    @pytest.mark.parametrize("fault", ["server_error", "timeout"])
    async def test_server_errors_and_timeouts_are_retried(
        self, server: ScriptedLLMServer, make_llm: Any, fault: str
    ) -> None:
        server.set_faults({fault: 1.0, "max_faults": 1, "hang_s": 30.0})
        llm = make_llm(timeout_s=0.5)
        assert (await llm.chat(extraction())).text
        assert [c.fault for c in server.calls()] == [fault, None]

    async def test_gives_up_after_max_retries(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        server.set_faults({"rate_limit": 1.0, "retry_after_s": 0.01})
        llm = make_llm(max_retries=2, rate_limit_budget_s=0)
        with pytest.raises(LLMError) as info:
            await llm.chat(extraction())
        assert info.value.retryable and info.value.attempts == 3
        assert "429" in info.value.reason
        assert len(server.calls()) == 3
        assert llm.stats().failures == 1

    async def test_rate_limits_past_max_retries_are_retried_within_the_budget(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        server.set_faults({"rate_limit": 1.0, "max_faults": 5, "retry_after_s": 0.02})
        llm = make_llm(max_retries=2, rate_limit_budget_s=30)
        assert "<|COMPLETE|>" in (await llm.chat(extraction())).text
        assert [c.status for c in server.calls()] == [429] * 5 + [200]

    async def test_a_rate_limit_that_outlasts_the_budget_gives_up(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        server.set_faults({"rate_limit": 1.0, "retry_after_s": 0.05})
        # a budget of seconds, so a loaded machine's slow round trips still fit more attempts
        # than max_retries allows
        llm = make_llm(max_retries=2, rate_limit_budget_s=2.0)
        started = time.monotonic()
        with pytest.raises(LLMError) as info:
            await llm.chat(extraction())
        assert time.monotonic() - started >= 2.0
        assert info.value.attempts > 3 and "429" in info.value.reason

    async def test_the_budget_is_for_rate_limits_only(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        server.set_faults({"server_error": 1.0})
        llm = make_llm(max_retries=2, rate_limit_budget_s=30)
        with pytest.raises(LLMError) as info:
            await llm.chat(extraction())
        assert info.value.attempts == 3 and len(server.calls()) == 3

    async def test_bad_request_is_not_retried(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        prompt = extraction()[0]["content"].replace(
            "Entity types: organization, person, geo", "Entity types:"
        )
        with pytest.raises(LLMError) as info:
            await make_llm().chat([{"role": "user", "content": prompt}])
        assert not info.value.retryable and "entity types" in info.value.reason
        assert len(server.calls()) == 1

    def test_retryable_predicate(self) -> None:
        assert is_retryable(TimeoutError()) and is_retryable(ConnectionResetError())
        assert not is_retryable(ValueError("bad"))


class TestCache:
    async def test_repeat_and_restart_cost_no_call(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        first = await make_llm().chat(extraction())
        again = await make_llm().chat(extraction())  # new instance: a restarted worker
        assert again.text == first.text and again.cached and not first.cached
        assert len(server.calls()) == 1

    async def test_parameters_are_part_of_the_key(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        llm = make_llm()
        await llm.chat(extraction())
        await llm.chat(extraction(), max_tokens=500)
        await llm.chat(extraction("Toyota Motors opened a plant in Kentucky."))
        assert len(server.calls()) == 3

    async def test_forget_sends_the_request_again(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        server.set_faults({"malformed": 1.0, "max_faults": 1})
        llm = make_llm()
        bad = await llm.chat(extraction())
        assert await llm.forget(extraction())
        good = await llm.chat(extraction())
        assert "<|COMPLETE|>" not in bad.text and "<|COMPLETE|>" in good.text

    async def test_identical_concurrent_requests_share_one_call(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        server.set_faults({"latency_s": 0.1})
        llm = make_llm(None)
        results = await asyncio.gather(*(llm.chat(extraction()) for _ in range(4)))
        assert len({r.text for r in results}) == 1
        assert len(server.calls()) == 1 and llm.stats().cache_hits == 3
        # the tokens were spent once: the three that joined the call are marked cached
        assert sorted(r.cached for r in results) == [False, True, True, True]
        assert results[0].prompt_tokens > 0

    async def test_cache_shared_between_connections(self, tmp_path: Path) -> None:
        # Each process opens its own connection to one file; WAL makes that safe.
        a, b = ResponseCache(tmp_path), ResponseCache(tmp_path)
        try:
            await a.put("k", ChatResult("answer", 3, 4))
            hit = await b.get("k")
            assert hit == ChatResult("answer", 3, 4, cached=True)
        finally:
            a.close()
            b.close()

    def test_corrupt_cache_file_is_reported_at_start(self, tmp_path: Path) -> None:
        (tmp_path / "responses.sqlite").write_bytes(b"not a database" * 100)
        with pytest.raises(LLMError, match="delete it"):
            ResponseCache(tmp_path)


class TestAccounting:
    async def test_concurrency_bound_is_respected(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        server.set_faults({"latency_s": 0.15})
        llm = make_llm(None, concurrency=3)
        texts = [f"Company{i} Corp bought Firm{i} Inc." for i in range(9)]
        await asyncio.gather(*(llm.chat(extraction(t)) for t in texts))
        assert server.stats()["max_in_flight"] == 3
        stats = llm.stats()
        assert stats.calls == 9 and stats.in_flight == 0
        assert stats.prompt_tokens > 0 and stats.completion_tokens > 0
        assert 0.5 < stats.utilisation <= 1.0

    async def test_counters_exported_to_the_given_registry(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        registry = CollectorRegistry()
        llm = make_llm(registry=registry)
        await llm.chat(extraction())
        await llm.chat(extraction())
        assert registry.get_sample_value("kgrag_llm_calls_total") == 1
        assert registry.get_sample_value("kgrag_llm_cache_hits_total") == 1


class TestPromptOverride:
    async def test_override_by_path_changes_what_the_server_receives(
        self, server: ScriptedLLMServer, make_llm: Any, tmp_path: Path
    ) -> None:
        custom = tmp_path / "prompts"
        custom.mkdir()
        shipped = LIB.template("extract_graph")
        (custom / "extract_graph.txt").write_text(
            shipped.replace("=== Steps ===", "Prefer company names over people.\n=== Steps ==="),
            encoding="utf-8",
        )
        await make_llm().chat(extraction(lib=p.PromptLibrary(custom)))
        [call] = server.calls()
        assert "Prefer company names over people." in call.messages[0]["content"]
        assert call.kind == "extract_graph" and call.status == 200


class TestEmbedder:
    async def test_vectors_have_the_configured_size_and_order(
        self, server: ScriptedLLMServer
    ) -> None:
        settings = EmbeddingSettings(
            base_url=server.base_url, model="text-embedding-3-small", dimensions=32
        )
        emb = OpenAIEmbedder(settings, batch_size=2, registry=CollectorRegistry())
        try:
            vectors = await emb.embed(["oil", "gold", "oil", "wheat", "gold"])
        finally:
            await emb.aclose()
        assert emb.dimensions == 32 and all(len(v) == 32 for v in vectors)
        assert vectors[0] == vectors[2] and vectors[1] == vectors[4] and vectors[0] != vectors[1]
        # batches go out concurrently, so the server may see them in any order
        assert sorted(list(c.input) for c in server.calls()) == [
            ["gold"],
            ["oil", "gold"],
            ["oil", "wheat"],
        ]

    async def test_retries_then_detects_dimension_mismatch(self, server: ScriptedLLMServer) -> None:
        server.set_faults({"rate_limit": 1.0, "max_faults": 1, "retry_after_s": 0.01})
        settings = EmbeddingSettings(base_url=server.base_url, model="local-model", dimensions=64)
        emb = OpenAIEmbedder(settings, registry=CollectorRegistry())  # sends no dimensions
        try:
            with pytest.raises(LLMError, match="KGRAG_EMBEDDINGS__DIMENSIONS") as info:
                await emb.embed(["oil"])
        finally:
            await emb.aclose()
        assert not info.value.retryable and emb.stats().retries == 1


class TestStreaming:
    async def test_the_answer_comes_in_pieces_and_is_cached_whole(
        self, server: ScriptedLLMServer, make_llm: Any
    ) -> None:
        pieces: list[str] = []

        async def on_text(text: str) -> None:
            pieces.append(text)

        llm = make_llm()
        streamed = await llm.chat_stream(extraction(), on_text)
        assert len(pieces) > 3 and "".join(pieces) == streamed.text
        assert streamed.prompt_tokens > 0 and streamed.completion_tokens > 0
        assert streamed.text == (await make_llm(cache_dir=None).chat(extraction())).text
        again: list[str] = []

        async def later(text: str) -> None:
            again.append(text)

        cached = await make_llm().chat_stream(extraction(), later)
        assert again == [streamed.text] and cached.cached
        assert len(server.calls()) == 2  # the stream, the uncached chat; not the cached one
