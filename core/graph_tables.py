"""Graph tables: versioned Delta Lake tables written as delta commits of the rows that changed.

Why Delta Lake (delta-rs through ``deltalake``): atomic commits, time travel and an open format
that DuckDB, pandas, polars and Spark read, on a local path today and an object store later,
instead of a home-made directory protocol.

Layout under ``root`` (a path or an URI delta-rs understands)::

    entities/ relationships/ communities/ community_reports/ text_units/ documents/ claims/
    _versions/     one row per graph version: its number, time, meta and each table's rows

**Rows as a change log (merge on read).** delta-rs rewrites every file a MERGE touches, so
upserting a few hundred rows of a table kept in a few large files rewrites all of it. Each
table is instead a log of row versions: the GraphRAG columns plus ``_version`` (the graph
version that wrote the row) and ``_deleted``. A commit appends only the rows that changed and
a tombstone per deleted id; the table *as of* version V is, per ``id``, the newest row with
``_version <= V`` unless it is a tombstone (:func:`current_rows`). Files carry ``_version``
statistics, so reading what changed between two versions opens only the files of those
commits. ``kgrag export`` and any Delta reader get the current rows with that one rule. A
field added to a row class (with a default) joins its table's schema at the next commit;
rows of the files written before read it as that default.

**A version is atomic across tables.** The writer appends to each table first, then appends
the version's row to ``_versions``: that single-table Delta commit is the moment the version
exists. Readers only look at rows of versions listed there, so a writer killed between the two
leaves rows no reader sees; the next commit deletes them (rows above the latest listed
version) before it writes its own.

**One writer per version number.** Versions only go up: a commit at or below the latest listed
version raises ``StaleSnapshotError`` (a community-job leader that lost its role mid-run
cannot publish an older graph over a newer one). The community job is the one writer of every
table. Every commit's rows carry its own id (``_commit``) and the version's listing names it,
so if two leaders ever took the same number, only the rows of the one that listed it are
read; the other's are dropped by the next maintenance.

**Two kinds of version.** A community run commits every table (``meta.kind == "run"``);
between runs the job makes *light commits* of the rows new articles wrote (``"rows"``:
entities, relationships, text units, documents, claims), so they are searchable within
seconds; communities and reports stay those of the last run (``meta.reports_from``).

**On an object store** (``tables.uri = s3://…``) the same protocol holds: every Delta commit
is a conditional put (``core.object_store``), the listing commit above included. Any failure
to reach the store is a ``GraphStoreUnavailableError`` with a one-line reason: readers keep
the version they have, the writer retries with its next commit.

**Retention and small files.** The versions of the last ``keep`` runs stay readable as of their
number, with the light commits between them. After ``compact_every`` commits the next commits
maintain one table each: files below 1 MiB are compacted (Delta ``optimize``);
rows superseded before the oldest kept version are dropped by rewriting the table when they
outnumber the live ones; files no Delta version still needs are vacuumed after
``vacuum_hours`` (readers part-way through an older Delta version keep theirs meanwhile), and a
Delta checkpoint keeps opening a table cheap.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import sys
import threading
import time
import types
import typing
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from core.errors import ConfigError
from core.object_store import delta_storage_options, one_line
from core.settings import Settings
from core.snapshot_store import (
    SnapshotCorruptError,
    SnapshotNotFoundError,
    SnapshotStoreError,
    StaleSnapshotError,
)
from graph.codec import DecodeError
from graph.snapshot_model import Snapshot, SnapshotMeta
from graph.snapshots import CODEC, DERIVED, TABLES, KnownRows, row_digests

log = logging.getLogger(__name__)

VERSIONS = "_versions"
FORMAT = 2  # graph-table format (1 was the JSON-lines snapshot directories)
_VERSION, _DELETED, _COMMIT = "_version", "_deleted", "_commit"
_ROW_VERSION = (_VERSION, _DELETED, _COMMIT)
COMPACT_FILES = 8  # a table with fewer data files is left as it is by maintenance
COMPACT_TARGET_BYTES = 1024 * 1024  # compaction merges smaller files into ones this big
MAINTAINED = (*TABLES, VERSIONS)


class GraphTablesError(SnapshotStoreError):
    """A graph-table operation that cannot be done; says what to do."""


class GraphStoreUnavailableError(SnapshotStoreError):
    """The tables' storage could not be reached or refused a request (network, credentials)."""


_F = typing.TypeVar("_F", bound=typing.Callable[..., Any])


def _storage_io(method: _F) -> _F:
    """Turn the ``OSError`` delta-rs and pyarrow raise for storage failures into a
    ``GraphStoreUnavailableError`` naming the tables and the reason in one line."""

    @functools.wraps(method)
    def wrapper(self: GraphTables, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OSError as err:
            raise GraphStoreUnavailableError(
                f"graph tables at {self.root} not reachable: {one_line(err)}"
            ) from err

    return typing.cast(_F, wrapper)


# ---- schema: dataclass fields -> Arrow columns ---------------------------------------------


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
    name: str
    cls: type
    arrow: pa.Schema
    json_columns: frozenset[str]

    @property
    def fields(self) -> tuple[str, ...]:
        """The stored columns of the row class (derived ones left out)."""
        derived = DERIVED.get(self.name, ())
        return tuple(f.name for f in dataclasses.fields(self.cls) if f.name not in derived)


@functools.cache
def table_schema(name: str) -> TableSchema:
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
        pa.field(_VERSION, pa.int64(), nullable=False),
        pa.field(_DELETED, pa.bool_()),
        pa.field(_COMMIT, pa.string()),
    ]
    return TableSchema(name, cls, pa.schema(columns), frozenset(json_columns))


