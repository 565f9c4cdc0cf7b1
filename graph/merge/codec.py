"""Plain-dict forms of the merge records, for table rows and ``graph-changes`` messages.

``to_dict`` gives orjson-serialisable values (str, int, float, bool, None, list, dict) and
``from_dict(cls, data)`` the record back, with ``from_dict(type(x), to_dict(x)) == x``. Both
are ``graph.codec`` driven by the records' type hints, so a record's stored form is its fields
in declaration order and nothing here is written per record. Every field must be present,
except an ``X | None`` one, which reads as None. Decoding checks types and raises
``RecordDecodeError`` naming the record, so a corrupt row or message is routed, not merged.

Three types keep compact forms of their own: dates are ISO strings; a tally is an object of
counts; the day window is stored as its first day plus a flat list of (days since previous,
mentions) pairs, which keeps a 400-day window near 2 KB. A claim aggregate's facts must match
the claim ids it counts. The ``*_to_dict`` / ``*_from_dict`` names below are what the merger
and the tests call; they are the two functions above.
"""

from __future__ import annotations

from datetime import date
from typing import Any, TypeVar

from graph.codec import Codec, Converter, DecodeError
from graph.merge.aggregates import ClaimAggregate
from graph.merge.errors import RecordDecodeError
from graph.merge.tally import DayWindow, Tally

Obj = dict[str, Any]
T = TypeVar("T")


def _field(d: Any, name: str, kind: type[T]) -> T:
    if not isinstance(d, dict):
        raise TypeError(f"expected an object, got {type(d).__name__}")
    value = d[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"field {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def _day(value: object) -> date:
    if not isinstance(value, str):
        raise TypeError("a date must be an ISO string")
    return date.fromisoformat(value)


def _tally(d: Any) -> Tally:
    counts = _field(d, "counts", dict)
    for k, v in counts.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"count of {k!r} must be a positive integer")
    return Tally(tuple(sorted(counts.items())), _field(d, "overflow", int))


def _iso(ordinal: int | None) -> str | None:
    return date.fromordinal(ordinal).isoformat() if ordinal else None


def _ordinal(value: object) -> int | None:
    if value is not None and not isinstance(value, str):
        raise TypeError("a date must be an ISO string or null")
    return _day(value).toordinal() if value else None


def _window_to_dict(w: DayWindow) -> Obj:
    flat: list[int] = []
    previous = w.days[0][0] if w.days else 0
    for ordinal, count in w.days:
        flat += [ordinal - previous, count]
        previous = ordinal
    return {
        "from": _iso(w.days[0][0]) if w.days else None,
        "deltas_counts": flat,
        "older": w.older,
        "older_first": _iso(w.older_first),
        "older_last": _iso(w.older_last),
    }


def _window(d: Any) -> DayWindow:
    flat = _field(d, "deltas_counts", list)
    if len(flat) % 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in flat):
        raise ValueError("deltas_counts must be an even-length list of integers")
    days: list[tuple[int, int]] = []
    ordinal = _day(d["from"]).toordinal() if flat else 0
    for delta, count in zip(flat[::2], flat[1::2], strict=True):
        ordinal += delta
        days.append((ordinal, count))
    first, last = _ordinal(d.get("older_first")), _ordinal(d.get("older_last"))
    return DayWindow(tuple(days), _field(d, "older", int), first, last)


def _check_claims(a: ClaimAggregate) -> None:
    if [f.id for f in a.facts] != list(a.support.values()):
        raise ValueError("facts do not match the claim ids in support")


CODEC = Codec(
    {
        date: Converter(date.isoformat, _day),
        Tally: Converter(lambda t: {"counts": dict(t.items), "overflow": t.overflow}, _tally),
        DayWindow: Converter(_window_to_dict, _window),
    },
    absent="none",
    checks={ClaimAggregate: _check_claims},
)


def to_dict(record: object) -> Obj:
    """The stored form of a merge record, or of any dataclass made of the same types (a
    ``Chunk``, an extraction's mentions: ``streams.codecs`` uses it for topic bodies)."""
    encoded: Obj = CODEC.encode(record)
    return encoded


def from_dict(cls: type[T], data: object) -> T:
    """Decode ``cls`` from its stored form; raises ``RecordDecodeError`` naming ``cls``."""
    try:
        return CODEC.decode(cls, data)
    except DecodeError as e:
        raise RecordDecodeError(cls.__name__, str(e)) from e
