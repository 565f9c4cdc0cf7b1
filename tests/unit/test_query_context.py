"""Local-search context: budgets and proportions, ranking, skipped hits, history, windows, and
what the question asks beyond the names it matched."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

import pytest

from graph.keys import entity_key
from offline.embedding import HashingEmbedder
from query.context import (
    LocalContextConfig,
    build_local_context,
    local_context,
    question_beyond_names,
)
from query.history import history_table
from query.index import QueryIndex
from query.time_window import TimeWindow
from tests.unit.test_query_support import (
    comm,
    ent,
    entity_store,
    rel,
    report,
    snapshot,
    unit,
    words,
    world,
)


def section(text: str, name: str) -> str:
    """The lines of one table of a context (its heading and header included)."""
    m = re.search(rf"-----{name}-----\n(.*?)(?=\n\n-----|\Z)", text, re.DOTALL)
    return f"-----{name}-----\n{m.group(1)}" if m else ""


def row_ids(text: str, name: str) -> list[int]:
    return [int(line.split("|")[0]) for line in section(text, name).splitlines()[2:]]


def big_world() -> QueryIndex:
    """30 entities on a chain with wordy descriptions, so every budget binds."""
    filler = "which traders watched closely as the market moved through the week " * 2
    n = 30
    units = [
        unit(i + 1, f"Story {i} about E{i} and E{i + 1}. {filler}", "1987-03-10", [])
        for i in range(n)
    ]
    ents = [
        ent(
            i + 1, f"E{i}", f"E{i} is entity number {i}. {filler}", [f"chunk-{i + 1}", f"chunk-{i}"]
        )
        for i in range(n)
    ]
    rels = [
        rel(
            i + 1,
            ents[i],
            ents[i + 1],
            f"E{i} deals with E{i + 1}. {filler}",
            4,
            [f"chunk-{i + 1}"],
        )
        for i in range(n - 1)
    ]
    communities = [comm(k + 1, 0, ents[k * 5 : k * 5 + 5]) for k in range(6)]
    reports = [report(c, f"Group {c.community}", f"Group summary. {filler}") for c in communities]
    return QueryIndex.from_snapshot(snapshot(ents, rels, units, communities, reports))


class TestBudget:
    @pytest.mark.parametrize(
        ("max_tokens", "text_prop", "community_prop"),
        [(300, 0.5, 0.15), (600, 0.3, 0.3), (1200, 0.6, 0.1), (200, 0.0, 0.5)],
    )
    def test_total_and_each_section_within_their_share(
        self, max_tokens: int, text_prop: float, community_prop: float
    ) -> None:
        index = big_world()
        config = LocalContextConfig(
            max_tokens=max_tokens, text_unit_prop=text_prop, community_prop=community_prop
        )
        keys = [entity_key(f"E{i}") for i in range(10)]
        ctx = build_local_context(index, keys, config=config, count_tokens=words)
        reports, local, sources = config.budgets()
        assert words(ctx.text) <= max_tokens
        assert words(section(ctx.text, "Reports")) <= reports
        assert words(section(ctx.text, "Sources")) <= sources
        local_words = sum(
            words(section(ctx.text, t)) for t in ("Entities", "Relationships", "Claims")
        )
        assert local_words <= local
        # the budget binds (the context is well filled, not trivially small)
        assert sum(ctx.tokens.values()) > max_tokens * 0.5
        assert ctx.ids["Entities"] and len(ctx.ids["Entities"]) < 10

    def test_ids_record_exactly_the_rows_in_the_tables(self) -> None:
        index = big_world()
        config = LocalContextConfig(max_tokens=900)
        ctx = build_local_context(
            index, [entity_key(f"E{i}") for i in range(6)], config=config, count_tokens=words
        )
        for name in ("Entities", "Relationships", "Reports", "Sources"):
            assert list(ctx.ids[name]) == row_ids(ctx.text, name)

    def test_each_added_entity_brings_its_relationships(self) -> None:
        index = big_world()
        ctx = build_local_context(
            index,
            [entity_key(f"E{i}") for i in range(10)],
            config=LocalContextConfig(max_tokens=1000, text_unit_prop=0.2, community_prop=0.1),
            count_tokens=words,
        )
        entities = {index.entity_by_hrid[i].id for i in ctx.ids["Entities"]}
        for rid in ctx.ids["Relationships"]:
            a, b = index.relationship_ends[index.relationship_by_hrid[rid].id]
            assert a in entities or b in entities
        assert ctx.ids["Relationships"], "relationships arrive with their entities"

    def test_bad_proportions_are_refused(self) -> None:
        with pytest.raises(ValueError, match="sum"):
            LocalContextConfig(text_unit_prop=0.7, community_prop=0.4)


class TestRanking:
    def test_in_network_relationships_come_first(self) -> None:
        index = QueryIndex.from_snapshot(world())
        ctx = build_local_context(
            index, ["oil prices", "kuwait"], config=LocalContextConfig(), count_tokens=words
        )
        # 3 links the two selected entities (combined degree 3); 2 leaves them for OPEC (5)
        assert list(ctx.ids["Relationships"]) == [3, 2]

    @pytest.mark.parametrize(
        ("selected", "expected"),
        [(["opec", "oil prices"], [1, 2, 3]), (["oil prices", "opec"], [2, 3, 1])],
    )
    def test_sources_follow_the_entity_rank(self, selected: list[str], expected: list[int]) -> None:
        # GraphRAG's order: the first entity's units first; without a question's distances
        # they tie on relationships carried (one each) and fall back to their ids
        index = QueryIndex.from_snapshot(world())
        ctx = build_local_context(index, selected, config=LocalContextConfig(), count_tokens=words)
        assert list(ctx.ids["Sources"]) == expected

    @pytest.mark.parametrize(("level", "expected"), [(0, [1]), (1, [3, 4]), (5, [3, 4])])
    def test_reports_of_the_level_or_the_leaf_standing_in(
        self, level: int, expected: list[int]
    ) -> None:
        index = QueryIndex.from_snapshot(world())
        ctx = build_local_context(
            index,
            ["opec", "saudi arabia", "kuwait"],
            config=LocalContextConfig(community_level=level),
            count_tokens=words,
        )
        assert list(ctx.ids["Reports"]) == expected  # 3 holds two selected entities, 4 one

    def test_claims_of_selected_entities_are_included(self) -> None:
        index = QueryIndex.from_snapshot(world())
        ctx = build_local_context(index, ["opec"], config=LocalContextConfig(), count_tokens=words)
        assert list(ctx.ids["Claims"]) == [1]
        assert "15.8 million barrels" in section(ctx.text, "Claims")


class TestSelection:
    async def test_unknown_vector_hits_are_skipped(self) -> None:
        index = QueryIndex.from_snapshot(world())
        store = await entity_store(index, extra_keys=["opec cartel quota newcomer"])
        ctx = await local_context(
            "opec cartel quota newcomer",
            index=index,
            embedder=HashingEmbedder(256),
            store=store,
            config=LocalContextConfig(top_k_entities=3),
            count_tokens=words,
        )
        assert ctx.skipped_hits == 1
        assert "opec" in ctx.entity_keys
        assert all(k in index.entities for k in ctx.entity_keys)

    async def test_window_keeps_to_entities_and_sources_of_the_period(self) -> None:
        index = QueryIndex.from_snapshot(world())
        store = await entity_store(index)
        late = TimeWindow(since=date(1987, 3, 25))
        ctx = await local_context(
            "OPEC and the Federal Reserve",
            index=index,
            embedder=HashingEmbedder(256),
            store=store,
            config=LocalContextConfig(),
            count_tokens=words,
            window=late,
        )
        assert "opec" not in ctx.entity_keys and "federal reserve" in ctx.entity_keys
        assert set(ctx.ids["Sources"]) <= {4, 5}
        assert set(ctx.ids["Reports"]) <= {2, 5}


class TestHistory:
    TURNS = [
        {"role": "user", "content": "first question about OPEC"},
        {"role": "assistant", "content": "an answer about OPEC quotas"},
        {"role": "user", "content": "latest question about Kuwait"},
    ]

    def test_most_recent_turn_first(self) -> None:
        text = history_table(self.TURNS, budget=500, count=words)
        lines = text.splitlines()[2:]
        assert lines[0] == "1|user|latest question about Kuwait"
        assert lines[-1].endswith("first question about OPEC")

    def test_budget_drops_the_oldest_turns(self) -> None:
        text = history_table(self.TURNS, budget=14, count=words)
        assert "Kuwait" in text and "first question" not in text
        assert words(text) <= 14

    def test_history_is_part_of_the_context_but_not_of_its_budget(self) -> None:
        index = QueryIndex.from_snapshot(world())
        config = LocalContextConfig(max_tokens=200)
        bare = build_local_context(index, ["opec"], config=config, count_tokens=words)
        with_history = build_local_context(
            index, ["opec"], config=config, count_tokens=words, history=self.TURNS
        )
        assert with_history.text == bare.text
        assert "latest question about Kuwait" in with_history.history


class RecordingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(256)
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return await super().embed(texts)


def names_world() -> QueryIndex:
    names = ["International Monetary Fund", "EC", "European Community", "Crude Oil", "OPEC"]
    ents = [ent(i + 1, n, f"{n} is named here.", ["chunk-1"]) for i, n in enumerate(names)]
    ents.append(
        ent(9, "Paul Volcker", "Paul Volcker is a central banker.", ["chunk-1"], type="person")
    )
    return QueryIndex.from_snapshot(
        snapshot(ents, units=[unit(1, "The names in one story.", "1987-03-02", ents)])
    )


class TestBeyondTheNames:
    @pytest.mark.parametrize(
        ("question", "named", "rest"),
        [
            # the proper-noun phrase naming the entity goes, the topic stays
            (
                "What happened involving European Community in sugar?",
                ["european community"],
                "sugar",
            ),
            # a lower-case topic stays even when it is an entity's name
            ("What did OPEC do about crude oil prices?", ["opec", "crude oil"], "crude oil prices"),
            # a person named by the surname
            ("What did Volcker say on interest rates?", ["paul volcker"], "interest rates"),
            # acronyms, either way
            ("Has the IMF lent to Brazil?", ["international monetary fund"], "lent brazil"),
            ("What did the European Community decide?", ["ec"], "decide"),
            # a name the question does not name (a vector hit) is not taken out
            ("What did OPEC decide?", [], "opec decide"),
            # nothing left: the caller falls back to the whole question
            ("Tell me about OPEC", ["opec"], ""),
        ],
    )
    def test_the_names_matched_are_taken_out(
        self, question: str, named: list[str], rest: str
    ) -> None:
        assert question_beyond_names(question, named, names_world()) == rest

    async def test_question_and_remainder_embedded_in_one_call(self) -> None:
        index = QueryIndex.from_snapshot(world())
        embedder = RecordingEmbedder()
        await local_context(
            "What did OPEC keep after its quota accord?",
            index=index,
            embedder=embedder,
            store=await entity_store(index),
            config=LocalContextConfig(),
            count_tokens=words,
        )
        assert embedder.calls == [
            ["What did OPEC keep after its quota accord?", "keep quota accord"]
        ]

    async def test_the_whole_question_when_nothing_is_left(self) -> None:
        index = QueryIndex.from_snapshot(world())
        embedder = RecordingEmbedder()
        ctx = await local_context(
            "Tell me about OPEC",
            index=index,
            embedder=embedder,
            store=await entity_store(index),
            config=LocalContextConfig(top_k_entities=1),
            count_tokens=words,
        )
        assert embedder.calls == [["Tell me about OPEC"]]
        assert ctx.entity_keys == ("opec",) and set(ctx.ids["Sources"]) == {1, 2}
