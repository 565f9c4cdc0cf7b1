"""Alias resolution of the community job's merged graph: its evidence read from the view,
and each run re-resolved around what changed (``resolve_changed``) with the kept indexes,
and afresh every ``full_every``-th run."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from graph.aliases.indexes import AliasState, NameIndexes, Related
from graph.aliases.names import CONNECTORS, acronym_of, spells
from graph.aliases.resolution import Brief, Evidence, Named, Resolution
from graph.aliases.rules import resolve_scope
from graph.merge.view import GraphView
from graph.protocols import Peeked, peek


def resolve_changed(
    previous: Resolution,
    changed: Iterable[str],
    ev: Evidence,
    idx: NameIndexes,
    reweighed: Iterable[str] = (),
) -> tuple[Resolution, set[str]]:
    """``previous`` brought up to date after the evidence of the keys ``changed`` moved (their
    mentions, units, types or relationships), and the keys re-decided. ``idx`` must already
    index the entities as they are now. Re-decided are the changed keys (an acronym mentioned
    beside a changed name was in the changed text units, so it is one of them) and every key
    whose decision rests on one of them: the name endings of a changed person, spellings of a
    changed key, the names it may qualify, be qualified by or clip, every name several people
    share, and the whole groups (old and new) they belong to; every other decision is kept.
    What this leaves stale rests on the rest of the graph only through a neighbour's degree
    (which entities are hubs) or the graph's size, which a periodic full resolution
    refreshes. ``reweighed``: entities whose weight as a shared neighbour moved
    (``graph.aliases.indexes.degree_class``), whose people's shared names are re-decided."""
    groups = _Groups.of(previous)
    scope = _first_scope(changed, ev.entities, idx, groups)
    scope |= _shared_names_near(reweighed, ev.neighbours, idx)
    for _ in range(4):  # until the groups the new decisions reach are all in scope
        for key in list(scope):
            scope |= groups.around(key)
        live = {k for k in scope if k in ev.entities}
        part = resolve_scope(live, ev, idx)
        reached = {k for m in part.merges.values() for k in (m.alias, m.canonical)}
        more = {k for k in reached - scope if groups.of_key(k) != {k}}
        if not more:
            break
        scope |= more
    return _combined(previous, part, scope), scope


@dataclass(frozen=True, slots=True)
class _Groups:
    """The groups of a previous resolution: each canonical key's whole group, and the
    surnames resolved in single text units to each person."""

    previous: Resolution
    canonical: dict[str, set[str]]
    unit_surnames: dict[str, set[str]]

    @classmethod
    def of(cls, previous: Resolution) -> _Groups:
        canonical_groups: dict[str, set[str]] = defaultdict(set)
        for alias, m in previous.merges.items():
            canonical_groups[m.canonical].update((alias, m.canonical))
        unit_surnames: dict[str, set[str]] = defaultdict(set)
        for u in previous.unit_aliases.values():
            unit_surnames[u.canonical].add(u.alias)
        return cls(previous, canonical_groups, unit_surnames)

    def of_key(self, key: str) -> set[str]:
        """The whole group ``key`` was in ({key} when it was in none)."""
        merge = self.previous.merges.get(key)
        return self.canonical.get(merge.canonical if merge else key, {key})

    def around(self, key: str) -> set[str]:
        """The group of ``key`` and the surnames resolved per unit to it."""
        return self.of_key(key) | self.unit_surnames.get(key, set())


