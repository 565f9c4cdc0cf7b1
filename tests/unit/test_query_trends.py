"""Time windows on document time, and trends: emerging communities, new entities, timelines."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from query.activity import active_communities
from query.errors import TimeWindowError
from query.index import QueryIndex
from query.time_window import TimeWindow, parse_time_window
from query.trends import compare_trends, trends
from tests.unit.test_query_support import comm, ent, snapshot, unit, world

NEWEST = date(1987, 3, 31)


class TestParse:
    @pytest.mark.parametrize(
        ("since", "expected"),
        [
            ("last 7 days", date(1987, 3, 25)),
            ("7 days", date(1987, 3, 25)),
            ("last 1 day", NEWEST),
            ("last 2 weeks", date(1987, 3, 18)),
            ("1987-03-01", date(1987, 3, 1)),
            ("1987-03-01T23:30:00-05:00", date(1987, 3, 2)),  # UTC day
        ],
    )
    def test_since_forms(self, since: str, expected: date) -> None:
        assert parse_time_window(since, None, newest=NEWEST) == TimeWindow(expected, None)

    def test_relative_window_counts_from_the_newest_document_not_today(self) -> None:
        window = parse_time_window("last 7 days", None, newest=date(1987, 3, 10))
        assert window.since == date(1987, 3, 4)
        assert window.contains(date(1987, 3, 10)) and not window.contains(date(1987, 3, 3))

    @pytest.mark.parametrize(
        ("since", "until"),
        [
            ("yesterday", None),
            ("last 0 days", None),
            (None, "last 3 days"),
            ("1987-03-05", "1987-03-01"),
        ],
    )
    def test_bad_input_says_what_is_accepted(self, since: str | None, until: str | None) -> None:
        with pytest.raises(TimeWindowError):
            parse_time_window(since, until, newest=NEWEST)

    def test_open_window_holds_undated_records_bounded_does_not(self) -> None:
        assert TimeWindow().contains(None)
        assert not TimeWindow(since=date(1987, 1, 1)).contains(None)


class TestActivity:
    def test_active_communities_follow_their_members_mentions(self) -> None:
        index = QueryIndex.from_snapshot(world())
        late = parse_time_window("last 7 days", None, newest=index.newest)
        assert index.newest == NEWEST
        assert active_communities(index, late) == {2, 5}
        assert active_communities(index, TimeWindow()) is None


def news_world(*storylines: tuple[int, str, int, int, int], version: int = 1) -> QueryIndex:
    """One community of one entity per storyline ``(number, name, first day after 1 January
    1987, articles, articles per day)``; the entity is first seen on its first day."""
    start = date(1987, 1, 1)
    entities, units, communities = [], [], []
    for number, name, first, count, per_day in storylines:
        bare = ent(number, name, f"{name}, in the news.", [], 1)
        mine = [
            unit(
                number * 1000 + i,
                f"{name} news {i}.",
                str(start + timedelta(days=first + i // per_day)),
                [bare],
            )
            for i in range(count)
        ]
        seen = str(start + timedelta(days=first))
        e = ent(number, name, bare.description, [u.id for u in mine], 1, first_seen=seen)
        entities.append(e)
        units += mine
        communities.append(comm(number, 0, [e]))
    return QueryIndex.from_snapshot(
        snapshot(entities, units=units, communities=communities, version=version)
    )


def burst_world() -> QueryIndex:
    """A steady storyline mentioned every day for 60 days and a burst in the last 5."""
    return news_world((1, "Steady Corp", 0, 60, 1), (2, "Burst Ltd", 55, 20, 4))


class TestTrends:
    def test_planted_burst_ranks_first(self) -> None:
        index = burst_world()
        result = trends(index, parse_time_window("last 5 days", None, newest=index.newest))
        assert [c.community for c in result.communities] == [2, 1]
        assert result.communities[0].recent == 20 and result.communities[0].top_entities == (
            "Burst Ltd",
        )
        assert result.communities[0].score > result.communities[1].score

    def test_new_entities_are_those_first_seen_in_the_window(self) -> None:
        index = burst_world()
        result = trends(index, parse_time_window("last 5 days", None, newest=index.newest))
        assert [e.title for e in result.new_entities] == ["Burst Ltd"]
        assert result.new_entities[0].mentions == 20

    def test_a_window_before_the_burst_does_not_see_it(self) -> None:
        index = burst_world()
        result = trends(index, TimeWindow(date(1987, 1, 20), date(1987, 1, 26)))
        assert [c.community for c in result.communities] == [1]
        assert result.new_entities == ()

    def test_timelines_list_daily_mentions_in_the_window(self) -> None:
        index = burst_world()
        result = trends(
            index, TimeWindow(date(1987, 2, 25), date(1987, 2, 26)), entity_keys=["burst ltd"]
        )
        [timeline] = result.timelines
        assert timeline.points == (("1987-02-25", 4), ("1987-02-26", 4))

    def test_no_window_means_the_last_week_of_the_collection(self) -> None:
        index = QueryIndex.from_snapshot(world())
        result = trends(index, TimeWindow())
        assert (result.since, result.until, result.window_days) == ("1987-03-25", "1987-03-31", 7)
        # communities 2 and 5 (its child, with all of its members) are one storyline: one
        # row, at the finer level, the other reachable from it
        [row] = result.communities
        assert (row.community, row.folded, row.within) == (5, ("c-2",), ())


def before_the_burst() -> QueryIndex:
    """``burst_world`` as an earlier version knew it: 55 days of the steady storyline, no
    burst yet, and another storyline that flared in those last days and is gone since."""
    return news_world((1, "Steady Corp", 0, 55, 1), (3, "Faded plc", 50, 15, 3))


class TestCompare:
    def test_the_same_question_from_an_earlier_version_beside_now(self) -> None:
        now_index, then_index = burst_world(), before_the_burst()
        now = trends(now_index, parse_time_window("last 5 days", None, newest=now_index.newest))
        then_window = parse_time_window("last 5 days", None, newest=then_index.newest)
        result = compare_trends(now, then_index, then_window)
        compared = result.compared
        assert compared is not None and result.communities == now.communities
        # "last 5 days" is read against what that version had: its own last five days
        assert (compared.since, compared.until) == ("1987-02-20", "1987-02-24")
        burst, steady = (compared.then[c.id] for c in now.communities)
        assert (burst.existed, burst.rank, burst.size) == (False, None, 0)  # new since then
        assert (steady.existed, steady.rank, steady.recent) == (True, 2, 5)
        assert steady.score is not None
        [gone] = compared.dropped  # the storyline that led then and is not in the answer now
        assert (gone.id, gone.rank, gone.title, gone.recent) == ("c-3", 1, "Community 3", 15)
        assert result.as_dict()["compared"]["dropped"][0]["rank"] == 1

    def test_without_a_comparison_the_answer_says_none(self) -> None:
        index = burst_world()
        assert trends(index, TimeWindow()).as_dict()["compared"] is None
