"""Errors of the pure layer; agents route them to dead-letter topics with their reason.

Also the base that lets every project exception cross a process boundary: the community job
runs its work in a ``ProcessPoolExecutor`` child, and whatever that child raises reaches the
parent as a pickle. It lives here, on the bottom floor, so ``graph/`` and the layers above it
share one definition.
"""

from __future__ import annotations

from typing import Any


def rebuild_error(
    cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]
) -> BaseException:
    """An exception of ``cls`` with ``args`` and attributes ``state``, made without calling
    ``__init__``: its parameters (``reason, *, retryable``) need not be its ``args``."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class PicklableError(Exception):
    """An exception that pickles as its type, ``args`` and attributes.

    Python's default pickling calls ``cls(*args)`` on the way back, which fails (or sets the
    wrong attributes) for any subclass whose ``__init__`` takes other arguments than the
    message it passes on. Reconstructing from state works for every subclass, present and
    future, and keeps notes (``add_note``) and attributes set after construction.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (rebuild_error, (type(self), self.args, dict(self.__dict__)))


class GraphError(PicklableError):
    """Base of errors raised by graph/."""


class InvalidDocumentError(GraphError):
    """A document payload cannot be processed; ``reason`` says why, for the dead-letter topic."""

    def __init__(self, reason: str, doc_id: str | None = None) -> None:
        super().__init__(reason if doc_id is None else f"{doc_id}: {reason}")
        self.reason = reason
        self.doc_id = doc_id
