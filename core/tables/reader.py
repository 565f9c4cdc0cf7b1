"""Reading graph tables: the versions listed, a table's rows as of one, what changed between two.

Readers only look at rows of versions listed in ``_versions`` (``core.tables.store`` says why)
and merge each table's row versions on read (``core.tables.merge_on_read``). Files carry
``_version`` statistics, so reading what changed between two versions opens only the files of
those commits. Any failure to reach the storage is a ``GraphStoreUnavailableError`` with a
one-line reason: a reader keeps the version it has.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from core.errors import ConfigError
from core.tables.codecs import arrow_to_rows
from core.tables.derived import DAYS_INPUT, DERIVED_INPUTS, derived_columns, realigned
from core.tables.errors import storage_io
from core.tables.merge_on_read import current_rows, current_rows_with_tombstones, listed_rows
from core.tables.schema import (
    DELETED_COLUMN,
    ROW_VERSION_COLUMNS,
    VERSION_COLUMN,
    VERSIONS,
    table_schema,
)
from core.tables.versions import (
    PointerStamp,
    TableChange,
    VersionInfo,
    kept_versions,
    resolve_version,
    version_info,
)
from graph.versions.model import Snapshot
from graph.versions.rows import TABLES


class TextSink(Protocol):
    """Takes a table's bulk columns apart while a version is read (``GraphTables.load``)."""

    def split(self, table: str) -> tuple[str, ...]: ...

    def add(self, table: str, texts: pa.Table) -> None: ...


def release_memory() -> None:
    """Hand the Arrow memory pool's free pages back to the system: reading a version leaves
    its buffers cached in the pool (150 MiB after reading 8,000 articles' tables), which a
    long-lived reader such as the query service would otherwise keep for good."""
    pa.default_memory_pool().release_unused()


