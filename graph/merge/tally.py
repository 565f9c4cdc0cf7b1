"""Bounded counters that stay invertible: the building blocks of merged graph rows.

A hub entity is named in thousands of chunks, but its table row must stay a few KB, so every
per-value count it keeps is capped. Two structures, both pure and immutable:

``Tally`` — value → number of live chunks supporting it, at most ``cap`` values, plus
``overflow``, the supports of values not kept. Two rules decide which values a full tally keeps:

- ``sample_add`` (descriptions, claims): the kept values are the ``cap`` distinct values of
  smallest *rank* (a stable 64-bit hash of the text), each with its exact count — a bottom-k
  sample, which is a function of the evidence alone: any order of the same adds gives the
  same tally. That matters because a merger's input interleaves many chunk partitions, and a
  replay after a crash interleaves them differently; the kept descriptions feed summaries and
  report materiality, so they must not depend on it. A newcomer of smaller rank than the
  largest kept value evicts it (its count goes to ``overflow``); once evicted, a value never
  comes back while only adds arrive, since the largest kept rank only goes down.
- ``tally_add`` (display names, types): a value confirmed by several chunks is never pushed
  out by a newcomer ("keep the most supported", so ``most_common`` stays right); among
  single-support values the kept ones are those of smallest rank. More than ``cap`` distinct
  names or types is rare, and only then can the kept set depend on arrival order.

Removing a value decrements it if kept, else decrements ``overflow``. When that removes a
kept value of a sample while ``overflow`` still counts values left out (``lost_sample_slot``),
the sample alone cannot tell which value takes the freed place: the caller refolds it from
the row's live evidence with ``sample_of``, which gives the tally an insert-only stream of
that evidence would have built. With that refold a sample is a function of the live evidence
under any sequence of adds and removes.

``DayWindow`` — mentions per day (date ordinals) for the ``cap`` most recent distinct days;
mentions on older days are folded into ``older`` with the range of their days
(``older_first``/``older_last``). A new day past a full window evicts the oldest day.

Exactness. Totals are always exact: ``sum(counts) + overflow`` (and ``sum(days) + older``)
equals the number of live supports under any sequence of adds and removes. Below the caps
every count is exact and ``remove(add(x)) == x``. At the caps some detail is lost, on
purpose: an evicted value or day keeps only its count in ``overflow``/``older`` and does not
come back when the newcomer that evicted it is removed. For samples the refold above puts it
back; for ``tally_add`` tallies (names, types) a freed slot goes to the next value that
arrives; ``older_first`` is a lower bound (and ``older_last`` an upper bound) of the folded
days until ``older`` drops to zero. Insert-only streams keep the same window and the same
``sample_add`` tally whatever their order.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date

from graph.merge.errors import RetractionError
from graph.pickling import by_fields


def rank(value: str) -> int:
    """Stable priority of a value among equals (Python's ``hash`` differs per process)."""
    return int.from_bytes(hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest(), "big")


@by_fields
@dataclass(frozen=True, slots=True)
class Tally:
    """Capped multiset of strings; ``items`` sorted by value so equal tallies compare equal."""

    items: tuple[tuple[str, int], ...] = ()
    overflow: int = 0

    def count(self, value: str) -> int:
        return dict(self.items).get(value, 0)

    @property
    def total(self) -> int:
        return sum(c for _, c in self.items) + self.overflow

    def most_common(self) -> str | None:
        """The most supported kept value; ties go to the smallest value (deterministic)."""
        if not self.items:
            return None
        return min(self.items, key=lambda item: (-item[1], item[0]))[0]

    def values(self) -> tuple[str, ...]:
        return tuple(v for v, _ in self.items)

    def first(self) -> str:
        """``values()[0]`` (the smallest kept value), "" when empty, without building them."""
        return self.items[0][0] if self.items else ""


def _weakest(counts: dict[str, int]) -> str:
    """Fewest supports first, then largest rank: the first value to give way."""
    return min(counts, key=lambda v: (counts[v], -rank(v)))


def _counted(tally: Tally, value: str, cap: int) -> tuple[dict[str, int], bool]:
    """The counts with ``value`` added when it is kept already or there is room, and whether
    it was (else the caller decides what a full tally gives way to)."""
    counts = dict(tally.items)
    if value in counts:
        counts[value] += 1
    elif len(counts) < cap:
        counts[value] = 1
    else:
        return counts, False
    return counts, True


def tally_add(tally: Tally, value: str, *, cap: int) -> Tally:
    """One more chunk supports ``value``."""
    counts, placed = _counted(tally, value, cap)
    overflow = tally.overflow
    if not placed:
        weakest = _weakest(counts) if counts else None
        if weakest is not None and counts[weakest] == 1 and rank(value) < rank(weakest):
            del counts[weakest]
            counts[value] = 1
        overflow += 1  # either the newcomer or the value it evicted is no longer kept
    return Tally(tuple(sorted(counts.items())), overflow)


def sample_add(tally: Tally, value: str, *, cap: int) -> Tally:
    """One more chunk supports ``value``; a full tally keeps the ``cap`` values of smallest
    rank whatever their counts (see the module docstring)."""
    counts, placed = _counted(tally, value, cap)
    overflow = tally.overflow
    if not placed:
        ranked = max(counts, key=rank, default=None)
        if ranked is not None and rank(value) < rank(ranked):
            overflow += counts.pop(ranked)
            counts[value] = 1
        else:
            overflow += 1
    return Tally(tuple(sorted(counts.items())), overflow)


def sample_of(values: Iterable[str], *, cap: int) -> Tally:
    """The ``sample_add`` tally of ``values`` (one entry per supporting chunk), built at once:
    the ``cap`` distinct values of smallest rank with their counts, the rest in ``overflow``."""
    counts = Counter(values)
    kept = sorted(counts, key=rank)[:cap]
    overflow = sum(counts.values()) - sum(counts[v] for v in kept)
    return Tally(tuple(sorted((v, counts[v]) for v in kept)), overflow)


def lost_sample_slot(before: Tally, after: Tally) -> bool:
    """True when a removal took a kept value out of a sample that left values out: the value
    that now belongs in its place is known only to the row's evidence (see ``sample_of``)."""
    return after.overflow > 0 and len(after.items) < len(before.items)


def tally_remove(tally: Tally, value: str) -> Tally:
    """One chunk no longer supports ``value``."""
    counts = dict(tally.items)
    overflow = tally.overflow
    if value in counts:
        counts[value] -= 1
        if counts[value] == 0:
            del counts[value]
    elif overflow > 0:
        overflow -= 1
    else:
        raise RetractionError(f"value {value[:80]!r} was never counted")
    return Tally(tuple(sorted(counts.items())), overflow)


@by_fields
@dataclass(frozen=True, slots=True)
class DayWindow:
    """Mentions per day for the most recent days, older mentions folded into one bucket."""

    days: tuple[tuple[int, int], ...] = ()  # (date ordinal, mentions), ascending
    older: int = 0
    older_first: int | None = None
    older_last: int | None = None

    @property
    def total(self) -> int:
        return sum(c for _, c in self.days) + self.older

    @property
    def first_seen(self) -> date | None:
        if self.older and self.older_first is not None:
            return date.fromordinal(self.older_first)
        return date.fromordinal(self.days[0][0]) if self.days else None

    @property
    def last_seen(self) -> date | None:
        if self.days:
            return date.fromordinal(self.days[-1][0])
        if self.older and self.older_last is not None:
            return date.fromordinal(self.older_last)
        return None

    def per_day(self) -> dict[date, int]:
        return {date.fromordinal(d): c for d, c in self.days}


def _fold_older(window: DayWindow, day: int, mentions: int) -> tuple[int, int, int]:
    first = day if window.older_first is None else min(window.older_first, day)
    last = day if window.older_last is None else max(window.older_last, day)
    return window.older + mentions, first, last


def _find(days: tuple[tuple[int, int], ...], day: int) -> tuple[int, bool]:
    """Index where ``day`` is or would go, and whether it is there (days are sorted)."""
    i = bisect_left(days, (day, 0))
    return i, i < len(days) and days[i][0] == day


def day_add(window: DayWindow, day: int, *, cap: int) -> DayWindow:
    """One more mention on ``day`` (a date ordinal)."""
    days = window.days
    i, found = _find(days, day)
    if found:
        days = (*days[:i], (day, days[i][1] + 1), *days[i + 1 :])
        return replace(window, days=days)
    if len(days) < cap:
        return replace(window, days=(*days[:i], (day, 1), *days[i:]))
    if i == 0:  # older than the whole full window
        older, first, last = _fold_older(window, day, 1)
        return DayWindow(days, older, first, last)
    oldest, count = days[0]
    older, first, last = _fold_older(window, oldest, count)
    return DayWindow((*days[1:i], (day, 1), *days[i:]), older, first, last)


def day_remove(window: DayWindow, day: int) -> DayWindow:
    """One mention on ``day`` retracted."""
    days = window.days
    i, found = _find(days, day)
    if found:
        count = days[i][1] - 1
        kept = ((day, count),) if count else ()
        return replace(window, days=(*days[:i], *kept, *days[i + 1 :]))
    if window.older > 0:
        if window.older == 1:
            return DayWindow(days)
        return replace(window, older=window.older - 1)
    raise RetractionError(f"no mention on {date.fromordinal(day).isoformat()} to retract")