def rows_to_arrow(
    name: str, rows: Sequence[Any], version: int, deleted: Sequence[str] = (), commit: str = ""
) -> pa.Table:
    """Row objects (upserts) and ids (tombstones) of one table as one Arrow batch."""
    schema = table_schema(name)
    encoded = [CODEC.encode(r) for r in rows]
    data: dict[str, list[Any]] = {}
    for column in schema.fields:
        values = [row.get(column) for row in encoded]
        if column in schema.json_columns:
            values = [orjson.dumps(v).decode() for v in values]
        data[column] = values + [deleted_id if column == "id" else None for deleted_id in deleted]
    data[_VERSION] = [version] * (len(rows) + len(deleted))
    data[_DELETED] = [False] * len(rows) + [True] * len(deleted)
    data[_COMMIT] = [commit] * (len(rows) + len(deleted))
    return pa.Table.from_pydict(data, schema=schema.arrow)


# rows turned into objects at a time: the Python lists of one slice's columns live only while
# its rows are made, so a table's conversion holds its Arrow buffers, its rows and one slice's
# lists (whole-table lists were 45 MiB on top of 8,000 articles' relationships)
ROWS_PER_SLICE = 4096


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
                ("column", (column, lambda vs: [tuple(map(_intern, v)) if v else () for v in vs]))
            )
        elif column in _SHARED_COLUMNS:
            columns.append(("column", (column, lambda vs: [_intern(v) for v in vs])))
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


def _intern(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) else value


def _json_decoder(table: str, column: str, hint: Any) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and len(args) == 2 and args[1] is Ellipsis:
        inner = typing.get_args(args[0])
        if typing.get_origin(args[0]) is tuple and all(a in (str, int) for a in inner):
            # daily counts and size histories: pairs of plain values, by far the most common
            # nested column, read without a per-value check (the writer encoded them)
            def pairs(text: str | None) -> Any:
                try:
                    return tuple(tuple(map(_intern, p)) for p in orjson.loads(text or "[]"))
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


class TextSink(Protocol):
    """Takes a table's bulk columns apart while a version is read (``GraphTables.load``)."""

    def split(self, table: str) -> tuple[str, ...]: ...

    def add(self, table: str, texts: pa.Table) -> None: ...


# the stored columns ``derived_columns`` reads, per table
DERIVED_INPUTS: Mapping[str, tuple[str, ...]] = {
    "relationships": ("id", "source_id", "target_id"),
    "entities": ("id", "text_unit_ids"),
    "communities": ("id", "entity_ids", "unreflected"),
    "community_reports": ("id",),
}


def _realigned(
    values: Mapping[str, list[Any]], order: pa.ChunkedArray, wanted: pa.ChunkedArray
) -> dict[str, list[Any]]:
    """Derived values listed in ``order`` (ids) put in the order of ``wanted`` (ids)."""
    at = {k: i for i, k in enumerate(order.to_pylist())}
    where = [at[k] for k in wanted.to_pylist()]
    return {column: [vals[i] for i in where] for column, vals in values.items()}


def derived_columns(
    tables: Mapping[str, pa.Table], *, community_lists: bool = True, combined_degrees: bool = True
) -> dict[str, dict[str, list[Any]]]:
    """The ``DERIVED`` columns of a whole version from its stored columns: entity ``degree``
    (relationships at the entity; a loop counts twice), relationship ``combined_degree`` (the
    sum of its ends' degrees), a community's ``relationship_ids`` (those with both ends among
    its members) and ``text_unit_ids`` (its members' text units), each sorted, and a report's
    ``unreflected`` (kept in its community's row). Without ``community_lists`` a community's
    two lists are left empty, without ``combined_degrees`` a relationship's combined degree
    (a reader that never uses them)."""
    rels, ents = tables["relationships"], tables["entities"]
    comms, reports = tables["communities"], tables["community_reports"]
    rel_ids = rels.column("id").to_pylist()
    sources = rels.column("source_id").to_pylist()
    targets = rels.column("target_id").to_pylist()
    degree: Counter[str] = Counter(sources)
    degree.update(targets)
    at: dict[str, list[int]] = {}
    for i, (a, b) in enumerate(zip(sources, targets, strict=True)):
        at.setdefault(a, []).append(i)
        if b != a:
            at.setdefault(b, []).append(i)
    entity_ids = ents.column("id").to_pylist()
    units = dict(zip(entity_ids, ents.column("text_unit_ids").to_pylist(), strict=True))
    community_rels: list[tuple[str, ...]] = []
    community_units: list[tuple[str, ...]] = []
    for members in comms.column("entity_ids").to_pylist() if community_lists else ():
        inside = set(members)
        community_rels.append(
            tuple(
                sorted(
                    {
                        rel_ids[i]
                        for k in members
                        for i in at.get(k, ())
                        if sources[i] in inside and targets[i] in inside
                    }
                )
            )
        )
        community_units.append(
            tuple(sorted({_intern(u) for k in members for u in units.get(k) or ()}))
        )
    share = dict(
        zip(comms.column("id").to_pylist(), comms.column("unreflected").to_pylist(), strict=True)
    )
    return {
        "entities": {"degree": [degree[k] for k in entity_ids]},
        "relationships": {
            "combined_degree": [
                degree[a] + degree[b] for a, b in zip(sources, targets, strict=True)
            ]
        }
        if combined_degrees
        else {},
        "communities": {"relationship_ids": community_rels, "text_unit_ids": community_units}
        if community_lists
        else {},
        "community_reports": {
            "unreflected": [share.get(k, 0.0) for k in reports.column("id").to_pylist()]
        },
    }


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