def _first_scope(
    changed: Iterable[str], entities: Mapping[str, Named], idx: NameIndexes, groups: _Groups
) -> set[str]:
    """The keys whose decisions rest on the ``changed`` ones (``resolve_changed``), before
    the groups the new decisions reach are added."""
    scope: set[str] = set()
    acronyms: list[tuple[str, str]] | None = None  # (letters, key) of every acronym
    for key in set(changed):
        scope |= groups.around(key)
        words = key.split()
        # names it may qualify or be qualified by: "porvane x", "u s x", "x" for "porvane x"
        scope |= idx.parts.get(key, set())
        if len(words) > 1:
            initials = " ".join(w[0] for w in words if w not in CONNECTORS)
            scope |= idx.parts.get(initials, set())
        endings = [" ".join(words[-n:]) for n in range(1, len(words))]
        e = entities.get(key)
        if e is None:  # gone, and what it was is not known: any acronym it could expand
            if acronyms is None:  # (once, at the first key gone)
                acronyms = [
                    (b[4:], k) for b, keys in idx.buckets.items() if b[:4] == "acr:" for k in keys
                ]
                # and, gone from the units that mentioned it, any name several people share
                # that those units decided (a change of what else a unit mentions otherwise
                # changes the name itself: its chunk was extracted again)
                scope.update(k for k, held in idx.people.items() if len(held) > 1 and k in entities)
            scope.update(k for letters, k in acronyms if spells(letters, key))
            scope.update([*endings, words[0]])
            continue
        # (an acronym mentioned beside a changed name was itself in the changed text units,
        # so it is among the changed keys already)
        if e.type == "person":
            scope.update(endings)
        elif len(words) > 1 and acronym_of(e.name) is None:
            scope.add(words[0])  # a bare name starting an organisation's may be it
            scope.update(words[0][:n] for n in range(3, len(words[0])))  # or clip it
        bucket = idx.indexed.get(key, ("", ""))[1]
        scope |= idx.buckets.get(bucket, set())
    return scope


def _shared_names_near(
    keys: Iterable[str], neighbours: Mapping[str, Collection[str]], idx: NameIndexes
) -> set[str]:
    """The names several people share, of the people related to ``keys``: a unit mentioning
    such a name goes to the person whose neighbours its entities are, weighed by theirs."""
    out: set[str] = set()
    for key in keys:
        for person in neighbours.get(key, ()):
            words = person.split()
            for n in range(1, len(words)):
                held = idx.people.get(" ".join(words[-n:]))
                if held is not None and len(held) > 1 and person in held:
                    out.add(" ".join(words[-n:]))
    return out


def _combined(previous: Resolution, part: Resolution, scope: set[str]) -> Resolution:
    """The decisions of ``previous`` outside ``scope`` with those ``part`` made inside it."""
    merges = {
        a: m for a, m in previous.merges.items() if a not in scope and m.canonical not in scope
    }
    merges.update(part.merges)
    units = {k: u for k, u in previous.unit_aliases.items() if k[0] not in scope}
    units.update(part.unit_aliases)
    # a decision in scope may point at a name merged outside it: point it at that name's end
    for alias, m in list(merges.items()):
        if m.canonical in merges:
            merges[alias] = replace(m, canonical=merges[m.canonical].canonical)
    for k, u in list(units.items()):
        if u.canonical in merges:
            units[k] = replace(u, canonical=merges[u.canonical].canonical)
    return Resolution(merges, units)


def view_inputs(
    view: GraphView,
) -> tuple[dict[str, Named], dict[str, set[str]], dict[str, set[str]], dict[str, str]]:
    """What ``resolve`` reads, from a merged graph, as plain maps: the entities, each text
    unit's entity keys, each entity's neighbours, each text unit's document."""
    names = ViewNames(view)
    entities = {key: names[key] for key in view.entities}
    unit_entities: dict[str, set[str]] = defaultdict(set)
    for key, e in entities.items():
        for u in e.units:
            unit_entities[u].add(key)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for r in view.relationships.values():
        neighbours[r.source_key].add(r.target_key)
        neighbours[r.target_key].add(r.source_key)
    return entities, unit_entities, neighbours, dict(view.unit_documents())


KEPT_NAMES = 20_000  # entities ``KeptNames`` holds between runs, the most recently made


class KeptNames(dict[str, Named]):
    """Entities as resolution read them, kept between runs in the job's memory (pickled empty):
    every run re-decides the acronyms beside changed names and the names several people share
    around changed people, reading many of the same entities (and their units' documents).
    The entities a run's changes touched are dropped before it reads (``resolve_view``), and
    only the ``KEPT_NAMES`` most recently made are kept. A child retired for its memory hands
    them to the next one (``graph.job.warm``)."""

    def __reduce__(self) -> tuple[type[KeptNames], tuple[()]]:
        return (KeptNames, ())

    def forget(self, keys: Iterable[str] | None) -> None:
        """Drop ``keys`` (None: every entity)."""
        if keys is None:
            self.clear()
            return
        for key in keys:
            self.pop(key, None)

    def trim(self) -> None:
        for key in list(itertools.islice(self, max(0, len(self) - KEPT_NAMES))):
            del self[key]


