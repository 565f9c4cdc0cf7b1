"""Emerging score on document time: planted bursts rank first, size alone does not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph.trends.emerging import (
    EmergingError,
    Mention,
    emerging_scores,
    parse_document_time,
    rank_emerging,
)

START = datetime(1987, 2, 26, tzinfo=UTC)  # the Reuters sample's own era


def weekly(counts: list[int], start: datetime = START) -> list[Mention]:
    """One entry per day; week i spreads counts[i] mentions over its 7 days."""
    out: list[Mention] = []
    for week, total in enumerate(counts):
        for day in range(7):
            n = total // 7 + (1 if day < total % 7 else 0)
            if n:
                out.append((start + timedelta(days=7 * week + day, hours=12), n))
    return out


def histories() -> dict[str, list[Mention]]:
    return {
        "steady-big": weekly([300] * 10),
        "burst": weekly([3] * 9 + [60]),
        "quiet": weekly([2] * 10),
        "fading": weekly([40] * 9 + [5]),
        "new-tiny": weekly([0] * 9 + [2]),
    }


def order(hist: dict[str, list[Mention]], as_of: datetime | None = None) -> list[str]:
    return [s.community_id for s in rank_emerging(emerging_scores(hist, as_of=as_of))]


class TestRanking:
    def test_planted_burst_ranks_first(self) -> None:
        assert order(histories())[0] == "burst"

    def test_steady_big_community_is_not_emerging(self) -> None:
        scores = emerging_scores(histories())
        assert abs(scores["steady-big"].score) < 0.1 * scores["burst"].score
        assert order(histories()).index("steady-big") > order(histories()).index("new-tiny")

    def test_fading_community_scores_below_zero(self) -> None:
        assert emerging_scores(histories())["fading"].score < 0
        assert order(histories())[-1] == "fading"

    def test_tiny_new_community_does_not_outrank_a_real_surge(self) -> None:
        hist = {"new-2": weekly([0] * 9 + [2]), "surge": weekly([50] * 9 + [200])}
        assert order(hist) == ["surge", "new-2"]

    def test_counts_recent_earlier_and_expected(self) -> None:
        s = emerging_scores(histories())["burst"]
        assert (s.recent, s.earlier) == (60, 27)
        assert s.expected == pytest.approx(3.0, rel=0.05)
        assert s.as_of == START + timedelta(days=69, hours=12)


class TestDocumentTime:
    def test_independent_of_when_it_is_computed(self) -> None:
        """Shifting every document by 39 years changes nothing: only document time counts."""
        shift = timedelta(days=39 * 365)
        moved = {c: [(t + shift, n) for t, n in m] for c, m in histories().items()}
        a, b = emerging_scores(histories()), emerging_scores(moved)
        assert {c: s.score for c, s in a.items()} == pytest.approx(
            {c: s.score for c, s in b.items()}
        )

    def test_explicit_as_of_ignores_later_documents(self) -> None:
        cutoff = START + timedelta(days=63)  # end of week 9: the burst has not happened
        assert order(histories(), as_of=cutoff)[0] != "burst"

    def test_naive_times_are_utc(self) -> None:
        naive = {c: [(t.replace(tzinfo=None), n) for t, n in m] for c, m in histories().items()}
        a, b = emerging_scores(naive), emerging_scores(histories())
        assert {c: s.score for c, s in a.items()} == {c: s.score for c, s in b.items()}

    def test_parse_document_time(self) -> None:
        assert parse_document_time("1987-03-01T10:00:00Z") == datetime(1987, 3, 1, 10, tzinfo=UTC)
        assert parse_document_time("1987-03-01") == datetime(1987, 3, 1, tzinfo=UTC)
        with pytest.raises(EmergingError):
            parse_document_time("March 1st")

    def test_no_mentions_at_all(self) -> None:
        assert emerging_scores({}) == {}
        assert emerging_scores({"empty": []}) == {}

    def test_bad_window_is_rejected(self) -> None:
        with pytest.raises(EmergingError):
            emerging_scores(histories(), window_days=0)


def test_a_baseline_compares_shares_of_the_news_not_counts() -> None:
    # the whole news triples in the last week: a storyline that triples with it keeps its
    # share (score near 0 with the baseline, a surge without it); one that grows ten-fold
    # still surges
    base = weekly([1000] * 9 + [3000])
    h = {"with-the-news": weekly([70] * 9 + [210]), "ten-fold": weekly([14] * 9 + [140])}
    plain = emerging_scores(h, window_days=7)
    shared = emerging_scores(h, window_days=7, baseline=base)
    assert plain["with-the-news"].score > 1.0
    assert abs(shared["with-the-news"].score) < 0.1
    assert shared["with-the-news"].expected == pytest.approx(210, rel=0.02)
    assert shared["ten-fold"].score > 2.0
    # a baseline with nothing before the window leaves the time rate
    late = emerging_scores(h, window_days=7, baseline=weekly([0] * 9 + [3000]))
    assert late["with-the-news"].expected == plain["with-the-news"].expected
