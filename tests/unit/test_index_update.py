"""Following versions row by row gives the index a fresh build of the new version gives."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

import pytest

from core.tables.opening import QUERY_OMITS, open_graph_store
from core.tables.store import GraphTables
from graph.keys import entity_key
from query.index import QueryIndex
from query.index_update import follow
from query.text_store import BULK
from tests.unit.test_community_run import _fact, steady_job
from tests.unit.test_query_service import grown, versioned
from tests.unit.test_query_support import dated, world


def assert_same(followed: QueryIndex, fresh: QueryIndex, step: int) -> None:
    for f in dataclasses.fields(QueryIndex):
        a, b = getattr(followed, f.name), getattr(fresh, f.name)
        assert a == b, (step, f.name)


class TestFollow:
    @pytest.mark.parametrize(
        ("for_queries", "mapped"),
        [(False, False), (True, False), (True, True)],
        ids=["whole rows", "query reader", "query service, text mapped"],
    )
    async def test_every_version_followed_row_by_row_equals_a_fresh_index(
        self, tmp_path: Path, for_queries: bool, mapped: bool
    ) -> None:
        """News of every kind (a fact, a newcomer, a repeat, a new cluster) through the
        community job; after each run the followed index equals the fresh one, with whole
        rows, with the query service's reader (which leaves columns it never uses out), and
        as the service reads it, the bulk text in memory-mapped segments."""
        world, job = await steady_job(tmp_path)
        store = open_graph_store(job.settings, for_queries=for_queries)
        text_dir = tmp_path / "text"
        text_dir.mkdir()

        def fresh() -> QueryIndex:
            if mapped:
                return QueryIndex.read(store, None, text_dir)
            return QueryIndex.from_snapshot(store.load())

        index = fresh()
        followed_rows = 0
        for step in range(1, 13):
            _fact(world, step)
            await job.run(world.view)
            latest = store.resolve(None)
            changes = store.changes(index.version, latest.version, split=BULK if mapped else None)
            followed_rows += sum(len(c.upserts) + len(c.deletes) for c in changes.values())
            index = follow(index, latest.meta, changes, lean=for_queries)
            assert_same(index, fresh(), step)
        assert followed_rows > 0
        assert not list(text_dir.iterdir())  # each segment's file is unlinked once mapped
        whole = QueryIndex.from_snapshot(open_graph_store(job.settings).load())
        assert {r.id: index.combined_degree(r) for r in index.relationships.values()} == {
            r.id: r.combined_degree for r in whole.relationships.values()
        }
        lists = {c.text_unit_ids for c in index.communities.values()}
        assert (lists == {()}) == for_queries
        assert all(
            r.full_content == "" and r.body() for r in map(index.full, index.reports.values())
        ) or not (for_queries)
        # the rows carry no bulk text (mapped or taken out of the rows read), and full() gives
        # it back as the graph tables hold it
        rows = open_graph_store(job.settings).load()
        described = [e for e in rows.entities if e.description]
        assert described
        for e in described:
            assert index.entities[e.id].description == ""
            assert index.full(index.entities[e.id]).description == e.description
        for u in rows.text_units:
            assert index.full(index.text_units[u.id]).text == u.text
        for r in rows.community_reports:
            got = index.full(index.reports[r.community])
            assert (got.summary, got.findings) == (r.summary, r.findings)

    async def test_a_deleted_document_leaves_every_map(self, tmp_path: Path) -> None:
        _, job = await steady_job(tmp_path)
        store = open_graph_store(job.settings)
        first = store.load()
        index = QueryIndex.from_snapshot(first)
        gone = first.text_units[0]
        smaller = dataclasses.replace(
            first,
            meta=dataclasses.replace(first.meta, version=first.meta.version + 1),
            text_units=first.text_units[1:],
            documents=tuple(d for d in first.documents if d.id != gone.document_id),
        )
        store.write(smaller)
        latest = store.resolve(None)
        followed = follow(index, latest.meta, store.changes(index.version, latest.version))
        assert_same(followed, QueryIndex.from_snapshot(store.load()), 0)
        assert gone.id not in followed.text_units and gone.id not in followed.unit_dates

    def test_an_entity_without_relationships_arrives(self, tmp_path: Path) -> None:
        store = GraphTables(tmp_path)
        store.write(versioned(world(), 1))
        store.write(grown(2))  # one more entity, related to nothing
        index = QueryIndex.from_snapshot(store.load(1))
        followed = follow(index, store.resolve(2).meta, store.changes(1, 2))
        assert_same(followed, QueryIndex.from_snapshot(store.load(2)), 2)
        assert followed.entities["newcomer 2"].degree == 0


class TestCommunityDays:
    """A community's mentions per day are derived (its members' added up): a followed index
    moves them by the members that left, joined or were mentioned again."""

    @pytest.mark.parametrize("for_queries", [False, True], ids=["whole rows", "query reader"])
    def test_members_that_move_or_are_mentioned_again_move_the_sums(
        self, tmp_path: Path, for_queries: bool
    ) -> None:
        first = dated(world())
        by_number = {c.community: c for c in first.communities}
        kuwait, saudi = entity_key("Kuwait"), entity_key("Saudi Arabia")
        # Kuwait leaves community 4 for 3; community 5 goes; Saudi Arabia is mentioned in a
        # third unit (its row changes, its communities' rows do not)
        moved = (
            dataclasses.replace(by_number[3], entity_ids=(*by_number[3].entity_ids, kuwait)),
            dataclasses.replace(
                by_number[4], entity_ids=tuple(k for k in by_number[4].entity_ids if k != kuwait)
            ),
        )
        second = dataclasses.replace(
            first,
            meta=dataclasses.replace(first.meta, version=2),
            communities=(
                by_number[1],
                dataclasses.replace(by_number[2], children=()),
                *moved,
            ),
            entities=tuple(
                dataclasses.replace(
                    e,
                    text_unit_ids=(*e.text_unit_ids, "chunk-3"),
                    mentions_per_day=(*e.mentions_per_day, ("1987-03-05", 1)),
                )
                if e.id == saudi
                else e
                for e in first.entities
            ),
        )
        writer = GraphTables(tmp_path)
        writer.write(first)
        writer.write(second)
        store = GraphTables(tmp_path, omit=QUERY_OMITS if for_queries else None)
        index = QueryIndex.from_snapshot(store.load(1))
        changes = store.changes(1, 2)
        assert {c.id for c in changes["communities"].upserts} == {"c-2", "c-3", "c-4"}
        followed = follow(index, store.resolve(2).meta, changes, lean=for_queries)
        assert_same(followed, QueryIndex.from_snapshot(store.load(2)), 2)
        days = {n: dict(d) for n, d in followed.community_daily.items()}
        assert days[3] == {date(1987, 3, 2): 2, date(1987, 3, 3): 1, date(1987, 3, 5): 2}
        assert days[4] == {date(1987, 3, 3): 1, date(1987, 3, 5): 1}
        assert days[1] == {date(1987, 3, 2): 2, date(1987, 3, 3): 2, date(1987, 3, 5): 3}
        assert 5 not in days
