"""Storylines: the hierarchy folded into one row per story (``graph.trends.storylines``), scored on
documents against the news's volume, titled by what its top documents share, and the
community job's bounded headline digest that repeats a storyline only when it grows."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta
from pathlib import Path

from graph.communities.lineage import kinds_shown
from graph.trends.story_detail import describe, key_phrase, same_name
from graph.trends.storylines import (
    Storyline,
    StoryNode,
    fold,
    newsworthy,
    storyline_groups,
    window_documents,
)
from kgrag.cli_query import format_event
from tests.unit.test_community_run import steady_job

SINCE, END = date(1987, 3, 24), date(1987, 3, 26)
EARLY = date(1987, 3, 1)


def days(before: int, during: int) -> tuple[tuple[date, int], ...]:
    """``before`` mentions a day over 23 days up to the 23rd, ``during`` a day in the window."""
    early = [(EARLY + timedelta(days=i), before) for i in range(23) if before]
    late = [(SINCE + timedelta(days=i), during) for i in range(3) if during]
    return tuple(early + late)


def node(
    n: int, level: int, parent: int, members: Iterable[str], daily: tuple[tuple[date, int], ...]
) -> StoryNode:
    return StoryNode(n, f"c-{n}", level, parent, frozenset(members), daily)


def letters(prefix: str, k: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(k)]


# a world of news: a steady storyline (S, its child S1 holding most of it), a surging one
# (T, with a child T1 holding most of it and a small child T2), all at the same volume
STEADY = node(1, 0, -1, letters("s", 10), days(20, 20))
STEADY_CHILD = node(2, 1, 1, letters("s", 8), days(16, 16))
SURGE = node(3, 0, -1, letters("t", 10), days(2, 12))
SURGE_CHILD = node(4, 1, 3, letters("t", 7), days(2, 11))
SURGE_SMALL = node(5, 1, 3, letters("t", 10)[7:], days(0, 1))
NODES = [STEADY, STEADY_CHILD, SURGE, SURGE_CHILD, SURGE_SMALL]
DOCS = {1: 30, 2: 25, 3: 20, 4: 18, 5: 2}


def test_a_child_holding_most_of_its_parent_continues_its_storyline() -> None:
    groups = storyline_groups(NODES)
    assert groups == {1: 1, 2: 1, 3: 3, 4: 3, 5: 5}


def test_rows_are_distinct_storylines_shown_at_their_best_level() -> None:
    rows = fold(NODES, SINCE, END, limit=10, documents=DOCS)
    shown = [r.node.community for r in rows]
    # the surge first; its levels are one row, its small child is inside it, not a row
    assert shown[0] in (3, 4)
    assert {r.node.community for r in rows}.isdisjoint({5})
    top = rows[0]
    assert set(top.folded) == {"c-3", "c-4"} - {top.node.id}
    assert "c-5" in top.within
    # the steady storyline is one row at most, never two levels of it
    assert len([c for c in shown if c in (1, 2)]) <= 1
    members = [r.node.members for r in rows]
    assert all(a.isdisjoint(b) for i, a in enumerate(members) for b in members[i + 1 :])
    # without reach, the same rows (what they hold is not collected past the last)
    brief = fold(NODES, SINCE, END, limit=1, documents=DOCS, reach=False)
    assert [r.node.community for r in brief] == shown[:1]
    # one level of the hierarchy: no folding, the level's communities alone
    assert [r.node.community for r in fold(NODES, SINCE, END, limit=10, level=1, documents=DOCS)]
    assert {r.node.level for r in fold(NODES, SINCE, END, limit=10, level=1, documents=DOCS)} == {1}


def test_a_steady_storyline_in_a_busy_window_is_not_news() -> None:
    # the whole news doubles in the window (24 a day, then 52): a storyline that doubles
    # with it keeps its share; one that quadruples surges
    busy = [
        node(1, 0, -1, letters("s", 10), days(20, 40)),
        node(3, 0, -1, letters("t", 10), days(2, 4)),
        node(6, 0, -1, letters("u", 10), days(2, 8)),
    ]
    rows = fold(busy, SINCE, END, limit=10, documents={1: 60, 3: 6, 6: 12})
    by_number = {r.node.community: r for r in rows}
    assert rows[0].node.community == 6 and by_number[6].ratio > 1.5
    assert 0.85 < by_number[1].ratio < 1.0 and by_number[1].score < 0
    assert newsworthy(rows, min_documents=3, min_ratio=1.5) == [rows[0]]


def test_one_article_naming_many_members_is_not_a_storyline() -> None:
    one_article = node(7, 0, -1, letters("x", 12), days(0, 8))  # 24 mentions, one document
    many = node(8, 0, -1, letters("y", 3), days(1, 4))  # 12 mentions in nine documents
    news = [STEADY, one_article, many]
    rows = fold(news, SINCE, END, limit=2, documents={1: 30, 7: 1, 8: 9})
    assert [r.node.community for r in rows] == [8, 7]
    assert newsworthy(rows, min_documents=3, min_ratio=1.5) == [rows[0]]


def test_window_documents_counts_each_document_once_per_community() -> None:
    units = [
        ("d1", date(1987, 3, 24), ["a", "b"]),
        ("d1", date(1987, 3, 24), ["a"]),  # a second unit of the same document
        ("d2", date(1987, 3, 25), ["b"]),
        ("d3", date(1987, 3, 20), ["a"]),  # before the window
        ("d4", None, ["a"]),  # undated
    ]
    member_of = {"a": [1, 10], "b": [1, 11]}
    assert window_documents(units, member_of, SINCE, END) == {1: 2, 10: 1, 11: 2}


def test_the_key_phrase_is_what_most_headlines_share() -> None:
    titles = [
        "JAPAN WARNS ON CHIP TARIFFS",
        "U.S. SETS CHIP TARIFFS ON JAPAN",
        "Chip tariffs would hurt trade, Nakasone says",
    ]
    assert key_phrase(titles) == "Chip Tariffs"
    # names already in the title and the words every headline has are not the phrase
    assert key_phrase(titles, exclude=["Chip Tariffs Group"]) == "Japan"
    assert key_phrase(["Bank says profit rose", "Bank says profit fell"]) == "Bank"
    assert key_phrase(["One story", "Another thing"]) == ""
    assert key_phrase(["TREASURY'S BAKER SEES DOLLAR", "TREASURY'S BAKER ON TRADE"]) == (
        "Treasury's Baker"
    )


class Lookup:
    """A tiny graph: three documents in the window, one before it."""

    titles = {"a": "Aurora Launch", "b": "Kiruna Spaceport", "c": "Orbit Insurers"}
    units = {
        "a": ["u1", "u2", "u3"],
        "b": ["u1", "u2"],
        "c": ["u3", "u0"],
    }
    docs = {
        "u0": ("d0", date(1987, 3, 2)),
        "u1": ("d1", date(1987, 3, 24)),
        "u2": ("d2", date(1987, 3, 25)),
        "u3": ("d3", date(1987, 3, 26)),
    }
    headlines = {
        "d0": "Insurers meet",
        "d1": "ROCKET TEST FIRE SET",
        "d2": "Rocket test fire delayed",
        "d3": "Insurers price rocket risk",
    }

    def entity_title(self, key: str) -> str | None:
        return self.titles.get(key)

    def entity_daily(self, key: str) -> tuple[tuple[date, int], ...]:
        return tuple(sorted((self.docs[u][1], 1) for u in self.units[key]))

    def entity_first_seen(self, key: str) -> date | None:
        return min(self.docs[u][1] for u in self.units[key])

    def entity_units(self, key: str) -> list[str]:
        return self.units[key]

    def unit_document(self, unit: str) -> tuple[str, date | None] | None:
        return self.docs.get(unit)

    def document_title(self, document: str) -> str:
        return self.headlines[document]


def test_a_storyline_is_described_by_its_top_documents() -> None:
    story = node(1, 0, -1, ["a", "b", "c"], ((date(1987, 3, 2), 1), (SINCE, 2), (END, 2)))
    row = fold([story], SINCE, END, limit=1, documents={1: 3})[0]
    detail = describe(row, Lookup(), SINCE, END)
    # d1 and d2 name two members each, d3 two as well but later: the newest first on ties
    assert [d.id for d in detail.top_documents] == ["d3", "d2", "d1"]
    assert [d.mentions for d in detail.top_documents] == [2, 2, 2]
    # shared by most top documents, then the largest share of their mentions in the window
    assert detail.title == "Aurora Launch, Kiruna Spaceport: Rocket test"
    assert [m.key for m in detail.new_entities] == ["a", "b"]  # c was seen on the 2nd
    # a report an LLM wrote names the storyline
    titled = fold(
        [StoryNode(1, "c-1", 0, -1, story.members, story.daily, "Kiruna's first orbital launch")],
        SINCE,
        END,
        limit=1,
        documents={1: 3},
    )[0]
    assert describe(titled, Lookup(), SINCE, END).title == "Kiruna's first orbital launch"


async def test_the_job_headlines_a_new_storyline_once_until_it_grows(tmp_path: Path) -> None:
    world, job = await steady_job(tmp_path)  # every base article is from 2 March
    names = ["Aurora Launch", "Kiruna Spaceport", "Orbit Insurers", "Ilse Varga"]

    def article(i: int, day: str) -> None:
        a, b = names[i % 4], names[(i + 1) % 4]
        world.say(
            f"space-{i}",
            [(a, f"{a} prepared a launch."), (b, f"{b} backed the launch.")],
            [(a, b, f"{a} works with {b} on the launch.")],
            day=day,
        )

    for i in range(6):  # six articles on a brand-new storyline: significant (G 15.2)
        article(i, "1987-03-09")
    first = await job.run(world.view)
    assert not [e for e in first.events if e["kind"] == "headline"]  # beside the events
    headlines = first.headlines
    assert len(headlines) == 1, headlines
    h = headlines[0]
    assert h["rank"] == 1 and not h["why"]["again"]
    assert h["why"]["documents"] == 6 and h["why"]["expected_documents"] == 0
    assert h["why"]["significance"] > 10.83
    assert (h["why"]["since"], h["why"]["until"]) == ("1987-03-07", "1987-03-09")
    assert {d["id"] for d in h["top_documents"]} <= {f"space-{i}" for i in range(6)}
    assert len(h["top_documents"]) == 5
    assert {e["title"] for e in h["new_entities"]} <= set(names) and h["new_entities"]

    # nothing new about it: no headline; one more article is not growth enough
    world.say("quiet", [("Vega A 2", "Vega A 2 opened a branch.")], day="1987-03-02")
    assert not (await job.run(world.view)).headlines
    article(6, "1987-03-09")
    assert not (await job.run(world.view)).headlines
    # half as many documents again: headlined again, saying so
    article(7, "1987-03-09")
    article(8, "1987-03-09")
    again = (await job.run(world.view)).headlines
    assert len(again) == 1 and again[0]["why"]["again"] and again[0]["why"]["documents"] == 9


async def test_headlines_are_bounded_per_run(tmp_path: Path) -> None:
    world, job = await steady_job(tmp_path, headlines_per_run=1)
    for story in ("Aurora", "Borealis"):
        for i in range(6):
            a, b = f"{story} Alpha", f"{story} Beta {i}"
            world.say(f"{story}-{i}", [(a, a), (b, b)], [(a, b, f"{a} and {b}")], day="1987-03-09")
    run = await job.run(world.view)
    assert len(run.headlines) == 1
    # the next run does not work down the list: the other storyline is not on the front page
    world.say("quiet", [("Vega A 2", "Vega A 2 opened a branch.")], day="1987-03-02")
    assert (await job.run(world.view)).headlines == []
    off = await steady_job(tmp_path / "off", headlines_per_run=0)
    for i in range(6):
        a, b = "Aurora Alpha", f"Aurora Beta {i}"
        off[0].say(f"aurora-{i}", [(a, a), (b, b)], [(a, b, f"{a} and {b}")], day="1987-03-09")
    assert not (await off[1].run(off[0].view)).headlines


def test_readers_see_headlines_unless_they_ask_for_more() -> None:
    assert kinds_shown(None, raw=False) == {"headline"}
    assert kinds_shown([], raw=True) is None  # every kind
    assert kinds_shown(["emerged", "grew"], raw=False) == {"emerged", "grew"}


def test_watch_prints_a_headline_with_why() -> None:
    text = format_event(
        {
            "kind": "headline",
            "rank": 2,
            "title": "Bank of Japan, Satoshi Sumita: Discount Rate",
            "snapshot_version": 7,
            "why": {
                "documents": 28,
                "expected_documents": 3.8,
                "ratio": 6.0,
                "since": "1987-03-24",
                "until": "1987-03-26",
            },
            "new_entities": [{"title": "Chris Bourdain"}],
            "top_documents": [{"id": "reuters-9", "title": "JAPAN CUTS RATE", "day": "1987-03-25"}],
        }
    ).plain
    assert text.startswith("headline") and "#2 Bank of Japan, Satoshi Sumita: Discount Rate" in text
    assert "28 articles 1987-03-24..1987-03-26, 3.8 expected (x6.0)" in text
    assert "new: Chris Bourdain" in text and "1987-03-25  JAPAN CUTS RATE (reuters-9)" in text


def test_a_headline_surge_must_be_unlikely_by_chance() -> None:
    def row(documents: int, expected: float) -> Storyline:
        return Storyline(STEADY, 1.0, documents, 10, expected, documents, expected)

    # four articles on a brand-new storyline could be chance (G 8.1), five are not (G 11.5)
    assert 8.0 < row(4, 0.0).significance < 10.83 < row(5, 0.0).significance < 12.0
    # a big storyline at twice its share is more significant than a small one at six times
    assert row(60, 29.0).significance > row(6, 0.0).significance
    assert row(5, 9.0).significance == 0.0  # below expectation
    found = newsworthy(
        [row(6, 0.0), row(4, 0.0), row(60, 29.0)],
        min_documents=3,
        min_ratio=1.5,
        min_significance=10.83,
    )
    assert [r.documents for r in found] == [60, 6]


def test_a_title_names_a_thing_once() -> None:
    assert same_name("EC", "European Community") and same_name("European Community", "E.C.")
    assert same_name("Apple", "Apple Computer")
    assert not same_name("Kuwait", "United Arab Emirates")
    # a share's ticker is not the phrase of a storyline
    assert key_phrase(["Apple Computer <AAPL> upgrades Macintosh", "<AAPL> Macintosh sales"]) == (
        "Macintosh"
    )
