"""The ``DERIVED`` columns of a version, computed from its stored columns when it is read.

They are not stored because they change with rows that did not: a hub's new relationship
would rewrite every one of its relationships' rows, a member's new mention every community
above it (``graph.versions.rows.DERIVED``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from core.tables.codecs import intern, stored_decoder

# the stored columns ``derived_columns`` reads, per table
DERIVED_INPUTS: Mapping[str, tuple[str, ...]] = {
    "relationships": ("id", "source_id", "target_id"),
    "entities": ("id", "text_unit_ids", "mentions_per_day"),
    "communities": ("id", "entity_ids", "unreflected"),
    "community_reports": ("id",),
}
# what only a community's ``mentions_per_day`` needs (left unread by a reader that omits it)
DAYS_INPUT = ("entities", "mentions_per_day")


def realigned(
    values: Mapping[str, list[Any]], order: pa.ChunkedArray, wanted: pa.ChunkedArray
) -> dict[str, list[Any]]:
    """Derived values listed in ``order`` (ids) put in the order of ``wanted`` (ids)."""
    at = {k: i for i, k in enumerate(order.to_pylist())}
    where = [at[k] for k in wanted.to_pylist()]
    return {column: [vals[i] for i in where] for column, vals in values.items()}


def derived_columns(
    tables: Mapping[str, pa.Table],
    *,
    community_lists: bool = True,
    combined_degrees: bool = True,
    community_days: bool = True,
) -> dict[str, dict[str, list[Any]]]:
    """The ``DERIVED`` columns of a whole version from its stored columns: entity ``degree``
    (relationships at the entity; a loop counts twice), relationship ``combined_degree`` (the
    sum of its ends' degrees), a community's ``relationship_ids`` (those with both ends among
    its members) and ``text_unit_ids`` (its members' text units), each sorted, its
    ``mentions_per_day`` (its members' added up), and a report's ``unreflected`` (kept in its
    community's row). Without ``community_lists`` a community's two lists are left empty,
    without ``combined_degrees`` a relationship's combined degree, without ``community_days``
    its day series (a reader that never uses them)."""
    rels, ents = tables["relationships"], tables["entities"]
    comms, reports = tables["communities"], tables["community_reports"]
    sources = rels.column("source_id").to_pylist()
    targets = rels.column("target_id").to_pylist()
    degree: Counter[str] = Counter(sources)
    degree.update(targets)
    entity_ids = ents.column("id").to_pylist()
    share = dict(
        zip(comms.column("id").to_pylist(), comms.column("unreflected").to_pylist(), strict=True)
    )
    communities: dict[str, list[Any]] = (
        _community_lists(tables, sources, targets) if community_lists else {}
    )
    if community_days:
        communities["mentions_per_day"] = _community_days(tables)
    return {
        "entities": {"degree": [degree[k] for k in entity_ids]},
        "relationships": {
            "combined_degree": [
                degree[a] + degree[b] for a, b in zip(sources, targets, strict=True)
            ]
        }
        if combined_degrees
        else {},
        "communities": communities,
        "community_reports": {
            "unreflected": [share.get(k, 0.0) for k in reports.column("id").to_pylist()]
        },
    }


def _community_lists(
    tables: Mapping[str, pa.Table], sources: Sequence[str], targets: Sequence[str]
) -> dict[str, list[Any]]:
    """Each community's ``relationship_ids`` (both ends among its members) and
    ``text_unit_ids`` (its members' text units), sorted, in the communities' row order;
    ``sources`` and ``targets`` are the relationships' ends, in their row order."""
    rels, ents = tables["relationships"], tables["entities"]
    rel_ids = rels.column("id").to_pylist()
    at: dict[str, list[int]] = {}
    for i, (a, b) in enumerate(zip(sources, targets, strict=True)):
        at.setdefault(a, []).append(i)
        if b != a:
            at.setdefault(b, []).append(i)
    units = dict(
        zip(ents.column("id").to_pylist(), ents.column("text_unit_ids").to_pylist(), strict=True)
    )
    community_rels: list[tuple[str, ...]] = []
    community_units: list[tuple[str, ...]] = []
    for members in tables["communities"].column("entity_ids").to_pylist():
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
            tuple(sorted({intern(u) for k in members for u in units.get(k) or ()}))
        )
    return {"relationship_ids": community_rels, "text_unit_ids": community_units}


def _community_days(tables: Mapping[str, pa.Table]) -> list[tuple[tuple[str, int], ...]]:
    """Each community's mentions per day, its members' added up (ISO day, mentions; sorted),
    in the communities' row order."""
    ents = tables["entities"]
    pairs = stored_decoder("entities", "mentions_per_day")
    days = dict(
        zip(
            ents.column("id").to_pylist(),
            map(pairs, ents.column("mentions_per_day").to_pylist()),
            strict=True,
        )
    )
    out: list[tuple[tuple[str, int], ...]] = []
    for members in tables["communities"].column("entity_ids").to_pylist():
        tally: Counter[str] = Counter()
        for k in members or ():
            for day, n in days.get(k, ()):
                tally[day] += n
        out.append(tuple(sorted(tally.items())))
    return out
