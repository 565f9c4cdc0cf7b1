"""DRIFT search in process: the calls it makes against the scripted model (the same answers
the scripted HTTP server gives), the traversal's rules, citations, the offline answer, the
JSON it reads, its bounds, and the scripted model's strictness about the DRIFT prompts. The
HTTP path against real services is in ``tests/integration/test_query_api.py``."""

from __future__ import annotations

import json
from datetime import date

import httpx
import pytest

from core.errors import ConfigError, LLMError
from core.settings.serving import DriftSettings
from kgrag.testing.scripted_answers import answer, classify
from kgrag.testing.scripted_llm import ScriptedLLMServer
from kgrag.testing.scripted_text import RequestRejected
from offline.embedding import HashingEmbedder
from prompts import (
    PromptLibrary,
    render_drift_local_system,
    render_drift_primer,
    render_drift_reduce_system,
)
from query.citations import cited_ids
from query.drift_search import (
    NO_DATA_ANSWER,
    DriftConfig,
    Frontier,
    Step,
    drift_search,
    match_reports,
    offline_drift,
    reduce_context,
    report_folds,
)
from query.index import QueryIndex
from query.json_answers import MalformedAnswerError, parse_drift_step
from query.offline_answers import OFFLINE_LABEL
from query.time_window import TimeWindow
from tests.unit.test_query_support import (
    Call,
    DictVectorStore,
    ScriptedLLM,
    deps,
    entity_store,
    words,
    world,
)

LIB = PromptLibrary()


def scripted(override: dict[str, str] | None = None) -> ScriptedLLM:
    """The scripted server's model in process; ``override``: a fixed answer per purpose."""

    def reply(call: Call) -> str:
        if override and call.purpose in override:
            return override[call.purpose]
        return answer(classify(call.messages), call.messages, json_mode=call.json_mode)

    return ScriptedLLM(reply)


async def store_with_reports(index: QueryIndex) -> DictVectorStore:
    store = await entity_store(index)
    reports = list(index.reports.values())
    vectors = await HashingEmbedder(256).embed([f"{r.title}\n{r.summary}" for r in reports])
    await store.upsert(
        "report",
        [(index.communities[r.community].id, v, {}) for r, v in zip(reports, vectors, strict=True)],
    )
    return store


def allowed_by_context(result: object) -> bool:
    cited, context = result.citations, result.context_ids  # type: ignore[attr-defined]
    return all(set(ids) <= set(context.get(name, ())) for name, ids in cited.items())


