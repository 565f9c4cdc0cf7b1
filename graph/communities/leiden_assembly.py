"""The communities a maintained run made or kept (trees of ``MadeNode`` and ``KeptNode``)
written into the next ``Hierarchy``: labels, parent links, the children index, volumes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from graph.communities.leiden import Hierarchy
from graph.communities.leiden_volumes import level_zero_modularity


@dataclass(frozen=True, slots=True)
class KeptNode:
    """A previous community kept with its whole sub-hierarchy (its member sets reused)."""

    level: int
    label: int


@dataclass(frozen=True, slots=True)
class MadeNode:
    """A community made this run: its members, its children, and the previous member set it
    continues (a community changed in place), if any."""

    members: frozenset[str]
    children: list[MadeNode | KeptNode]
    origin: frozenset[str] | None = None


class SmallestKey:
    """A member set's smallest key, as a sort key found only when the sort compares it: on
    a tie in size, which communities of thousands of members (a hub's) rarely have."""

    __slots__ = ("_key", "_members")

    def __init__(self, members: frozenset[str]) -> None:
        self._members, self._key = members, ""

    def key(self) -> str:
        if not self._key:
            self._key = min(self._members)
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SmallestKey) and self.key() == other.key()

    def __lt__(self, other: SmallestKey) -> bool:
        return self.key() < other.key()

    def __hash__(self) -> int:
        return hash(self.key())


@dataclass(frozen=True, slots=True)
class NewTree:
    """A new level-0 community and its volumes (weight inside, sum of weighted degrees)."""

    members: frozenset[str]
    node: MadeNode | KeptNode
    inside: float
    degree: float


def assemble_hierarchy(
    prev: Hierarchy,
    children: dict[tuple[int, int], list[int]],
    replaced: set[int],
    trees: Sequence[NewTree],
    digests: dict[str, int],
    placed: dict[str, float],
    volumes: dict[int, tuple[float, float]],
    total: float,
) -> Hierarchy:
    """``prev`` with the level-0 communities ``replaced`` taken out and ``trees`` put in,
    level by level, breadth first. A previous community kept at its own level (most of a
    large changed community's sub-hierarchy) stays where it is, with its label and its whole
    subtree: only its parent link changes, so the work follows what was made, not the size of
    the changed communities. Made communities get new labels; a kept one that moved to
    another level is copied under new labels, member sets reused."""
    draft = _Draft(
        [dict(lv) for lv in prev.levels], [dict(pv) for pv in prev.parents], dict(children)
    )
    kept = draft.take_out(replaced, _in_place(trees))
    draft.put_in(prev, children, kept, trees, volumes)
    levels, parents = draft.levels, draft.parents
    while levels and not levels[-1]:
        levels.pop()
        parents.pop()
    # a label gone took its children's entry with it; a made label's children are all made
    # (a kept-in-place one keeps its own), and no other label gained or lost one
    made_kids: dict[tuple[int, int], list[int]] = {}
    for level, label in draft.made:
        up = parents[level].get(label)
        if up is not None:
            made_kids.setdefault((level - 1, up), []).append(label)
    for at, labels in made_kids.items():
        draft.index[at] = sorted(labels)
    return Hierarchy(
        tuple(levels),
        tuple(parents),
        level_zero_modularity(volumes, total),
        digests,
        placed,
        volumes,
        draft.origins,
        frozenset(draft.made),
        draft.index,
    )


@dataclass(slots=True)
class _Draft:
    """The next hierarchy's levels, parent links and children index as they are assembled,
    with the communities made so far and the previous member sets they continue."""

    levels: list[dict[int, frozenset[str]]]
    parents: list[dict[int, int]]
    index: dict[tuple[int, int], list[int]]
    origins: dict[tuple[int, int], frozenset[str]] = field(default_factory=dict)
    made: set[tuple[int, int]] = field(default_factory=set)

    def take_out(self, replaced: set[int], stay: set[tuple[int, int]]) -> set[tuple[int, int]]:
        """The level-0 communities ``replaced`` and their subtrees taken out, except the
        previous communities the new trees keep at their level (``stay``), which are
        returned."""
        doomed = [(0, label) for label in replaced]
        kept: set[tuple[int, int]] = set()
        while doomed:
            at = doomed.pop()
            if at in stay:
                kept.add(at)
                continue
            level, label = at
            del self.levels[level][label]
            self.parents[level].pop(label, None)
            doomed.extend((level + 1, kid) for kid in self.index.pop(at, ()))
        return kept

    def put_in(
        self,
        prev: Hierarchy,
        children: dict[tuple[int, int], list[int]],
        kept: set[tuple[int, int]],
        trees: Sequence[NewTree],
        volumes: dict[int, tuple[float, float]],
    ) -> None:
        """The trees put in level by level, breadth first; their level-0 volumes noted."""
        levels, parents = self.levels, self.parents
        next_label = [max(lv, default=-1) + 1 for lv in levels]
        queue: list[tuple[MadeNode | KeptNode, int | None, NewTree | None]] = [
            (t.node, None, t) for t in trees
        ]
        level = 0
        while queue:
            if level == len(levels):
                levels.append({})
                parents.append({})
                next_label.append(0)
            below: list[tuple[MadeNode | KeptNode, int | None, NewTree | None]] = []
            for node, parent, tree in queue:
                kids: list[MadeNode | KeptNode] = []
                if isinstance(node, KeptNode) and (node.level, node.label) in kept:
                    label = node.label  # in place: its subtree stays as it is
                else:
                    label = next_label[level]
                    next_label[level] += 1
                    kids = self._placed(prev, children, node, level, label)
                self.made.add((level, label))
                if parent is not None:
                    parents[level][label] = parent
                if tree is not None:
                    volumes[label] = (tree.inside, tree.degree)
                below.extend((kid, label, None) for kid in kids)
            queue = below
            level += 1

    def _placed(
        self,
        prev: Hierarchy,
        children: dict[tuple[int, int], list[int]],
        node: MadeNode | KeptNode,
        level: int,
        label: int,
    ) -> list[MadeNode | KeptNode]:
        """``node`` written at a new ``label`` of ``level``; returns its children to place.
        A kept node moved to another level is copied, its member sets reused."""
        if isinstance(node, KeptNode):
            self.levels[level][label] = prev.levels[node.level][node.label]
            return [KeptNode(node.level + 1, k) for k in children.get((node.level, node.label), ())]
        self.levels[level][label] = node.members
        if node.origin is not None:
            self.origins[(level, label)] = node.origin
        return sorted(node.children, key=lambda c: _order(prev, c))


def _in_place(trees: Sequence[NewTree]) -> set[tuple[int, int]]:
    """The previous communities the trees keep at the level they were at."""
    out: set[tuple[int, int]] = set()
    queue: list[MadeNode | KeptNode] = [t.node for t in trees]
    level = 0
    while queue:
        below: list[MadeNode | KeptNode] = []
        for node in queue:
            if isinstance(node, KeptNode):
                if node.level == level:
                    out.add((node.level, node.label))
            else:
                below.extend(node.children)
        queue = below
        level += 1
    return out


def _order(prev: Hierarchy, node: MadeNode | KeptNode) -> tuple[int, int, str | SmallestKey]:
    """Children by descending size; made ones by their smallest key, kept ones by label."""
    if isinstance(node, KeptNode):
        return (-len(prev.levels[node.level][node.label]), 1, f"{node.label:012d}")
    return (-len(node.members), 0, SmallestKey(node.members))
