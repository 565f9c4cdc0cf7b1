"""Entities a question names: coverage by name weight within one phrase of the question,
proper phrases before common ones, surnames and acronyms, one pick per phrase first, and
their place ahead of the vector hits in local search."""

from __future__ import annotations

import pytest

from offline.embedding import HashingEmbedder
from query.context import LocalContextConfig, local_context
from query.entity_names import NameIndex, keyword_query, named_entities
from query.index import QueryIndex
from tests.unit.test_query_support import DictVectorStore, entity_store, words, world

NAMES = [
    "edouard balladur",
    "james baker",
    "james exon",
    "james wolfensohn",
    "james river",
    "james capel",
    "howard baker",
    "natural gas",
    "southern natural gas",
    "john herrington",
    "what",
    "happened",
]


def pick(question: str, limit: int = 10, freq: dict[str, int] | None = None) -> list[str]:
    counts = freq or {}
    return named_entities(question, NameIndex.build(NAMES), lambda k: counts.get(k, 0), limit=limit)


class TestUpdated:
    def test_adding_and_removing_names_equals_building_afresh(self) -> None:
        before = NameIndex.build(NAMES[:8])
        now = [*NAMES[2:], "international monetary fund", "james baker iii"]
        added = [k for k in now if k not in NAMES[:8]]
        removed = [k for k in NAMES[:8] if k not in now]
        assert before.updated(now, added, removed) == NameIndex.build(now)
        assert before.updated(NAMES[:8], [], []) == before


class TestMatching:
    def test_a_surname_finds_the_full_name(self) -> None:
        assert pick("What did Balladur say?") == ["edouard balladur"]

    def test_a_common_first_name_alone_covers_no_name(self) -> None:
        assert pick("What did James say?") == []

    def test_the_full_name_comes_before_namesakes(self) -> None:
        found = pick("What happened involving James Baker?")
        assert found[0] == "james baker"
        assert "james exon" not in found

    def test_frame_and_stop_words_never_match(self) -> None:
        assert pick("What happened?") == []

    def test_nothing_named_gives_nothing(self) -> None:
        assert pick("how are bond yields moving") == []


class TestOrder:
    def test_the_proper_noun_comes_before_the_lower_case_topic(self) -> None:
        found = pick("What happened involving Herrington in natural gas?")
        assert found == ["john herrington", "natural gas"]

    def test_part_of_a_name_in_lower_case_words_names_nothing(self) -> None:
        assert "southern natural gas" not in pick(
            "What happened involving Herrington in natural gas?"
        )

    def test_a_lower_case_question_still_finds_every_part(self) -> None:
        found = pick("what happened involving herrington in natural gas")
        assert set(found[:2]) == {"natural gas", "john herrington"}
        assert found[2:] == ["southern natural gas"]

    def test_limit_is_respected(self) -> None:
        assert len(pick("Herrington natural gas", limit=1)) == 1


class TestLocalSelection:
    async def test_named_entity_is_selected_even_when_vectors_miss_it(self) -> None:
        index = QueryIndex.from_snapshot(world())
        empty = DictVectorStore()  # no entity vectors at all: only the name can find it
        ctx = await local_context(
            "What did Volcker do?",
            index=index,
            embedder=HashingEmbedder(256),
            store=empty,
            config=LocalContextConfig(),
            count_tokens=words,
        )
        assert ctx.entity_keys == ("paul volcker",)

    async def test_named_entities_come_before_vector_hits(self) -> None:
        index = QueryIndex.from_snapshot(world())
        store = await entity_store(index)
        ctx = await local_context(
            "oil cartel output quotas and Kuwait",
            index=index,
            embedder=HashingEmbedder(256),
            store=store,
            config=LocalContextConfig(top_k_entities=3),
            count_tokens=words,
        )
        assert ctx.entity_keys[0] == "kuwait"
        assert len(ctx.entity_keys) == 3

    async def test_disabled_by_config(self) -> None:
        index = QueryIndex.from_snapshot(world())
        ctx = await local_context(
            "What did Volcker do?",
            index=index,
            embedder=HashingEmbedder(256),
            store=DictVectorStore(),
            config=LocalContextConfig(named_entities=0),
            count_tokens=words,
        )
        assert ctx.entity_keys == ()


class TestKeywordQuery:
    @pytest.mark.parametrize(
        ("question", "keywords"),
        [
            ("What did James Baker say or do about the dollar?", "james baker dollar"),
            ("What is OPEC's quota for Iraq?", "opec quota iraq"),
            ("Tell me about STEEL import tariffs, steel tariffs", "steel import tariffs"),
            # hyphens and tickers split as Weaviate's word tokenization splits the text
            (
                "What did Hapag-Lloyd say about money-supply and AMR.N shares?",
                "hapag lloyd money supply amr shares",
            ),
            ("What happened?", ""),
        ],
    )
    def test_the_frame_stop_words_and_possessives_are_left_out(
        self, question: str, keywords: str
    ) -> None:
        assert keyword_query(question) == keywords
