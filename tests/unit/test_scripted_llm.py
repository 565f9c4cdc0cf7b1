"""The scripted OpenAI-compatible server: strict about requests, answers derived from them,
faults on demand. Talked to over real loopback HTTP."""

from __future__ import annotations

import base64
import json
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import prompts as p
from kgrag.testing.scripted_llm import FaultConfig, ScriptedLLMServer

LIB = p.PromptLibrary()
TYPES = ["organization", "person", "geo", "event"]
CHUNK = (
    "Harborview Shipping Ltd agreed to buy Coastal Freight Co for 210 million dollars. "
    "Chief executive Maria Lindqvist announced the deal in Rotterdam. "
    "The European Commission must approve it. "
    "Paulo Andrade attended the Trade Summit in Montevideo."
)
CONTEXT = (
    "-----Entities-----\nid|entity|description\n"
    "5|ACME CORP|Acme Corp makes anvils in Ohio\n6|WIDGET INC|Widget Inc makes widgets\n"
    "-----Relationships-----\nid|source|target|description\n"
    "31|ACME CORP|WIDGET INC|Acme Corp sued Widget Inc over anvil patents\n"
    "-----Sources-----\nid|text\n"
    "77|Acme Corp filed a lawsuit against Widget Inc on Monday over anvil patents.\n"
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


def post_chat(srv: ScriptedLLMServer, messages: list[dict[str, str]]) -> httpx.Response:
    return httpx.post(
        f"{srv.base_url}/chat/completions",
        json={"model": "m", "messages": messages},
        timeout=10,
    )


def text_of(resp: httpx.Response) -> str:
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


def extraction(chunk: str = CHUNK) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": p.render_extract_graph(LIB, entity_types=TYPES, input_text=chunk),
        }
    ]


def entity_names(output: str) -> list[str]:
    return re.findall(r'\("entity"<\|>([^<]+)<\|>', output)


class TestStrictExtraction:
    @pytest.mark.parametrize(
        ("breakage", "reason"),
        [
            (
                lambda t: t.replace(
                    "Entity types: organization, person, geo, event", "Entity types:"
                ),
                "entity types",
            ),
            (lambda t: t.replace("<|COMPLETE|>", "END"), "delimiters"),
            (
                lambda t: re.sub(
                    r"=== Examples ===.*?=== Real data ===", "=== Real data ===", t, flags=re.S
                ),
                "worked examples",
            ),
            (lambda t: t.replace(CHUNK, ""), "chunk text"),
        ],
        ids=["no-types", "no-delimiters", "no-examples", "no-text"],
    )
    def test_incomplete_prompt_is_refused(
        self, server: ScriptedLLMServer, breakage: Any, reason: str
    ) -> None:
        prompt = breakage(extraction()[0]["content"])
        resp = post_chat(server, [{"role": "user", "content": prompt}])
        assert resp.status_code == 400
        assert reason in resp.json()["error"]["message"]
        assert server.calls()[-1].status == 400

    def test_answer_is_derived_from_the_chunk(self, server: ScriptedLLMServer) -> None:
        out = text_of(post_chat(server, extraction()))
        names = entity_names(out)
        assert {"HARBORVIEW SHIPPING LTD", "MARIA LINDQVIST", "ROTTERDAM"} <= set(names)
        assert all(n.lower() in CHUNK.lower() for n in names)
        assert out.rstrip().endswith("<|COMPLETE|>")
        assert '("relationship"<|>HARBORVIEW SHIPPING LTD<|>COASTAL FREIGHT CO<|>' in out

    def test_other_text_other_entities(self, server: ScriptedLLMServer) -> None:
        out = text_of(post_chat(server, extraction("Toyota Motors opened a plant in Kentucky.")))
        assert "TOYOTA MOTORS" in entity_names(out)
        assert "HARBORVIEW SHIPPING LTD" not in out

    def test_usage_tokens_reported(self, server: ScriptedLLMServer) -> None:
        usage = post_chat(server, extraction()).json()["usage"]
        assert usage["prompt_tokens"] > 100
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


