"""The ``aliases`` graph table as the query side reads it: which name a key resolves to.

The community job resolves which entity keys name one thing (``graph.aliases.resolution``) and
writes the result as the ``aliases`` table: keys merged whole ("imf" into "international monetary
fund") and, for a surname several people share, the text units where it means one of them.
Entities stay separate rows, so the tables keep every name as written; the query side reads
through the aliases:

* a question naming an alias selects the entity it resolves to (``canonical``);
* an entity's text units are its own, its whole aliases' and the units where a shared
  surname resolves to it (``QueryIndex.entity_units``), so a question about the IMF reads the
  articles that only say "International Monetary Fund" and those that only say "IMF";
* ``/v1/entities/{id}`` shows the aliases with the rule and evidence of each.

Small (hundreds of rows per ten thousand articles) and rewritten whole by each community run,
so following a version rebuilds it from the old rows and the change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from graph.aliases.resolution import NAMESAKE
from graph.versions.model import SnapshotAlias


@dataclass(frozen=True, slots=True)
class AliasIndex:
    rows: dict[str, SnapshotAlias] = field(default_factory=dict)  # by row id
    # alias key -> the key it resolves to, for keys merged whole
    canonical: dict[str, str] = field(default_factory=dict)
    # canonical key -> its rows: whole aliases first, then namesake units
    of_canonical: dict[str, tuple[SnapshotAlias, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Iterable[SnapshotAlias]) -> AliasIndex:
        by_id = {r.id: r for r in sorted(rows, key=lambda r: r.id)}
        grouped: dict[str, list[SnapshotAlias]] = defaultdict(list)
        for r in by_id.values():
            grouped[r.canonical].append(r)
        return cls(
            by_id,
            {r.alias: r.canonical for r in by_id.values() if r.rule != NAMESAKE},
            {
                k: tuple(sorted(v, key=lambda r: (r.rule == NAMESAKE, r.id)))
                for k, v in grouped.items()
            },
        )

    def updated(self, upserts: Sequence[SnapshotAlias], deletes: Iterable[str]) -> AliasIndex:
        """The index after a version's change of the table (``upserts``, deleted ids)."""
        gone = set(deletes)
        if not upserts and not gone:
            return self
        kept = {k: r for k, r in self.rows.items() if k not in gone}
        kept.update((r.id, r) for r in upserts)
        return AliasIndex.of(kept.values())

    def resolve(self, key: str) -> str:
        """The key ``key`` resolves to (itself when it is no alias)."""
        return self.canonical.get(key, key)

    def whole(self, key: str) -> list[SnapshotAlias]:
        """The keys merged whole into ``key``."""
        return [r for r in self.of_canonical.get(key, ()) if r.rule != NAMESAKE]

    def namesake_units(self, key: str) -> list[str]:
        """Text units where a surname other people share too means ``key``."""
        return [
            u for r in self.of_canonical.get(key, ()) if r.rule == NAMESAKE for u in r.text_unit_ids
        ]
