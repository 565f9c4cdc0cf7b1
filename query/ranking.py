"""Which records of the graph a local context shows first.

GraphRAG's local search order: relationships between the selected entities ("in-network")
come first, by combined degree; then relationships to outside entities, those linked to more
of the selected entities first, then by combined degree.

Text units (the Sources table) follow the selected entities: those of the first selected
entity first, as in GraphRAG, where the units of each entity in rank order are then sorted by
how many of the context's relationships they carry. That second key takes no account of the
question, so of the many articles naming a well-known entity it shows those about anything
at all (asked about Balladur and consumer prices, articles on the Paris bourse reform as
readily as those on inflation). Here the question breaks that order: among the units of one
entity, the nearest to the question come first (``distances``: what the question asks beyond
the names it matched, see ``query.context.question_beyond_names``, against the text units by
one hybrid search filtered to the candidate units, see ``query.context.text_unit_distances``),
then those carrying more of the context's relationships. The first entity's other spellings
that the question names rank with it (``alike``). A unit without a distance (the vector
store may lag the snapshot, or the context was built without a question) follows those with
one, in GraphRAG's order.

Reports of the selected entities' communities come first when they hold more of them.
All orders end in the record's id, so equal inputs always give the same context.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from graph.versions.model import SnapshotClaim, SnapshotRelationship, SnapshotReport
from query.index import QueryIndex
from query.time_window import TimeWindow, to_date


def relationship_in_window(index: QueryIndex, r: SnapshotRelationship, window: TimeWindow) -> bool:
    """Seen in the window: by its first/last seen days, else by its text units' days."""
    if not window.bounded:
        return True
    first, last = to_date(r.first_seen), to_date(r.last_seen)
    if first is None and last is None:
        return any(window.contains(index.unit_dates.get(u)) for u in r.text_unit_ids)
    lo, hi = first or last, last or first
    return (window.until is None or lo is None or lo <= window.until) and (
        window.since is None or hi is None or hi >= window.since
    )


def rank_relationships(
    index: QueryIndex, selected: Sequence[str], limit: int, window: TimeWindow
) -> list[SnapshotRelationship]:
    """In-network first, then out-of-network; at most ``limit`` in all."""
    chosen = set(selected)
    seen: dict[str, SnapshotRelationship] = {}
    for key in selected:
        for r in map(index.relationships.__getitem__, index.relationships_by_entity.get(key, ())):
            if r.id not in seen and relationship_in_window(index, r, window):
                seen[r.id] = r
    inside, outside = [], []
    links: Counter[str] = Counter()
    for r in seen.values():
        a, b = index.relationship_ends[r.id]
        if a in chosen and b in chosen:
            inside.append(r)
        else:
            outside.append(r)
            links[b if a in chosen else a] += 1

    def outer(r: SnapshotRelationship) -> str:
        a, b = index.relationship_ends[r.id]
        return b if a in chosen else a

    degree = index.combined_degree
    inside.sort(key=lambda r: (-degree(r), -r.weight, r.human_readable_id))
    outside.sort(key=lambda r: (-links[outer(r)], -degree(r), -r.weight, r.human_readable_id))
    return (inside + outside)[: max(0, limit)]


def claims_of(
    index: QueryIndex, selected: Sequence[str], window: TimeWindow
) -> list[SnapshotClaim]:
    out: list[SnapshotClaim] = []
    for key in selected:
        for c in index.claims_by_entity.get(key, ()):
            if window.contains(index.unit_dates.get(c.text_unit_id)):
                out.append(c)
    return out


def text_unit_candidates(
    index: QueryIndex,
    selected: Sequence[str],
    window: TimeWindow,
    alike: Collection[str] = (),
) -> dict[str, int]:
    """Text units of the selected entities in the window (under any of their names,
    ``QueryIndex.entity_units``), each with the rank of the first selected entity that has
    it, in that order; the entities of ``alike`` (spellings of the first one the resolution
    left apart, see ``query.context.spellings``) all rank first with it."""
    first_entity: dict[str, int] = {}
    ranks = [0 if key in alike else order for order, key in enumerate(selected)]
    for order, key in sorted(zip(ranks, selected, strict=True), key=lambda p: p[0]):
        for u in index.entity_units(key):
            if u not in first_entity and window.contains(index.unit_dates.get(u)):
                first_entity[u] = order
    return first_entity


def rank_text_units(
    index: QueryIndex,
    selected: Sequence[str],
    relationships: Sequence[SnapshotRelationship],
    window: TimeWindow,
    distances: Mapping[str, float] | None = None,
    alike: Collection[str] = (),
) -> list[str]:
    """Text units of the selected entities: by the rank of their first selected entity (the
    spellings of the first, ``alike``, rank with it), then nearest to the question
    (``distances``: text unit id -> distance to the question), then carrying most of the
    context's relationships."""
    distances = distances or {}
    first_entity = text_unit_candidates(index, selected, window, alike)
    carried: Counter[str] = Counter(
        u for r in relationships for u in set(r.text_unit_ids) if u in first_entity
    )
    return sorted(
        first_entity,
        key=lambda u: (
            first_entity[u],
            distances.get(u, math.inf),
            -carried[u],
            index.text_units[u].human_readable_id,
        ),
    )


def rank_reports(
    index: QueryIndex, selected: Sequence[str], level: int, active: set[int] | None
) -> list[SnapshotReport]:
    """Reports of the selected entities' communities at ``level`` (or their stand-in leaf),
    those holding more selected entities first, then by rating."""
    matches: Counter[int] = Counter()
    for key in selected:
        community = index.community_at(key, level)
        if community is not None and (active is None or community in active):
            matches[community] += 1
    reports = [index.reports[c] for c in matches if c in index.reports]
    return sorted(reports, key=lambda r: (-matches[r.community], -r.rank, r.community))
