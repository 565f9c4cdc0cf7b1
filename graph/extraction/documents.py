"""Validation of incoming document payloads.

A payload is a UTF-8 JSON object with ``id``, ``text`` and ``published_at`` (ISO 8601; a
date alone is read as midnight UTC), and optional ``title``, ``source``, ``url`` and
``metadata``. Any other top-level field (e.g. Reuters' gold ``topics``) is kept in
``metadata``. Whatever fails raises InvalidDocumentError with a reason a person can act on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from graph.errors import InvalidDocumentError
from graph.model import Document

MAX_ID_CHARS = 256
_KNOWN = {"id", "title", "text", "published_at", "source", "url", "metadata"}


def has_control_characters(text: str) -> bool:
    """NUL, other C0 controls, DEL and C1 controls: never part of an id a person can type,
    and a key that prints like another one."""
    return any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text)


def normalise_time(value: str) -> str:
    """ISO 8601 → ``YYYY-MM-DDTHH:MM:SSZ`` in UTC; raises ValueError when unparseable."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _string(obj: dict[str, Any], name: str, *, required: bool, doc_id: str | None) -> str:
    value = obj.get(name)
    if value is None:
        if required:
            raise InvalidDocumentError(f"missing required field '{name}'", doc_id)
        return ""
    if not isinstance(value, str):
        raise InvalidDocumentError(
            f"field '{name}' must be a string, got {type(value).__name__}", doc_id
        )
    return value


def document_from_obj(obj: object, *, max_chars: int) -> Document:
    if not isinstance(obj, dict):
        raise InvalidDocumentError(f"expected a JSON object, got {type(obj).__name__}")
    doc_id = _string(obj, "id", required=True, doc_id=None).strip()
    if not doc_id:
        raise InvalidDocumentError("field 'id' is empty")
    if len(doc_id) > MAX_ID_CHARS:
        raise InvalidDocumentError(f"field 'id' is longer than {MAX_ID_CHARS} characters")
    if has_control_characters(doc_id):
        raise InvalidDocumentError(
            f"field 'id' contains control characters ({doc_id!r}); use printable characters"
        )
    text = _string(obj, "text", required=True, doc_id=doc_id)
    if not text.strip():
        raise InvalidDocumentError("field 'text' is empty", doc_id)
    if len(text) > max_chars:
        raise InvalidDocumentError(
            f"text has {len(text)} characters, more than the limit of {max_chars} "
            "(KGRAG_CHUNKING__MAX_DOCUMENT_CHARS)",
            doc_id,
        )
    raw_time = _string(obj, "published_at", required=True, doc_id=doc_id)
    try:
        published_at = normalise_time(raw_time)
    except ValueError as e:
        raise InvalidDocumentError(
            f"field 'published_at' is not an ISO 8601 time: {raw_time!r}", doc_id
        ) from e
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidDocumentError("field 'metadata' must be an object", doc_id)
    extra = {k: v for k, v in obj.items() if k not in _KNOWN}
    return Document(
        id=doc_id,
        title=_string(obj, "title", required=False, doc_id=doc_id).strip(),
        text=text,
        published_at=published_at,
        source=_string(obj, "source", required=False, doc_id=doc_id),
        url=_string(obj, "url", required=False, doc_id=doc_id),
        metadata={**extra, **metadata},
    )


def parse_document(payload: bytes | str | None, *, max_chars: int) -> Document:
    """Decode and validate one payload; InvalidDocumentError says what is wrong."""
    if payload is None or len(payload) == 0:
        raise InvalidDocumentError("empty message")
    if isinstance(payload, bytes):
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidDocumentError(f"payload is not UTF-8: {e.reason} at byte {e.start}") from e
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError as e:
        raise InvalidDocumentError(f"payload is not JSON: {e}") from e
    return document_from_obj(obj, max_chars=max_chars)


def document_to_obj(doc: Document) -> dict[str, Any]:
    return {
        "id": doc.id,
        "title": doc.title,
        "text": doc.text,
        "published_at": doc.published_at,
        "source": doc.source,
        "url": doc.url,
        "metadata": doc.metadata,
    }
