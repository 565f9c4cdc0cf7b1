"""Payloads of the internal topics, as orjson envelopes around graph/'s dataclasses.

Every internal topic carries raw bytes encoded here, so each payload is declared once and
decoded with the same checks wherever it is read. ``op`` is ``add`` or ``retract``: a
retraction withdraws what one chunk contributed (a corrected document).

- ``chunks`` (key: document id): ``{"op": "add", "chunk"}`` or
  ``{"op": "retract", "chunk_id", "document_id"}``
- ``extractions`` (key: document id): ``{"op": "add", "extraction"}`` or a retraction as above
- ``entity-items``, ``relationship-items``, ``claim-items`` (key: row key):
  ``{"op": "add", "contribution"}`` or ``{"op": "retract", "key", "chunk_id", "document_id"}``
- ``graph-changes`` (key: row key, chunk id or document id): ``{"kind": "change", "change"}``,
  ``{"kind": "document", "document"}`` or ``{"kind": "document_removed", "id"}``

The bodies are ``graph.merge.codec``'s forms, derived from the dataclasses' type hints; only
the envelopes are written here. An extraction keeps its compact form: each mention is the
list of its field values without the trailing ``chunk_id``, which is the chunk's own, and the
tokens it spent are ``"tokens": [prompt, completion]``, left out when both are 0 (offline, or
every answer cached), so such a record is written as before tokens were counted and an older
record reads as 0. A body that does not decode raises ``RecordDecodeError``, reported as
``PayloadError``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

import orjson

from graph.errors import GraphError
from graph.extraction.documents import document_to_obj
from graph.merge.changes import DocumentRemoved, GraphChange
from graph.merge.codec import from_dict, to_dict
from graph.merge.contributions import (
    ClaimContribution,
    EntityContribution,
    RelationshipContribution,
)
from graph.model import (
    Chunk,
    ChunkExtraction,
    ClaimMention,
    Document,
    EntityMention,
    RelationshipMention,
)

Op = Literal["add", "retract"]
ItemKind = Literal["entity", "relationship", "claim"]


class PayloadError(GraphError):
    """An internal payload did not decode; the message goes to a dead-letter topic."""


def _loads(raw: bytes) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise PayloadError(f"not JSON: {e}") from e
    if not isinstance(obj, dict):
        raise PayloadError(f"expected an object, got {type(obj).__name__}")
    return obj


@dataclass(frozen=True, slots=True)
class Retraction:
    chunk_id: str
    document_id: str


# ---- chunks ---------------------------------------------------------------------------


def encode_chunk_add(chunk: Chunk) -> bytes:
    return orjson.dumps({"op": "add", "chunk": to_dict(chunk)})


def encode_retraction(chunk_id: str, document_id: str) -> bytes:
    return orjson.dumps({"op": "retract", "chunk_id": chunk_id, "document_id": document_id})


def decode_chunk_event(raw: bytes) -> Chunk | Retraction:
    obj = _loads(raw)
    try:
        if obj.get("op") == "retract":
            return Retraction(str(obj["chunk_id"]), str(obj["document_id"]))
        return from_dict(Chunk, obj["chunk"])
    except (KeyError, GraphError) as e:
        raise PayloadError(f"bad chunk event: {e}") from e


# ---- extractions ----------------------------------------------------------------------


# A mention is stored as the list of its fields but the last, ``chunk_id``: the chunk's own id.
_MENTIONS = {
    "entities": EntityMention,
    "relationships": RelationshipMention,
    "claims": ClaimMention,
}


def extraction_to_dict(x: ChunkExtraction) -> dict[str, Any]:
    mentions = {k: [list(to_dict(m).values())[:-1] for m in getattr(x, k)] for k in _MENTIONS}
    body: dict[str, Any] = {
        "chunk": to_dict(x.chunk),
        **mentions,
        "mode": x.mode,
        "dropped": x.dropped_records,
    }
    if x.prompt_tokens or x.completion_tokens:
        body["tokens"] = [x.prompt_tokens, x.completion_tokens]
    return body


def _tokens(d: dict[str, Any]) -> dict[str, Any]:
    """The extraction's ``[prompt, completion]`` tokens as fields; absent (written before
    tokens were counted, or none spent): 0 and 0."""
    tokens = d.get("tokens", [0, 0])
    if not isinstance(tokens, list) or len(tokens) != 2:
        raise ValueError("tokens must be a list of 2 counts")
    return {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}


def _mention(cls: type, row: object, chunk_id: object) -> dict[str, Any]:
    names = [f.name for f in fields(cls)]
    if not isinstance(row, list) or len(row) != len(names) - 1:
        raise ValueError(f"a {cls.__name__} must be a list of {len(names) - 1} values")
    return dict(zip(names, [*row, chunk_id], strict=True))


def extraction_from_dict(d: dict[str, Any]) -> ChunkExtraction:
    chunk_id = d["chunk"]["id"]
    mentions = {k: [_mention(c, row, chunk_id) for row in d[k]] for k, c in _MENTIONS.items()}
    body = {"chunk": d["chunk"], **mentions, "mode": d.get("mode", "offline"), **_tokens(d)}
    return from_dict(ChunkExtraction, {**body, "dropped_records": d.get("dropped", 0)})


def encode_extraction(x: ChunkExtraction) -> bytes:
    return orjson.dumps({"op": "add", "extraction": extraction_to_dict(x)})


def decode_extraction_event(raw: bytes) -> ChunkExtraction | Retraction:
    obj = _loads(raw)
    try:
        if obj.get("op") == "retract":
            return Retraction(str(obj["chunk_id"]), str(obj["document_id"]))
        return extraction_from_dict(obj["extraction"])
    except (KeyError, TypeError, ValueError, GraphError) as e:
        raise PayloadError(f"bad extraction event: {e}") from e


# ---- merge items ----------------------------------------------------------------------

Contribution = EntityContribution | RelationshipContribution | ClaimContribution
_CONTRIBUTIONS: dict[str, type[Contribution]] = {
    "entity": EntityContribution,
    "relationship": RelationshipContribution,
    "claim": ClaimContribution,
}


@dataclass(frozen=True, slots=True)
class ItemRetraction:
    key: str
    chunk_id: str
    document_id: str


def encode_item(c: Contribution) -> bytes:
    return orjson.dumps({"op": "add", "contribution": to_dict(c)})


def encode_item_retraction(key: str, chunk_id: str, document_id: str) -> bytes:
    return orjson.dumps(
        {"op": "retract", "key": key, "chunk_id": chunk_id, "document_id": document_id}
    )


def decode_item(raw: bytes, kind: ItemKind) -> Contribution | ItemRetraction:
    obj = _loads(raw)
    try:
        if obj.get("op") == "retract":
            return ItemRetraction(str(obj["key"]), str(obj["chunk_id"]), str(obj["document_id"]))
        return from_dict(_CONTRIBUTIONS[kind], obj["contribution"])
    except (KeyError, GraphError) as e:
        raise PayloadError(f"bad {kind} item: {e}") from e


# ---- graph changes --------------------------------------------------------------------


def encode_change(change: GraphChange) -> bytes:
    return orjson.dumps({"kind": "change", "change": to_dict(change)})


def encode_document(doc: Document) -> bytes:
    return orjson.dumps({"kind": "document", "document": document_to_obj(doc)})


def encode_document_removed(doc_id: str) -> bytes:
    return orjson.dumps({"kind": "document_removed", "id": doc_id})


def decode_graph_change(raw: bytes) -> GraphChange | DocumentRemoved | dict[str, Any]:
    """A GraphChange, a document object (``{"id", "title", "text", …}``) or the removal of
    one."""
    obj = _loads(raw)
    try:
        if obj.get("kind") == "document_removed":
            doc_id = obj["id"]
            if not isinstance(doc_id, str) or not doc_id:
                raise PayloadError("document_removed needs a document id")
            return DocumentRemoved(doc_id)
        if obj.get("kind") == "document":
            doc = obj["document"]
            if not isinstance(doc, dict):
                raise PayloadError("document must be an object")
            return doc
        return from_dict(GraphChange, obj["change"])
    except (KeyError, GraphError) as e:
        raise PayloadError(f"bad graph change: {e}") from e
