"""Errors of the merge rules (``graph/merge/contributions.py``, ``graph/merge/rules.py``, the
codec).

They signal input the merger must not absorb (a malformed extraction item, a stored row that
does not decode) or a broken invariant (retracting what was never applied); the merger routes
the first two to a dead-letter topic and treats the last as a bug.
"""

from __future__ import annotations

from graph.errors import GraphError


class MergeError(GraphError):
    """Base of the merge rules' errors."""


class InvalidContributionError(MergeError):
    """An extraction item cannot become a contribution (bad date, non-finite strength…)."""


class RetractionError(MergeError):
    """A retraction removes more than was applied: the stored rows are inconsistent."""


class RecordDecodeError(MergeError):
    """A stored or published dict is not a valid merge record; ``kind`` names the record."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"cannot decode {kind}: {reason}")
        self.kind = kind
        self.reason = reason
