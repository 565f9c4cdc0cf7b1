"""The query index's bulk text, read on demand from memory-mapped Arrow files instead of held
as Python strings.

Descriptions, text-unit text and report summaries and findings are most of a graph's bytes
(about 55 MiB of a query service's 190 MiB at 8,000 articles) and any one query reads a few
hundred of them. The index's row objects carry them empty; their values live here, one Arrow
IPC file per table and build (a *segment*), written once to the local disk and mapped
read-only: the operating system pages in what a query touches and can drop it again, so the
text is neither anonymous memory nor millions of Python objects. ``full(row)`` gives a row
with its text.

Each file is unlinked as soon as it is mapped: the mapping keeps its pages reachable until the
last Arrow buffer over it is freed, so a segment lives exactly as long as an index that reads
it, and a crashed service leaves no files behind. A store is immutable like the index that
holds it: following a version (``updated``) writes the changed rows' text as one new segment
per table and shares every other segment and every unchanged table's positions; a table whose
segments hold many superseded rows, or many segments, is rewritten into one.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from sys import intern
from typing import Any, TypeVar

import pyarrow as pa

from core.tables.codecs import rows_to_arrow, stored_decoder
from graph.versions.rows import TABLES

# the columns kept here, per graph table; everything else stays in the row objects
BULK: Mapping[str, tuple[str, ...]] = {
    "entities": ("description",),
    "relationships": ("description",),
    "claims": ("description", "source_text"),
    "text_units": ("text",),
    "community_reports": ("summary", "rating_explanation", "findings"),
}
_TABLE_OF: Mapping[type, str] = {TABLES[name]: name for name in BULK}
_TUPLE_COLUMNS = frozenset({"findings"})  # the bulk columns whose empty value is ()
MAX_SEGMENTS = 24  # per table, before its live rows are rewritten into one segment
_STRIDE = 1 << 32  # position = segment number * _STRIDE + row within the segment

R = TypeVar("R")


@dataclass(frozen=True, slots=True, eq=False)
class _Segment:
    """One memory-mapped Arrow table (``id`` and a table's bulk columns)."""

    table: pa.Table
    starts: tuple[int, ...]  # first row of each record batch
    source: Any  # the pyarrow MemoryMappedFile the buffers point into

    def value(self, column: str, row: int) -> Any:
        chunk = bisect_right(self.starts, row) - 1
        return self.table.column(column).chunk(chunk)[row - self.starts[chunk]].as_py()


@dataclass(frozen=True, slots=True, eq=False)
class _TableTexts:
    segments: tuple[_Segment, ...]
    where: dict[str, int]  # id -> position
    rows: int  # rows over all segments (superseded ones included)


class TextStore:
    """Per table, id -> its bulk text, over memory-mapped segments (see the module doc)."""

    __slots__ = ("_directory", "_tables")

    def __init__(self, tables: Mapping[str, _TableTexts], directory: Path | None) -> None:
        self._tables = dict(tables)
        self._directory = directory

    @classmethod
    def empty(cls, directory: Path | None = None) -> TextStore:
        return cls({}, directory)

    @classmethod
    def from_rows(
        cls, tables: Mapping[str, Sequence[Any]], directory: Path | None = None
    ) -> TextStore:
        """A store of the bulk text the row objects carry (an index built from rows)."""
        builder = TextStoreBuilder(directory)
        for name in BULK:
            builder.add(name, rows_text(name, tables.get(name, ())))
        return builder.build()

    # ---- reading -------------------------------------------------------------------------

    def get(self, table: str, column: str, row_id: str) -> Any:
        """The decoded value of ``column`` for ``row_id`` (None when it has none here)."""
        texts = self._tables.get(table)
        at = texts.where.get(row_id) if texts is not None else None
        if texts is None or at is None:
            return None
        segment = texts.segments[at // _STRIDE]
        return stored_decoder(table, column)(segment.value(column, at % _STRIDE))

    def full(self, row: R) -> R:
        """``row`` with its bulk text (the row itself when it has none here)."""
        table = _TABLE_OF.get(type(row))
        texts = self._tables.get(table) if table is not None else None
        at = texts.where.get(row.id) if texts is not None else None  # type: ignore[attr-defined]
        if texts is None or at is None or table is None:
            return row
        segment = texts.segments[at // _STRIDE]
        values = {c: stored_decoder(table, c)(segment.value(c, at % _STRIDE)) for c in BULK[table]}
        return dataclasses.replace(row, **values)  # type: ignore[type-var]

    def ids(self, table: str) -> frozenset[str]:
        texts = self._tables.get(table)
        return frozenset(texts.where) if texts is not None else frozenset()

    def segments(self, table: str) -> int:
        texts = self._tables.get(table)
        return len(texts.segments) if texts is not None else 0

    def __eq__(self, other: object) -> bool:
        """Equal when every table holds the same ids with the same values (whatever the
        segments); for tests and the benchmark's check of a followed index."""
        if not isinstance(other, TextStore):
            return NotImplemented
        for table, columns in BULK.items():
            ids = self.ids(table)
            if ids != other.ids(table):
                return False
            for row_id in ids:
                for c in columns:
                    if self.get(table, c, row_id) != other.get(table, c, row_id):
                        return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        sizes = {t: len(v.where) for t, v in self._tables.items()}
        return f"TextStore({sizes})"

    # ---- following versions ---------------------------------------------------------------

    def updated(self, changes: Mapping[str, tuple[pa.Table | None, Iterable[str]]]) -> TextStore:
        """A new store: per table, the upserted rows' text (an Arrow table of ``id`` and the
        bulk columns) and the deleted ids applied; other tables are shared as they are."""
        tables = dict(self._tables)
        for name, (upserts, deletes) in changes.items():
            if name not in BULK:
                continue
            old = tables.get(name)
            where = dict(old.where) if old is not None else {}
            for row_id in deletes:
                where.pop(row_id, None)
            segments = old.segments if old is not None else ()
            rows = old.rows if old is not None else 0
            if upserts is not None and upserts.num_rows:
                segment = _write(upserts, self._directory)
                base = len(segments) * _STRIDE
                for i, row_id in enumerate(upserts.column("id").to_pylist()):
                    where[intern(row_id)] = base + i
                segments = (*segments, segment)
                rows += upserts.num_rows
            texts = _TableTexts(segments, where, rows)
            if len(segments) > MAX_SEGMENTS or rows > 2 * len(where) + 1024:
                texts = _compacted(name, texts, self._directory)
            tables[name] = texts
        return TextStore(tables, self._directory)


class TextStoreBuilder:
    """Collects a whole version's bulk text table by table (a sink for
    ``GraphTables.load(text_sink=…)``), each written to its segment at once."""

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory
        self._tables: dict[str, _TableTexts] = {}

    def split(self, table: str) -> tuple[str, ...]:
        return BULK.get(table, ())

    def add(self, table: str, texts: pa.Table) -> None:
        if table not in BULK:
            return
        segment = _write(texts.select(["id", *BULK[table]]), self._directory)
        # the ids the rows hold (interned on reading), not a second copy of each
        where = {intern(row_id): i for i, row_id in enumerate(texts.column("id").to_pylist())}
        self._tables[table] = _TableTexts((segment,), where, texts.num_rows)

    def build(self) -> TextStore:
        return TextStore(self._tables, self._directory)


def without_text(row: R) -> R:
    """``row`` with its bulk columns empty, as the query service's reader gives it."""
    table = _TABLE_OF.get(type(row))
    if table is None:
        return row
    empty = {c: () if c in _TUPLE_COLUMNS else "" for c in BULK[table]}
    return dataclasses.replace(row, **empty)  # type: ignore[type-var]


def rows_text(name: str, rows: Sequence[Any]) -> pa.Table:
    """The bulk columns of row objects, as the graph tables store them."""
    return rows_to_arrow(name, rows, 0).select(["id", *BULK[name]])


def _write(table: pa.Table, directory: Path | None) -> _Segment:
    """``table`` written as an Arrow IPC file, mapped, and the file unlinked."""
    fd, path = tempfile.mkstemp(prefix="kgrag-text-", suffix=".arrow", dir=directory)
    os.close(fd)
    try:
        # a native file: through a Python file object each buffer was copied into bytes
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        source = pa.memory_map(path, "r")
    finally:
        os.unlink(path)
    mapped = pa.ipc.open_file(source).read_all()
    starts, at = [], 0
    for batch_rows in (len(c) for c in mapped.column("id").chunks):
        starts.append(at)
        at += batch_rows
    return _Segment(mapped, tuple(starts or [0]), source)


def _compacted(name: str, texts: _TableTexts, directory: Path | None) -> _TableTexts:
    """The live rows of every segment rewritten into one."""
    by_segment: dict[int, list[tuple[str, int]]] = {}
    for row_id, at in texts.where.items():
        by_segment.setdefault(at // _STRIDE, []).append((row_id, at % _STRIDE))
    parts: list[pa.Table] = []
    ids: list[str] = []
    for number, members in sorted(by_segment.items()):
        segment = texts.segments[number]
        rows = pa.array([r for _, r in members], pa.int64())
        parts.append(segment.table.take(rows))
        ids.extend(row_id for row_id, _ in members)
    if not parts:
        return _TableTexts((), {}, 0)
    table = pa.concat_tables(p.select(["id", *BULK[name]]) for p in parts).combine_chunks()
    segment = _write(table, directory)
    return _TableTexts((segment,), {row_id: i for i, row_id in enumerate(ids)}, len(ids))
