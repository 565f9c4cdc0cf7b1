"""Which entity keys name one real-world thing: deterministic alias resolution over the graph.

The extractors key entities by their normalised name, so one actor can arrive under several
keys: an acronym and its expansion ("IMF", "International Monetary Fund"), a spelling
("Organisation" / "Organization", "Community" / "Communities", "U.N." / "UN"), a surname and
the full name ("Lyng", "Richard Lyng"). This module decides, from the merged graph alone
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
  rare a neighbour it is (a hub like "United States" says little), when one leads
  (``UnitAlias``), and stays unresolved otherwise. Two people who share a surname are never
  merged with each other.

The canonical key of a group is its best-known full name: not an acronym, two words or more,
then the most mentioned ("European Community" over "European Communities" and "EC").
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from graph.graph_view import GraphView
from graph.snapshot_model import SnapshotAlias

# the rule of a surname resolved in one text unit (``UnitAlias``)
NAMESAKE = "namesake"
# connectors an acronym skips ("Organization of Petroleum Exporting Countries" -> OPEC)
CONNECTORS = frozenset({"of", "for", "and", "on", "the", "de", "du", "des", "la", "le", "&", "in"})
# another expansion mentioned with the acronym at least this share as often makes it ambiguous
ACRONYM_MARGIN = 0.5
# a related entity of more neighbours than this share of all entities is a hub: no evidence
HUB_SHARE = 0.005
# a person mentioned this often is established: a bare surname may mean them without a full
# name in the same document (a person mentioned once is a newcomer, named in full)
KNOWN_MENTIONS = 2
_ACRONYM = re.compile(r"(?:[A-Z]\.){2,7}|[A-Z][A-Z&]{1,6}")
# British spellings -> American, applied word by word before keys are compared
# last words whose singular is another word in names ("Securities" is not one "Security")
_NOT_PLURALS = frozenset({"securities", "futures", "savings", "news", "works", "arms", "goods"})
_SPELLINGS = {
    "organisation": "organization",
    "organisations": "organizations",
    "programme": "program",
    "labour": "labor",
    "defence": "defense",
    "centre": "center",
    "co operation": "cooperation",
}


class _Union(Protocol):
    """How a rule records that two keys are one thing."""

    def __call__(
        self, a: str, b: str, rule: str, evidence: str, units: Iterable[str] = ()
    ) -> None: ...


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


@dataclass(frozen=True, slots=True)
class UnitAlias:
    """A shared surname resolved in one text unit only."""

    alias: str
    unit: str
    canonical: str
    evidence: str


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


def acronym_of(name: str) -> str | None:
    """The letters of a name written as an acronym ("U.N." -> "un", "IMF" -> "imf")."""
    text = name.strip()
    if not _ACRONYM.fullmatch(text):
        return None
    letters = text.replace(".", "").replace("&", "").lower()
    return letters if 2 <= len(letters) <= 7 else None


def spells(letters: str, key: str) -> bool:
    """Whether an acronym's letters spell a name of two content words or more: each content
    word gives its first letter and up to two more of its letters, in order, and a connector
    its first letter or none ("gatt": General Agreement on Tariffs and Trade; "icco":
    International CoCoa Organization; "unctad": United Nations Conference on Trade And
    Development)."""
    words = _spelled(key).replace("-", " ").split()
    if sum(w not in CONNECTORS for w in words) < 2 or words[0][:1] != letters[:1]:
        return False

    def match(i: int, j: int) -> bool:
        if j == len(words):
            return i == len(letters)
        word = words[j]
        if word in CONNECTORS and match(i, j + 1):
            return True
        return any(
            _begins(word, letters[i : i + n]) and match(i + n, j + 1)
            for n in range(1, min(3, len(word)) + 1)
            if i + n <= len(letters)
        )

    return match(0, 0)


def _begins(word: str, part: str) -> bool:
    """``part`` starts with the word's first letter and its other letters follow in order."""
    if not part or part[0] != word[0]:
        return False
    rest = iter(word[1:])
    return all(c in rest for c in part[1:])


def spelling_key(key: str) -> str:
    """The key with British spellings and a plural last word normalised."""
    words = _spelled(key).split()
    if len(words) < 2:  # "Lloyds" and "Lloyd" may well be two things
        return " ".join(words) or key
    last = words[-1]
    if last in _NOT_PLURALS:
        pass
    elif len(last) > 4 and last.endswith("ies"):
        last = last[:-3] + "y"
    elif len(last) > 3 and last.endswith("s") and not last.endswith(("ss", "us", "is")):
        last = last[:-1]
    return " ".join([*words[:-1], last])


