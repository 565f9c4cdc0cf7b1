"""Map-point parsing, basic search, question generation and offline answers."""

from __future__ import annotations

import json
from datetime import date

import pytest

from query.basic_search import basic_search
from query.citations import check_citations
from query.index import QueryIndex
from query.json_answers import MalformedAnswerError, parse_map_points, parse_rating
from query.offline_answers import (
    OFFLINE_LABEL,
    offline_basic,
    offline_global,
    offline_local,
    offline_questions,
)
from query.questions import generate_questions, parse_questions
from query.results import QueryResult
from query.time_window import TimeWindow
from tests.unit.test_query_support import deps, entity_store, fixed, world


class TestMapPoints:
    def test_well_formed(self) -> None:
        text = json.dumps({"points": [{"description": "a [Data: Reports (1)]", "score": 80}]})
        assert parse_map_points(text) == [("a [Data: Reports (1)]", 80)]

    @pytest.mark.parametrize(
        ("score", "expected"),
        [
            (150, 100),
            (-5, 0),
            (72.6, 73),
            ("85", 85),
            ("90/100", 90),
            ("high", 0),
            (None, 0),
            (True, 0),
        ],
    )
    def test_scores_are_clamped_and_coerced(self, score: object, expected: int) -> None:
        text = json.dumps({"points": [{"description": "p", "score": score}]})
        assert parse_map_points(text) == [("p", expected)]

    def test_fenced_and_chatty_json_is_read(self) -> None:
        text = 'Here you go:\n```json\n{"points": [{"description": "p", "score": 5}]}\n```'
        assert parse_map_points(text) == [("p", 5)]

    def test_points_without_description_and_non_objects_are_skipped(self) -> None:
        text = json.dumps({"points": [{"score": 50}, "loose", {"description": " q ", "score": 1}]})
        assert parse_map_points(text) == [("q", 1)]

    @pytest.mark.parametrize(
        "text",
        ["", "no json at all", '{"points": [{"description": "cut', '{"answer": "x"}', "[1, 2"],
    )
    def test_malformed_answers_raise(self, text: str) -> None:
        with pytest.raises(MalformedAnswerError):
            parse_map_points(text)

    def test_rating(self) -> None:
        assert parse_rating('{"rating": 9, "reason": "x"}') == 5
        with pytest.raises(MalformedAnswerError):
            parse_rating("four")


class TestQuestions:
    def test_list_markers_are_stripped_and_preamble_ignored(self) -> None:
        text = (
            "Here are some questions:\n1. What did OPEC do?\n- How did Kuwait react?\n"
            "* Why?\n2) What did OPEC do?"
        )
        assert parse_questions(text, 5) == ["What did OPEC do?", "How did Kuwait react?", "Why?"]
        assert parse_questions(text, 1) == ["What did OPEC do?"]

    async def test_generation_uses_the_local_context_and_lists_earlier_questions(self) -> None:
        index = QueryIndex.from_snapshot(world())
        llm = fixed("- What is the role of OPEC?\n- How is Kuwait connected to OPEC?")
        result = await generate_questions(
            "OPEC quota",
            index,
            deps(await entity_store(index), llm),
            count=2,
            history=[{"role": "user", "content": "What is OPEC?"}],
        )
        assert result.questions == ["What is the role of OPEC?", "How is Kuwait connected to OPEC?"]
        [call] = llm.calls
        assert call.purpose == "question_generation" and call.system == ""
        assert "Number of questions: 2" in call.user and "- What is OPEC?" in call.user
        assert "-----Entities-----" in call.user and 1 in result.context_ids["Entities"]


class TestBasicSearch:
    async def test_sources_cited_and_made_up_removed(self) -> None:
        index = QueryIndex.from_snapshot(world())
        store = await entity_store(index)
        await store.upsert("text_unit", [("chunk-unknown", [1.0] * 256, {"text": "ghost"})])
        llm = fixed("Rates were unchanged [Data: Sources (5, 77)].")
        result = await basic_search("Federal Reserve interest rates", index, deps(store, llm))
        assert result.answer == "Rates were unchanged [Data: Sources (5)]."
        assert result.removed_citations == 1 and result.extra["skipped_vector_hits"] == 1
        assert llm.calls[0].purpose == "basic_search" and "5|1987-03-31" in llm.calls[0].system

    async def test_window_drops_sources_outside_it(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = await basic_search(
            "oil",
            index,
            deps(await entity_store(index), fixed("x")),
            window=TimeWindow(since=date(1987, 3, 25)),
        )
        assert set(result.context_ids["Sources"]) <= {4, 5}


def assert_cites_only_context(result: QueryResult) -> None:
    assert result.mode == "offline" and result.llm_calls == 0
    assert result.answer.startswith(OFFLINE_LABEL)
    assert result.removed_citations == 0
    recheck = check_citations(result.answer, {k: set(v) for k, v in result.context_ids.items()})
    assert recheck.removed == 0 and recheck.cited == result.citations
    assert result.citations, "an offline answer cites its context"


class TestOffline:
    async def test_local_cites_entities_and_source_sentences(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = await offline_local(
            "What did Kuwait do about its quota?", index, deps(await entity_store(index))
        )
        assert_cites_only_context(result)
        assert "Kuwait pumped above its quota" in result.answer
        assert set(result.citations) == {"Entities", "Sources"}

    def test_global_ranks_reports_by_shared_words(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = offline_global("Paul Volcker and interest rates", index, level=1)
        assert_cites_only_context(result)
        assert result.citations == {"Reports": [5]}

    def test_global_theme_question_falls_back_to_top_rated_reports(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = offline_global("What are the main themes?", index, level=1)
        assert_cites_only_context(result)
        assert result.citations == {"Reports": [3, 5, 4]}  # rank 7, 6, 5
        assert result.extra["matched"] is False

    async def test_basic_quotes_passages(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = await offline_basic(
            "Geneva meeting output", index, deps(await entity_store(index))
        )
        assert_cites_only_context(result)
        assert result.citations["Sources"][0] == 1

    async def test_questions_name_entities_and_their_busiest_month(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = await offline_questions("OPEC", index, deps(await entity_store(index)), count=2)
        assert result.mode == "offline" and len(result.questions) == 2
        assert result.questions[0] == "What happened involving OPEC in March 1987?"
