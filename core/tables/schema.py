"""The Arrow schema of each graph table: the row class's fields, plus the row-version columns.

A field of a row class becomes a column of the Arrow type its annotation names; nested or
mapped values (tuples of pairs, dicts) are stored as JSON text. The ``DERIVED`` fields are
left out: readers compute them from other rows (``core.tables.derived``). Every table adds
``_version`` (the graph version that wrote the row), ``_deleted`` (a tombstone) and
``_commit`` (the id of the commit that wrote it, see ``core.tables.store``).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from graph.versions.rows import DERIVED, TABLES, stored_fields

VERSIONS = "_versions"  # the table listing the graph versions
VERSION_COLUMN, DELETED_COLUMN, COMMIT_COLUMN = "_version", "_deleted", "_commit"
ROW_VERSION_COLUMNS = (VERSION_COLUMN, DELETED_COLUMN, COMMIT_COLUMN)


def _arrow_type(hint: Any) -> tuple[pa.DataType, bool]:
    """The column type of a field and whether it holds JSON text (nested or mapped values)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _arrow_type(inner[0])
    plain = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    if hint in plain:
        return plain[hint], False
    is_tuple = typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis
    if is_tuple and args[0] in (str, int):
        return pa.list_(plain[args[0]]), False
    return pa.string(), True


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A table's row class, its Arrow schema and which of its columns hold JSON text."""

    name: str
    cls: type
    arrow: pa.Schema
    json_columns: frozenset[str]

    @property
    def fields(self) -> tuple[str, ...]:
        """The stored columns of the row class (derived ones left out)."""
        return stored_fields(self.name)


@functools.cache
def table_schema(name: str) -> TableSchema:
    """The stored columns of table ``name``, from its row class (cached: asked per batch)."""
    cls = TABLES[name]
    hints = typing.get_type_hints(cls)
    columns: list[pa.Field] = []
    json_columns = set()
    for f in dataclasses.fields(cls):
        if f.name in DERIVED.get(name, ()):
            continue
        kind, as_json = _arrow_type(hints[f.name])
        columns.append(pa.field(f.name, kind))
        if as_json:
            json_columns.add(f.name)
    columns += [
        pa.field(VERSION_COLUMN, pa.int64(), nullable=False),
        pa.field(DELETED_COLUMN, pa.bool_()),
        pa.field(COMMIT_COLUMN, pa.string()),
    ]
    return TableSchema(name, cls, pa.schema(columns), frozenset(json_columns))