def _spelled(key: str) -> str:
    text = f" {key} "
    for british, american in _SPELLINGS.items():
        text = text.replace(f" {british} ", f" {american} ")
    return text.strip()


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
    parent: dict[str, str] = {}
    merges: list[Merge] = []

    def find(k: str) -> str:
        while parent.get(k, k) != k:
            k = parent[k]
        return k

    def union(a: str, b: str, rule: str, evidence: str, units: Iterable[str] = ()) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            merges.append(Merge(a, b, rule, evidence, tuple(sorted(units))[:3]))

    _spellings(entities, union)
    _acronyms(entities, unit_entities, union)
    surnames = _surnames(entities, neighbours, union)
    groups: dict[str, list[str]] = defaultdict(list)
    for key in entities:
        groups[find(key)].append(key)
    canonical_of: dict[str, str] = {}
    for members in groups.values():
        if len(members) > 1:
            best = max(members, key=lambda k: _descriptive(entities[k]))
            canonical_of.update({m: best for m in members})
    out: dict[str, Merge] = {}
    for m in merges:
        for alias in (m.alias, m.canonical):
            target = canonical_of.get(alias, alias)
            if alias != target and alias not in out:
                out[alias] = Merge(alias, target, m.rule, m.evidence, m.units)
    unit_aliases = _unit_surnames(
        entities, unit_entities, neighbours, surnames, canonical_of, unit_document or {}
    )
    return Resolution(out, unit_aliases)


def _descriptive(e: Named) -> tuple[bool, bool, int, int, str]:
    words = len(e.key.split())
    return (acronym_of(e.name) is None, words >= 2, e.mentions, words, e.key)


def _spellings(entities: Mapping[str, Named], union: _Union) -> None:
    by_spelling: dict[str, list[str]] = defaultdict(list)
    for key, e in entities.items():
        if e.type == "geo":
            continue
        if e.type == "person":  # "Ivan F. Boesky" and "Ivan Boesky"
            words = [w for w in key.split() if len(w) > 1]
            if len(words) >= 2:
                by_spelling["person:" + " ".join(words)].append(key)
            continue
        letters = acronym_of(e.name)
        by_spelling[f"acr:{letters}" if letters else spelling_key(key)].append(key)
    for keys in by_spelling.values():
        keys.sort(key=lambda k: (-entities[k].mentions, k))
        for other in keys[1:]:
            union(
                other,
                keys[0],
                "spelling",
                f"{entities[other].name!r} is a spelling of {entities[keys[0]].name!r}",
            )


def _acronyms(
    entities: Mapping[str, Named], unit_entities: Mapping[str, Collection[str]], union: _Union
) -> None:
    for key, e in entities.items():
        letters = acronym_of(e.name)
        if letters is None or e.type == "person":
            continue
        # an expansion is mentioned beside its acronym: the candidates are the unit's names
        together: Counter[str] = Counter(
            x
            for u in e.units
            for x in unit_entities.get(u, ())
            if x != key and entities[x].type not in ("person", "geo")
        )
        ranked = [
            (x, n)
            for x, n in together.most_common()
            if acronym_of(entities[x].name) is None and spells(letters, x)
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
        )


def _surnames(
    entities: Mapping[str, Named], neighbours: Mapping[str, Collection[str]], union: _Union
) -> dict[str, list[str]]:
    """Merge a name that ends exactly one person's longer name ("volcker", "de clercq",
    "cavaco silva"); return the names that end several (name -> those people)."""
    hub = max(10, int(HUB_SHARE * len(entities)))
    people: dict[str, list[str]] = defaultdict(list)
    for key, e in entities.items():
        words = key.split()
        if e.type == "person":
            for n in range(1, len(words)):
                people[" ".join(words[-n:])].append(key)
    # first words of organisations' and places' names: "Ford" may be Ford Motor's
    org_words = {k.split()[0] for k, x in entities.items() if x.type != "person" and " " in k}
    shared: dict[str, list[str]] = {}
    for key, e in entities.items():
        if (
            e.type == "geo"
            or key not in people
            or (e.type != "person" and " " in key)
            or acronym_of(e.name) is not None
        ):
            continue
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
        return 1.0 / math.log2(2 + len(neighbours.get(n, ())))

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
                )
    return out


def view_inputs(
    view: GraphView,
) -> tuple[dict[str, Named], dict[str, set[str]], dict[str, set[str]], dict[str, str]]:
    """What ``resolve`` reads, from a merged graph: the entities, each text unit's entity
    keys, each entity's neighbours, each text unit's document."""
    unit_document = {u: t.document_id for u, t in view.text_units.items()}
    entities = {}
    for key, agg in view.entities.items():
        units = frozenset(view.entity_units.get(key, ()))
        entities[key] = Named(
            key=key,
            name=agg.name,
            type=agg.type,
            mentions=agg.mention_count,
            units=units,
            typed_person=2 * agg.types.count("person") >= max(1, agg.types.total),
            documents=frozenset(unit_document[u] for u in units if u in unit_document),
        )
    unit_entities: dict[str, set[str]] = defaultdict(set)
    for key, e in entities.items():
        for u in e.units:
            unit_entities[u].add(key)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for r in view.relationships.values():
        neighbours[r.source_key].add(r.target_key)
        neighbours[r.target_key].add(r.source_key)
    return entities, unit_entities, neighbours, unit_document


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