def _interned(value: Any) -> Any:
    """Short strings inside nested JSON values (dates of daily counts) interned."""
    if isinstance(value, str):
        return sys.intern(value) if len(value) <= 32 else value
    if isinstance(value, list):
        return [_interned(v) for v in value]
    return value


def release_memory() -> None:
    """Hand the Arrow memory pool's free pages back to the system: reading a version leaves
    its buffers cached in the pool (150 MiB after reading 8,000 articles' tables), which a
    long-lived reader such as the query service would otherwise keep for good."""
    pa.default_memory_pool().release_unused()


def current_rows(table: pa.Table, as_of: int | None = None) -> pa.Table:
    """Per id, the newest row at or below ``as_of`` (all when None), tombstones dropped."""
    return _newest_per_id(table, as_of, keep_tombstones=False)


def _newest_per_id(table: pa.Table, as_of: int | None, *, keep_tombstones: bool) -> pa.Table:
    """The newest row version per id; the order and the mask are computed on the id and
    version columns alone and the table is copied once (or not at all when every id has one
    live row), so reading a large version does not hold several copies of it."""
    if as_of is not None:
        table = table.filter(pc.field(_VERSION) <= as_of)
    if table.num_rows == 0:
        return table
    ids = table.column("id")
    deleted = table.column(_DELETED).fill_null(False)
    if pc.count_distinct(ids).as_py() == table.num_rows and (
        keep_tombstones or not pc.any(deleted).as_py()
    ):
        return table
    keys = pa.table({"id": ids, "v": table.column(_VERSION)})
    order = pc.sort_indices(keys, sort_keys=[("id", "ascending"), ("v", "descending")])
    ordered = ids.take(order).combine_chunks()
    first = pc.not_equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
    keep = pa.concat_arrays([pa.array([True]), first.fill_null(True)])
    if not keep_tombstones:
        keep = pc.and_(keep, pc.invert(deleted.take(order).combine_chunks()))
    return table.take(order.filter(keep))


# ---- what a commit carries ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableChange:
    upserts: tuple[Any, ...] = ()  # whole rows (row objects of the table's class)
    deletes: tuple[str, ...] = ()  # ids
    # the upserts' split columns (``changes(split=…)``): ``id`` and those columns, in Arrow
    texts: pa.Table | None = None

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes)


@dataclass(frozen=True, slots=True)
class VersionInfo:
    version: int
    committed_at: str  # ISO wall-clock time of the commit
    meta: SnapshotMeta
    rows: dict[str, int] = field(default_factory=dict)  # live rows per table after it
    changed: dict[str, int] = field(default_factory=dict)  # rows it wrote per table
    commit: str = ""  # the id its rows carry in ``_commit``


# ---- the store -----------------------------------------------------------------------------


