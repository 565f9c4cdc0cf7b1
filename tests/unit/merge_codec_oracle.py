# Test oracle: graph/merge_codec.py as of commit ee65def, verbatim below this line.
"""Plain-dict forms of the merge records, for table rows and ``graph-changes`` messages.

Every record has ``*_to_dict`` (orjson-serialisable: str, int, float, bool, None, list,
dict) and ``*_from_dict``, with ``from(to(x)) == x``. Decoders check types and raise
``RecordDecodeError`` naming the record, so a corrupt row or message is routed, not merged.
Dates are ISO strings; the day window is stored as its first day plus a flat list of
(days since previous, mentions) pairs, which keeps a 400-day window near 2 KB.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from functools import wraps
from typing import Any, TypeVar, cast

from graph.merge.aggregates import ClaimAggregate, EntityAggregate, RelationshipAggregate
from graph.merge.changes import GraphChange
from graph.merge.contributions import (
    ChunkManifest,
    ClaimContribution,
    ClaimFact,
    EntityContribution,
    RelationshipContribution,
)
from graph.merge.errors import RecordDecodeError
from graph.merge.tally import DayWindow, Tally
from graph.model import Chunk

Obj = dict[str, Any]
T = TypeVar("T")
_STATUSES = ("TRUE", "FALSE", "SUSPECTED")
_MODES = ("llm", "offline")


def _decoder(kind: str) -> Callable[[Callable[[Obj], T]], Callable[[object], T]]:
    """Turn any failure of a decoder into a RecordDecodeError naming the record kind."""

    def wrap(fn: Callable[[Obj], T]) -> Callable[[object], T]:
        @wraps(fn)
        def decode(data: object) -> T:
            if not isinstance(data, dict):
                raise RecordDecodeError(kind, f"expected an object, got {type(data).__name__}")
            try:
                return fn(data)
            except RecordDecodeError:
                raise
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise RecordDecodeError(kind, f"{type(e).__name__}: {e}") from e

        return decode

    return wrap


def _get(d: Obj, name: str, kind: type[T]) -> T:
    value = d[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"field {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def _opt_str(d: Obj, name: str) -> str | None:
    value = d.get(name)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"field {name!r} must be a string or null")
    return value


def _strs(d: Obj, name: str) -> tuple[str, ...]:
    values = _get(d, name, list)
    if not all(isinstance(v, str) for v in values):
        raise TypeError(f"field {name!r} must be a list of strings")
    return tuple(values)


def _day(value: object) -> date:
    if not isinstance(value, str):
        raise TypeError("a date must be an ISO string")
    return date.fromisoformat(value)


# ---- building blocks ------------------------------------------------------------------
def tally_to_dict(t: Tally) -> Obj:
    return {"counts": dict(t.items), "overflow": t.overflow}


def tally_from_dict(d: Obj) -> Tally:
    counts = _get(d, "counts", dict)
    for k, v in counts.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"count of {k!r} must be a positive integer")
    return Tally(tuple(sorted(counts.items())), _get(d, "overflow", int))


def day_window_to_dict(w: DayWindow) -> Obj:
    flat: list[int] = []
    previous = w.days[0][0] if w.days else 0
    for ordinal, count in w.days:
        flat += [ordinal - previous, count]
        previous = ordinal
    first = date.fromordinal(w.days[0][0]).isoformat() if w.days else None
    return {
        "from": first,
        "deltas_counts": flat,
        "older": w.older,
        "older_first": date.fromordinal(w.older_first).isoformat() if w.older_first else None,
        "older_last": date.fromordinal(w.older_last).isoformat() if w.older_last else None,
    }


def day_window_from_dict(d: Obj) -> DayWindow:
    flat = _get(d, "deltas_counts", list)
    if len(flat) % 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        raise ValueError("deltas_counts must be an even-length list of integers")
    days: list[tuple[int, int]] = []
    ordinal = _day(d["from"]).toordinal() if flat else 0
    for delta, count in zip(flat[::2], flat[1::2], strict=True):
        ordinal += delta
        days.append((ordinal, count))
    first, last = _opt_str(d, "older_first"), _opt_str(d, "older_last")
    return DayWindow(
        tuple(days),
        _get(d, "older", int),
        _day(first).toordinal() if first else None,
        _day(last).toordinal() if last else None,
    )


def claim_fact_to_dict(f: ClaimFact) -> Obj:
    return {
        "subject_key": f.subject_key,
        "subject_name": f.subject_name,
        "object_key": f.object_key,
        "object_name": f.object_name,
        "claim_type": f.claim_type,
        "status": f.status,
        "start_date": f.start_date,
        "end_date": f.end_date,
        "description": f.description,
        "source_text": f.source_text,
    }


def claim_fact_from_dict(d: Obj) -> ClaimFact:
    status = _get(d, "status", str)
    if status not in _STATUSES:
        raise ValueError(f"status {status!r} is not one of {_STATUSES}")
    return ClaimFact(
        subject_key=_get(d, "subject_key", str),
        subject_name=_get(d, "subject_name", str),
        object_key=_opt_str(d, "object_key"),
        object_name=_opt_str(d, "object_name"),
        claim_type=_get(d, "claim_type", str),
        status=cast(Any, status),
        start_date=_opt_str(d, "start_date"),
        end_date=_opt_str(d, "end_date"),
        description=_get(d, "description", str),
        source_text=_get(d, "source_text", str),
    )


def chunk_to_dict(c: Chunk) -> Obj:
    return {
        "id": c.id,
        "document_id": c.document_id,
        "title": c.title,
        "published_at": c.published_at,
        "position": c.position,
        "text": c.text,
        "n_tokens": c.n_tokens,
    }


def chunk_from_dict(d: Obj) -> Chunk:
    return Chunk(
        id=_get(d, "id", str),
        document_id=_get(d, "document_id", str),
        title=_get(d, "title", str),
        published_at=_get(d, "published_at", str),
        position=_get(d, "position", int),
        text=_get(d, "text", str),
        n_tokens=_get(d, "n_tokens", int),
    )


# ---- contributions and manifest -------------------------------------------------------
def entity_contribution_to_dict(c: EntityContribution) -> Obj:
    return {
        "key": c.key,
        "name": c.name,
        "type": c.type,
        "descriptions": list(c.descriptions),
        "chunk_id": c.chunk_id,
        "document_id": c.document_id,
        "day": c.day.isoformat(),
    }


@_decoder("EntityContribution")
def entity_contribution_from_dict(d: Obj) -> EntityContribution:
    return EntityContribution(
        key=_get(d, "key", str),
        name=_get(d, "name", str),
        type=_get(d, "type", str),
        descriptions=_strs(d, "descriptions"),
        chunk_id=_get(d, "chunk_id", str),
        document_id=_get(d, "document_id", str),
        day=_day(d["day"]),
    )


def relationship_contribution_to_dict(c: RelationshipContribution) -> Obj:
    return {
        "key": c.key,
        "source_key": c.source_key,
        "target_key": c.target_key,
        "source_name": c.source_name,
        "target_name": c.target_name,
        "descriptions": list(c.descriptions),
        "strength_milli": c.strength_milli,
        "chunk_id": c.chunk_id,
        "document_id": c.document_id,
        "day": c.day.isoformat(),
    }


@_decoder("RelationshipContribution")
def relationship_contribution_from_dict(d: Obj) -> RelationshipContribution:
    return RelationshipContribution(
        key=_get(d, "key", str),
        source_key=_get(d, "source_key", str),
        target_key=_get(d, "target_key", str),
        source_name=_get(d, "source_name", str),
        target_name=_get(d, "target_name", str),
        descriptions=_strs(d, "descriptions"),
        strength_milli=_get(d, "strength_milli", int),
        chunk_id=_get(d, "chunk_id", str),
        document_id=_get(d, "document_id", str),
        day=_day(d["day"]),
    )


def claim_contribution_to_dict(c: ClaimContribution) -> Obj:
    return {
        "key": c.key,
        "facts": [claim_fact_to_dict(f) for f in c.facts],
        "chunk_id": c.chunk_id,
        "document_id": c.document_id,
        "day": c.day.isoformat(),
    }


@_decoder("ClaimContribution")
def claim_contribution_from_dict(d: Obj) -> ClaimContribution:
    return ClaimContribution(
        key=_get(d, "key", str),
        facts=tuple(claim_fact_from_dict(f) for f in _get(d, "facts", list)),
        chunk_id=_get(d, "chunk_id", str),
        document_id=_get(d, "document_id", str),
        day=_day(d["day"]),
    )


def chunk_manifest_to_dict(m: ChunkManifest) -> Obj:
    return {
        "chunk_id": m.chunk_id,
        "document_id": m.document_id,
        "entity_keys": list(m.entity_keys),
        "relationship_keys": list(m.relationship_keys),
        "claim_keys": list(m.claim_keys),
    }


@_decoder("ChunkManifest")
def chunk_manifest_from_dict(d: Obj) -> ChunkManifest:
    return ChunkManifest(
        chunk_id=_get(d, "chunk_id", str),
        document_id=_get(d, "document_id", str),
        entity_keys=_strs(d, "entity_keys"),
        relationship_keys=_strs(d, "relationship_keys"),
        claim_keys=_strs(d, "claim_keys"),
    )


# ---- aggregates -------------------------------------------------------------------------
def entity_aggregate_to_dict(a: EntityAggregate) -> Obj:
    return {
        "key": a.key,
        "names": tally_to_dict(a.names),
        "types": tally_to_dict(a.types),
        "descriptions": tally_to_dict(a.descriptions),
        "mention_count": a.mention_count,
        "document_count": a.document_count,
        "days": day_window_to_dict(a.days),
        "version": a.version,
    }


@_decoder("EntityAggregate")
def entity_aggregate_from_dict(d: Obj) -> EntityAggregate:
    return EntityAggregate(
        key=_get(d, "key", str),
        names=tally_from_dict(_get(d, "names", dict)),
        types=tally_from_dict(_get(d, "types", dict)),
        descriptions=tally_from_dict(_get(d, "descriptions", dict)),
        mention_count=_get(d, "mention_count", int),
        document_count=_get(d, "document_count", int),
        days=day_window_from_dict(_get(d, "days", dict)),
        version=_get(d, "version", int),
    )


def relationship_aggregate_to_dict(a: RelationshipAggregate) -> Obj:
    return {
        "key": a.key,
        "source_key": a.source_key,
        "target_key": a.target_key,
        "source_names": tally_to_dict(a.source_names),
        "target_names": tally_to_dict(a.target_names),
        "descriptions": tally_to_dict(a.descriptions),
        "weight": a.weight,
        "strength_milli_sum": a.strength_milli_sum,
        "days": day_window_to_dict(a.days),
        "version": a.version,
    }


@_decoder("RelationshipAggregate")
def relationship_aggregate_from_dict(d: Obj) -> RelationshipAggregate:
    return RelationshipAggregate(
        key=_get(d, "key", str),
        source_key=_get(d, "source_key", str),
        target_key=_get(d, "target_key", str),
        source_names=tally_from_dict(_get(d, "source_names", dict)),
        target_names=tally_from_dict(_get(d, "target_names", dict)),
        descriptions=tally_from_dict(_get(d, "descriptions", dict)),
        weight=_get(d, "weight", int),
        strength_milli_sum=_get(d, "strength_milli_sum", int),
        days=day_window_from_dict(_get(d, "days", dict)),
        version=_get(d, "version", int),
    )


def claim_aggregate_to_dict(a: ClaimAggregate) -> Obj:
    return {
        "key": a.key,
        "facts": [claim_fact_to_dict(f) for f in a.facts],
        "support": tally_to_dict(a.support),
        "mention_count": a.mention_count,
        "version": a.version,
    }


@_decoder("ClaimAggregate")
def claim_aggregate_from_dict(d: Obj) -> ClaimAggregate:
    facts = tuple(claim_fact_from_dict(f) for f in _get(d, "facts", list))
    support = tally_from_dict(_get(d, "support", dict))
    if [f.id for f in facts] != list(support.values()):
        raise ValueError("facts do not match the claim ids in support")
    return ClaimAggregate(
        key=_get(d, "key", str),
        facts=facts,
        support=support,
        mention_count=_get(d, "mention_count", int),
        version=_get(d, "version", int),
    )


# ---- graph-changes messages -----------------------------------------------------------
def graph_change_to_dict(c: GraphChange) -> Obj:
    return {
        "chunk_id": c.chunk_id,
        "document_id": c.document_id,
        "retraction": c.retraction,
        "text_unit": chunk_to_dict(c.text_unit) if c.text_unit else None,
        "mode": c.mode,
        "entities": [entity_aggregate_to_dict(a) for a in c.entities],
        "deleted_entities": list(c.deleted_entities),
        "relationships": [relationship_aggregate_to_dict(a) for a in c.relationships],
        "deleted_relationships": list(c.deleted_relationships),
        "claims": [claim_aggregate_to_dict(a) for a in c.claims],
        "deleted_claims": list(c.deleted_claims),
    }


@_decoder("GraphChange")
def graph_change_from_dict(d: Obj) -> GraphChange:
    mode = d.get("mode")
    if mode is not None and mode not in _MODES:
        raise ValueError(f"mode {mode!r} is not one of {_MODES}")
    text_unit = d.get("text_unit")
    return GraphChange(
        chunk_id=_get(d, "chunk_id", str),
        document_id=_get(d, "document_id", str),
        retraction=_get(d, "retraction", bool),
        text_unit=chunk_from_dict(text_unit) if text_unit is not None else None,
        mode=cast(Any, mode),
        entities=tuple(entity_aggregate_from_dict(a) for a in _get(d, "entities", list)),
        deleted_entities=_strs(d, "deleted_entities"),
        relationships=tuple(
            relationship_aggregate_from_dict(a) for a in _get(d, "relationships", list)
        ),
        deleted_relationships=_strs(d, "deleted_relationships"),
        claims=tuple(claim_aggregate_from_dict(a) for a in _get(d, "claims", list)),
        deleted_claims=_strs(d, "deleted_claims"),
    )
