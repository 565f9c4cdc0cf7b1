"""Emerging score: which communities are being talked about more than they used to be.

Time is document time (``published_at``), never the wall clock: the news may be from 1987, and
re-indexing the same documents next year must give the same scores. ``as_of`` defaults to the
newest document time in the histories.

For each community c, with a window of W days ending at ``as_of`` = T:

* ``recent``   r = mentions with T − W < t ≤ T
* ``earlier``  e = mentions with t ≤ T − W
* ``span``     s = (T − W) − (time of c's first mention), in days
* ``expected`` λ = e · W / max(s, W)  — c's own earlier rate, per window (0 for a new community)

    score = ln(1 + r) · ln((r + a) / (λ + b))        (a = b = 1 by default)

The ratio compares the recent count with the community's own earlier rate; the priors a and b
keep it finite for new communities and stop a handful of mentions from looking like an
infinite surge. The ratio is near 1 for a steady community (score ≈ 0, whatever its size) and
below 1 for a fading one (negative score). The ln(1 + r) factor weighs the evidence by volume,
so a brand-new community with 2 mentions (ln 3 · ln 3 ≈ 1.2) does not outrank a community that
went from 50 to 200 mentions a week (ln 201 · ln(201/51) ≈ 7.3).

With a ``baseline`` (the whole graph's mentions per day) the earlier rate is scaled by the
volume of news instead of by time: λ = e · R / E, where R is the baseline's mentions in the
window and E its mentions from c's first mention to the window's start. A community then
surges when its *share* of the news grows, so a busy week (or a quiet weekend before it) does
not lift (or sink) every storyline at once. Without a baseline, or when it has no mentions
before the window, the time rate above is used.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

Mention = tuple[datetime, int]  # (document time, number of mentions at that time)


class EmergingError(ValueError):
    """Parameters or times the score cannot be computed from."""


@dataclass(frozen=True, slots=True)
class EmergingScore:
    community_id: str
    score: float
    recent: int  # mentions in the window ending at as_of
    earlier: int  # mentions before the window
    expected: float  # the community's earlier rate, per window
    as_of: datetime


def parse_document_time(text: str) -> datetime:
    """ISO 8601 ``published_at`` as an aware UTC datetime (naive means UTC)."""
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise EmergingError(f"not an ISO 8601 document time: {text!r}") from e
    return _utc(parsed)


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


class _Cumulative:
    """Running totals of a mention history, for sums over any span in O(log n)."""

    def __init__(self, mentions: Iterable[Mention]) -> None:
        ordered = sorted((_utc(t), int(n)) for t, n in mentions if n > 0)
        self.times = [t for t, _ in ordered]
        self.sums = list(itertools.accumulate(n for _, n in ordered))

    def upto(self, t: datetime) -> int:
        """Mentions at or before ``t``."""
        i = bisect.bisect_right(self.times, t)
        return self.sums[i - 1] if i else 0

    def before(self, t: datetime) -> int:
        """Mentions strictly before ``t``."""
        i = bisect.bisect_left(self.times, t)
        return self.sums[i - 1] if i else 0


def _score_one(
    cid: str,
    mentions: list[Mention],
    as_of: datetime,
    window: timedelta,
    prior_recent: float,
    prior_expected: float,
    baseline: _Cumulative | None = None,
) -> EmergingScore:
    start = as_of - window
    recent = sum(n for t, n in mentions if start < t <= as_of)
    past = [(t, n) for t, n in mentions if t <= start]
    earlier = sum(n for _, n in past)
    expected = 0.0
    if past:
        first = min(t for t, _ in past)
        span = max(start - first, window)
        expected = earlier * (window / span)
        if baseline is not None:
            in_window = baseline.upto(as_of) - baseline.upto(start)
            before = baseline.upto(start) - baseline.before(first)
            if in_window > 0 and before > 0:
                expected = earlier * in_window / before
    ratio = (recent + prior_recent) / (expected + prior_expected)
    score = math.log1p(recent) * math.log(ratio)
    return EmergingScore(cid, score, recent, earlier, expected, as_of)


def emerging_scores(
    histories: Mapping[str, Iterable[Mention]],
    *,
    window_days: float = 7.0,
    as_of: datetime | None = None,
    prior_recent: float = 1.0,
    prior_expected: float = 1.0,
    baseline: Iterable[Mention] | None = None,
) -> dict[str, EmergingScore]:
    """Score every community from its mention history (see the module docstring);
    ``baseline`` is the whole graph's mentions over time, to compare shares of the news."""
    if window_days <= 0 or prior_recent <= 0 or prior_expected <= 0:
        raise EmergingError("window_days and both priors must be positive")
    clean = {
        cid: [(_utc(t), int(n)) for t, n in mentions if n > 0]
        for cid, mentions in histories.items()
    }
    newest = [t for mentions in clean.values() for t, _ in mentions]
    if as_of is None:
        if not newest:
            return {}
        as_of = max(newest)
    end = _utc(as_of)
    window = timedelta(days=window_days)
    base = None if baseline is None else _Cumulative(baseline)
    return {
        cid: _score_one(cid, mentions, end, window, prior_recent, prior_expected, base)
        for cid, mentions in clean.items()
    }


def rank_emerging(scores: Mapping[str, EmergingScore]) -> list[EmergingScore]:
    """Highest score first; ties by more recent mentions, then by id (deterministic)."""
    return sorted(scores.values(), key=lambda s: (-s.score, -s.recent, s.community_id))
