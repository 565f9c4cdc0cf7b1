"""Row objects to Arrow batches and back: the one place a graph table's values are encoded."""

from __future__ import annotations

import dataclasses
import functools
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
import pyarrow as pa

from core.tables.errors import GraphTablesError
from core.tables.schema import COMMIT_COLUMN, DELETED_COLUMN, VERSION_COLUMN, table_schema
from graph.codec import DecodeError
from graph.versions.rows import CODEC, DERIVED, stored_form

# rows turned into objects at a time: the Python lists of one slice's columns live only while
# its rows are made, so a table's conversion holds its Arrow buffers, its rows and one slice's
# lists (whole-table lists were 45 MiB on top of 8,000 articles' relationships)
ROWS_PER_SLICE = 4096

# strings many rows repeat: ids other rows hold too, a relationship's ends' titles (its
# entities' titles), dates, a document's title on each of its text units
_SHARED_COLUMNS = (
    "id",
    "document_id",
    "source_id",
    "target_id",
    "source",
    "target",
    "title",
    "type",
    "period",
    "first_seen",
    "last_seen",
    "published_at",
    "creation_date",
)


def rows_to_arrow(
    name: str, rows: Sequence[Any], version: int, deleted: Sequence[str] = (), commit: str = ""
) -> pa.Table:
    """Row objects (upserts) and ids (tombstones) of one table as one Arrow batch."""
    schema = table_schema(name)
    encoded = [stored_form(name, r) for r in rows]
    data: dict[str, list[Any]] = {}
    for column in schema.fields:
        values = [row.get(column) for row in encoded]
        if column in schema.json_columns:
            values = [orjson.dumps(v).decode() for v in values]
        data[column] = values + [deleted_id if column == "id" else None for deleted_id in deleted]
    data[VERSION_COLUMN] = [version] * (len(rows) + len(deleted))
    data[DELETED_COLUMN] = [False] * len(rows) + [True] * len(deleted)
    data[COMMIT_COLUMN] = [commit] * (len(rows) + len(deleted))
    return pa.Table.from_pydict(data, schema=schema.arrow)


def arrow_to_rows(
    name: str, table: pa.Table, derived: Mapping[str, Sequence[Any]] | None = None
) -> tuple[Any, ...]:
    """Live (not tombstone) rows of an Arrow table back into row objects, column by column
    and ``ROWS_PER_SLICE`` rows at a time (no per-row dict: reading a large version leaves
    little garbage behind). ``derived`` holds the values of the ``DERIVED`` columns in row
    order; without it they are left empty."""
    schema = table_schema(name)
    hints = typing.get_type_hints(schema.cls)
    n = table.num_rows
    columns: list[tuple[str, Any]] = []  # ("values", sequence) or ("column", converter)
    for f in dataclasses.fields(schema.cls):
        column = f.name
        if column in DERIVED.get(name, ()) or column not in table.column_names:  # or left unread
            empty: object = {int: 0, float: 0.0, str: ""}.get(hints[column], ())
            columns.append(("values", (derived or {}).get(column) or [empty] * n))
        elif column in schema.json_columns:
            decode = _json_decoder(name, column, hints[column])
            columns.append(("column", (column, lambda vs, d=decode: [d(v) for v in vs])))
        elif pa.types.is_list(schema.arrow.field(column).type):  # ids shared across rows
            columns.append(
                ("column", (column, lambda vs: [tuple(map(intern, v)) if v else () for v in vs]))
            )
        elif column in _SHARED_COLUMNS:
            columns.append(("column", (column, lambda vs: [intern(v) for v in vs])))
        elif f.default not in (dataclasses.MISSING, None):  # null in files older than it
            columns.append(("default", (column, f.default)))
        else:
            columns.append(("column", (column, None)))
    cls = schema.cls
    rows: list[Any] = []
    for start in range(0, n, ROWS_PER_SLICE):
        part = table.slice(start, ROWS_PER_SLICE)
        values: list[Sequence[Any]] = []
        for kind, how in columns:
            if kind == "values":
                values.append(how[start : start + ROWS_PER_SLICE])
                continue
            if kind == "default":
                column, default = how
                data = part.column(column)
                plain = data.to_pylist()
                values.append(
                    [default if v is None else v for v in plain] if data.null_count else plain
                )
                continue
            column, convert = how
            plain = part.column(column).to_pylist()
            values.append(convert(plain) if convert is not None else plain)
        rows.extend(cls(*row) for row in zip(*values, strict=True))
    return tuple(rows)


def intern(value: Any) -> Any:
    """A string interned (rows repeat ids and titles), any other value as it is."""
    return sys.intern(value) if isinstance(value, str) else value


def _interned(value: Any) -> Any:
    """Short strings inside nested JSON values (dates of daily counts) interned."""
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= 32 else value
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value


def _json_decoder(table: str, column: str, hint: Any) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        inner = typing.get_args(args[0])
        if typing.get_origin(args[0]) is tuple and all(a in (str, int) for a in inner):
            # daily counts and size histories: pairs of plain values, by far the most common
            # nested column, read without a per-value check (the writer encoded them)
            def pairs(text: str | None) -> Any:
                try:
                    return tuple(tuple(map(intern, p)) for p in orjson.loads(text or "[]"))
                except (orjson.JSONDecodeError, TypeError) as err:
                    raise GraphTablesError(f"graph table {table}, column {column}: {err}") from err

            return pairs

    def decode(text: str | None) -> Any:
        try:
            return CODEC.decode(hint, _interned(orjson.loads(text or "null")))
        except (orjson.JSONDecodeError, DecodeError) as err:
            raise GraphTablesError(f"graph table {table}, column {column}: {err}") from err

    return decode


@functools.cache
def stored_decoder(table: str, column: str) -> Callable[[Any], Any]:
    """The row value of a column's stored (Arrow) value: JSON columns decoded, the others
    as they are (a missing text as empty)."""
    schema = table_schema(table)
    if column in schema.json_columns:
        decode: Callable[[Any], Any] = _json_decoder(
            table, column, typing.get_type_hints(schema.cls)[column]
        )
        return decode
    return lambda value: "" if value is None else value
