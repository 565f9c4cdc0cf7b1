"""Retention and small files: what the writer's commits do to keep the tables cheap to read.

The versions of the last ``keep`` runs stay readable as of their number, with the light
commits between them. After ``compact_every`` commits the next commits maintain one table
each (``core.tables.store``): files below 1 MiB are compacted (Delta ``optimize``); rows
superseded before the oldest kept version are dropped by rewriting the table when they
outnumber the live ones; files no Delta version still needs are vacuumed after
``vacuum_hours`` (readers part-way through an older Delta version keep theirs meanwhile), and
a Delta checkpoint keeps opening a table cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from core.tables.merge_on_read import listed_rows, needed_rows
from core.tables.reader import GraphTableReader
from core.tables.schema import COMMIT_COLUMN, DELETED_COLUMN, VERSION_COLUMN, VERSIONS
from core.tables.versions import VersionInfo, kept_versions
from graph.versions.rows import TABLES

COMPACT_FILES = 8  # a table with fewer data files is left as it is by maintenance
COMPACT_TARGET_BYTES = 1024 * 1024  # compaction merges smaller files into ones this big
MAINTAINED = (*TABLES, VERSIONS)
# what deciding which row versions a reader needs reads of a table (``needed_rows``)
KEY_COLUMNS = ("id", VERSION_COLUMN, DELETED_COLUMN, COMMIT_COLUMN)


def maintain(
    tables: GraphTableReader, *, vacuum_hours: int, only: str | None = None
) -> dict[str, Any]:
    """Compact small files, drop row versions older than retention needs, vacuum files no
    Delta version needs any more, checkpoint the logs: of every table, or ``only`` one.
    Returns, per table that dropped rows, how many."""
    infos = tables.version_infos_all()
    if not infos:
        return {}
    oldest = kept_versions(infos, tables.keep)[0]
    report: dict[str, Any] = {}
    for name in MAINTAINED if only is None else (only,):
        dt = tables.open_table(name)
        if dt is None:
            continue
        compact = True
        if name == VERSIONS:
            _drop_old_versions(tables, dt, oldest)
        else:
            compact, dropped = _drop_superseded(tables, dt, name, infos, oldest)
            if dropped:
                report[name] = {"rows_dropped": dropped}
        dt = tables.open_table(name)
        if compact:  # files already near the target are left alone: cost follows new files
            dt.optimize.compact(target_size=COMPACT_TARGET_BYTES)
            dt = tables.open_table(name)
        dt.vacuum(retention_hours=vacuum_hours, dry_run=False, enforce_retention_duration=False)
        dt.create_checkpoint()
        dt.cleanup_metadata()
    return report


def _drop_old_versions(tables: GraphTableReader, dt: Any, oldest: int) -> None:
    """Rewrite the ``_versions`` table without the versions before ``oldest``, if any."""
    from deltalake import write_deltalake

    table = dt.to_pyarrow_table()
    stale = pc.less(table.column("version"), oldest)
    if pc.any(stale).as_py():
        write_deltalake(
            tables.uri(VERSIONS),
            table.filter(pc.invert(stale)),
            mode="overwrite",
            storage_options=tables.storage_options or None,
        )


def _drop_superseded(
    tables: GraphTableReader, dt: Any, name: str, infos: Sequence[VersionInfo], oldest: int
) -> tuple[bool, int]:
    """Rewrite table ``name`` with only the row versions a reader from ``oldest`` on needs,
    when those are under half its rows. Returns whether the table is worth compacting and
    how many rows were dropped."""
    from deltalake import write_deltalake

    files, stored = _file_stats(dt)
    live = infos[-1].rows.get(name, 0)
    dropped = 0
    # the row versions retention no longer needs are worth dropping only when they
    # outnumber the live rows; the file statistics say so without reading the table
    if stored > 2 * live and _worth_dropping(dt, name, infos, oldest):
        table = dt.to_pyarrow_table()
        needed = needed_rows(
            table.filter(listed_rows(table.schema, infos)),
            oldest,
            keep_tombstones=name == "documents",
        )
        if needed.num_rows < table.num_rows // 2:
            write_deltalake(
                tables.uri(name),
                needed,
                mode="overwrite",
                storage_options=tables.storage_options or None,
            )
            dropped = table.num_rows - needed.num_rows
            files = 1
    # with few files compacting would rewrite the table for nothing
    return files >= COMPACT_FILES, dropped


def _worth_dropping(dt: Any, name: str, infos: Sequence[VersionInfo], oldest: int) -> bool:
    """Whether the row versions a reader needs are under half the table's, decided from its
    key columns alone: reading every column (a text unit's text, a description) to find that
    nothing is worth dropping held the whole table in memory, which the Arrow allocator kept
    (measured on the text units of 100,000 articles: 1.4 GiB resident, gained for nothing)."""
    present = set(dt.schema().to_arrow().names)
    keys = dt.to_pyarrow_table(columns=[c for c in KEY_COLUMNS if c in present])
    needed = needed_rows(
        keys.filter(listed_rows(keys.schema, infos)), oldest, keep_tombstones=name == "documents"
    )
    return needed.num_rows < keys.num_rows // 2


def _file_stats(dt: Any) -> tuple[int, int]:
    """(data files, row versions stored) of a Delta table's current version, from its log."""
    actions = pa.table(dt.get_add_actions(flatten=True))
    if not actions.num_rows:
        return 0, 0
    return actions.num_rows, int(pc.sum(actions.column("num_records")).as_py() or 0)
