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

import math
import re
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from graph.graph_view import GraphView
from graph.keys import split_relationship_key
from graph.snapshot_model import SnapshotAlias

# the rule of a surname resolved in one text unit (``UnitAlias``)
NAMESAKE = "namesake"
# the rule of a name's variants (``_variants``): proposals a model must confirm
VARIANT = "variant"
PROPOSED = frozenset({VARIANT})
# connectors an acronym skips ("Organization of Petroleum Exporting Countries" -> OPEC)
CONNECTORS = frozenset({"of", "for", "and", "on", "the", "de", "du", "des", "la", "le", "&", "in"})
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
        self,
        a: str,
        b: str,
        rule: str,
        evidence: str,
        units: Iterable[str] = (),
        certain: bool = True,
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


@dataclass(frozen=True, slots=True)
class Evidence:
    """What resolution reads of the graph: the entities, each text unit's entity keys, each
    entity's neighbours (the keys it is related to), each text unit's document."""

    entities: Mapping[str, Named]
    unit_entities: Mapping[str, Collection[str]]
    neighbours: Mapping[str, Collection[str]]
    unit_document: Mapping[str, str]


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
    return _resolve_scope(set(entities), ev, NameIndexes.build(entities))


@dataclass
class NameIndexes:
    """What the rules read of every entity, kept up to date key by key so a run re-resolves
    only around what changed (``resolve_changed``): the people bearing each name ending, the
    first words of organisations' and places' names, the keys of each spelling, and how many
    entities there are."""

    people: dict[str, set[str]] = field(default_factory=dict)  # name ending -> person keys
    org_words: Counter[str] = field(default_factory=Counter)  # first words, counted
    buckets: dict[str, set[str]] = field(default_factory=dict)  # spelling -> keys
    # initials of places named in two words or more ("us" for "united states")
    places: Counter[str] = field(default_factory=Counter)
    # first three letters -> keys of organisations' names of two words or more starting so
    # (the names a clipped form like "Fed" may stand for)
    clips: dict[str, set[str]] = field(default_factory=dict)
    # the leading words, and trailing ones of two words or more, of organisations' names ->
    # those names (a place that may qualify one, the name it may qualify)
    parts: dict[str, set[str]] = field(default_factory=dict)
    # key -> (type, spelling bucket or "") as indexed, to take a key out when it changes
    indexed: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def build(cls, entities: Mapping[str, Named]) -> NameIndexes:
        made = cls()
        made.update(entities, entities)
        return made

    def update(self, entities: Mapping[str, Named], keys: Iterable[str]) -> None:
        """Re-index ``keys`` as ``entities`` has them now (a key it lacks is taken out)."""
        for key in keys:
            old = self.indexed.pop(key, None)
            if old is not None:
                self._index(key, *old, -1)
            e = entities.get(key)
            if e is not None:
                entry = (e.type, _bucket(e))
                self.indexed[key] = entry
                self._index(key, *entry, 1)

    def _index(self, key: str, type_: str, bucket: str, sign: int) -> None:
        words = key.split()
        if type_ == "person":
            for n in range(1, len(words)):
                _toggle(self.people, " ".join(words[-n:]), key, sign)
        elif len(words) > 1:
            self.org_words[words[0]] += sign
            if self.org_words[words[0]] <= 0:
                del self.org_words[words[0]]
            if type_ == "geo":
                initials = "".join(w[0] for w in words if w not in CONNECTORS)
                self.places[initials] += sign
                if self.places[initials] <= 0:
                    del self.places[initials]
            else:
                if len(words[0]) > 3:
                    _toggle(self.clips, words[0][:3], key, sign)
                for i in range(1, len(words)):
                    _toggle(self.parts, " ".join(words[:i]), key, sign)
                    if len(words) - i >= 2:
                        _toggle(self.parts, " ".join(words[i:]), key, sign)
        if bucket:
            _toggle(self.buckets, bucket, key, sign)


def _toggle(index: dict[str, set[str]], at: str, key: str, sign: int) -> None:
    if sign > 0:
        index.setdefault(at, set()).add(key)
        return
    held = index.get(at)
    if held is not None:
        held.discard(key)
        if not held:
            del index[at]


def _bucket(e: Named) -> str:
    """The spelling bucket of a key: keys in one bucket are spellings of one name."""
    if e.type == "geo":
        return ""
    if e.type == "person":  # "Ivan F. Boesky" and "Ivan Boesky"
        words = [w for w in e.key.split() if len(w) > 1]
        return "person:" + " ".join(words) if len(words) >= 2 else ""
    letters = acronym_of(e.name)
    return f"acr:{letters}" if letters else spelling_key(e.key)


