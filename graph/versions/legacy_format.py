"""The snapshot files of earlier releases: one JSON-lines payload per table plus ``meta.json``.

Graph versions now live in the graph tables (``core.graph_tables``); this format is kept to
read an old snapshot directory (``core.snapshot_store``) once and convert its latest snapshot
into the first graph version.

Why JSON lines per table: a table is appended row by row and read back row by row, a damaged
line names its table and line number, and every file stays readable with ``head``. The codec
is driven by the dataclasses' own type hints (``graph.versions.rows``), so adding a field with
a default to ``graph/versions/model.py`` needs no change here:

- a field missing from a stored row takes its default (older snapshots stay readable);
- a stored key the dataclass does not know is ignored (a newer writer does not break an older
  reader);
- a required field that is missing, or a value of the wrong type, is a ``SnapshotFormatError``.

``meta.json`` also records the row count of every table; a table whose row count differs (a
truncated file) is rejected rather than silently loaded short.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import orjson

from graph.codec import DecodeError
from graph.errors import GraphError
from graph.versions.model import Snapshot, SnapshotMeta
from graph.versions.rows import CODEC, TABLES

FORMAT_VERSION = 1
META_FILE = "meta.json"

# tables added after the format: absent when empty (written before they existed, or no
# rows), read as empty
LATER_TABLES = frozenset({"aliases"})

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
    """Every file a complete snapshot has, ``meta.json`` last (a table of ``LATER_TABLES``
    is there only when it has rows)."""
    return (*(table_file(t) for t in TABLES if t not in LATER_TABLES), META_FILE)


def snapshot_to_tables(s: Snapshot) -> dict[str, bytes]:
    """Encode a snapshot as ``{file name: bytes}``: ``<table>.jsonl`` per table, ``meta.json``."""
    out: dict[str, bytes] = {}
    rows: dict[str, int] = {}
    for table in TABLES:
        records = getattr(s, table)
        if table in LATER_TABLES and not records:
            continue  # written only when it has rows: such a snapshot reads as it always did
        out[table_file(table)] = _encode_rows(table, records)
        rows[table] = len(records)
    meta = {"format": FORMAT_VERSION, "rows": rows, "meta": CODEC.encode(s.meta)}
    out[META_FILE] = _dumps(META_FILE, meta) + b"\n"
    return out


def snapshot_from_tables(tables: Mapping[str, bytes]) -> Snapshot:
    """Decode what ``snapshot_to_tables`` produced; raises ``SnapshotFormatError``."""
    meta, rows = _decode_meta(_require(tables, META_FILE))
    decoded: dict[str, tuple[Any, ...]] = {}
    for table, cls in TABLES.items():
        if table in LATER_TABLES and table_file(table) not in tables:
            decoded[table] = ()
            continue
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
        return CODEC.dumps(value)
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
        meta = CODEC.decode(SnapshotMeta, doc["meta"])
    except DecodeError as err:
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
            out.append(CODEC.decode(cls, raw))
        except DecodeError as err:
            raise SnapshotFormatError(table, str(err), line=number) from err
    return tuple(out)