class GraphTables:
    """Implements ``graph.protocols.SnapshotStore`` on Delta tables (see the module docstring).

    ``write`` takes a whole snapshot and commits what differs from the latest version;
    ``commit`` takes the changes themselves. ``load`` returns a whole version.
    """

    def __init__(
        self,
        root: str | Path,
        keep: int = 5,
        *,
        storage_options: Mapping[str, str] | None = None,
        compact_every: int = 20,
        vacuum_hours: int = 1,
        omit: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        if keep < 1:
            raise ConfigError(f"keep must be >= 1 (the latest version is always kept); got {keep}")
        self.root = str(root).rstrip("/")
        self.keep = keep
        self.storage_options = dict(storage_options or {})
        self.compact_every = compact_every
        self.vacuum_hours = vacuum_hours
        # columns a reader never uses, left unread (their values empty in the rows it gets)
        self.omit = {table: tuple(columns) for table, columns in (omit or {}).items()}
        self._opened: dict[str, Any] = {}  # table -> DeltaTable, see ``_open``
        # the query service reads from worker threads: one at a time through the kept tables
        self._lock = threading.RLock()
        self._since_maintain = 0  # commits by this writer since its last ``maintain``
        self._maintain_next = 0  # which table of MAINTAINED its commits maintain next
        self.last_maintain_s = 0.0  # how long the last maintenance a commit made took
        self._infos: tuple[int, tuple[VersionInfo, ...]] | None = None  # by Delta version
        self._listed_by_me: int | None = None  # the version this writer listed last

    def uri(self, table: str) -> str:
        return f"{self.root}/{table}"

    def reads(self, table: str, column: str) -> bool:
        """Whether rows this store returns carry ``column`` (see ``omit``)."""
        return column not in self.omit.get(table, ())

    @property
    def remote(self) -> bool:
        """On an object store (each look at it is a request, not a ``stat``)."""
        return "://" in self.root and not self.root.startswith("file://")

    # -- reading ---------------------------------------------------------------------------

    def _open(self, table: str) -> Any:
        """The table's latest Delta version (None before its first commit). Opened tables are
        kept and brought up to date with the commits since (``update_incremental``), so a
        reader following versions does not replay each table's log from the start."""
        from deltalake import DeltaTable

        held = self._opened.get(table)
        if held is not None:
            held.update_incremental()
            return held
        try:
            dt = DeltaTable(self.uri(table), storage_options=self.storage_options or None)
        except Exception as err:  # deltalake raises TableNotFoundError (not exported alike)
            if (
                "no files in log segment" in str(err).lower()
                or "not a delta table" in str(err).lower()
                or type(err).__name__ == "TableNotFoundError"
            ):
                return None
            raise
        self._opened[table] = dt
        return dt

    def version_infos(self) -> list[VersionInfo]:
        """Every listed version still kept, oldest first."""
        out = self.version_infos_all()
        kept = set(self._kept(out))
        return [v for v in out if v.version in kept]

    @_storage_io
    def version_infos_all(self) -> list[VersionInfo]:
        """Every listed version, retention ignored (the writer's view), oldest first."""
        with self._lock:
            dt = self._open(VERSIONS)
            if dt is None:
                return []
            # read again only when the versions table moved (a commit, or maintenance):
            # writers and followers ask several times per version
            if self._infos is not None and self._infos[0] == dt.version():
                return list(self._infos[1])
            delta_version, rows = dt.version(), dt.to_pyarrow_table().to_pylist()
        out = []
        for row in rows:
            try:
                meta = orjson.loads(row["meta"])
                out.append(
                    VersionInfo(
                        int(row["version"]),
                        str(row["committed_at"]),
                        CODEC.decode(SnapshotMeta, meta["meta"]),
                        dict(meta.get("rows", {})),
                        dict(meta.get("changed", {})),
                        str(meta.get("commit", "")),
                    )
                )
            except (orjson.JSONDecodeError, DecodeError, KeyError, TypeError) as err:
                raise SnapshotCorruptError(
                    Path(self.uri(VERSIONS)), f"version {row.get('version')}: {err}"
                ) from err
        out.sort(key=lambda v: v.version)
        with self._lock:
            self._infos = (delta_version, tuple(out))
        return out

    def _kept(self, infos: Sequence[VersionInfo]) -> list[int]:
        """The last ``keep`` community-run versions and every light commit after the oldest
        of them (light commits come every second or so; retention counts runs)."""
        runs = [v.version for v in infos if v.meta.kind != "rows"]
        if len(runs) <= self.keep:
            return [v.version for v in infos]
        oldest = runs[-self.keep]
        return [v.version for v in infos if v.version >= oldest]

    def versions(self) -> list[int]:
        return [v.version for v in self.version_infos()]

    def latest_version(self) -> int | None:
        versions = self.versions()
        return versions[-1] if versions else None

    def next_version(self) -> int:
        return (self.latest_version() or 0) + 1

    def resolve(self, as_of: int | str | datetime | None) -> VersionInfo:
        """The kept version a reader asks for: a number, an ISO time (the newest version
        committed at or before it), or None for the latest. ``SnapshotNotFoundError`` names
        the oldest version kept when the request is older."""
        infos = self.version_infos()
        if not infos:
            raise SnapshotNotFoundError(f"no graph version has been committed in {self.root}")
        if as_of is None:
            return infos[-1]
        if isinstance(as_of, int):
            found = [v for v in infos if v.version == as_of]
            if found:
                return found[0]
            if as_of > infos[-1].version:
                raise SnapshotNotFoundError(
                    f"version {as_of} does not exist yet; the latest is {infos[-1].version}"
                )
            raise SnapshotNotFoundError(
                f"version {as_of} is older than retention; the oldest version kept is "
                f"{infos[0].version} (committed {infos[0].committed_at})"
            )
        when = as_of if isinstance(as_of, datetime) else _parse_time(as_of)
        before = [v for v in infos if _parse_time(v.committed_at) <= when]
        if not before:
            raise SnapshotNotFoundError(
                f"no version kept was committed at or before {when.isoformat()}; the oldest "
                f"version kept is {infos[0].version} (committed {infos[0].committed_at})"
            )
        return before[-1]

    @_storage_io
    def read_table(
        self,
        table: str,
        as_of: int,
        since: int | None = None,
        listed: Sequence[VersionInfo] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """The raw row versions of ``table`` with ``since < _version <= as_of`` written by
        listed commits (``listed``: the versions listed now, read when not given); only
        ``columns`` (with the row-version columns) when given."""
        listed = self.version_infos_all() if listed is None else listed
        with self._lock:
            dt = self._open(table)
            if dt is None:
                return table_schema(table).arrow.empty_table()
            dataset = dt.to_pyarrow_dataset()
            condition = (pc.field(_VERSION) <= as_of) & _listed_rows(dataset.schema, listed)
            if since is not None:
                condition = condition & (pc.field(_VERSION) > since)
                dataset = _files_between(dt, dataset, since, as_of)
            if not self.remote:
                dataset = _on_local_disk(dataset, dt.table_uri)
        omitted = self.omit.get(table, ())
        wanted = None
        if columns is not None:
            wanted = [c for c in dataset.schema.names if c in columns or c in _ROW_VERSION]
        elif omitted:
            wanted = [c for c in dataset.schema.names if c not in omitted]
        return dataset.to_table(filter=condition, columns=wanted)

    def load(
        self, version: int | str | datetime | None = None, *, text_sink: TextSink | None = None
    ) -> Snapshot:
        """The whole graph as of ``version`` (see ``resolve``), derived columns filled in.
        ``text_sink``: the columns it names (``split``) go to it as Arrow (``id`` and those
        columns, one call per table) and the rows carry them empty."""
        info = self.resolve(version)
        listed = self.version_infos_all()

        def read(name: str, columns: Sequence[str] | None = None) -> pa.Table:
            return current_rows(self.read_table(name, info.version, listed=listed, columns=columns))

        # the derived columns need a few narrow columns of four tables; each table is then
        # read whole and turned into rows on its own, so a reader never holds every table's
        # Arrow buffers besides the rows (the peak memory of a load is the rows and one table)
        narrow = {name: read(name, columns) for name, columns in DERIVED_INPUTS.items()}
        derived = derived_columns(
            narrow,
            community_lists=self.reads("communities", "text_unit_ids"),
            combined_degrees=self.reads("relationships", "combined_degree"),
        )
        narrow_ids = {name: t.column("id") for name, t in narrow.items()}
        del narrow
        tables = {}
        for name in TABLES:
            split = text_sink.split(name) if text_sink is not None else ()
            if text_sink is not None and split:
                # the bulk text read on its own and handed over before the rest is read, so
                # the rows are never made beside the text's Arrow buffers
                text_sink.add(name, read(name, ("id", *split)))
                release_memory()
                rest = [c for c in table_schema(name).fields if self.reads(name, c)]
                whole = read(name, [c for c in rest if c not in split])
            else:
                whole = read(name)
            values = derived.get(name)
            if values is not None and not whole.column("id").equals(narrow_ids[name]):
                values = _realigned(values, narrow_ids[name], whole.column("id"))
            tables[name] = arrow_to_rows(name, whole, values)
            del whole
            release_memory()  # each table's read buffers go back before the next is read
        return Snapshot(meta=info.meta, **tables)

    @_storage_io
    def human_ids(self, table: str, version: int) -> tuple[int | None, dict[str, int]]:
        """Of ``table`` up to ``version``: the largest ``human_readable_id`` any row version
        ever had (None for none), and each current row's id and ``human_readable_id``."""
        history = self.read_table(table, version, columns=["id", "human_readable_id"])
        if history.num_rows == 0:
            return None, {}
        top = pc.max(history.column("human_readable_id")).as_py()
        now = current_rows(history)
        pairs = zip(
            now.column("id").to_pylist(), now.column("human_readable_id").to_pylist(), strict=True
        )
        return top, {k: int(n) for k, n in pairs if n is not None}

    @_storage_io
    def row(
        self, table: str, row_id: str, as_of: int, columns: Sequence[str]
    ) -> dict[str, Any] | None:
        """Some columns of one row as of a version (None: not there), as stored. For what
        the query service leaves out of its index (``QUERY_OMITS``) and a page shows for one
        row: a document's text, a community's size history."""
        rows = self.read_table(table, as_of, columns=["id", *columns])
        rows = current_rows_with_tombstones(rows.filter(pc.equal(rows.column("id"), row_id)))
        if rows.num_rows == 0 or rows.column(_DELETED).fill_null(False)[0].as_py():
            return None
        found = rows.to_pylist()[0]
        return {c: found.get(c) for c in columns}

    @_storage_io
    def document_status(self, ids: Iterable[str]) -> dict[str, bool]:
        """Of ``ids``, those the documents table ever held as of the latest version: True
        while a document is there, False once it was deleted (an id never indexed is left
        out). Reads the id column alone."""
        wanted = set(ids)
        latest = self.latest_listed()
        if latest is None or not wanted:
            return {}
        rows = self.read_table("documents", latest, columns=["id"])
        rows = rows.filter(pc.is_in(rows.column("id"), pa.array(sorted(wanted), pa.string())))
        rows = current_rows_with_tombstones(rows)
        deleted = rows.column(_DELETED).fill_null(False).to_pylist()
        return {i: not d for i, d in zip(rows.column("id").to_pylist(), deleted, strict=True)}

    @_storage_io
    def pointer_stamp(self) -> tuple[int, int, int] | None:
        """A cheap change detector for readers: it changes whenever a version is listed."""
        if self.remote:
            with self._lock:
                dt = self._open(VERSIONS)
                return None if dt is None else (int(dt.version()), 0, 0)
        try:
            st = os.stat(os.path.join(self.root, VERSIONS, "_delta_log"))
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def changes(
        self, since: int, until: int, split: Mapping[str, tuple[str, ...]] | None = None
    ) -> dict[str, TableChange]:
        """What versions ``since+1 .. until`` changed, per table: the rows as of ``until`` of
        every id written in between (tombstoned ids as deletes). ``split``: per table, the
        columns handed over as Arrow (``TableChange.texts``) and left empty in the rows."""
        out: dict[str, TableChange] = {}
        listed = self.version_infos_all()
        # a light commit writes five tables and a run often fewer than all seven: the tables
        # no version in between wrote are not opened (on an object store each is requests),
        # as far as the listing says what each wrote
        between = [v for v in listed if since < v.version <= until]
        known = bool(listed) and listed[0].version <= since and all(v.changed for v in between)
        written = {n for v in between for n in v.changed}
        for name in TABLES:
            if known and name not in written:
                out[name] = TableChange()
                continue
            rows = current_rows_with_tombstones(self.read_table(name, until, since, listed=listed))
            deleted = rows.filter(rows.column(_DELETED).fill_null(False))
            live = rows.filter(pc.invert(rows.column(_DELETED).fill_null(False)))
            columns = (split or {}).get(name, ())
            texts = live.select(["id", *columns]) if columns else None
            if columns:
                live = live.drop_columns(list(columns))
            out[name] = TableChange(
                arrow_to_rows(name, live), tuple(deleted.column("id").to_pylist()), texts
            )
        return out

    # -- writing ---------------------------------------------------------------------------

    def write(self, snapshot: Snapshot, known: KnownRows | None = None) -> KnownRows:
        """Commit ``snapshot`` as its ``meta.version``: only the rows that differ from the
        latest version's are written. ``known`` is what the writer remembers of the version
        it wrote last (row digests); when that is not the latest version, the latest is read
        back. Returns what to remember of this one."""
        latest = self.latest_listed()
        _reject_stale(snapshot.meta.version, latest)
        if latest is not None and (known is None or known.version != latest):
            known = KnownRows.of(self.load(latest))
        digests = {name: row_digests(name, getattr(snapshot, name)) for name in TABLES}
        changes = {}
        for name in TABLES:
            before = {} if known is None else known.digests.get(name, {})
            now = digests[name]
            changes[name] = TableChange(
                tuple(r for r in getattr(snapshot, name) if before.get(r.id) != now[r.id]),
                tuple(sorted(k for k in before if k not in now)),
            )
        self.commit(snapshot.meta, changes)
        return KnownRows(snapshot.meta.version, digests)

    def write_rows(
        self,
        meta: SnapshotMeta,
        rows: Mapping[str, Sequence[Any]],
        known: KnownRows | None,
        *,
        deletes: Mapping[str, Iterable[str]] | None = None,
        complete: Iterable[str] = (),
        always: bool = False,
    ) -> KnownRows | None:
        """Commit some rows of some tables as ``meta.version``: ``rows`` upserted where they
        differ from ``known``, the ids in ``deletes`` (and, for the tables named in
        ``complete``, whose rows are all given, every id not given) tombstoned where the
        table holds them; every other row stays as it is, and the version's row counts are
        the tables'. With nothing to change, nothing is committed (returns None) unless
        ``always``; else returns what to remember of the new version."""
        latest = self.latest_listed()
        _reject_stale(meta.version, latest)
        if latest is not None and (known is None or known.version != latest):
            known = KnownRows.of(self.load(latest))
        before = {} if known is None else known.digests
        deletes = deletes or {}
        whole = set(complete)
        changes: dict[str, TableChange] = {}
        digests = dict(before)
        for name in set(rows) | set(deletes) | whole:
            had = before.get(name, {})
            now = row_digests(name, rows.get(name, ()))
            upserts = tuple(r for r in rows.get(name, ()) if had.get(r.id) != now[r.id])
            gone = {i for i in deletes.get(name, ()) if i in had and i not in now}
            if name in whole:
                gone.update(i for i in had if i not in now)
            if upserts or gone:
                changes[name] = TableChange(upserts, tuple(sorted(gone)))
                table = {**had, **{r.id: now[r.id] for r in upserts}}
                for i in gone:
                    del table[i]
                digests[name] = table
        if not changes and not always:
            return None
        counts = {**meta.counts, **{name: len(digests.get(name, {})) for name in TABLES}}
        self.commit(dataclasses.replace(meta, counts=counts), changes)
        return KnownRows(meta.version, digests)

    @_storage_io
    def commit(self, meta: SnapshotMeta, changes: Mapping[str, TableChange]) -> VersionInfo:
        """Append ``changes`` as version ``meta.version`` (atomic across tables, see above)."""
        from deltalake import write_deltalake

        version = meta.version
        if version < 1:
            raise GraphTablesError(f"graph versions start at 1; got {version}")
        infos = self.version_infos_all()
        latest = infos[-1].version if infos else None
        _reject_stale(version, latest)
        if latest is None or latest != self._listed_by_me:
            # a writer may have died between appending rows and listing them (when this one
            # listed the latest version itself, its own appends since were all listed)
            self._drop_unlisted(latest or 0)
        self._listed_by_me = None  # until this version is listed
        changed: dict[str, int] = {}
        rows = dict(infos[-1].rows) if infos else {}
        commit = uuid.uuid4().hex  # rows of a writer that loses the race stay invisible
        for name in TABLES:
            change = changes.get(name, TableChange())
            if not change:
                continue
            batch = rows_to_arrow(name, change.upserts, version, change.deletes, commit)
            write_deltalake(
                self.uri(name),
                batch,
                mode="append",
                schema_mode="merge",  # a column the row class gained since (see above)
                storage_options=self.storage_options or None,
            )
            changed[name] = batch.num_rows
        for name in TABLES:  # live row counts come from the snapshot's own counts when given
            if name in meta.counts:
                rows[name] = meta.counts[name]
        committed_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        record = {
            "format": FORMAT,
            "meta": CODEC.encode(meta),
            "rows": rows,
            "changed": changed,
            "commit": commit,
        }
        entry = pa.table(
            {
                "version": pa.array([version], pa.int64()),
                "committed_at": pa.array([committed_at]),
                "meta": pa.array([orjson.dumps(record).decode()]),
            }
        )
        if self.latest_listed() != latest:  # another writer listed a version meanwhile
            raise StaleSnapshotError(version, self.latest_listed() or 0)
        write_deltalake(
            self.uri(VERSIONS), entry, mode="append", storage_options=self.storage_options or None
        )
        self._listed_by_me = version
        info = VersionInfo(version, committed_at, meta, rows, changed, commit)
        self._since_maintain += 1
        # maintenance of every table at once takes seconds on a large graph, and the writer
        # makes a light commit every second or so: once due, each commit maintains one table
        if self._since_maintain >= self.compact_every:
            started = time.monotonic()
            self.maintain(only=MAINTAINED[self._maintain_next])
            self.last_maintain_s = round(time.monotonic() - started, 3)
            self._maintain_next = (self._maintain_next + 1) % len(MAINTAINED)
            if self._maintain_next == 0:
                self._since_maintain = 0
        return info

    def latest_listed(self) -> int | None:
        infos = self.version_infos_all()
        return infos[-1].version if infos else None

    def _drop_unlisted(self, latest: int) -> None:
        """Rows of versions above the latest listed one: a writer died before listing them."""
        for name in TABLES:
            dt = self._open(name)
            if dt is None:
                continue
            if dt.to_pyarrow_dataset().count_rows(filter=pc.field(_VERSION) > latest):
                log.warning("graph table %s: dropping rows of unlisted versions > %d", name, latest)
                dt.delete(f"{_VERSION} > {latest}")

    # -- retention -------------------------------------------------------------------------

    @_storage_io
    def maintain(self, only: str | None = None) -> dict[str, Any]:
        """Compact small files, drop row versions older than retention needs, vacuum files no
        Delta version needs any more, checkpoint the logs: of every table, or ``only`` one."""
        from deltalake import write_deltalake

        infos = self.version_infos_all()
        if not infos:
            return {}
        kept = self._kept(infos)
        oldest = kept[0]
        report: dict[str, Any] = {}
        for name in MAINTAINED if only is None else (only,):
            dt = self._open(name)
            if dt is None:
                continue
            compact = True
            if name == VERSIONS:
                table = dt.to_pyarrow_table()
                stale = pc.less(table.column("version"), oldest)
                if pc.any(stale).as_py():
                    write_deltalake(
                        self.uri(name),
                        table.filter(pc.invert(stale)),
                        mode="overwrite",
                        storage_options=self.storage_options or None,
                    )
            else:
                files, stored = _file_stats(dt)
                live = infos[-1].rows.get(name, 0)
                # the row versions retention no longer needs are worth dropping only when they
                # outnumber the live rows; the file statistics say so without reading the table
                if stored > 2 * live:
                    table = dt.to_pyarrow_table()
                    needed = needed_rows(
                        table.filter(_listed_rows(table.schema, infos)),
                        oldest,
                        keep_tombstones=name == "documents",
                    )
                    if needed.num_rows < table.num_rows // 2:
                        write_deltalake(
                            self.uri(name),
                            needed,
                            mode="overwrite",
                            storage_options=self.storage_options or None,
                        )
                        report[name] = {"rows_dropped": table.num_rows - needed.num_rows}
                        files = 1
                # with few files compacting would rewrite the table for nothing
                compact = files >= COMPACT_FILES
            dt = self._open(name)
            if compact:  # files already near the target are left alone: cost follows new files
                dt.optimize.compact(target_size=COMPACT_TARGET_BYTES)
                dt = self._open(name)
            dt.vacuum(
                retention_hours=self.vacuum_hours,
                dry_run=False,
                enforce_retention_duration=False,
            )
            dt.create_checkpoint()
            dt.cleanup_metadata()
        return report


def _file_stats(dt: Any) -> tuple[int, int]:
    """(data files, row versions stored) of a Delta table's current version, from its log."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    if not actions.num_rows:
        return 0, 0
    return actions.num_rows, int(pc.sum(actions.column("num_records")).as_py() or 0)


def _listed_rows(schema: pa.Schema, listed: Sequence[VersionInfo]) -> pc.Expression:
    """Rows a reader may see: written by the commit that listed their version, or older than
    every version listed (rows maintenance kept: they were listed when it ran). Two writers
    that took the same version number both append rows; only the one that listed it counts."""
    if _COMMIT not in schema.names or not listed:
        return pc.scalar(True)
    oldest = min(v.version for v in listed)
    commits = [v.commit for v in listed if v.commit]
    return (pc.field(_VERSION) < oldest) | pc.field(_COMMIT).isin(commits)


def _on_local_disk(dataset: pads.FileSystemDataset, table_uri: str) -> pads.FileSystemDataset:
    """The same files (with the statistics that prune them) read through Arrow's own local
    file system instead of delta-rs's file handler: reading 8,000 articles' tables through
    the handler left 70-100 MiB behind in the process, through Arrow 35-45 MiB."""
    root = table_uri.removeprefix("file://")
    local = pafs.LocalFileSystem()
    fragments = [
        dataset.format.make_fragment(
            os.path.join(root, f.path), local, partition_expression=f.partition_expression
        )
        for f in dataset.get_fragments()
    ]
    return pads.FileSystemDataset(fragments, dataset.schema, dataset.format, local)


def _files_between(dt: Any, dataset: pads.FileSystemDataset, since: int, until: int) -> Any:
    """Only the files holding rows of versions ``since+1 .. until``, chosen by the
    ``_version`` statistics of each file in the Delta log (every commit is a file of its own
    until compaction), so following a few versions does not open every file of the table."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    lo, hi = f"min.{_VERSION}", f"max.{_VERSION}"
    if lo not in actions.column_names or hi not in actions.column_names:
        return dataset  # no statistics: every file is read
    wanted = {
        path
        for path, first, last in zip(
            actions.column("path").to_pylist(),
            actions.column(lo).to_pylist(),
            actions.column(hi).to_pylist(),
            strict=True,
        )
        if first is None or last is None or (last > since and first <= until)
    }
    fragments = [
        f
        for f in dataset.get_fragments()
        if f.path in wanted or any(f.path.endswith(f"/{p}") for p in wanted)
    ]
    return pads.FileSystemDataset(fragments, dataset.schema, dataset.format, dataset.filesystem)


def needed_rows(table: pa.Table, oldest: int, *, keep_tombstones: bool = False) -> pa.Table:
    """The row versions a reader of any version from ``oldest`` on can need: all rows newer
    than ``oldest``, and per id the newest row at or below it (unless a tombstone, which
    ``keep_tombstones`` keeps: the documents table remembers every deleted document, so
    deleting one again is told apart from deleting an id never seen)."""
    newer = table.filter(pc.field(_VERSION) > oldest)
    base = _newest_per_id(table, oldest, keep_tombstones=keep_tombstones)
    return pa.concat_tables([base, newer])


def current_rows_with_tombstones(table: pa.Table) -> pa.Table:
    """Per id, the newest row version (a tombstone stays, as a delete)."""
    return _newest_per_id(table, None, keep_tombstones=True)


def parse_as_of(text: str | int | None) -> int | str | None:
    """An as-of given by a user: a version number (digits) or an ISO time, kept as text."""
    if text is None or isinstance(text, int):
        return text
    text = text.strip()
    if text.isascii() and text.isdigit():  # "¹" is a digit to str.isdigit, not to int()
        return int(text)
    _parse_time(text)  # refuse a malformed time here, with the message saying what is expected
    return text


def _parse_time(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise GraphTablesError(
            f"{text!r} is neither a version number nor an ISO time (e.g. 2026-12-01T09:00:00Z)"
        ) from err
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _reject_stale(version: int, current: int | None) -> None:
    if current is not None and version <= current:
        raise StaleSnapshotError(version, current)


# ---- opening, and converting the old snapshot directories ----------------------------------


# what answering questions never reads: a report's Markdown (``full_content``) repeats its
# title, summary and findings and is built from them on demand (``SnapshotReport.body``), and
# its JSON form (a third copy) is only for GraphRAG's export
QUERY_OMITS: Mapping[str, tuple[str, ...]] = {
    "community_reports": ("full_content", "full_content_json"),
    # searches reach relationships and claims through entities
    "text_units": ("relationship_ids", "covariate_ids"),
    # answers quote text units; a document's text and raw fields are the export's
    "documents": ("text", "raw_data"),
    # derived, not stored: a community's relationships and text units are its members', and a
    # relationship's combined degree its ends' degrees (``QueryIndex.combined_degree``)
    "communities": ("relationship_ids", "text_unit_ids", "size_history"),
    "relationships": ("combined_degree", "strength"),
}


def open_graph_store(
    settings: Settings, *, convert: bool = False, for_queries: bool = False
) -> GraphTables:
    """The namespace's graph tables. ``convert`` (writers: the community job, ``kgrag
    migrate``) first converts a data directory that still holds only the JSON-lines snapshots
    of earlier releases (its latest snapshot becomes the first graph version).
    ``for_queries``: a reader for the query index, which leaves ``QUERY_OMITS`` unread."""
    store = GraphTables(
        settings.tables_uri,
        keep=settings.community.keep_snapshots,
        storage_options=delta_storage_options(settings.tables),
        compact_every=settings.community.compact_every,
        omit=QUERY_OMITS if for_queries else None,
    )
    if convert:
        convert_legacy_snapshots(settings, store)
    return store


def legacy_snapshot_version(settings: Settings) -> int | None:
    """The latest snapshot in the old format under the namespace, if any."""
    from core.snapshot_store import SnapshotStore

    root = settings.snapshots_dir
    if not (root / "LATEST").is_file():
        return None
    return SnapshotStore(root).latest_version()


def legacy_hint(settings: Settings, store: GraphTables) -> str | None:
    """What to run when the data directory holds old snapshots and no graph version yet."""
    version = legacy_snapshot_version(settings)
    if version is None or store.latest_listed() is not None:
        return None
    return (
        f"{settings.snapshots_dir} holds graph snapshots in the format of an earlier release "
        f"(latest: version {version}) and there are no graph tables yet: run `kgrag migrate` "
        "(or start the worker, whose community job converts them) and ask again"
    )


def convert_legacy_snapshots(settings: Settings, store: GraphTables) -> int | None:
    """Convert the old snapshot directory's latest snapshot into the first graph version,
    once (nothing happens when graph tables exist). Returns the version converted."""
    from core.snapshot_store import SnapshotStore

    if legacy_hint(settings, store) is None:
        return None
    old = SnapshotStore(settings.snapshots_dir)
    snapshot = old.load()
    store.write(snapshot)
    log.warning(
        "converted snapshot %d from %s into graph tables at %s; the old directory is no "
        "longer read and may be deleted",
        snapshot.meta.version,
        settings.snapshots_dir,
        store.root,
    )
    return snapshot.meta.version