class TestGleaning:
    def test_conversation_finds_the_held_back_entities(self, server: ScriptedLLMServer) -> None:
        convo = extraction()
        first = text_of(post_chat(server, convo))
        convo += [
            {"role": "assistant", "content": first},
            {"role": "user", "content": p.render_glean_loop(LIB)},
        ]
        assert text_of(post_chat(server, convo)) == "YES"
        convo[-1] = {"role": "user", "content": p.render_glean_continue(LIB)}
        more = text_of(post_chat(server, convo))
        assert entity_names(more) and not set(entity_names(more)) & set(entity_names(first))
        convo += [
            {"role": "assistant", "content": more},
            {"role": "user", "content": p.render_glean_loop(LIB)},
        ]
        assert text_of(post_chat(server, convo)) == "NO"
        assert [c.kind for c in server.calls()] == [
            "extract_graph",
            "glean_loop",
            "glean_continue",
            "glean_loop",
        ]

    @pytest.mark.parametrize("turn", [p.render_glean_continue, p.render_glean_loop])
    def test_turn_without_earlier_answer_is_refused(
        self, server: ScriptedLLMServer, turn: Any
    ) -> None:
        convo = [*extraction(), {"role": "user", "content": turn(LIB)}]
        resp = post_chat(server, convo)
        assert resp.status_code == 400
        assert "earlier answer" in resp.json()["error"]["message"]


