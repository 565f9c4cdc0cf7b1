"""Local and global search against a scripted model: calls made, citations kept or removed."""

from __future__ import annotations

import json
import re
from datetime import date

import pytest

from core.errors import LLMError
from query.citations import cited_ids
from query.dynamic import DynamicConfig
from query.errors import AllMapCallsFailedError, QueryError
from query.global_search import NO_DATA_ANSWER, GlobalSearchConfig, global_search
from query.index import QueryIndex
from query.local_search import local_search
from query.report_batches import level_reports, make_batches
from query.time_window import TimeWindow
from tests.unit.test_query_support import (
    Call,
    ScriptedLLM,
    comm,
    deps,
    ent,
    entity_store,
    fixed,
    report,
    snapshot,
    words,
    world,
)

ONE_PER_BATCH = GlobalSearchConfig(level=1, batch_max_tokens=30)


def table_ids(system: str) -> list[int]:
    return [int(m) for m in re.findall(r"^(\d+)\|", system, re.MULTILINE)]


def mapper(score: int | None = None, also_cite: int | None = None) -> ScriptedLLM:
    """Map: one point per report of the batch (score 60, or ``score``); reduce: the points."""

    def reply(call: Call) -> str:
        if call.purpose == "global_map":
            ids = table_ids(call.system)
            extra = [also_cite] if also_cite is not None else []
            points = [
                {
                    "description": f"P{i} [Data: Reports ({', '.join(map(str, [i, *extra]))})]",
                    "score": 60 if score is None else score,
                }
                for i in ids
            ]
            return json.dumps({"points": points})
        if call.purpose == "global_reduce":
            cited = sorted({i for i in cited_ids(call.system).get("Reports", [])})
            return f"Answer [Data: Reports ({', '.join(map(str, [*cited, 99]))})]"
        raise AssertionError(call.purpose)

    return ScriptedLLM(reply)