def resolve_changed(
    previous: Resolution, changed: Iterable[str], ev: Evidence, idx: NameIndexes
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
    refreshes."""
    entities = ev.entities
    canonical_groups: dict[str, set[str]] = defaultdict(set)
    for alias, m in previous.merges.items():
        canonical_groups[m.canonical].update((alias, m.canonical))
    unit_surnames: dict[str, set[str]] = defaultdict(set)
    for u in previous.unit_aliases.values():
        unit_surnames[u.canonical].add(u.alias)

    def group(key: str) -> set[str]:
        merge = previous.merges.get(key)
        return canonical_groups.get(merge.canonical if merge else key, {key})

    # names several people share: each of their units is decided by what else it mentions,
    # which any change may have touched, so they are all decided again (a few hundred)
    scope = {k for k, held in idx.people.items() if len(held) > 1 and k in entities}
    acronyms: list[tuple[str, str]] | None = None  # (letters, key) of every acronym
    for key in set(changed):
        scope |= group(key) | unit_surnames.get(key, set())
        words = key.split()
        # names it may qualify or be qualified by: "porvane x", "u s x", "x" for "porvane x"
        scope |= idx.parts.get(key, set())
        if len(words) > 1:
            initials = " ".join(w[0] for w in words if w not in CONNECTORS)
            scope |= idx.parts.get(initials, set())
        endings = [" ".join(words[-n:]) for n in range(1, len(words))]
        e = entities.get(key)
        if e is None:  # gone, and what it was is not known: any acronym it could expand
            if acronyms is None:
                acronyms = [
                    (b[4:], k) for b, keys in idx.buckets.items() if b[:4] == "acr:" for k in keys
                ]
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
    for _ in range(4):  # until the groups the new decisions reach are all in scope
        for key in list(scope):
            scope |= group(key) | unit_surnames.get(key, set())
        live = {k for k in scope if k in entities}
        part = _resolve_scope(live, ev, idx)
        reached = {k for m in part.merges.values() for k in (m.alias, m.canonical)}
        more = {k for k in reached - scope if group(k) != {k}}
        if not more:
            break
        scope |= more
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
    return Resolution(merges, units), scope


def _resolve_scope(scope: Collection[str], ev: Evidence, idx: NameIndexes) -> Resolution:
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
        keys = sorted(
            (k for k in idx.buckets.get(bucket, ()) if k in entities),
            key=lambda k: (-entities[k].mentions, k),
        )
        for other in keys[1:]:
            union(
                other,
                keys[0],
                "spelling",
                f"{entities[other].name!r} is a spelling of {entities[keys[0]].name!r}",
            )


def _acronyms(
    scope: Sequence[str],
    entities: Mapping[str, Named],
    unit_entities: Mapping[str, Collection[str]],
    union: _Union,
) -> None:
    for key in scope:
        e = entities[key]
        letters = acronym_of(e.name)
        if letters is None or e.type == "person":
            continue
        # an expansion is mentioned beside its acronym: the candidates are the unit's names
        # (of a pseudo-random sample of its units, the same as the unit ids grow: "U.S." is in
        # thousands, and a sample of them tells its expansion as well)
        together: Counter[str] = Counter(
            x
            for u in sorted(e.units)[:ACRONYM_UNITS]
            for x in unit_entities.get(u, ())
            if x != key and x in entities and entities[x].type not in ("person", "geo")
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
        e = entities[key]
        if e.type in ("person", "geo") or acronym_of(e.name) is not None:
            continue
        words = key.split()
        found: tuple[str, str, int] | None = None
        for i in range(1, len(words)):
            place, rest = " ".join(words[:i]), " ".join(words[i:])
            if i == len(words) - 1:
                break  # a one-word remainder ("Pacific Bell", "Bell") says too little
            other = entities.get(rest)
            if other is None or other.type in ("person", "geo") or acronym_of(other.name):
                continue
            known = entities.get(place)
            if (known is not None and known.type == "geo") or (
                all(len(w) == 1 for w in words[:i]) and "".join(words[:i]) in idx.places
            ):
                shared = len(e.documents & other.documents)
                if shared:
                    found = (rest, f"{e.name!r} is {other.name!r} qualified by a place", shared)
                break
        if found is None and len(words) == 1 and len(key) >= 3:
            clipped = [
                (len(e.documents & entities[k].documents), k)
                for k in idx.clips.get(key[:3], ())
                if k.split()[0].startswith(key) and k.split()[0] != key and k in entities
            ]
            shared, best = max(clipped, default=(0, ""))
            if shared >= 2:
                found = (best, f"{e.name!r} clips {entities[best].name!r}", shared)
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
        e = entities[key]
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
                    certain=False,
                )
    return out


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
    return entities, unit_entities, neighbours, dict(UnitDocuments(view))


class ViewNames(Mapping[str, Named]):
    """The view's entities as resolution reads them, made on first use (a run that resolves
    around a few changes reads a few hundred of them)."""

    def __init__(self, view: GraphView) -> None:
        self.view = view
        self._made: dict[str, Named] = {}

    def __getitem__(self, key: str) -> Named:
        made = self._made.get(key)
        if made is None:
            agg = self.view.entities[key]
            units = frozenset(self.view.entity_units.get(key, ()))
            texts = self.view.text_units
            made = Named(
                key=key,
                name=agg.name,
                type=agg.type,
                mentions=agg.mention_count,
                units=units,
                typed_person=2 * agg.types.count("person") >= max(1, agg.types.total),
                documents=frozenset(texts[u].document_id for u in units if u in texts),
            )
            self._made[key] = made
        return made

    def __contains__(self, key: object) -> bool:
        return key in self.view.entities

    def __iter__(self) -> Iterator[str]:
        return iter(self.view.entities)

    def __len__(self) -> int:
        return len(self.view.entities)


class UnitDocuments(Mapping[str, str]):
    """Text unit id -> its document id, read from the view."""

    def __init__(self, view: GraphView) -> None:
        self.units = view.text_units

    def __getitem__(self, unit: str) -> str:
        return self.units[unit].document_id

    def __iter__(self) -> Iterator[str]:
        return iter(self.units)

    def __len__(self) -> int:
        return len(self.units)


@dataclass
class Related:
    """Each entity key's neighbours (the other ends of its relationships), kept up to date
    relationship by relationship."""

    near: dict[str, set[str]] = field(default_factory=dict)

    def update(self, view: GraphView, relationship_keys: Iterable[str]) -> set[str]:
        """Re-read the given relationships; returns the entity keys at their ends."""
        ends: set[str] = set()
        for key in relationship_keys:
            a, b = split_relationship_key(key)
            ends.update((a, b))
            if a == b:
                continue
            if key in view.relationships:
                self.near.setdefault(a, set()).add(b)
                self.near.setdefault(b, set()).add(a)
            else:
                _toggle(self.near, a, b, -1)
                _toggle(self.near, b, a, -1)
        return ends


@dataclass
class AliasState:
    """What the community job keeps of alias resolution between runs."""

    indexes: NameIndexes
    related: Related
    runs_since_full: int = 0


def resolve_view(
    view: GraphView,
    previous: Resolution | None,
    kept: AliasState | None,
    changed_entities: Collection[str] | None,
    changed_relationships: Collection[str],
    *,
    full_every: int,
) -> tuple[Resolution, AliasState, int]:
    """The view's resolution, and the state to keep, and how many keys were re-decided:
    around what changed (``resolve_changed``) when the previous resolution and state are
    kept and what changed is known, else (and every ``full_every``-th run) afresh."""
    names = ViewNames(view)
    docs = UnitDocuments(view)
    full = (
        previous is None
        or kept is None
        or changed_entities is None
        or kept.runs_since_full + 1 >= full_every
    )
    if full:
        related = Related()
        related.update(view, view.relationships)
        idx = NameIndexes.build(names)
        ev = Evidence(names, view.unit_entities, related.near, docs)
        resolution = _resolve_scope(set(view.entities), ev, idx)
        return resolution, AliasState(idx, related), len(view.entities)
    assert previous is not None and kept is not None and changed_entities is not None
    keys = set(changed_entities) | kept.related.update(view, changed_relationships)
    idx = kept.indexes
    was = {b for k in keys if (b := idx.indexed.get(k, ("", ""))[1])}
    idx.update(names, keys)
    keys.update(k for b in was for k in idx.buckets.get(b, ()))  # the spellings it had
    ev = Evidence(names, view.unit_entities, kept.related.near, docs)
    resolution, scope = resolve_changed(previous, keys, ev, idx)
    kept.runs_since_full += 1
    return resolution, kept, sum(k in view.entities for k in scope)


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