class ViewNames(Mapping[str, Named]):
    """The view's entities as resolution reads them, made on first use (a run that resolves
    around a few changes reads a few hundred of them), into ``kept`` when given."""

    def __init__(self, view: GraphView, kept: dict[str, Named] | None = None) -> None:
        self.view = view
        self._made: dict[str, Named] = {} if kept is None else kept
        self._briefs: dict[str, Brief | None] = {}

    def brief(self, key: str) -> Brief | None:
        """The entity's name, type and mentions (None: there is none), read from its
        aggregate alone (``graph.aliases.resolution.brief``): a rule looks at many names it
        never uses."""
        made = self._made.get(key)
        if made is not None:
            return Brief(made.name, made.type, made.mentions)
        if key not in self._briefs:
            agg = peek(self.view.entities, key, None)
            self._briefs[key] = (
                None if agg is None else Brief(agg.name, agg.type, agg.mention_count)
            )
        return self._briefs[key]

    def __getitem__(self, key: str) -> Named:
        made = self._made.get(key)
        if made is None:
            agg = self.view.entities[key]
            units = frozenset(peek(self.view.entity_units, key, ()))
            docs = self.view.unit_documents()
            made = Named(
                key=key,
                name=agg.name,
                type=agg.type,
                mentions=agg.mention_count,
                units=units,
                typed_person=2 * agg.types.count("person") >= max(1, agg.types.total),
                documents=frozenset(docs[u] for u in units if u in docs),
            )
            self._made[key] = made
        return made

    def __contains__(self, key: object) -> bool:
        # a made entity is live (``KeptNames`` forgets the keys changes touched, deletions
        # among them), and asking the view is a look in its map on disk
        return key in self._made or key in self.view.entities

    def __iter__(self) -> Iterator[str]:
        return iter(self.view.entities)

    def __len__(self) -> int:
        return len(self.view.entities)


def resolve_view(
    view: GraphView,
    previous: Resolution | None,
    kept: AliasState | None,
    changed_entities: Collection[str] | None,
    changed_relationships: Collection[str],
    *,
    full_every: int,
    names_kept: KeptNames | None = None,
) -> tuple[Resolution, AliasState, int]:
    """The view's resolution, and the state to keep, and how many keys were re-decided:
    around what changed (``resolve_changed``) when the previous resolution and state are
    kept and what changed is known, else (and every ``full_every``-th run) afresh.
    ``names_kept``: the entities earlier runs read, less those ``changed_entities`` names."""
    full = (
        previous is None
        or kept is None
        or changed_entities is None
        or kept.runs_since_full + 1 >= full_every
    )
    if names_kept is not None:
        names_kept.forget(None if full else changed_entities)
    try:
        return _resolve(
            view, previous, kept, changed_entities, changed_relationships, full, names_kept
        )
    finally:
        if names_kept is not None:
            names_kept.trim()


def _resolve(
    view: GraphView,
    previous: Resolution | None,
    kept: AliasState | None,
    changed_entities: Collection[str] | None,
    changed_relationships: Collection[str],
    full: bool,
    names_kept: KeptNames | None,
) -> tuple[Resolution, AliasState, int]:
    names = ViewNames(view, names_kept)
    docs = view.unit_documents()
    if full:
        related = Related()
        related.update(view, view.relationships)  # every weight read afresh below
        idx = NameIndexes.build(names)
        ev = Evidence(names, Peeked(view.unit_entities), Peeked(related.near), docs)
        resolution = resolve_scope(set(view.entities), ev, idx)
        return resolution, AliasState(idx, related), len(view.entities)
    assert previous is not None and kept is not None and changed_entities is not None
    ends, reweighed = kept.related.update(view, changed_relationships)
    keys = set(changed_entities) | ends
    idx = kept.indexes
    was = {b for k in keys if (b := idx.indexed.get(k, ("", ""))[1])}
    idx.update(names, keys)
    keys.update(k for b in was for k in idx.buckets.get(b, ()))  # the spellings it had
    ev = Evidence(names, Peeked(view.unit_entities), Peeked(kept.related.near), docs)
    resolution, scope = resolve_changed(previous, keys, ev, idx, reweighed)
    kept.runs_since_full += 1
    return resolution, kept, sum(k in view.entities for k in scope)
