"""What the community job's leader has read from ``graph-changes`` and not yet handed to its
child, and when a run or a light commit is due (``agents.community.job`` polls it).

Pure bookkeeping, apart from the clock it is given: the debounce (quiet for ``debounce_s`` or
dirty for ``max_wait_s``) and the light-commit cadence live here so they are tested without
Kafka.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Feed:
    """Changes received and not yet sent to the child, and when the graph was first and last
    dirtied since the last run (a light commit sends the changes on but leaves the graph
    dirty: the run is still due)."""

    changes: list[bytes] = field(default_factory=list)
    offsets: dict[int, int] = field(default_factory=dict)  # partition -> next offset
    first_at: float | None = None
    last_at: float | None = None
    pending_since: float | None = None  # the oldest change not yet sent to the child

    def add(self, partition: int, offset: int, value: bytes) -> None:
        now = time.monotonic()
        self.changes.append(value)
        self.offsets[partition] = offset + 1
        self.first_at = self.first_at or now
        self.pending_since = self.pending_since or now
        self.last_at = now

    def mark_dirty(self, now: float) -> None:
        """The graph holds changes no run has taken in (a new term found them folded): a run
        follows the debounce as if they had just arrived."""
        self.first_at = self.first_at or now
        self.last_at = now

    def due(self, debounce_s: float, max_wait_s: float, now: float) -> bool:
        """Quiet for ``debounce_s`` or dirty for ``max_wait_s``."""
        if self.first_at is None or self.last_at is None:
            return False
        return now - self.last_at >= debounce_s or now - self.first_at >= max_wait_s

    def fresh_due(self, fresh_s: float, now: float) -> bool:
        """Time for a light commit: changes are waiting and either the feed paused (a fifth
        of ``fresh_s``: an article's rows arrive within a few hundred milliseconds, so they
        land in one commit) or the oldest has waited ``fresh_s``."""
        if fresh_s <= 0 or self.pending_since is None or self.last_at is None:
            return False
        return now - self.last_at >= fresh_s / 5 or now - self.pending_since >= fresh_s

    def take_pending(self) -> tuple[list[bytes], dict[int, int]]:
        """The changes for a light commit; the graph stays dirty until the run."""
        changes, offsets = self.changes, dict(self.offsets)
        self.changes, self.pending_since = [], None
        return changes, offsets

    def take(self) -> tuple[list[bytes], dict[int, int]]:
        changes, offsets = self.take_pending()
        self.first_at, self.last_at = None, None
        return changes, offsets