class TestLocalSearch:
    async def test_one_call_with_context_in_system_and_question_as_user(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = fixed("OPEC held output [Data: Entities (1, 42); Sources (1, 2)].")
        result = await local_search(
            "What did OPEC decide?", index, deps(await entity_store(index), llm)
        )
        assert llm.purposes() == ["local_search"]
        call = llm.calls[0]
        assert call.user == "What did OPEC decide?"
        assert (
            "-----Entities-----" in call.system and "TASK: ANSWER FROM LOCAL CONTEXT" in call.system
        )
        assert result.answer == "OPEC held output [Data: Entities (1); Sources (1, 2)]."
        assert result.removed_citations == 1
        assert result.citations == {"Entities": [1], "Sources": [1, 2]}
        assert 1 in result.context_ids["Entities"] and result.mode == "llm"
        assert (result.llm_calls, result.prompt_tokens, result.snapshot_version) == (1, 10, 1)

    async def test_history_reaches_the_prompt(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = fixed("ok")
        await local_search(
            "And Kuwait?",
            index,
            deps(await entity_store(index), llm),
            history=[{"role": "user", "content": "What did OPEC decide?"}],
        )
        assert "What did OPEC decide?" in llm.calls[0].system

    async def test_offline_deps_are_refused(self) -> None:
        index = QueryIndex.from_snapshot(world())
        with pytest.raises(QueryError, match="offline"):
            await local_search("OPEC?", index, deps(await entity_store(index)))


class TestGlobalCalls:
    async def test_exactly_one_call_per_batch_plus_reduce(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = mapper()
        result = await global_search(
            "oil?", index, deps(await entity_store(index), llm), config=ONE_PER_BATCH
        )
        assert result.extra["batches"] == 3
        assert llm.purposes().count("global_map") == 3
        assert llm.purposes()[-1] == "global_reduce" and result.llm_calls == 4
        assert result.citations == {"Reports": [3, 4, 5]}
        assert result.removed_citations == 1  # the reduce's made-up 99
        assert all(c.json_mode for c in llm.calls[:3])

    async def test_only_map_calls_when_every_point_scores_zero(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = mapper(score=0)
        result = await global_search(
            "weather?", index, deps(await entity_store(index), llm), config=ONE_PER_BATCH
        )
        assert llm.purposes() == ["global_map"] * 3
        assert result.answer == NO_DATA_ANSWER and result.citations == {}

    async def test_map_citation_outside_its_batch_is_removed(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = mapper(also_cite=1)  # report 1 is level 0: never in a level-1 batch
        result = await global_search(
            "oil?", index, deps(await entity_store(index), llm), config=ONE_PER_BATCH
        )
        assert result.extra["map_removed_citations"] == 3
        reduce_prompt = llm.calls[-1].system
        assert "Reports (1)" not in reduce_prompt and "3, 1" not in reduce_prompt

    async def test_malformed_map_answer_is_retried_once_then_ignored(self) -> None:
        index = QueryIndex.from_snapshot(world())
        good = mapper()

        def reply(call: Call) -> str:
            if call.purpose == "global_map" and 5 in table_ids(call.system):
                return "Sure! Here are the points: (format ignored)"
            return good.reply(call)

        llm = ScriptedLLM(reply)
        result = await global_search(
            "oil?", index, deps(await entity_store(index), llm), config=ONE_PER_BATCH
        )
        assert llm.purposes().count("global_map") == 4  # 3 batches + 1 retry
        assert result.citations == {"Reports": [3, 4]}

    async def test_failed_map_calls_everywhere_raise(self) -> None:
        index = QueryIndex.from_snapshot(world())

        def reply(call: Call) -> str:
            raise LLMError("endpoint down", retryable=True)

        with pytest.raises(AllMapCallsFailedError):
            await global_search(
                "oil?",
                index,
                deps(await entity_store(index), ScriptedLLM(reply)),
                config=ONE_PER_BATCH,
            )

    async def test_window_limits_to_active_communities(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = mapper()
        result = await global_search(
            "rates?",
            index,
            deps(await entity_store(index), llm),
            config=ONE_PER_BATCH,
            window=TimeWindow(since=date(1987, 3, 25)),
        )
        assert result.context_ids == {"Reports": [5]} and result.llm_calls == 2


class TestReportSelection:
    def test_leaves_above_the_level_stand_in_for_themselves(self) -> None:
        a, b, c = ent(1, "A", "", []), ent(2, "B", "", []), ent(3, "C", "", [])
        parent, lone, child = (
            comm(1, 0, [a, b], children=(3,)),
            comm(2, 0, [c]),
            comm(3, 1, [a], parent=1),
        )
        snap = snapshot(
            [a, b, c],
            communities=[parent, lone, child],
            reports=[report(x, f"R{x.community}", "s") for x in (parent, lone, child)],
        )
        index = QueryIndex.from_snapshot(snap)
        assert [r.community for r in level_reports(index, 1, TimeWindow())] == [2, 3]
        assert [r.community for r in level_reports(index, 0, TimeWindow())] == [1, 2]

    def test_batches_are_seeded_complete_and_within_budget(self) -> None:
        index = QueryIndex.from_snapshot(world())
        reports = list(index.reports.values())
        first = make_batches(reports, count=words, budget=40, seed=7)
        again = make_batches(list(reversed(reports)), count=words, budget=40, seed=7)
        assert first == again
        assert sorted(i for b in first for i in b.ids) == [1, 2, 3, 4, 5]
        assert all(words(b.text) <= 40 for b in first) and len(first) > 1

    def test_a_report_longer_than_a_batch_is_cut_to_fit(self) -> None:
        index = QueryIndex.from_snapshot(world())
        long = report(index.communities[3], "Long", "word " * 500)
        [batch] = make_batches([long], count=words, budget=60, seed=1)
        assert batch.ids == (3,) and words(batch.text) <= 60


class TestDynamicSelection:
    @staticmethod
    def rater(call: Call) -> str:
        if call.purpose == "community_rating":
            report_text = call.user.split("\nReport:", 1)[1]
            return json.dumps({"rating": 4 if re.search(r"OPEC|Oil", report_text) else 0})
        return mapper().reply(call)

    async def test_irrelevant_subtrees_are_never_rated(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = ScriptedLLM(self.rater)
        result = await global_search(
            "What about OPEC and oil?",
            index,
            deps(await entity_store(index), llm),
            config=ONE_PER_BATCH,
            dynamic=DynamicConfig(),
        )
        rated = [c for c in llm.calls if c.purpose == "community_rating"]
        assert len(rated) == 4 and result.extra["rating_calls"] == 4  # 1, 2, then 3, 4
        assert not any("Volcker and rates" in c.user for c in rated)
        assert result.context_ids == {"Reports": [3, 4]}  # parent 1 replaced by its children
        assert llm.purposes().count("global_map") == 2
        assert result.llm_calls == 4 + 2 + 1

    async def test_same_cited_reports_with_fewer_map_calls(self) -> None:
        index = QueryIndex.from_snapshot(world())

        def relevant_only(call: Call) -> str:
            if call.purpose == "global_map":
                ids = [i for i in table_ids(call.system) if i in (3, 4)]
                points = [{"description": f"p [Data: Reports ({i})]", "score": 50} for i in ids]
                return json.dumps({"points": points or [{"description": "none", "score": 0}]})
            return self.rater(call)

        full_llm, dyn_llm = ScriptedLLM(relevant_only), ScriptedLLM(relevant_only)
        store = await entity_store(index)
        full = await global_search("OPEC oil?", index, deps(store, full_llm), config=ONE_PER_BATCH)
        dyn = await global_search(
            "OPEC oil?", index, deps(store, dyn_llm), config=ONE_PER_BATCH, dynamic=DynamicConfig()
        )
        assert full.citations == dyn.citations == {"Reports": [3, 4]}
        assert dyn_llm.purposes().count("global_map") < full_llm.purposes().count("global_map")

    async def test_keep_parent_keeps_both_levels(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = await global_search(
            "OPEC oil?",
            index,
            deps(await entity_store(index), ScriptedLLM(self.rater)),
            config=ONE_PER_BATCH,
            dynamic=DynamicConfig(keep_parent=True),
        )
        assert result.context_ids == {"Reports": [1, 3, 4]}
