"""What one message on ``documents`` turns into: the decision behind the chunker agent.

The agent (``agents.chunker``) reads a batch, looks rows up, sends and writes; what to do with
each message (dead-letter it, re-publish it under its id, leave it, or which chunks to retract
and add and which table row to write) is decided here, from the message and the document's
known row alone, so every case is tested without Kafka or faust.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from graph.errors import InvalidDocumentError
from graph.extraction.documents import document_to_obj, parse_document
from graph.model import Chunk, Document

NO_KEY_REASON = (
    "a message with no value deletes the document its key names, and this one has no key: "
    "use `kgrag delete ID`"
)


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """The documents table's row of one id: the absorbed version's hash and its chunk ids, or a
    deletion marker (no version, no chunks) that makes a repeated tombstone change nothing."""

    hash: str
    chunks: tuple[str, ...]
    deleted: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> DocumentRow:
        """From the table's stored form (``as_row``)."""
        return cls(
            hash=str(row.get("hash", "")),
            chunks=tuple(row.get("chunks", ())),
            deleted=bool(row.get("deleted", False)),
        )

    def as_row(self) -> dict[str, Any]:
        """The table's stored form: ``{"hash", "chunks"}``, plus ``"deleted": True`` on a
        deletion marker."""
        row: dict[str, Any] = {"hash": self.hash, "chunks": list(self.chunks)}
        if self.deleted:
            row["deleted"] = True
        return row


DELETED = DocumentRow(hash="", chunks=(), deleted=True)


@dataclass(frozen=True, slots=True)
class DocumentPlan:
    """What to send and write for one message, sent in field order: retractions, additions,
    then the document's change on ``graph-changes``. An empty plan changes nothing."""

    doc_id: str = ""
    dead_letter: str | None = None  # the reason: send the message to documents.dlq, only that
    rekey: bool = False  # re-publish the message under ``doc_id``, only that
    retract: tuple[str, ...] = ()  # chunk ids retracted on ``chunks``, keyed by ``doc_id``
    add: tuple[Chunk, ...] = ()  # chunks added on ``chunks``
    change: Document | None = None  # a new version, announced on ``graph-changes``
    removed: bool = False  # the document's removal, announced on ``graph-changes``
    row: DocumentRow | None = None  # the table row written for ``doc_id``; None: none


def document_hash(doc: Document) -> str:
    """The version's content hash: equal hashes are the same version (a redelivery)."""
    body = orjson.dumps(document_to_obj(doc), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(body).hexdigest()[:32]


def plan(
    key: str | None,
    value: bytes | None,
    known: Callable[[str], DocumentRow | None],
    *,
    max_chars: int,
    cut: Callable[[Document], list[Chunk]],
) -> DocumentPlan:
    """The plan for one message with message key ``key``: ``known`` gives a document id's
    current row (None: never seen), ``cut`` cuts a document into its chunks."""
    if value is None:
        return _removal(key, known)
    try:
        doc = parse_document(value, max_chars=max_chars)
    except InvalidDocumentError as e:
        return DocumentPlan(dead_letter=str(e))
    if key != doc.id:  # every version of an id must meet the same partition and table row
        return DocumentPlan(doc_id=doc.id, rekey=True)
    return _version(doc, known(doc.id), cut)


def _removal(doc_id: str | None, known: Callable[[str], DocumentRow | None]) -> DocumentPlan:
    """A tombstone: retract every chunk of the document and leave a deletion marker."""
    if not doc_id:
        return DocumentPlan(dead_letter=NO_KEY_REASON)
    row = known(doc_id)
    if row is None or row.deleted:
        return DocumentPlan(doc_id=doc_id)  # never indexed, or deleted already
    return DocumentPlan(doc_id=doc_id, retract=row.chunks, removed=True, row=DELETED)


def _version(
    doc: Document, known: DocumentRow | None, cut: Callable[[Document], list[Chunk]]
) -> DocumentPlan:
    """A document: a new version retracts the old chunks it lacks and adds the ones it brings."""
    digest = document_hash(doc)
    if known is not None and known.hash == digest:
        # a redelivery or a re-publish of the same version: nothing to send, but the row is
        # written again, so a changelog that missed it (a worker killed between its local
        # write and the changelog send) gets it back
        return DocumentPlan(doc_id=doc.id, row=known)
    pieces = cut(doc)
    new_ids = [c.id for c in pieces]
    old_ids = known.chunks if known is not None else ()
    kept, had = set(new_ids), set(old_ids)
    return DocumentPlan(
        doc_id=doc.id,
        retract=tuple(cid for cid in old_ids if cid not in kept),
        add=tuple(c for c in pieces if c.id not in had),
        change=doc,
        row=DocumentRow(hash=digest, chunks=tuple(new_ids)),
    )
