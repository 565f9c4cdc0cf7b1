"""Merge on read: a table's rows as of a version, from its log of row versions.

delta-rs rewrites every file a MERGE touches, so upserting a few hundred rows of a table kept
in a few large files rewrites all of it. Each table is instead a log of row versions: the
GraphRAG columns plus ``_version`` (the graph version that wrote the row) and ``_deleted``. A
commit appends only the rows that changed and a tombstone per deleted id; the table *as of*
version V is, per ``id``, the newest row with ``_version <= V`` unless it is a tombstone
(:func:`current_rows`). ``kgrag export`` and any Delta reader get the current rows with that
one rule. A field added to a row class (with a default) joins its table's schema at the next
commit; rows of the files written before read it as that default.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from core.tables.schema import COMMIT_COLUMN, DELETED_COLUMN, VERSION_COLUMN
from core.tables.versions import VersionInfo


def current_rows(table: pa.Table, as_of: int | None = None) -> pa.Table:
    """Per id, the newest row at or below ``as_of`` (all when None), tombstones dropped."""
    return _newest_per_id(table, as_of, keep_tombstones=False)


def current_rows_with_tombstones(table: pa.Table) -> pa.Table:
    """Per id, the newest row version (a tombstone stays, as a delete)."""
    return _newest_per_id(table, None, keep_tombstones=True)


def needed_rows(table: pa.Table, oldest: int, *, keep_tombstones: bool = False) -> pa.Table:
    """The row versions a reader of any version from ``oldest`` on can need: all rows newer
    than ``oldest``, and per id the newest row at or below it (unless a tombstone, which
    ``keep_tombstones`` keeps: the documents table remembers every deleted document, so
    deleting one again is told apart from deleting an id never seen)."""
    newer = table.filter(pc.field(VERSION_COLUMN) > oldest)
    base = _newest_per_id(table, oldest, keep_tombstones=keep_tombstones)
    return pa.concat_tables([base, newer])


def listed_rows(schema: pa.Schema, listed: Sequence[VersionInfo]) -> pc.Expression:
    """Rows a reader may see: written by the commit that listed their version, or older than
    every version listed (rows maintenance kept: they were listed when it ran). Two writers
    that took the same version number both append rows; only the one that listed it counts."""
    if COMMIT_COLUMN not in schema.names or not listed:
        return pc.scalar(True)
    oldest = min(v.version for v in listed)
    commits = [v.commit for v in listed if v.commit]
    return (pc.field(VERSION_COLUMN) < oldest) | pc.field(COMMIT_COLUMN).isin(commits)


def _newest_per_id(table: pa.Table, as_of: int | None, *, keep_tombstones: bool) -> pa.Table:
    """The newest row version per id; the order and the mask are computed on the id and
    version columns alone and the table is copied once (or not at all when every id has one
    live row), so reading a large version does not hold several copies of it."""
    if as_of is not None:
        table = table.filter(pc.field(VERSION_COLUMN) <= as_of)
    if table.num_rows == 0:
        return table
    ids = table.column("id")
    deleted = table.column(DELETED_COLUMN).fill_null(False)
    if pc.count_distinct(ids).as_py() == table.num_rows and (
        keep_tombstones or not pc.any(deleted).as_py()
    ):
        return table
    keys = pa.table({"id": ids, "v": table.column(VERSION_COLUMN)})
    order = pc.sort_indices(keys, sort_keys=[("id", "ascending"), ("v", "descending")])
    ordered = ids.take(order).combine_chunks()
    first = pc.not_equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1))
    keep = pa.concat_arrays([pa.array([True]), first.fill_null(True)])
    if not keep_tombstones:
        keep = pc.and_(keep, pc.invert(deleted.take(order).combine_chunks()))
    return table.take(order.filter(keep))
