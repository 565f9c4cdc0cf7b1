"""Sources order: entity rank first, then the distance of each text unit to what the question
asks beyond the names it matched."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

from graph.protocols import VectorHit
from offline.embedding import HashingEmbedder
from query.context import (
    LocalContextConfig,
    build_local_context,
    local_context,
    spellings,
    text_unit_distances,
)
from query.index import QueryIndex
from query.ranking import rank_text_units
from query.time_window import TimeWindow
from tests.unit.test_query_support import (
    DictVectorStore,
    ent,
    entity_store,
    snapshot,
    unit,
    words,
    world,
)


class RecordingStore(DictVectorStore):
    """Records every search; answers text-unit searches only within the ``key`` filter."""

    def __init__(self) -> None:
        super().__init__()
        self.searches: list[tuple[str, int, dict[str, Any] | None]] = []
        self.keywords: list[str | None] = []  # the keyword side of each search (hybrid)

    async def search(
        self,
        kind: str,
        vector: list[float],
        limit: int,
        filters: dict[str, Any] | None = None,
        *,
        text: str | None = None,
    ) -> list[VectorHit]:
        self.searches.append((kind, limit, filters))
        self.keywords.append(text)
        hits = await super().search(kind, vector, 10_000)
        if filters and "key" in filters:
            hits = [h for h in hits if h.key in filters["key"]]
        return hits[:limit]


async def recording_store(index: QueryIndex) -> RecordingStore:
    source = await entity_store(index)
    store = RecordingStore()
    for kind, items in source.items.items():
        await store.upsert(kind, [(k, v, p) for k, (v, p) in items.items()])
    return store


def ranked(index: QueryIndex, selected: Sequence[str], distances: dict[str, float]) -> list[str]:
    return rank_text_units(index, selected, [], TimeWindow(), distances)


class TestRankTextUnits:
    def test_the_unit_nearer_to_the_question_comes_first_within_an_entity(self) -> None:
        # Both units are OPEC's and carry as many relationships; without the question,
        # chunk-1 comes first by id. Asked about oil prices, chunk-2 is nearer.
        index = QueryIndex.from_snapshot(world())
        assert ranked(index, ["opec"], {}) == ["chunk-1", "chunk-2"]
        assert ranked(index, ["opec"], {"chunk-1": 0.6, "chunk-2": 0.2}) == [
            "chunk-2",
            "chunk-1",
        ]

    def test_the_question_does_not_override_the_entity_rank(self) -> None:
        index = QueryIndex.from_snapshot(world())
        # chunk-3 (oil prices and Kuwait) is the nearest, but it is not OPEC's
        order = ranked(
            index, ["opec", "oil prices"], {"chunk-1": 0.6, "chunk-2": 0.4, "chunk-3": 0.1}
        )
        assert order == ["chunk-2", "chunk-1", "chunk-3"]

    def test_units_without_a_distance_follow_those_with_one(self) -> None:
        index = QueryIndex.from_snapshot(world())
        assert ranked(index, ["opec"], {"chunk-2": 0.9}) == ["chunk-2", "chunk-1"]

    def test_the_context_sources_follow_the_distances(self) -> None:
        index = QueryIndex.from_snapshot(world())
        config = LocalContextConfig()
        plain = build_local_context(index, ["opec"], config=config, count_tokens=words)
        asked = build_local_context(
            index,
            ["opec"],
            config=config,
            count_tokens=words,
            unit_distances={"chunk-1": 0.6, "chunk-2": 0.2},
        )
        assert list(plain.ids["Sources"]) == [1, 2]
        assert list(asked.ids["Sources"]) == [2, 1]
        assert asked.ids["Entities"] == plain.ids["Entities"]


class TestTextUnitDistances:
    async def test_one_search_filtered_to_the_candidates_in_the_window(self) -> None:
        index = QueryIndex.from_snapshot(world())
        store = await recording_store(index)
        [vector] = await HashingEmbedder(256).embed(["oil prices and quotas"])
        window = TimeWindow(since=date(1987, 3, 3))  # chunk-1 (March 2) is outside
        distances = await text_unit_distances(
            vector, ["opec", "oil prices"], index=index, store=store, window=window
        )
        assert store.searches == [("text_unit", 2, {"key": ["chunk-2", "chunk-3"]})]
        assert set(distances) == {"chunk-2", "chunk-3"}

    async def test_at_most_limit_candidates_in_entity_rank_order(self) -> None:
        index = QueryIndex.from_snapshot(world())
        store = await recording_store(index)
        [vector] = await HashingEmbedder(256).embed(["oil prices"])
        distances = await text_unit_distances(
            vector, ["oil prices", "opec"], index=index, store=store, window=TimeWindow(), limit=2
        )
        assert store.searches == [("text_unit", 2, {"key": ["chunk-2", "chunk-3"]})]
        assert set(distances) == {"chunk-2", "chunk-3"}
        assert (
            await text_unit_distances(
                vector, ["opec"], index=index, store=store, window=TimeWindow(), limit=0
            )
            == {}
        )
        assert len(store.searches) == 1  # no search without candidates

    async def test_hits_outside_the_candidates_are_dropped(self) -> None:
        # DictVectorStore ignores filters, as a store might
        index = QueryIndex.from_snapshot(world())
        store = await entity_store(index)
        [vector] = await HashingEmbedder(256).embed(["Federal Reserve interest rates"])
        distances = await text_unit_distances(
            vector, ["opec"], index=index, store=store, window=TimeWindow()
        )
        assert set(distances) <= {"chunk-1", "chunk-2"}


class TestLocalContext:
    async def test_sources_of_the_named_entity_nearest_to_the_question_first(self) -> None:
        index = QueryIndex.from_snapshot(world())
        store = await recording_store(index)
        ctx = await local_context(
            "What did OPEC keep after its quota accord?",
            index=index,
            embedder=HashingEmbedder(256),
            store=store,
            config=LocalContextConfig(top_k_entities=1),
            count_tokens=words,
        )
        assert ctx.entity_keys == ("opec",)
        # GraphRAG's order would put chunk-1 (the Geneva output meeting) first
        assert list(ctx.ids["Sources"]) == [2, 1]
        kinds = [kind for kind, _, _ in store.searches]
        assert kinds == ["entity", "text_unit"]  # one search for all the candidate units

    async def test_no_distances_asked_when_turned_off(self) -> None:
        index = QueryIndex.from_snapshot(world())
        store = await recording_store(index)
        ctx = await local_context(
            "What did OPEC keep after its quota accord?",
            index=index,
            embedder=HashingEmbedder(256),
            store=store,
            config=LocalContextConfig(top_k_entities=1, question_ranked_units=0),
            count_tokens=words,
        )
        assert [kind for kind, _, _ in store.searches] == ["entity"]
        assert list(ctx.ids["Sources"]) == [1, 2]


def big_entity_world() -> QueryIndex:
    """One well-known organisation: one of its units repeats its name about something else,
    the other names it once, about sugar."""
    ec = ent(1, "European Community", "The European Community is a trade bloc.", [], 5)
    units = [
        unit(
            1,
            "European Community ministers met. The European Community said the European "
            "Community would hold.",
            "1987-03-02",
            [ec],
        ),
        unit(
            2,
            "The European Community sold white sugar at its weekly tender, traders in Brussels "
            "said.",
            "1987-03-03",
            [ec],
        ),
    ]
    return QueryIndex.from_snapshot(snapshot([ec], units=units))


class TestBeyondTheNames:
    QUESTION = "What happened involving European Community in sugar?"

    async def test_the_unit_about_the_topic_comes_first_for_a_big_entity(self) -> None:
        index = big_entity_world()
        store = await recording_store(index)
        ctx = await local_context(
            self.QUESTION,
            index=index,
            embedder=HashingEmbedder(256),
            store=store,
            config=LocalContextConfig(top_k_entities=1),
            count_tokens=words,
        )
        assert ctx.entity_keys == ("european community",)
        assert list(ctx.ids["Sources"]) == [2, 1]
        assert [kind for kind, _, _ in store.searches] == ["entity", "text_unit"]
        # hybrid: entities by the question's keywords, the units by what it asks beyond the
        # names and one word of the lead entity's name (its rarest; here a tie)
        assert store.keywords == ["european community sugar", "european sugar"]

    async def test_the_whole_question_would_put_the_name_repeating_unit_first(self) -> None:
        # the old order: the entity's own words dominate the question's vector
        index = big_entity_world()
        store = await recording_store(index)
        [vector] = await HashingEmbedder(256).embed([self.QUESTION])
        distances = await text_unit_distances(
            vector, ["european community"], index=index, store=store, window=TimeWindow()
        )
        assert distances["chunk-1"] < distances["chunk-2"]


def two_spellings_world() -> QueryIndex:
    """One person under two keys, as the offline extractor leaves them until aliases are
    resolved: the bare surname has an article on rice, the full name one on wheat."""
    bare = ent(1, "Lyng", "Lyng spoke on rice.", [], 1, type="person")
    full = ent(
        2,
        "Richard Lyng",
        "Agriculture Secretary Richard Lyng spoke on wheat.",
        [],
        1,
        type="person",
    )
    namesake = ent(3, "Lyng Farms", "Lyng Farms sells rice.", [], 1)
    units = [
        unit(1, "Lyng said rice exports were steady.", "1987-03-02", [bare]),
        unit(2, "Richard Lyng said wheat subsidies would go on.", "1987-03-03", [full]),
        unit(3, "Lyng Farms raised rice prices.", "1987-03-04", [namesake]),
    ]
    return QueryIndex.from_snapshot(snapshot([bare, full, namesake], units=units))


class TestSpellings:
    def test_names_holding_one_another_are_one_thing_namesakes_are_not(self) -> None:
        keys = ["lyng", "richard lyng", "lyng farms", "wheat"]
        # "lyng farms" holds "lyng" too, but the question did not name it
        assert spellings(keys, named={"lyng", "richard lyng"}) == {"lyng", "richard lyng"}
        assert spellings(
            ["james baker", "baker", "charles baker"], named={"baker", "charles baker"}
        ) == {"james baker", "baker"}
        assert spellings([], named=set()) == frozenset()

    def test_the_spellings_units_rank_together_by_the_question(self) -> None:
        index = two_spellings_world()
        selected = ["lyng", "richard lyng", "lyng farms"]
        distances = {"chunk-1": 0.9, "chunk-2": 0.1, "chunk-3": 0.0}
        # entity by entity, the bare surname's rice article comes first whatever was asked
        assert ranked(index, selected, distances) == ["chunk-1", "chunk-2", "chunk-3"]
        together = rank_text_units(
            index, selected, [], TimeWindow(), distances, alike={"lyng", "richard lyng"}
        )
        assert together == ["chunk-2", "chunk-1", "chunk-3"]

    async def test_local_search_reads_the_full_names_article_first_when_it_is_the_topic(
        self,
    ) -> None:
        index = two_spellings_world()
        store = await recording_store(index)
        ctx = await local_context(
            "What did Lyng say about wheat?",
            index=index,
            embedder=HashingEmbedder(256),
            store=store,
            config=LocalContextConfig(top_k_entities=3),
            count_tokens=words,
        )
        assert ctx.entity_keys[:2] == ("lyng", "richard lyng")
        assert ctx.ids["Sources"][0] == 2
