"""The indexes alias resolution reads, kept up to date between runs: names by ending, first
word, spelling and clip (``NameIndexes``) and each entity's neighbours (``Related``).

They are pickled in the community job's checkpoint (``AliasState`` in
``graph.job.state.JobState``), so a run re-resolves only around what changed
(``graph.aliases.view``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from graph.aliases.names import CONNECTORS, acronym_of, spelling_key
from graph.aliases.resolution import Brief, Named, brief
from graph.keys import split_relationship_key
from graph.merge.view import GraphView


@dataclass
class NameIndexes:
    """What the rules read of every entity, kept up to date key by key so a run re-resolves
    only around what changed (``graph.aliases.view``): the people bearing each name ending, the
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
            e = brief(entities, key)  # the name and type: not the whole record
            if e is not None:
                entry = (e.type, _bucket(key, e))
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


def _bucket(key: str, e: Brief) -> str:
    """The spelling bucket of a key: keys in one bucket are spellings of one name."""
    if e.type == "geo":
        return ""
    if e.type == "person":  # "Ivan F. Boesky" and "Ivan Boesky"
        words = [w for w in key.split() if len(w) > 1]
        return "person:" + " ".join(words) if len(words) >= 2 else ""
    letters = acronym_of(e.name)
    return f"acr:{letters}" if letters else spelling_key(key)


def degree_class(degree: int) -> int:
    """How common a neighbour of ``degree`` relationships is, by powers of two (2 for none or
    one, 3 for two to five, ...): the rules weigh a shared neighbour by it, so a neighbour's
    weight moves only when its degree crosses a power of two and a run re-decides what rests
    on it only then (``Related.update``)."""
    return (degree + 2).bit_length()


@dataclass
class Related:
    """Each entity key's neighbours (the other ends of its relationships), kept up to date
    relationship by relationship."""

    near: dict[str, set[str]] = field(default_factory=dict)

    def update(
        self, view: GraphView, relationship_keys: Iterable[str]
    ) -> tuple[set[str], set[str]]:
        """Re-read the given relationships; returns the entity keys at their ends, and those
        of them whose ``degree_class`` moved."""
        ends: set[str] = set()
        degrees: dict[str, int] = {}  # each end's degree before the update
        for key in relationship_keys:
            a, b = split_relationship_key(key)
            ends.update((a, b))
            if a == b:
                continue
            for end in (a, b):
                if end not in degrees:
                    degrees[end] = len(self.near.get(end, ()))
            if key in view.relationships:
                self.near.setdefault(a, set()).add(b)
                self.near.setdefault(b, set()).add(a)
            else:
                _toggle(self.near, a, b, -1)
                _toggle(self.near, b, a, -1)
        moved = {
            k
            for k, d in degrees.items()
            if degree_class(d) != degree_class(len(self.near.get(k, ())))
        }
        return ends, moved


@dataclass
class AliasState:
    """What the community job keeps of alias resolution between runs."""

    indexes: NameIndexes
    related: Related
    runs_since_full: int = 0
