"""Time windows on document time (``published_at``), never on the wall clock.

"last N days" is relative to the newest document of the snapshot: a 1987 news collection
queried today still has a "last week". The window holds whole days, both ends included, so
"last 7 days" with the newest document on March 10 is March 4 .. March 10.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta

from graph.trends.emerging import EmergingError, parse_document_time
from query.errors import TimeWindowError

_RELATIVE = re.compile(r"^\s*(?:last\s+)?(\d{1,5})\s*(d|days?|w|weeks?)\s*$", re.IGNORECASE)
DailyCounts = tuple[tuple[date, int], ...]


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """Whole days ``since`` .. ``until``, both included; ``None`` leaves that side open."""

    since: date | None = None
    until: date | None = None

    @property
    def bounded(self) -> bool:
        return self.since is not None or self.until is not None

    def contains(self, day: date | None) -> bool:
        """Undated records fall outside every bounded window (we cannot place them)."""
        if not self.bounded:
            return True
        if day is None:
            return False
        return (self.since is None or day >= self.since) and (
            self.until is None or day <= self.until
        )

    def count(self, daily: Iterable[tuple[date, int]]) -> int:
        """Mentions of a daily history that fall in the window."""
        return sum(n for d, n in daily if self.contains(d))

    def as_dict(self) -> dict[str, str | None]:
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }


@functools.lru_cache(maxsize=1 << 16)
def to_date(text: str | None) -> date | None:
    """The UTC day of an ISO 8601 time or date; ``None`` when empty or unreadable. Cached:
    an index holds a day per entity and community per day mentioned, so one ``date`` object
    per day is shared by all of them (and parsed once)."""
    if not text:
        return None
    try:
        return parse_document_time(text).date()
    except EmergingError:
        return None


def _relative_days(text: str) -> int | None:
    m = _RELATIVE.match(text)
    if m is None:
        return None
    n = int(m.group(1))
    return n * 7 if m.group(2).lower().startswith("w") else n


def _absolute(text: str) -> date:
    day = to_date(text.strip())
    if day is None:
        raise TimeWindowError(text, "not a date")
    return day


def parse_time_window(since: str | None, until: str | None, *, newest: date | None) -> TimeWindow:
    """Build a window from user input: ISO dates, or ``since="last N days"`` (also "N days",
    "last 2 weeks") counted back from ``newest``, the newest document's day."""
    start: date | None = None
    end: date | None = None
    if since and since.strip():
        days = _relative_days(since)
        if days is None:
            start = _absolute(since)
        elif days < 1:
            raise TimeWindowError(since, "a relative window needs at least one day")
        elif newest is None:
            start = None  # an empty snapshot: every window is the whole (empty) collection
        else:
            start = newest - timedelta(days=days - 1)
    if until and until.strip():
        if _relative_days(until) is not None:
            raise TimeWindowError(until, "'until' must be a date")
        end = _absolute(until)
    if start and end and start > end:
        raise TimeWindowError(f"{since} .. {until}", "'since' is after 'until'")
    return TimeWindow(start, end)
