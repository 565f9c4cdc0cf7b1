"""Errors of the pure layer; agents route them to dead-letter topics with their reason."""

from __future__ import annotations


class GraphError(Exception):
    """Base of errors raised by graph/."""


class InvalidDocumentError(GraphError):
    """A document payload cannot be processed; ``reason`` says why, for the dead-letter topic."""

    def __init__(self, reason: str, doc_id: str | None = None) -> None:
        super().__init__(reason if doc_id is None else f"{doc_id}: {reason}")
        self.reason = reason
        self.doc_id = doc_id
