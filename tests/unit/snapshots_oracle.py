# Test oracle: graph/snapshots.py as of commit ee65def, verbatim below this line.
"""Snapshot <-> bytes: one JSON-lines payload per table plus ``meta.json``.

Why JSON lines per table: a table is appended row by row and read back row by row, a damaged
line names its table and line number, and every file stays readable with ``head``. The codec
is driven by the dataclasses' own type hints, so adding a field with a default to
``graph/versions/model.py`` needs no change here:

- a field missing from a stored row takes its default (older snapshots stay readable);
- a stored key the dataclass does not know is ignored (a newer writer does not break an older
  reader);
- a required field that is missing, or a value of the wrong type, is a ``SnapshotFormatError``.

``meta.json`` also records the row count of every table; a table whose row count differs (a
truncated file) is rejected rather than silently loaded short.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import orjson

from graph.errors import GraphError
from graph.versions.model import (
    Snapshot,
    SnapshotClaim,
    SnapshotCommunity,
    SnapshotDocument,
    SnapshotEntity,
    SnapshotMeta,
    SnapshotRelationship,
    SnapshotReport,
    SnapshotTextUnit,
)

FORMAT_VERSION = 1
META_FILE = "meta.json"

# table name -> row class; the order is the order files are written and read.
TABLES: dict[str, type] = {
    "entities": SnapshotEntity,
    "relationships": SnapshotRelationship,
    "communities": SnapshotCommunity,
    "community_reports": SnapshotReport,
    "text_units": SnapshotTextUnit,
    "documents": SnapshotDocument,
    "claims": SnapshotClaim,
}

T = TypeVar("T")


class SnapshotFormatError(GraphError):
    """A snapshot payload cannot be encoded or decoded; names the table and (1-based) line."""

    def __init__(self, table: str, reason: str, line: int | None = None) -> None:
        where = table if line is None else f"{table} line {line}"
        super().__init__(f"snapshot table {where}: {reason}")
        self.table = table
        self.line = line
        self.reason = reason


def table_file(table: str) -> str:
    """File name of a table inside a snapshot directory."""
    return f"{table}.jsonl"


def snapshot_files() -> tuple[str, ...]:
    """Every file a complete snapshot has, ``meta.json`` last."""
    return (*(table_file(t) for t in TABLES), META_FILE)


def snapshot_to_tables(s: Snapshot) -> dict[str, bytes]:
    """Encode a snapshot as ``{file name: bytes}``: ``<table>.jsonl`` per table, ``meta.json``."""
    out: dict[str, bytes] = {}
    rows: dict[str, int] = {}
    for table in TABLES:
        records = getattr(s, table)
        out[table_file(table)] = _encode_rows(table, records)
        rows[table] = len(records)
    meta = {"format": FORMAT_VERSION, "rows": rows, "meta": s.meta}
    out[META_FILE] = _dumps(META_FILE, meta) + b"\n"
    return out


def snapshot_from_tables(tables: Mapping[str, bytes]) -> Snapshot:
    """Decode what ``snapshot_to_tables`` produced; raises ``SnapshotFormatError``."""
    meta, rows = _decode_meta(_require(tables, META_FILE))
    decoded: dict[str, tuple[Any, ...]] = {}
    for table, cls in TABLES.items():
        records: tuple[Any, ...] = _decode_rows(table, cls, _require(tables, table_file(table)))
        expected = rows.get(table)
        if expected is not None and expected != len(records):
            raise SnapshotFormatError(
                table, f"meta.json declares {expected} rows, the table has {len(records)}"
            )
        decoded[table] = records
    return Snapshot(meta=meta, **decoded)


def _require(tables: Mapping[str, bytes], name: str) -> bytes:
    try:
        return tables[name]
    except KeyError:
        raise SnapshotFormatError(name.removesuffix(".jsonl"), "missing") from None


def _dumps(table: str, value: object) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError as err:
        raise SnapshotFormatError(table, f"cannot encode: {err}") from err


def _encode_rows(table: str, records: tuple[object, ...]) -> bytes:
    return b"".join(_dumps(table, r) + b"\n" for r in records)


def _decode_meta(payload: bytes) -> tuple[SnapshotMeta, dict[str, int]]:
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError as err:
        raise SnapshotFormatError("meta", f"invalid JSON: {err}", line=1) from err
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict):
        raise SnapshotFormatError("meta", "expected an object with a 'meta' object", line=1)
    if doc.get("format") != FORMAT_VERSION:
        raise SnapshotFormatError("meta", f"unknown format {doc.get('format')!r}", line=1)
    rows = doc.get("rows", {})
    if not isinstance(rows, dict):
        raise SnapshotFormatError("meta", "'rows' must be an object", line=1)
    try:
        meta = _build(SnapshotMeta, doc["meta"])
    except (TypeError, ValueError) as err:
        raise SnapshotFormatError("meta", str(err), line=1) from err
    return meta, rows


def _decode_rows(table: str, cls: type[T], payload: bytes) -> tuple[T, ...]:
    out: list[T] = []
    for number, line in enumerate(payload.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            raise SnapshotFormatError(table, f"invalid JSON: {err}", line=number) from err
        try:
            out.append(_build(cls, raw))
        except (TypeError, ValueError) as err:
            raise SnapshotFormatError(table, str(err), line=number) from err
    return tuple(out)


def _build(cls: type[T], raw: object) -> T:
    """Construct a dataclass from decoded JSON, converting each field by its type hint."""
    if not isinstance(raw, dict):
        raise TypeError(f"expected an object, got {type(raw).__name__}")
    kwargs: dict[str, Any] = {}
    for name, convert in _converters(cls):
        if name in raw:
            try:
                kwargs[name] = convert(raw[name])
            except (TypeError, ValueError) as err:
                raise type(err)(f"field {name!r}: {err}") from err
        # a missing field falls back to its default; the constructor names a required one
    return cls(**kwargs)


_Converters = tuple[tuple[str, Callable[[Any], Any]], ...]
_CONVERTERS: dict[type, _Converters] = {}


def _converters(cls: type) -> _Converters:
    """Per-field converters of a dataclass, built once from its resolved type hints."""
    found = _CONVERTERS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = tuple((f.name, _converter(hints[f.name])) for f in dataclasses.fields(cls))
        _CONVERTERS[cls] = found
    return found


def _converter(hint: Any) -> Callable[[Any], Any]:
    """A function turning a JSON value into a value of ``hint`` (checking its type)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple:
        return _tuple_converter(args)
    if origin in (typing.Union, types.UnionType):
        return _optional_converter(args)
    if origin is dict or hint is dict:
        return _expect(dict)
    if hint is float:
        return _to_float
    if hint in (str, int, bool):
        return _expect(hint)
    raise TypeError(f"unsupported field type {hint!r}")


def _tuple_converter(args: tuple[Any, ...]) -> Callable[[Any], Any]:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _converter(args[0])
        return lambda v: tuple(item(x) for x in _expect(list)(v))
    items = tuple(_converter(a) for a in args)

    def fixed(v: Any) -> tuple[Any, ...]:
        values = _expect(list)(v)
        if len(values) != len(items):
            raise ValueError(f"expected {len(items)} items, got {len(values)}")
        return tuple(c(x) for c, x in zip(items, values, strict=True))

    return fixed


def _optional_converter(args: tuple[Any, ...]) -> Callable[[Any], Any]:
    inner = [a for a in args if a is not type(None)]
    if len(inner) != 1:
        raise TypeError(f"unsupported union {args!r}")
    convert = _converter(inner[0])
    return lambda v: None if v is None else convert(v)


def _expect(kind: type) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        # bool is an int in Python; a JSON true in an int column is still corruption
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise TypeError(f"expected {kind.__name__}, got {type(v).__name__}")
        return v

    return check


def _to_float(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError(f"expected a number, got {type(v).__name__}")
    return float(v)
