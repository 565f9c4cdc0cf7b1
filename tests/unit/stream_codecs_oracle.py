# Test oracle: streams/codecs.py as of commit ee65def, verbatim below this line but for
# importing the merge-codec oracle instead of graph.merge.codec (sorted last).
"""Payloads of the internal topics, as orjson envelopes around graph/'s dataclasses.

Every internal topic carries raw bytes encoded here, so each payload is declared once and
decoded with the same checks wherever it is read. ``op`` is ``add`` or ``retract``: a
retraction withdraws what one chunk contributed (a corrected document).

- ``chunks`` (key: document id): ``{"op": "add", "chunk"}`` or
  ``{"op": "retract", "chunk_id", "document_id"}``
- ``extractions`` (key: document id): ``{"op": "add", "extraction"}`` or a retraction as above
- ``entity-items``, ``relationship-items``, ``claim-items`` (key: row key):
  ``{"op": "add", "contribution"}`` or ``{"op": "retract", "key", "chunk_id", "document_id"}``
- ``graph-changes`` (key: row key, chunk id or document id): ``{"kind": "change", "change"}``
  or ``{"kind": "document", "document"}``
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson

from graph.errors import GraphError
from graph.extraction.documents import document_to_obj
from graph.merge.changes import GraphChange
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
from tests.unit.merge_codec_oracle import (
    chunk_from_dict,
    chunk_to_dict,
    claim_contribution_from_dict,
    claim_contribution_to_dict,
    entity_contribution_from_dict,
    entity_contribution_to_dict,
    graph_change_from_dict,
    graph_change_to_dict,
    relationship_contribution_from_dict,
    relationship_contribution_to_dict,
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
    return orjson.dumps({"op": "add", "chunk": chunk_to_dict(chunk)})


def encode_retraction(chunk_id: str, document_id: str) -> bytes:
    return orjson.dumps({"op": "retract", "chunk_id": chunk_id, "document_id": document_id})


def decode_chunk_event(raw: bytes) -> Chunk | Retraction:
    obj = _loads(raw)
    try:
        if obj.get("op") == "retract":
            return Retraction(str(obj["chunk_id"]), str(obj["document_id"]))
        return chunk_from_dict(obj["chunk"])
    except (KeyError, GraphError) as e:
        raise PayloadError(f"bad chunk event: {e}") from e


# ---- extractions ----------------------------------------------------------------------


def extraction_to_dict(x: ChunkExtraction) -> dict[str, Any]:
    return {
        "chunk": chunk_to_dict(x.chunk),
        "entities": [[e.name, e.type, e.description] for e in x.entities],
        "relationships": [[r.source, r.target, r.description, r.strength] for r in x.relationships],
        "claims": [
            [
                c.subject,
                c.object,
                c.claim_type,
                c.status,
                c.start_date,
                c.end_date,
                c.description,
                c.source_text,
            ]
            for c in x.claims
        ],
        "mode": x.mode,
        "dropped": x.dropped_records,
    }


def extraction_from_dict(d: dict[str, Any]) -> ChunkExtraction:
    chunk = chunk_from_dict(d["chunk"])
    cid = chunk.id
    return ChunkExtraction(
        chunk=chunk,
        entities=tuple(EntityMention(n, t, desc, cid) for n, t, desc in d["entities"]),
        relationships=tuple(
            RelationshipMention(s, t, desc, float(w), cid) for s, t, desc, w in d["relationships"]
        ),
        claims=tuple(
            ClaimMention(s, o, ct, st, sd, ed, desc, src, cid)
            for s, o, ct, st, sd, ed, desc, src in d["claims"]
        ),
        mode=d.get("mode", "offline"),
        dropped_records=int(d.get("dropped", 0)),
    )


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


@dataclass(frozen=True, slots=True)
class ItemRetraction:
    key: str
    chunk_id: str
    document_id: str


def encode_item(c: Contribution) -> bytes:
    if isinstance(c, EntityContribution):
        body = entity_contribution_to_dict(c)
    elif isinstance(c, RelationshipContribution):
        body = relationship_contribution_to_dict(c)
    else:
        body = claim_contribution_to_dict(c)
    return orjson.dumps({"op": "add", "contribution": body})


def encode_item_retraction(key: str, chunk_id: str, document_id: str) -> bytes:
    return orjson.dumps(
        {"op": "retract", "key": key, "chunk_id": chunk_id, "document_id": document_id}
    )


def decode_item(raw: bytes, kind: ItemKind) -> Contribution | ItemRetraction:
    obj = _loads(raw)
    try:
        if obj.get("op") == "retract":
            return ItemRetraction(str(obj["key"]), str(obj["chunk_id"]), str(obj["document_id"]))
        body = obj["contribution"]
        if kind == "entity":
            return entity_contribution_from_dict(body)
        if kind == "relationship":
            return relationship_contribution_from_dict(body)
        return claim_contribution_from_dict(body)
    except (KeyError, GraphError) as e:
        raise PayloadError(f"bad {kind} item: {e}") from e


# ---- graph changes --------------------------------------------------------------------


def encode_change(change: GraphChange) -> bytes:
    return orjson.dumps({"kind": "change", "change": graph_change_to_dict(change)})


def encode_document(doc: Document) -> bytes:
    return orjson.dumps({"kind": "document", "document": document_to_obj(doc)})


def decode_graph_change(raw: bytes) -> GraphChange | dict[str, Any]:
    """A GraphChange, or a document object (``{"id", "title", "text", …}``)."""
    obj = _loads(raw)
    try:
        if obj.get("kind") == "document":
            doc = obj["document"]
            if not isinstance(doc, dict):
                raise PayloadError("document must be an object")
            return doc
        return graph_change_from_dict(obj["change"])
    except (KeyError, GraphError) as e:
        raise PayloadError(f"bad graph change: {e}") from e
