"""Alias resolution's records (which keys name one thing, and why) and what is done with them.

A ``Resolution`` is what the rules (``graph.aliases.rules``) decide; here are the records it is
made of and the operations on a finished one: the verdicts a model gives on uncertain
decisions (``confirmed``), what changed between two resolutions (``alias_changes``) and the
``aliases`` graph table (``alias_rows``). ``Resolution`` and its records are pickled in the
community job's checkpoint (``graph.job.state.JobState``), so they stay at this path.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from graph.merge.view import GraphView
from graph.versions.model import SnapshotAlias

# the rule of a surname resolved in one text unit (``UnitAlias``)
NAMESAKE = "namesake"
# the rule of a name's variants (``graph.aliases.rules``): proposals a model must confirm
VARIANT = "variant"
PROPOSED = frozenset({VARIANT})


@dataclass(frozen=True, slots=True)
class Named:
    """What resolution reads of one entity."""

    key: str
    name: str  # display name, as written
    type: str
    mentions: int
    units: frozenset[str]
    typed_person: bool = False  # at least half of the chunks typing it typed it a person
    documents: frozenset[str] = frozenset()  # the documents of its text units


@dataclass(frozen=True, slots=True)
class Merge:
    """One key resolved into another, whole, with why."""

    alias: str
    canonical: str
    rule: str  # "acronym", "spelling" or "surname"
    evidence: str  # in words, for the audit trail
    units: tuple[str, ...] = ()  # text units showing both, a few
    # False when the rule rests on weak evidence (one joint mention, a shared neighbour):
    # in LLM mode the community job may ask the model to confirm it
    certain: bool = True


@dataclass(frozen=True, slots=True)
class UnitAlias:
    """A shared surname resolved in one text unit only."""

    alias: str
    unit: str
    canonical: str
    evidence: str
    certain: bool = True  # see ``Merge.certain``


@dataclass(frozen=True, slots=True)
class AliasChange:
    """A merge made or undone between two resolutions (``alias_changes``)."""

    kind: str  # "aliased" or "unaliased"
    alias: str
    canonical: str
    rule: str
    evidence: str  # a made merge's evidence; an undone one's former evidence
    unit: str | None = None  # a surname resolved in this text unit only


@dataclass(frozen=True, slots=True)
class Resolution:
    merges: dict[str, Merge] = field(default_factory=dict)  # alias key -> its merge
    unit_aliases: dict[tuple[str, str], UnitAlias] = field(default_factory=dict)

    def canonical(self, key: str, unit: str | None = None) -> str:
        """The key ``key`` resolves to (in ``unit``, when a surname is resolved per unit)."""
        if unit is not None and (key, unit) in self.unit_aliases:
            return self.unit_aliases[(key, unit)].canonical
        merge = self.merges.get(key)
        return merge.canonical if merge else key

    def aliases(self) -> dict[str, list[str]]:
        """Canonical key -> the keys merged into it whole, sorted."""
        out: dict[str, list[str]] = defaultdict(list)
        for m in self.merges.values():
            out[m.canonical].append(m.alias)
        return {k: sorted(v) for k, v in out.items()}


@dataclass(frozen=True, slots=True)
class Evidence:
    """What resolution reads of the graph: the entities, each text unit's entity keys, each
    entity's neighbours (the keys it is related to), each text unit's document."""

    entities: Mapping[str, Named]
    unit_entities: Mapping[str, Collection[str]]
    neighbours: Mapping[str, Collection[str]]
    unit_document: Mapping[str, str]


class Brief(NamedTuple):
    """What a rule looks at of a name it may not use: its name, type and mentions."""

    name: str
    type: str
    mentions: int


def brief(entities: Mapping[str, Named], key: str) -> Brief | None:
    """A key's name, type and mentions (None: no such entity): by the map's own ``brief``
    when it has one (``graph.aliases.view.ViewNames``, which then does not make the whole
    record, units and documents, of every name a rule only looks at), else its record's."""
    own = getattr(entities, "brief", None)
    if own is not None:
        found: Brief | None = own(key)
        return found
    e = entities.get(key)
    return None if e is None else Brief(e.name, e.type, e.mentions)