class TestSearch:
    async def test_primer_then_follow_ups_then_one_reduce(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = scripted()
        config = DriftConfig(primer_k=3, followups=2, depth=2)
        result = await drift_search(
            "What did OPEC decide about oil output?",
            index,
            deps(await store_with_reports(index), llm),
            config=config,
        )
        purposes = llm.purposes()
        assert purposes[0] == "drift_primer" and purposes[-1] == "drift_reduce"
        assert 1 <= purposes.count("drift_local") <= config.depth * config.followups
        assert result.llm_calls == len(purposes) <= config.max_calls
        assert all(c.json_mode for c in llm.calls if c.purpose != "drift_reduce")
        # every follow-up was asked of local search with the overall question beside it
        for call in llm.calls:
            if call.purpose == "drift_local":
                assert "What did OPEC decide about oil output?" in call.system
                assert "-----Entities-----" in call.system
        assert result.citations.get("Reports") and allowed_by_context(result)
        assert result.method == "drift" and result.mode == "llm"
        depths = [s["depth"] for s in result.extra["steps"]]
        assert depths[0] == 0 and 1 in depths

    async def test_a_follow_up_is_asked_once_and_the_best_scored_first(self) -> None:
        frontier = Frontier(asked=["What did OPEC decide?"])
        frontier.add(["What did OPEC  decide?"], 99)  # the question itself: answered already
        frontier.add(["Who is Kuwait?", "What about OPEC?"], 20)
        frontier.add(["what about  opec?", "What did Saudi Arabia do?"], 90)
        assert frontier.take(2) == ["What did Saudi Arabia do?", "Who is Kuwait?"]
        frontier.add(["Who is Kuwait?"], 100)
        assert frontier.take(5) == ["What about OPEC?"]

    async def test_a_failed_follow_up_does_not_fail_the_search(self) -> None:
        index = QueryIndex.from_snapshot(world())
        model = scripted()

        def reply(call: Call) -> str:
            if call.purpose == "drift_local" and "Kuwait" in call.user:
                raise LLMError("the endpoint refused", retryable=False)
            return model.reply(call)

        result = await drift_search(
            "How did OPEC and Kuwait move oil prices?",
            index,
            deps(await store_with_reports(index), ScriptedLLM(reply)),
            config=DriftConfig(followups=3, depth=1),
        )
        assert result.answer != NO_DATA_ANSWER and result.citations

    async def test_made_up_citations_are_removed_at_every_step(self) -> None:
        index = QueryIndex.from_snapshot(world())
        bad_step = json.dumps(
            {"response": "Made up [Data: Sources (999)]", "score": 50, "follow_up_queries": []}
        )
        llm = scripted({"drift_local": bad_step, "drift_reduce": "All [Data: Reports (1, 98)]"})
        result = await drift_search(
            "What did OPEC decide?",
            index,
            deps(await store_with_reports(index), llm),
            config=DriftConfig(followups=1, depth=1),
        )
        assert 999 not in result.citations.get("Sources", [])
        assert 98 not in result.citations.get("Reports", [])
        assert result.removed_citations >= 2

    async def test_a_primer_that_never_gives_its_json_is_asked_twice_then_nothing(
        self,
    ) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = scripted({"drift_primer": "Here is some prose instead."})
        result = await drift_search(
            "What did OPEC decide?", index, deps(await store_with_reports(index), llm)
        )
        assert llm.purposes() == ["drift_primer", "drift_primer"]
        assert result.answer == NO_DATA_ANSWER and result.citations == {}

    async def test_depth_zero_is_the_primer_and_the_reduce(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = scripted()
        await drift_search(
            "What did OPEC decide?",
            index,
            deps(await store_with_reports(index), llm),
            config=DriftConfig(depth=0),
        )
        assert llm.purposes() == ["drift_primer", "drift_reduce"]

    async def test_offline_deps_are_refused(self) -> None:
        index = QueryIndex.from_snapshot(world())
        with pytest.raises(Exception, match="offline"):
            await drift_search("OPEC?", index, deps(await entity_store(index)))


class TestReports:
    async def test_nearest_reports_by_vector_else_by_words_within_the_window(self) -> None:
        index = QueryIndex.from_snapshot(world())
        question = "What did Paul Volcker say about interest rates?"
        with_vectors = deps(await store_with_reports(index))
        by_vector = await match_reports(question, index, with_vectors, 2, TimeWindow())
        without = deps(DictVectorStore())
        by_words = await match_reports(question, index, without, 2, TimeWindow())
        assert len(by_vector) == 2 and by_vector[0].title == "Volcker and rates"
        # "The Federal Reserve" holds Volcker's community: the same story, not read twice
        fed = {"Volcker and rates", "The Federal Reserve"}
        assert by_words[0].title in fed and len(by_words) == 2
        assert by_words[1].title not in fed
        everything = await match_reports(question, index, with_vectors, 5, TimeWindow())
        assert len(everything) == 2  # c1 holds c3 and c4, c2 holds c5: two stories in all
        march_2_to_5 = TimeWindow(since=date(1987, 3, 2), until=date(1987, 3, 5))
        in_window = await match_reports(question, index, with_vectors, 5, march_2_to_5)
        assert in_window and all("Volcker" not in r.title for r in in_window)

    def test_folds_deal_the_reports_round_robin_within_the_budget(self) -> None:
        index = QueryIndex.from_snapshot(world())
        reports = [index.full(r) for _, r in sorted(index.reports.items())]
        folds = report_folds(reports, 2, 10_000, words)
        assert [t.ids for t in folds] == [[1, 3, 5], [2, 4]]
        assert report_folds(reports, 2, 1, words) == []


class TestReduce:
    def test_answers_that_scored_above_zero_best_first_within_the_budget(self) -> None:
        steps = [
            Step("q0", 0, "broad [Data: Reports (1)]", 30, ()),
            Step("q1", 1, "nothing", 0, ()),
            Step("q2", 1, "exact [Data: Sources (4)]", 80, ()),
            Step("q3", 1, "long " * 500, 60, ()),
        ]
        text = reduce_context(steps, budget=40, count=words)
        assert text.index("exact") < text.index("broad")
        assert "nothing" not in text and "long long" not in text
        assert cited_ids(text) == {"Sources": [4], "Reports": [1]}


class TestOffline:
    async def test_reports_then_follow_ups_about_their_key_entities(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = await offline_drift(
            "What did OPEC decide about oil output?",
            index,
            deps(await store_with_reports(index)),
            config=DriftConfig(primer_k=2, followups=2, depth=2),
        )
        assert result.answer.startswith(OFFLINE_LABEL) and result.mode == "offline"
        assert result.llm_calls == 0 and result.method == "drift"
        steps = result.extra["steps"]
        assert steps[0]["query"].startswith("What about ") and {1, 2} <= {s["depth"] for s in steps}
        assert len({s["query"] for s in steps}) == len(steps)  # no entity asked about twice
        assert "OPEC" in steps[0]["query"]  # the most connected member of the best report
        assert result.citations.get("Reports") and result.citations.get("Entities")
        assert allowed_by_context(result)


class TestParsing:
    def test_a_drift_answer_is_read_forgivingly(self) -> None:
        text = '```json\n{"response": "R", "score": "80/100", "follow_up_queries": "Q?"}\n```'
        assert parse_drift_step(text, "response") == ("R", 80, ["Q?"])
        text = '{"response": "R", "score": 130, "follow_up_queries": [" ", 3, "Q2"]}'
        assert parse_drift_step(text, "response") == ("R", 100, ["Q2"])
        for bad in ('{"score": 5}', "prose", "[1, 2]"):
            with pytest.raises(MalformedAnswerError):
                parse_drift_step(bad, "response")

    def test_settings_out_of_bounds_name_the_value(self) -> None:
        assert DriftConfig.of(DriftSettings(), depth=None, followups=5).followups == 5
        with pytest.raises(ConfigError, match="depth"):
            DriftConfig.of(DriftSettings(), depth=9)


class TestScriptedModel:
    def primer(self, reports: str) -> list[dict[str, str]]:
        system = render_drift_primer(LIB, community_reports=reports, followups=2)
        return [{"role": "system", "content": system}, {"role": "user", "content": "OPEC?"}]

    def test_it_answers_the_drift_prompts_in_their_json(self) -> None:
        msgs = self.primer(
            "-----Reports-----\nid|title|rating|content\n1|Oil|5|OPEC met. Kuwait pumped."
        )
        assert classify(msgs) == "drift_primer"
        text, score, followups = parse_drift_step(
            answer("drift_primer", msgs), "intermediate_answer"
        )
        assert "[Data: Reports (1)]" in text and score > 0 and followups == ["What did Kuwait do?"]
        system = render_drift_local_system(
            LIB,
            context_data="-----Entities-----\nid|entity|description\n5|Kuwait|Kuwait pumped",
            global_query="What did OPEC decide?",
            followups=2,
        )
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": "Kuwait?"}]
        assert classify(msgs) == "drift_local"
        text, score, _ = parse_drift_step(answer("drift_local", msgs), "response")
        assert "Entities (5)" in text and score > 0
        system = render_drift_reduce_system(
            LIB,
            intermediate_answers="----Answer 1----\nQuestion: q\nScore: 5\nA [Data: Reports (1)]",
        )
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": "q"}]
        assert "[Data: Reports (1)]" in answer(classify(msgs), msgs)

    def test_a_drift_prompt_without_its_parts_is_refused(self) -> None:
        good = self.primer("-----Reports-----\nid|title|rating|content\n1|OPEC|5|OPEC")
        system = good[0]["content"]
        for broken in (
            system.replace('"follow_up_queries":', '"next":'),
            system.replace("follow_up_queries: up to 2", "follow_up_queries:"),
            system.split("=== Reports ===")[0],
        ):
            msgs = [{"role": "system", "content": broken}, good[1]]
            with pytest.raises(RequestRejected):
                answer("drift_primer", msgs)
        reduce = render_drift_reduce_system(LIB, intermediate_answers="no numbered answers")
        with pytest.raises(RequestRejected):
            answer("drift_reduce", [{"role": "system", "content": reduce}])

    def test_the_server_answers_a_malformed_drift_prompt_with_a_400(self) -> None:
        broken = self.primer("(no reports)")
        good = self.primer("-----Reports-----\nid|title|rating|content\n1|Oil|5|OPEC met.")
        json_mode = {"response_format": {"type": "json_object"}}
        with ScriptedLLMServer() as server:

            def post(messages: list[dict[str, str]], **extra: object) -> httpx.Response:
                body = {"model": "m", "messages": messages, **extra}
                return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=10)

            no_reports = post(broken, **json_mode)
            not_json = post(good)
            fine = post(good, **json_mode)
        assert no_reports.status_code == 400 and "Reports" in no_reports.text
        assert not_json.status_code == 400 and "JSON mode" in not_json.text
        assert fine.status_code == 200
