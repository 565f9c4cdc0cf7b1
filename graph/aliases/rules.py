"""The alias rules: which entity keys name one real-world thing, decided from the graph.

The extractors key entities by their normalised name, so one actor can arrive under several
keys: an acronym and its expansion ("IMF", "International Monetary Fund"), a spelling
("Organisation" / "Organization", "Community" / "Communities", "U.N." / "UN"), a surname and
the full name ("Lyng", "Richard Lyng"). The rules decide, from the merged graph alone
(names, types, mention counts, the text units each key is mentioned in and each key's
neighbours), which keys are one thing, and says why.

It is a pure function of that evidence, so it needs no memory of earlier decisions: a merge
whose evidence a correction or deletion retracts is simply not made the next time, and the
caller reports it as undone by comparing two resolutions.

Rules, each with the evidence it records (``Merge``):

* **acronym**: a key written in capitals ("IMF", "U.N.") and a name of two words or more that
  it spells (``spells``: "International Monetary Fund"; "General Agreement on Tariffs and
  Trade"; "International Cocoa Organization" for ICCO), mentioned in the same text unit at
  least once (articles introduce an acronym next to its name). Of several expansions the
  one mentioned with it most often is taken, and none when another comes close
  (``ACRONYM_MARGIN``): an ambiguous acronym stays apart. Two letters spell too much by
  chance ("DC", "Dakota City"): they need two mentions together.
* **spelling**: keys equal once British spellings and, in names of two words or more, a
  plural last word are normalised ("Organisation for Economic Co-operation" / "Organization
  for Economic Cooperation", "European Communities" / "European Community"), and acronyms
  with the same letters ("U.N." / "UN"). People and places are left to their own rules.
* **surname**: a key that ends exactly one person's longer name in the whole graph
  ("Volcker", "De Clercq", "Cavaco Silva"), and shares evidence with that person: a
  document names the person in full in another of its text units (the extractor resolves a
  surname within one chunk only), or most chunks typed it a person, or it has a related
  entity in common with the person that is not a hub, no organisation's or place's name
  starts with it ("Ford" may be Ford Motor's) and it is not mentioned more often than the
  person (a bare name better known than the only person bearing it is more likely a
  company: "Dial", "Norton"). With several such people ("Baker": James, Howard, Charles)
  the key is not merged whole: each text unit mentioning it goes to the one person its
  document names in full; when it names none, to the only one mentioned more than once
  (news names a newcomer in full); or else to the person (of those its document names, if
  any) whose neighbours its other entities share most, each shared entity weighted by how
  rare a neighbour it is (a hub like "United States" says little; by powers of two of its
  relationships, so that the weights follow the graph's growth in steps), when one leads
  (``UnitAlias``), and stays unresolved otherwise. Two people who share a surname are never
  merged with each other.

* **variant** (proposals only, ``PROPOSED``): a name qualified by a place and the name it
  qualifies ("U.S. Federal Reserve", "Federal Reserve"), mentioned in one document, and a
  clipped name and the organisation whose first word it starts ("Fed", "Federal Reserve"),
  in two documents together. Alone these are wrong too often ("Sydney Treasury", "Pacific
  Bell"), so such a merge counts only once a model confirms it (``confirmed``; the
  community job asks in LLM mode), and offline it is never made.

Decisions resting on weak evidence (one joint mention, a shared neighbour, a text unit
scored by its company) are marked ``certain=False``: in LLM mode the community job puts
each to the model once and drops those it rejects.

The canonical key of a group is its best-known full name: not an acronym, two words or more,
then the most mentioned ("European Community" over "European Communities" and "EC").
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from graph.aliases.indexes import NameIndexes, degree_class
from graph.aliases.names import acronym_of, spelling_key, spells
from graph.aliases.resolution import (
    VARIANT,
    Evidence,
    Merge,
    Named,
    Resolution,
    UnitAlias,
    brief,
)

# another expansion mentioned with the acronym at least this share as often makes it ambiguous
ACRONYM_MARGIN = 0.5
# the text units of an acronym its expansions are counted in, at most (chunk ids are hashes:
# the first ones sorted are a sample)
ACRONYM_UNITS = 200
# a related entity of more neighbours than this share of all entities is a hub: no evidence
HUB_SHARE = 0.005
# a person mentioned this often is established: a bare surname may mean them without a full
# name in the same document (a person mentioned once is a newcomer, named in full)
KNOWN_MENTIONS = 2


class _Union(Protocol):
    """How a rule records that two keys are one thing."""

    def __call__(
        self,
        a: str,
        b: str,
        rule: str,
        evidence: str,
        units: Iterable[str] = (),
        certain: bool = True,
    ) -> None: ...


def resolve(
    entities: Mapping[str, Named],
    unit_entities: Mapping[str, Collection[str]],
    neighbours: Mapping[str, Collection[str]],
    unit_document: Mapping[str, str] | None = None,
) -> Resolution:
    """Resolve the graph's keys (see the module docstring). ``unit_entities``: text unit ->
    the entity keys mentioned in it; ``neighbours``: entity key -> the keys it is related to;
    ``unit_document``: text unit -> its document (a shared surname's unit goes to the one
    person its document names in full)."""
    ev = Evidence(entities, unit_entities, neighbours, unit_document or {})
    return resolve_scope(set(entities), ev, NameIndexes.build(entities))


def resolve_scope(scope: Collection[str], ev: Evidence, idx: NameIndexes) -> Resolution:
    """The decisions about the keys of ``scope`` (each rule looks beyond it for partners)."""
    entities, unit_entities, neighbours = ev.entities, ev.unit_entities, ev.neighbours
    parent: dict[str, str] = {}
    merges: list[Merge] = []

    def find(k: str) -> str:
        while parent.get(k, k) != k:
            k = parent[k]
        return k

    def union(
        a: str, b: str, rule: str, evidence: str, units: Iterable[str] = (), certain: bool = True
    ) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            merges.append(Merge(a, b, rule, evidence, tuple(sorted(units))[:3], certain))

    ordered = sorted(scope)
    _spellings(ordered, entities, idx, union)
    _acronyms(ordered, entities, unit_entities, union)
    surnames = _surnames(ordered, entities, neighbours, idx, union)
    groups: dict[str, list[str]] = defaultdict(list)
    for key in {k for m in merges for k in (m.alias, m.canonical)}:
        groups[find(key)].append(key)
    canonical_of: dict[str, str] = {}
    for members in groups.values():
        best = max(members, key=lambda k: _descriptive(entities[k]))
        canonical_of.update({m: best for m in members})
    out: dict[str, Merge] = {}
    for m in merges:
        for alias in (m.alias, m.canonical):
            target = canonical_of.get(alias, alias)
            if alias != target and alias not in out:
                out[alias] = Merge(alias, target, m.rule, m.evidence, m.units, m.certain)
    # proposals stay out of the groups: one a model rejects must not have moved the others
    for m in _variants(ordered, entities, idx):
        target = canonical_of.get(m.canonical, m.canonical)
        if m.alias not in canonical_of and target != m.alias:
            out[m.alias] = replace(m, canonical=target)
    unit_aliases = _unit_surnames(
        entities, unit_entities, neighbours, surnames, canonical_of, ev.unit_document
    )
    return Resolution(out, unit_aliases)


def _descriptive(e: Named) -> tuple[bool, bool, int, int, str]:
    words = len(e.key.split())
    return (acronym_of(e.name) is None, words >= 2, e.mentions, words, e.key)


def _spellings(
    scope: Sequence[str], entities: Mapping[str, Named], idx: NameIndexes, union: _Union
) -> None:
    buckets = {b for k in scope if (b := idx.indexed.get(k, ("", ""))[1])}
    for bucket in sorted(buckets):
        briefs = {k: n for k in idx.buckets.get(bucket, ()) if (n := brief(entities, k))}
        keys = sorted(briefs, key=lambda k: (-briefs[k].mentions, k))
        for other in keys[1:]:
            union(
                other,
                keys[0],
                "spelling",
                f"{briefs[other].name!r} is a spelling of {briefs[keys[0]].name!r}",
            )


def _acronyms(
    scope: Sequence[str],
    entities: Mapping[str, Named],
    unit_entities: Mapping[str, Collection[str]],
    union: _Union,
) -> None:
    for key in scope:
        seen = brief(entities, key)  # most names are no acronym: their record is not made
        letters = None if seen is None else acronym_of(seen.name)
        if seen is None or letters is None or seen.type == "person":
            continue
        e = entities[key]
        # an expansion is mentioned beside its acronym: the candidates are the unit's names
        # (of a pseudo-random sample of its units, the same as the unit ids grow: "U.S." is in
        # thousands, and a sample of them tells its expansion as well) that spell it, which
        # the key alone tells: the thousands of others are counted, never read
        together: Counter[str] = Counter(
            x
            for u in heapq.nsmallest(ACRONYM_UNITS, e.units)
            for x in unit_entities.get(u, ())
            if x != key
        )
        ranked = [
            (x, n)
            for x, n in together.most_common()
            if spells(letters, x)
            and (b := brief(entities, x)) is not None
            and b.type not in ("person", "geo")
            and acronym_of(b.name) is None
        ]
        if not ranked:
            continue
        best, n = ranked[0]
        if len(letters) == 2 and n < 2:
            continue  # two letters spell too much by chance to rest on one mention
        rivals = [x for x, m in ranked[1:] if m >= ACRONYM_MARGIN * n]
        if any(spelling_key(x) != spelling_key(best) for x in rivals):
            continue  # two different things spell this acronym here
        union(
            key,
            best,
            "acronym",
            f"{e.name!r} spells the initials of {entities[best].name!r}, mentioned together "
            f"in {n} text unit(s)",
            e.units & entities[best].units,
            certain=n >= 2,
        )


def _variants(scope: Sequence[str], entities: Mapping[str, Named], idx: NameIndexes) -> list[Merge]:
    """Proposals (``PROPOSED``): a name qualified by a place and the name it qualifies ("U.S.
    Federal Reserve", "Federal Reserve"), mentioned in one document; a clipped name and the
    organisation whose first word it starts ("Fed", "Federal Reserve"), mentioned in two
    documents together (the one in most, when several). On their own they are wrong too
    often ("Sydney Treasury" is not the Treasury, "Pacific Bell" not "Bell"), so a model
    must confirm each before it counts."""
    out: list[Merge] = []
    for key in scope:
        seen = brief(entities, key)
        if seen is None or seen.type in ("person", "geo") or acronym_of(seen.name) is not None:
            continue
        words = key.split()
        found: tuple[str, str, int] | None = None
        for i in range(1, len(words)):
            place, rest = " ".join(words[:i]), " ".join(words[i:])
            if i == len(words) - 1:
                break  # a one-word remainder ("Pacific Bell", "Bell") says too little
            other = brief(entities, rest)  # most are looked at only: their name and type
            if other is None or other.type in ("person", "geo") or acronym_of(other.name):
                continue
            known = brief(entities, place)
            if (known is not None and known.type == "geo") or (
                all(len(w) == 1 for w in words[:i]) and "".join(words[:i]) in idx.places
            ):
                shared = len(entities[key].documents & entities[rest].documents)
                if shared:
                    found = (rest, f"{seen.name!r} is {other.name!r} qualified by a place", shared)
                break
        if found is None and len(words) == 1 and len(key) >= 3:
            starting = [
                k
                for k in idx.clips.get(key[:3], ())
                if k.split()[0].startswith(key) and k.split()[0] != key and k in entities
            ]
            docs = entities[key].documents if starting else frozenset()
            clipped = [(len(docs & entities[k].documents), k) for k in starting]
            shared, best = max(clipped, default=(0, ""))
            if shared >= 2:
                found = (best, f"{seen.name!r} clips {entities[best].name!r}", shared)
        if found is not None:
            target, why, shared = found
            evidence = f"{why}, mentioned together in {shared} document(s)"
            out.append(Merge(key, target, VARIANT, evidence, (), certain=False))
    return out


def _surnames(
    scope: Sequence[str],
    entities: Mapping[str, Named],
    neighbours: Mapping[str, Collection[str]],
    idx: NameIndexes,
    union: _Union,
) -> dict[str, list[str]]:
    """Merge a name that ends exactly one person's longer name ("volcker", "de clercq",
    "cavaco silva"); return the names that end several (name -> those people)."""
    hub = max(10, int(HUB_SHARE * len(entities)))
    people, org_words = idx.people, idx.org_words
    shared: dict[str, list[str]] = {}
    for key in scope:
        seen = brief(entities, key)  # few names end a person's: only theirs are made whole
        if (
            seen is None
            or seen.type == "geo"
            or key not in people
            or (seen.type != "person" and " " in key)
            or acronym_of(seen.name) is not None
        ):
            continue
        e = entities[key]
        holders = sorted(people[key])
        if len(holders) > 1:
            shared[key] = holders
            continue
        [person] = holders
        common = set(neighbours.get(key, ())) & set(neighbours.get(person, ()))
        rare = {n for n in common if len(neighbours.get(n, ())) <= hub}
        together = e.documents & entities[person].documents
        if together:
            why = f"named in full elsewhere in {len(together)} of its documents"
        elif e.typed_person:
            why = "typed a person"
        elif e.mentions > entities[person].mentions:
            continue  # a bare name better known than the person is more likely something else
        elif rare and key not in org_words:
            why = f"related to {', '.join(sorted(rare)[:3])} as the person is"
        else:
            continue
        union(
            key,
            person,
            "surname",
            f"{e.name!r} ends the name of the only person {entities[person].name!r}; {why}",
            certain=bool(together),
        )
    return shared


def _unit_surnames(
    entities: Mapping[str, Named],
    unit_entities: Mapping[str, Collection[str]],
    neighbours: Mapping[str, Collection[str]],
    shared: Mapping[str, list[str]],
    canonical_of: Mapping[str, str],
    unit_document: Mapping[str, str],
) -> dict[tuple[str, str], UnitAlias]:
    out: dict[tuple[str, str], UnitAlias] = {}

    def weight(n: str) -> float:
        return 1.0 / degree_class(len(neighbours.get(n, ())))

    for surname, people in shared.items():
        near = {p: set(neighbours.get(p, ())) for p in people}
        for unit in sorted(entities[surname].units):
            document = unit_document.get(unit)
            named = [p for p in people if document in entities[p].documents]
            if len(named) == 1:  # the article names one of them in full
                out[(surname, unit)] = UnitAlias(
                    surname,
                    unit,
                    canonical_of.get(named[0], named[0]),
                    f"its document names {entities[named[0]].name!r} in full, and no other "
                    f"person named {entities[surname].name!r}",
                )
                continue
            known = [p for p in people if entities[p].mentions >= KNOWN_MENTIONS]
            if not named and len(known) == 1:  # news names a newcomer in full, not by surname
                out[(surname, unit)] = UnitAlias(
                    surname,
                    unit,
                    canonical_of.get(known[0], known[0]),
                    f"{entities[known[0]].name!r} is the only person named "
                    f"{entities[surname].name!r} mentioned more than once, and its document "
                    "names none of them in full",
                )
                continue
            others = set(unit_entities.get(unit, ())) - {surname}
            scores = sorted(
                ((round(sum(map(weight, others & near[p])), 3), p) for p in named or people),
                reverse=True,
            )
            (best, person), (second, _) = scores[0], scores[1]
            if best > second:
                target = canonical_of.get(person, person)
                out[(surname, unit)] = UnitAlias(
                    surname,
                    unit,
                    target,
                    f"the unit's entities are related to {entities[person].name!r} "
                    f"(weight {best}), to another person named {entities[surname].name!r} "
                    f"at most {second}",
                    certain=False,
                )
    return out
