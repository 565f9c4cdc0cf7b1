"""The graph store: versioned Delta Lake tables written as delta commits of the rows that changed.

Why Delta Lake (delta-rs through ``deltalake``): atomic commits, time travel and an open format
that DuckDB, pandas, polars and Spark read, on a local path today and an object store later,
instead of a home-made directory protocol.

Layout under ``root`` (a path or an URI delta-rs understands)::

    entities/ relationships/ communities/ community_reports/ text_units/ documents/ claims/
    _versions/     one row per graph version: its number, time, meta and each table's rows

Each table is a log of row versions read with one rule (``core.tables.merge_on_read``).

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

Retention and small files: ``core.tables.maintenance``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from core.tables import maintenance
from core.tables.codecs import rows_to_arrow
from core.tables.errors import GraphTablesError, StaleSnapshotError, reject_stale, storage_io
from core.tables.reader import GraphTableReader
from core.tables.schema import VERSION_COLUMN, VERSIONS
from core.tables.versions import TableChange, VersionInfo
from graph.versions.model import Snapshot, SnapshotMeta
from graph.versions.rows import CODEC, TABLES, KnownRows, digests_at, known_after, row_digests

log = logging.getLogger(__name__)

FORMAT = 2  # graph-table format (1 was the JSON-lines snapshot directories)


class GraphTables(GraphTableReader):
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
        super().__init__(root, keep, storage_options=storage_options, omit=omit)
        self.compact_every = compact_every
        self.vacuum_hours = vacuum_hours
        self._since_maintain = 0  # commits by this writer since its last ``maintain``
        self._maintain_next = 0  # which table of MAINTAINED its commits maintain next
        self.last_maintain_s = 0.0  # how long the last maintenance a commit made took
        self._listed_by_me: int | None = None  # the version this writer listed last

    def write(self, snapshot: Snapshot, known: KnownRows | None = None) -> KnownRows:
        """Commit ``snapshot`` as its ``meta.version``: only the rows that differ from the
        latest version's are written. ``known`` is what the writer remembers of the version
        it wrote last (row digests); when that is not the latest version, the latest is read
        back. Returns what to remember of this one."""
        latest = self.latest_listed()
        reject_stale(snapshot.meta.version, latest)
        if latest is not None and (known is None or known.version != latest):
            known = KnownRows.of(self.load(latest))
        digests: dict[str, MutableMapping[str, bytes]] = {
            name: row_digests(name, getattr(snapshot, name)) for name in TABLES
        }
        changes = {}
        for name in TABLES:
            before = {} if known is None else known.digests.get(name, {})
            now = digests[name]
            was = digests_at(before, now)
            changes[name] = TableChange(
                tuple(r for r in getattr(snapshot, name) if was.get(r.id) != now[r.id]),
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
        reject_stale(meta.version, latest)
        if latest is not None and (known is None or known.version != latest):
            known = KnownRows.of(self.load(latest))
        before = {} if known is None else known.digests
        deletes = deletes or {}
        whole = set(complete)
        changes: dict[str, TableChange] = {}
        counts = {name: len(before.get(name, {})) for name in TABLES}
        updates: dict[str, tuple[dict[str, bytes], set[str]]] = {}
        for name in set(rows) | set(deletes) | whole:
            had = before.get(name, {})
            now = row_digests(name, rows.get(name, ()))
            was = digests_at(had, now)
            upserts = tuple(r for r in rows.get(name, ()) if was.get(r.id) != now[r.id])
            gone = {i for i in deletes.get(name, ()) if i not in now and i in had}
            if name in whole:
                gone.update(i for i in had if i not in now)
            if upserts or gone:
                changes[name] = TableChange(upserts, tuple(sorted(gone)))
                updates[name] = ({r.id: now[r.id] for r in upserts}, gone)
                counts[name] += len({r.id for r in upserts if r.id not in was}) - len(gone)
        if not changes and not always:
            return None
        self.commit(dataclasses.replace(meta, counts={**meta.counts, **counts}), changes)
        return known_after(known, meta.version, updates)

    @storage_io
    def commit(self, meta: SnapshotMeta, changes: Mapping[str, TableChange]) -> VersionInfo:
        """Append ``changes`` as version ``meta.version`` (atomic across tables, see above)."""
        from deltalake import write_deltalake

        version = meta.version
        if version < 1:
            raise GraphTablesError(f"graph versions start at 1; got {version}")
        infos = self.version_infos_all()
        latest = infos[-1].version if infos else None
        reject_stale(version, latest)
        if latest is None or latest != self._listed_by_me:
            # a writer may have died between appending rows and listing them (when this one
            # listed the latest version itself, its own appends since were all listed)
            self._drop_unlisted(latest or 0)
        self._listed_by_me = None  # until this version is listed
        commit = uuid.uuid4().hex  # rows of a writer that loses the race stay invisible
        changed = self._append(version, changes, commit)
        rows = dict(infos[-1].rows) if infos else {}
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
        entry = _listing_row(version, committed_at, record)
        if self.latest_listed() != latest:  # another writer listed a version meanwhile
            raise StaleSnapshotError(version, self.latest_listed() or 0)
        write_deltalake(
            self.uri(VERSIONS), entry, mode="append", storage_options=self.storage_options or None
        )
        self._listed_by_me = version
        self._maintain_if_due()
        return VersionInfo(version, committed_at, meta, rows, changed, commit)

    def _append(
        self, version: int, changes: Mapping[str, TableChange], commit: str
    ) -> dict[str, int]:
        """Append each table's change as rows of ``version``; returns the rows written, per
        table."""
        from deltalake import write_deltalake

        changed: dict[str, int] = {}
        for name in TABLES:
            change = changes.get(name, TableChange())
            if not change:
                continue
            batch = rows_to_arrow(name, change.upserts, version, change.deletes, commit)
            write_deltalake(
                self.uri(name),
                batch,
                mode="append",
                schema_mode="merge",  # a field the row class gained (``core.tables.merge_on_read``)
                storage_options=self.storage_options or None,
            )
            changed[name] = batch.num_rows
        return changed

    def _maintain_if_due(self) -> None:
        """Maintenance of every table at once takes seconds on a large graph, and the writer
        makes a light commit every second or so: once due, each commit maintains one table."""
        self._since_maintain += 1
        if self._since_maintain < self.compact_every:
            return
        started = time.monotonic()
        self.maintain(only=maintenance.MAINTAINED[self._maintain_next])
        self.last_maintain_s = round(time.monotonic() - started, 3)
        self._maintain_next = (self._maintain_next + 1) % len(maintenance.MAINTAINED)
        if self._maintain_next == 0:
            self._since_maintain = 0

    def _drop_unlisted(self, latest: int) -> None:
        """Rows of versions above the latest listed one: a writer died before listing them."""
        for name in TABLES:
            dt = self.open_table(name)
            if dt is None:
                continue
            if dt.to_pyarrow_dataset().count_rows(filter=pc.field(VERSION_COLUMN) > latest):
                log.warning("graph table %s: dropping rows of unlisted versions > %d", name, latest)
                dt.delete(f"{VERSION_COLUMN} > {latest}")

    @storage_io
    def maintain(self, only: str | None = None) -> dict[str, Any]:
        """Compact, drop row versions retention no longer needs, vacuum and checkpoint every
        table, or ``only`` one (``core.tables.maintenance``)."""
        return maintenance.maintain(self, vacuum_hours=self.vacuum_hours, only=only)


def _listing_row(version: int, committed_at: str, record: Mapping[str, Any]) -> pa.Table:
    """The row of ``_versions`` that lists a version: its number, time and ``record`` (the
    format, meta, row counts, rows changed and commit id) as JSON."""
    return pa.table(
        {
            "version": pa.array([version], pa.int64()),
            "committed_at": pa.array([committed_at]),
            "meta": pa.array([orjson.dumps(record).decode()]),
        }
    )