class TestOtherKinds:
    def test_report_is_valid_json_citing_only_input_ids(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_community_report(LIB, input_text=CONTEXT)
        out = text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        report = p.CommunityReportResponse.model_validate_json(out)
        cited = set(re.findall(r"\d+", " ".join(re.findall(r"\[Data:[^\]]*\]", out))))
        assert cited and cited <= {"5", "6", "31", "77"}
        assert "ACME CORP" in report.title

    @pytest.mark.parametrize(
        ("question", "scored"),
        [("Who sued over anvil patents?", True), ("What did the weather do?", False)],
    )
    def test_map_scores_follow_overlap(
        self, server: ScriptedLLMServer, question: str, scored: bool
    ) -> None:
        reports = (
            "-----Reports-----\nid|title|content\n7|Anvils|Acme sued Widget over anvil patents"
        )
        msgs = [
            {"role": "system", "content": p.render_global_map_system(LIB, context_data=reports)},
            {"role": "user", "content": question},
        ]
        points = p.MapResponse.model_validate_json(text_of(post_chat(server, msgs))).points
        assert (max(pt.score for pt in points) > 0) is scored
        if scored:
            assert "[Data: Reports (7)]" in points[0].description

    def test_local_answer_cites_context_ids(self, server: ScriptedLLMServer) -> None:
        msgs = [
            {"role": "system", "content": p.render_local_search_system(LIB, context_data=CONTEXT)},
            {"role": "user", "content": "Who was sued over anvil patents?"},
        ]
        out = text_of(post_chat(server, msgs))
        assert "Relationships (31)" in out and "Sources (77)" in out

    def test_summary_keeps_every_distinct_fact(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_summarize_descriptions(
            LIB,
            entity_name="ACME CORP",
            descriptions=["Acme makes anvils.", "Acme makes anvils. Acme is based in Ohio."],
        )
        out = text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        assert out.count("Acme makes anvils.") == 1 and "Ohio" in out

    def test_claims_follow_the_tuple_format(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_extract_claims(
            LIB, entity_specs="organization", claim_description="deals", input_text=CHUNK
        )
        out = text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        first = out.split("##")[0].strip().strip("()")
        assert len(first.split("<|>")) == 8 and first.startswith("HARBORVIEW SHIPPING LTD")

    def test_question_generation_gives_the_asked_count(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_question_generation(LIB, context_data=CONTEXT, question_count=4)
        out = text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        assert len([ln for ln in out.splitlines() if ln.startswith("- ")]) == 4

    def test_rating_is_json_in_range(self, server: ScriptedLLMServer) -> None:
        prompt = p.render_community_rating(
            LIB, question="anvil patents", report_text="Acme sued Widget over anvil patents"
        )
        rating = p.RatingResponse.model_validate_json(
            text_of(post_chat(server, [{"role": "user", "content": prompt}]))
        )
        assert rating.rating > 0


class TestFaultsAndScripts:
    def test_script_overrides_next_answer_of_a_kind(self, server: ScriptedLLMServer) -> None:
        httpx.post(
            f"{server.base_url[:-3]}/_script",
            json={"kind": "local_search", "text": "Made up [Data: Entities (999)]"},
        )
        msgs = [
            {"role": "system", "content": p.render_local_search_system(LIB, context_data=CONTEXT)},
            {"role": "user", "content": "anvils?"},
        ]
        assert "999" in text_of(post_chat(server, msgs))
        assert "999" not in text_of(post_chat(server, msgs))

    def test_rate_limit_carries_retry_after(self, server: ScriptedLLMServer) -> None:
        server.set_faults({"rate_limit": 1.0, "retry_after_s": 2.5})
        resp = post_chat(server, extraction())
        assert resp.status_code == 429
        assert resp.headers["retry-after"] == "3" and resp.headers["retry-after-ms"] == "2500"

    def test_malformed_and_truncated_output(self, server: ScriptedLLMServer) -> None:
        server.set_faults({"malformed": 1.0})
        assert "<|COMPLETE|>" not in text_of(post_chat(server, extraction()))
        server.set_faults({"truncated": 1.0})
        cut = text_of(post_chat(server, extraction()))
        assert "<|COMPLETE|>" not in cut and not cut.rstrip().endswith(")")
        assert [c.fault for c in server.calls()] == ["malformed", "truncated"]

    def test_faults_limited_to_kinds_and_count(self, server: ScriptedLLMServer) -> None:
        server.set_faults({"server_error": 1.0, "kinds": ["extract_graph"], "max_faults": 1})
        emb = httpx.post(f"{server.base_url}/embeddings", json={"input": "x", "model": "e"})
        assert emb.status_code == 200
        assert post_chat(server, extraction()).status_code == 500
        assert post_chat(server, extraction()).status_code == 200

    def test_fault_config_over_http_is_validated(self, server: ScriptedLLMServer) -> None:
        root = server.base_url[:-3]
        assert httpx.post(f"{root}/_faults", json={"rate_limt": 0.2}).status_code == 400
        assert httpx.post(f"{root}/_faults", json={"malformed": 2}).status_code == 400
        ok = httpx.post(f"{root}/_faults", json={"rate_limit": 0.2, "latency_s": 0.01})
        assert ok.json()["rate_limit"] == 0.2 and server.faults().latency_s == 0.01

    async def test_latency_does_not_serialise_requests(self, server: ScriptedLLMServer) -> None:
        import asyncio

        server.set_faults({"latency_s": 0.3})
        async with httpx.AsyncClient(timeout=10) as client:
            await asyncio.gather(
                *(
                    client.post(
                        f"{server.base_url}/chat/completions",
                        json={"model": "m", "messages": extraction()},
                    )
                    for _ in range(5)
                )
            )
        assert server.stats()["max_in_flight"] == 5


class TestCallLogAndEmbeddings:
    def test_calls_listed_and_cleared_over_http(self, server: ScriptedLLMServer) -> None:
        post_chat(server, extraction())
        root = server.base_url[:-3]
        calls = httpx.get(f"{root}/_calls").json()
        assert [c["kind"] for c in calls] == ["extract_graph"]
        assert CHUNK in calls[0]["messages"][0]["content"] and calls[0]["timestamp"] > 0
        httpx.delete(f"{root}/_calls")
        assert httpx.get(f"{root}/_calls").json() == []

    def test_embeddings_deterministic_with_requested_dimension(
        self, server: ScriptedLLMServer
    ) -> None:
        def embed(**extra: Any) -> dict[str, Any]:
            body = {
                "model": "e",
                "input": ["oil prices rise", "oil prices rise", "anvils"],
                **extra,
            }
            return httpx.post(f"{server.base_url}/embeddings", json=body).json()

        data = embed(dimensions=64)["data"]
        a, b, c = (d["embedding"] for d in data)
        assert len(a) == 64 and a == b and a != c
        assert abs(sum(x * x for x in a) - 1.0) < 1e-9
        packed = embed(dimensions=64, encoding_format="base64")["data"][0]["embedding"]
        decoded = struct.unpack("<64f", base64.b64decode(packed))
        assert max(abs(x - y) for x, y in zip(decoded, a, strict=True)) < 1e-6
        assert len(embed()["data"][0]["embedding"]) == 384


def test_runs_as_its_own_process() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgrag.testing.scripted_llm", "--port", "0", "--latency-ms", "5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://\S+/v1", line)
        assert url, line
        resp = httpx.post(
            f"{url.group(0)}/chat/completions",
            json={"model": "m", "messages": extraction()},
            timeout=10,
        )
        assert "<|COMPLETE|>" in text_of(resp)
        assert json.loads(httpx.get(url.group(0)[:-3] + "/_faults").text)["latency_s"] == 0.005
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
