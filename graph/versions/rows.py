"""A graph version's tables by name, the columns derived on read, and each row's digest.

The row classes are ``graph.versions.model``'s; a row's stored form is ``graph.codec``'s
rendering of it (``absent="default"``: a field added with a default reads as that default from
rows written before it existed). Writers keep a digest of every row they committed
(``KnownRows``) so the next commit finds the rows that changed without reading the version back.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

from graph.codec import Codec
from graph.versions.model import (
    Snapshot,
    SnapshotAlias,
    SnapshotClaim,
    SnapshotCommunity,
    SnapshotDocument,
    SnapshotEntity,
    SnapshotRelationship,
    SnapshotReport,
    SnapshotTextUnit,
)

# table name -> row class; the order is the order tables are written and read.
TABLES: dict[str, type] = {
    "entities": SnapshotEntity,
    "relationships": SnapshotRelationship,
    "communities": SnapshotCommunity,
    "community_reports": SnapshotReport,
    "text_units": SnapshotTextUnit,
    "documents": SnapshotDocument,
    "claims": SnapshotClaim,
    "aliases": SnapshotAlias,
}

# columns derived from other rows, not stored: they would change with rows that did not (a
# hub's new relationship would rewrite every one of its relationships' rows, a member's new
# mention every community above it: at 100,000 articles a +40 rewrote every level's day
# series of the communities it touched, a hundred thousand (day, mentions) pairs), so
# readers derive them (``core.tables.derived.derived_columns``)
DERIVED: dict[str, tuple[str, ...]] = {
    "entities": ("degree",),
    "relationships": ("combined_degree",),
    "communities": ("relationship_ids", "text_unit_ids", "mentions_per_day"),
    "community_reports": ("unreflected",),  # kept in its community's row
}

CODEC = Codec(absent="default")


@dataclass(frozen=True, slots=True)
class KnownRows:
    """What a writer remembers of the version it committed: a digest of every row by id.
    A table's digests may be any mutable mapping (the community job keeps them on disk,
    ``agents.community.state``): a commit updates them in place (``known_after``) rather than
    copying a table of hundreds of thousands of rows for the few it wrote."""

    version: int
    digests: dict[str, MutableMapping[str, bytes]]

    @classmethod
    def of(cls, snapshot: Snapshot) -> KnownRows:
        return cls(
            snapshot.meta.version,
            {name: row_digests(name, getattr(snapshot, name)) for name in TABLES},
        )


def digests_at(had: Mapping[str, bytes], ids: Iterable[str]) -> dict[str, bytes]:
    """``had``'s digest of each of ``ids`` it holds: by chunks of keys from a map on disk
    (``get_many``), else key by key."""
    get_many = getattr(had, "get_many", None)
    if get_many is not None:
        return dict(get_many(ids))
    return {i: d for i in ids if (d := had.get(i)) is not None}


def known_after(
    known: KnownRows | None, version: int, updates: Mapping[str, tuple[dict[str, bytes], set[str]]]
) -> KnownRows:
    """``known`` after a commit of ``version`` that wrote, per table, the digests of its rows
    upserted and the ids it deleted; the tables are updated in place (a table ``known`` lacks
    starts as a dict)."""
    digests = {} if known is None else dict(known.digests)
    for name, (upserted, gone) in updates.items():
        table = digests.setdefault(name, {})
        table.update(upserted)
        for i in gone:
            del table[i]
    return KnownRows(version, digests)


@functools.cache
def stored_fields(name: str) -> tuple[str, ...]:
    """The fields of table ``name``'s row class that are stored (the derived ones left out),
    in the class's order."""
    derived = DERIVED.get(name, ())
    return tuple(f.name for f in dataclasses.fields(TABLES[name]) if f.name not in derived)


def stored_form(name: str, row: Any) -> dict[str, Any]:
    """A row's stored columns as plain values (``CODEC``'s encoding), the derived ones never
    encoded (a community's day series is most of its row)."""
    encode = CODEC.encode
    return {f: encode(getattr(row, f)) for f in stored_fields(name)}


def row_digests(name: str, rows: Iterable[Any]) -> dict[str, bytes]:
    """A short digest of each row's stored form (derived columns left out), by id: what a
    writer keeps to find the rows that changed without reading the previous version back."""
    return {
        r.id: hashlib.blake2b(orjson.dumps(stored_form(name, r)), digest_size=8).digest()
        for r in rows
    }
