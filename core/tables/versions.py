"""What a graph version is to its readers and writer: its listing, its changes, retention.

A version exists once its row is in the ``_versions`` table (``core.tables.store``); a
``VersionInfo`` is that row decoded. Retention counts community runs, not commits: the last
``keep`` runs stay readable with the light commits between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from core.tables.errors import GraphTablesError, SnapshotCorruptError, SnapshotNotFoundError
from graph.codec import DecodeError
from graph.versions.model import SnapshotMeta
from graph.versions.rows import CODEC

PointerStamp = tuple[int, int, int]  # (inode, mtime ns, size) of a pointer; a change detector


@dataclass(frozen=True, slots=True)
class TableChange:
    """What one commit writes to one table."""

    upserts: tuple[Any, ...] = ()  # whole rows (row objects of the table's class)
    deletes: tuple[str, ...] = ()  # ids
    # the upserts' split columns (``changes(split=…)``): ``id`` and those columns, in Arrow
    texts: pa.Table | None = None

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes)


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One listed graph version, as its row in ``_versions`` says."""

    version: int
    committed_at: str  # ISO wall-clock time of the commit
    meta: SnapshotMeta
    rows: dict[str, int] = field(default_factory=dict)  # live rows per table after it
    changed: dict[str, int] = field(default_factory=dict)  # rows it wrote per table
    commit: str = ""  # the id its rows carry in ``_commit``


def version_info(row: dict[str, Any], listing: str) -> VersionInfo:
    """A row of the ``_versions`` table (at ``listing``) decoded."""
    try:
        meta = orjson.loads(row["meta"])
        return VersionInfo(
            int(row["version"]),
            str(row["committed_at"]),
            CODEC.decode(SnapshotMeta, meta["meta"]),
            dict(meta.get("rows", {})),
            dict(meta.get("changed", {})),
            str(meta.get("commit", "")),
        )
    except (orjson.JSONDecodeError, DecodeError, KeyError, TypeError) as err:
        raise SnapshotCorruptError(Path(listing), f"version {row.get('version')}: {err}") from err


def kept_versions(infos: Sequence[VersionInfo], keep: int) -> list[int]:
    """The last ``keep`` community-run versions and every light commit after the oldest
    of them (light commits come every second or so; retention counts runs)."""
    runs = [v.version for v in infos if v.meta.kind != "rows"]
    if len(runs) <= keep:
        return [v.version for v in infos]
    oldest = runs[-keep]
    return [v.version for v in infos if v.version >= oldest]


def resolve_version(
    infos: Sequence[VersionInfo], as_of: int | str | datetime | None, root: str
) -> VersionInfo:
    """The kept version (of ``infos``, the store at ``root``'s) a reader asks for: a number,
    an ISO time (the newest version committed at or before it), or None for the latest.
    ``SnapshotNotFoundError`` names the oldest version kept when the request is older."""
    if not infos:
        raise SnapshotNotFoundError(f"no graph version has been committed in {root}")
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
    when = as_of if isinstance(as_of, datetime) else parse_time(as_of)
    before = [v for v in infos if parse_time(v.committed_at) <= when]
    if not before:
        raise SnapshotNotFoundError(
            f"no version kept was committed at or before {when.isoformat()}; the oldest "
            f"version kept is {infos[0].version} (committed {infos[0].committed_at})"
        )
    return before[-1]


def parse_as_of(text: str | int | None) -> int | str | None:
    """An as-of given by a user: a version number (digits) or an ISO time, kept as text."""
    if text is None or isinstance(text, int):
        return text
    text = text.strip()
    if text.isascii() and text.isdigit():  # "¹" is a digit to str.isdigit, not to int()
        return int(text)
    parse_time(text)  # refuse a malformed time here, with the message saying what is expected
    return text


def parse_time(text: str) -> datetime:
    """An ISO time (``Z`` allowed; UTC when it names no zone)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise GraphTablesError(
            f"{text!r} is neither a version number nor an ISO time (e.g. 2026-12-01T09:00:00Z)"
        ) from err
    return when if when.tzinfo else when.replace(tzinfo=UTC)
