"""Errors of the query service. Each says what was wrong with the request or the model."""

from __future__ import annotations

from core.errors import KgragError


class QueryError(KgragError):
    """Base of every error the query layer raises on purpose."""


class TimeWindowError(QueryError, ValueError):
    """A ``since``/``until`` value that is neither an ISO date nor "last N days"."""

    def __init__(self, value: str, reason: str) -> None:
        super().__init__(
            f"{reason}: {value!r}; use an ISO date such as 1987-03-01 or 'last 7 days'"
        )
        self.value = value


class EmptyQuestionError(QueryError, ValueError):
    """The question has no words to search for."""


class AllMapCallsFailedError(QueryError):
    """Every map call of a global search failed, so no answer can be given."""