class GraphTableReader:
    """The read side of ``core.tables.store.GraphTables``: versions listed, rows as of one.

    ``omit`` names columns a reader never uses: they are left unread (their values empty in
    the rows it gets). The query service reads from worker threads, so the Delta tables it
    keeps open are used one thread at a time.
    """

    def __init__(
        self,
        root: str | Path,
        keep: int = 5,
        *,
        storage_options: Mapping[str, str] | None = None,
        omit: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        if keep < 1:
            raise ConfigError(f"keep must be >= 1 (the latest version is always kept); got {keep}")
        self.root = str(root).rstrip("/")
        self.keep = keep
        self.storage_options = dict(storage_options or {})
        # columns a reader never uses, left unread (their values empty in the rows it gets)
        self.omit = {table: tuple(columns) for table, columns in (omit or {}).items()}
        self._opened: dict[str, Any] = {}  # table -> DeltaTable, see ``open_table``
        # the query service reads from worker threads: one at a time through the kept tables
        self._lock = threading.RLock()
        self._infos: tuple[int, tuple[VersionInfo, ...]] | None = None  # by Delta version

    def uri(self, table: str) -> str:
        return f"{self.root}/{table}"

    def reads(self, table: str, column: str) -> bool:
        """Whether rows this store returns carry ``column`` (see ``omit``)."""
        return column not in self.omit.get(table, ())

    @property
    def remote(self) -> bool:
        """On an object store (each look at it is a request, not a ``stat``)."""
        return "://" in self.root and not self.root.startswith("file://")

    def open_table(self, table: str) -> Any:
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

    # -- the versions listed ---------------------------------------------------------------

    def version_infos(self) -> list[VersionInfo]:
        """Every listed version still kept, oldest first."""
        out = self.version_infos_all()
        kept = set(kept_versions(out, self.keep))
        return [v for v in out if v.version in kept]

    @storage_io
    def version_infos_all(self) -> list[VersionInfo]:
        """Every listed version, retention ignored (the writer's view), oldest first."""
        with self._lock:
            dt = self.open_table(VERSIONS)
            if dt is None:
                return []
            # read again only when the versions table moved (a commit, or maintenance):
            # writers and followers ask several times per version
            if self._infos is not None and self._infos[0] == dt.version():
                return list(self._infos[1])
            delta_version, rows = dt.version(), dt.to_pyarrow_table().to_pylist()
        out = [version_info(row, self.uri(VERSIONS)) for row in rows]
        out.sort(key=lambda v: v.version)
        with self._lock:
            self._infos = (delta_version, tuple(out))
        return out

    def versions(self) -> list[int]:
        return [v.version for v in self.version_infos()]

    def latest_version(self) -> int | None:
        versions = self.versions()
        return versions[-1] if versions else None

    def next_version(self) -> int:
        return (self.latest_version() or 0) + 1

    def latest_listed(self) -> int | None:
        infos = self.version_infos_all()
        return infos[-1].version if infos else None

    def resolve(self, as_of: int | str | datetime | None) -> VersionInfo:
        """The kept version a reader asks for: a number, an ISO time (the newest version
        committed at or before it), or None for the latest. ``SnapshotNotFoundError`` names
        the oldest version kept when the request is older."""
        return resolve_version(self.version_infos(), as_of, self.root)

    @storage_io
    def pointer_stamp(self) -> PointerStamp | None:
        """A cheap change detector for readers: it changes whenever a version is listed."""
        if self.remote:
            with self._lock:
                dt = self.open_table(VERSIONS)
                return None if dt is None else (int(dt.version()), 0, 0)
        try:
            st = os.stat(os.path.join(self.root, VERSIONS, "_delta_log"))
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    # -- rows ------------------------------------------------------------------------------

    @storage_io
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
            dt = self.open_table(table)
            if dt is None:
                return table_schema(table).arrow.empty_table()
            dataset = dt.to_pyarrow_dataset()
            condition = (pc.field(VERSION_COLUMN) <= as_of) & listed_rows(dataset.schema, listed)
            if since is not None:
                condition = condition & (pc.field(VERSION_COLUMN) > since)
                dataset = _files_between(dt, dataset, since, as_of)
            if not self.remote:
                dataset = _on_local_disk(dataset, dt.table_uri)
        omitted = self.omit.get(table, ())
        wanted = None
        if columns is not None:
            wanted = [c for c in dataset.schema.names if c in columns or c in ROW_VERSION_COLUMNS]
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
        days = self.reads("communities", "mentions_per_day")
        narrow = {
            name: read(name, [c for c in columns if days or (name, c) != DAYS_INPUT])
            for name, columns in DERIVED_INPUTS.items()
        }
        derived = derived_columns(
            narrow,
            community_lists=self.reads("communities", "text_unit_ids"),
            combined_degrees=self.reads("relationships", "combined_degree"),
            community_days=days,
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
                values = realigned(values, narrow_ids[name], whole.column("id"))
            tables[name] = arrow_to_rows(name, whole, values)
            del whole
            release_memory()  # each table's read buffers go back before the next is read
        return Snapshot(meta=info.meta, **tables)

    @storage_io
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

    @storage_io
    def row(
        self, table: str, row_id: str, as_of: int, columns: Sequence[str]
    ) -> dict[str, Any] | None:
        """Some columns of one row as of a version (None: not there), as stored. For what
        the query service leaves out of its index (``QUERY_OMITS``) and a page shows for one
        row: a document's text, a community's size history."""
        rows = self.read_table(table, as_of, columns=["id", *columns])
        rows = current_rows_with_tombstones(rows.filter(pc.equal(rows.column("id"), row_id)))
        if rows.num_rows == 0 or rows.column(DELETED_COLUMN).fill_null(False)[0].as_py():
            return None
        found = rows.to_pylist()[0]
        return {c: found.get(c) for c in columns}

    @storage_io
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
        deleted = rows.column(DELETED_COLUMN).fill_null(False).to_pylist()
        return {i: not d for i, d in zip(rows.column("id").to_pylist(), deleted, strict=True)}

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
            deleted = rows.filter(rows.column(DELETED_COLUMN).fill_null(False))
            live = rows.filter(pc.invert(rows.column(DELETED_COLUMN).fill_null(False)))
            columns = (split or {}).get(name, ())
            texts = live.select(["id", *columns]) if columns else None
            if columns:
                live = live.drop_columns(list(columns))
            out[name] = TableChange(
                arrow_to_rows(name, live), tuple(deleted.column("id").to_pylist()), texts
            )
        return out


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
    lo, hi = f"min.{VERSION_COLUMN}", f"max.{VERSION_COLUMN}"
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