def decision_id(alias: str, canonical: str, unit: str | None = None) -> str:
    """How a verdict on one decision is kept: the names and, for one text unit, the unit."""
    return f"{alias}\t{unit or ''}\t{canonical}"


def uncertain(res: Resolution) -> list[Merge | UnitAlias]:
    """The decisions resting on weak evidence, whole merges first."""
    return [
        *(m for _, m in sorted(res.merges.items()) if not m.certain),
        *(u for _, u in sorted(res.unit_aliases.items()) if not u.certain),
    ]


def confirmed(res: Resolution | None, verdicts: Mapping[str, bool]) -> Resolution | None:
    """``res`` as it stands given a model's ``verdicts`` (``decision_id`` -> same): without
    the decisions it rejected, and without the proposals (``PROPOSED``) it did not confirm."""
    if res is None:
        return None

    def stands(ident: str, rule: str) -> bool:
        verdict = verdicts.get(ident)
        return verdict is True or (verdict is None and rule not in PROPOSED)

    return Resolution(
        {a: m for a, m in res.merges.items() if stands(decision_id(a, m.canonical), m.rule)},
        {
            k: u
            for k, u in res.unit_aliases.items()
            if stands(decision_id(u.alias, u.canonical, u.unit), NAMESAKE)
        },
    )


def alias_changes(before: Resolution | None, after: Resolution) -> list[AliasChange]:
    """What changed between two resolutions: a key now resolving to another than before is
    ``aliased`` (after ``unaliased`` from the old one); a key that no longer resolves to one
    is ``unaliased`` (its evidence was retracted or outweighed). A merge whose canonical
    stayed is not a change, even when its evidence was restated (counts moved)."""
    before = before or Resolution()
    out: list[AliasChange] = []
    for alias in sorted(before.merges.keys() | after.merges.keys()):
        old, new = before.merges.get(alias), after.merges.get(alias)
        if old is not None and (new is None or new.canonical != old.canonical):
            out.append(AliasChange("unaliased", alias, old.canonical, old.rule, old.evidence))
        if new is not None and (old is None or new.canonical != old.canonical):
            out.append(AliasChange("aliased", alias, new.canonical, new.rule, new.evidence))
    for key in sorted(before.unit_aliases.keys() | after.unit_aliases.keys()):
        was, now = before.unit_aliases.get(key), after.unit_aliases.get(key)
        if was is not None and (now is None or now.canonical != was.canonical):
            out.append(
                AliasChange("unaliased", was.alias, was.canonical, NAMESAKE, was.evidence, was.unit)
            )
        if now is not None and (was is None or now.canonical != was.canonical):
            out.append(
                AliasChange("aliased", now.alias, now.canonical, NAMESAKE, now.evidence, now.unit)
            )
    return out


def alias_rows(view: GraphView, resolution: Resolution | None) -> tuple[SnapshotAlias, ...]:
    """The ``aliases`` graph table of a resolution, for the keys the view still holds."""
    if resolution is None:
        return ()
    ents = view.entities
    rows = [
        SnapshotAlias(
            m.alias,
            m.alias,
            m.canonical,
            ents[m.alias].name,
            ents[m.canonical].name,
            m.rule,
            m.evidence,
            m.units,
        )
        for m in resolution.merges.values()
        if m.alias in ents and m.canonical in ents
    ]
    rows += [
        SnapshotAlias(
            f"{u.alias}@{u.unit}",
            u.alias,
            u.canonical,
            ents[u.alias].name,
            ents[u.canonical].name,
            NAMESAKE,
            u.evidence,
            (u.unit,),
        )
        for u in resolution.unit_aliases.values()
        if u.alias in ents and u.canonical in ents
    ]
    return tuple(sorted(rows, key=lambda r: r.id))
