"""Stable community ids, and the short human-readable ids citations use.

What "stable" means. A community id names one community of one level across runs: as long as
that level has, run after run, a community whose members overlap the id's previous members by
Jaccard ≥ ``threshold`` (settings ``community.jaccard_threshold``, default 0.3) and that wins the
matching below, the id survives — whatever label Leiden gave it, however its members drifted, and
whichever parent it now sits under. When no community wins it, the id ends and is never given to
another community. Ids never move between levels: a level is part of what a community is.

How it is kept. Leiden renumbers its labels by size every run, so ids come only from member
overlap, level by level from the top: every (previous, new) pair of the same level with Jaccard
≥ threshold is a candidate; candidates are taken greedily by descending Jaccard, then preferring
a previous community whose parent id is the new community's parent id (the matched parent's
lineage), then by larger overlap, then by previous id and the new community's smallest member
key — a total order, so the outcome never depends on input order. Each previous and each new
community is matched at most once. A child may keep its id under another parent: its members,
and so its report, are what matter; requiring the same parent would churn the ids (and
reports) of every intact child whenever two parents merge. Parent and children links are
rebuilt from the new hierarchy each run, so they are always consistent.

New ids. An unmatched community gets ``c-<n>`` with ``n`` drawn from the ``community`` counter
of ``HumanIds`` (``graph.communities.human_ids``), the allocator carried in the job's state:
counters only go up, so an id is never reused and never derived from positions ("old max + n"
reshuffles, as in Microsoft GraphRAG's update, re-point ids at other communities). ``n`` is also the
community's ``human_readable_id``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

from graph.communities.human_ids import HumanIds
from graph.communities.leiden import Hierarchy
from graph.model import Community

COMMUNITY_KIND = "community"
DEFAULT_JACCARD_THRESHOLD = 0.3


@dataclass(frozen=True, slots=True)
class Labelled:
    """One run's communities by level and hierarchy label (``by_label[level][label]``), with
    the hierarchy and the community tuple they index. The next run starts its ids from it
    when its hierarchy names the labels it placed (``Hierarchy.made``): every other label is
    the community it was, so only those are visited."""

    hierarchy: Hierarchy
    communities: tuple[Community, ...]
    by_label: tuple[dict[int, Community], ...]

    def indexes(self, hierarchy: Hierarchy | None, communities: tuple[Community, ...]) -> bool:
        """Whether this is the index of that hierarchy and those communities (the objects)."""
        return self.hierarchy is hierarchy and self.communities is communities


@dataclass(frozen=True, slots=True)
class Delta:
    """What a run changed in the communities, each side in its run's order (level by level,
    in label order): ``before``, the previous communities that are not in the run as they
    were (gone, or another object under their id); ``after``, the run's communities that are
    not the previous object with their id (new, or changed in members, level or links).
    Every other community is the same object in both runs."""

    before: tuple[Community, ...]
    after: tuple[Community, ...]


@dataclass(frozen=True, slots=True)
class StableCommunities:
    """The run's communities with stable ids (level by level, in hierarchy label order), the
    allocator to carry to the next run, what changed since the previous communities, and the
    communities by label for the next run."""

    communities: tuple[Community, ...]
    human_ids: HumanIds
    delta: Delta = Delta((), ())
    labelled: Labelled | None = None


def assign_community_ids(
    hierarchy: Hierarchy,
    previous: Sequence[Community],
    human_ids: HumanIds,
    *,
    threshold: float = DEFAULT_JACCARD_THRESHOLD,
    since: Labelled | None = None,
) -> StableCommunities:
    """Give each community of ``hierarchy`` a stable id by matching it to ``previous``.

    A community the clustering kept as it was (``graph.communities.leiden_local`` keeps most of
    them, with the previous member-set object) has that previous community's id at once: its members
    are equal, which the matching rule matches first anyway. A community it changed in place
    (``Hierarchy.origins``: the previous member set it continues) that shares more than half
    of their union with that previous community takes its id: such a pair is each other's only
    candidate above 1/2, so the greedy rule would match it whatever else is there, and a
    hub's community that moved a few members costs one set intersection. Only the others go
    through ``match_level``, so the cost follows what the run changed.

    ``since``: the previous run's communities by label, when ``hierarchy`` was made from
    ``since.hierarchy`` by ``graph.communities.leiden_local`` (and ``previous`` is
    ``since.communities``); with ``Hierarchy.made`` it lets the run visit the labels placed
    and the ones that went, not every community of the graph. The result is the same."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    made = hierarchy.placed()
    if since is not None and made is not None and since.communities is previous:
        return _assign_placed(hierarchy, made, since, human_ids, threshold)
    ids: list[dict[int, str]] = []
    fresh: list[tuple[int, int]] = []  # (level, label) needing a new id, in allocation order
    previous_by_level: dict[int, list[Community]] = {}
    for c in previous:
        previous_by_level.setdefault(c.level, []).append(c)
    # the same object is the same members; ids of live objects do not repeat
    by_object = {id(c.entity_keys): c for c in previous}
    for level, communities in enumerate(hierarchy.levels):
        ids.append(
            _level_ids(
                hierarchy,
                (level, threshold),
                dict(communities),
                by_object,
                previous_by_level.get(level, []),
                lambda lv, lab: ids[lv][lab],
                fresh,
            )
        )
    human_ids = _give_fresh(human_ids, ids, fresh, {c.id for c in previous})
    out = _communities(hierarchy, ids, previous)
    return StableCommunities(
        out,
        human_ids.assign(COMMUNITY_KIND, (c.id for c in out)),
        _delta(previous, out),
        _labelled(hierarchy, out),
    )


def _delta(previous: Sequence[Community], out: tuple[Community, ...]) -> Delta:
    """What a whole pass changed: the communities on either side that the other does not
    hold as the same object under their id."""
    had = {c.id: c for c in previous}
    has = {c.id: c for c in out}
    return Delta(
        tuple(c for c in previous if has.get(c.id) is not c),
        tuple(c for c in out if had.get(c.id) is not c),
    )


def _give_fresh(
    human_ids: HumanIds, ids: list[dict[int, str]], fresh: list[tuple[int, int]], taken: set[str]
) -> HumanIds:
    """New ids put in ``ids`` at the ``fresh`` (level, label)s, in order; returns the
    allocator that gave them."""
    new_ids, human_ids = _fresh_ids(human_ids, len(fresh), taken)
    for (level, label), new_id in zip(fresh, new_ids, strict=True):
        ids[level][label] = new_id
    return human_ids


def _level_ids(
    hierarchy: Hierarchy,
    level_and_threshold: tuple[int, float],
    rest: dict[int, frozenset[str]],
    by_object: Mapping[int, Community],
    candidates: Sequence[Community],
    parent_id: Callable[[int, int], str],
    fresh: list[tuple[int, int]],
) -> dict[int, str]:
    """Ids of one level's communities ``rest`` (label → members; emptied as they are
    matched): the previous community of the same object, then the one each continues, then
    ``match_level`` against the ``candidates`` (that level's previous communities) left;
    the labels still without one are noted in ``fresh`` and given a placeholder id.
    ``parent_id(level, label)``: the id given to a community of the level above."""
    level, threshold = level_and_threshold
    level_ids: dict[int, str] = {}
    for label, members in list(rest.items()):
        kept = by_object.get(id(members))
        if kept is not None and kept.level == level and kept.entity_keys is members:
            level_ids[label] = kept.id
            del rest[label]
    if not rest:
        return level_ids
    used = set(level_ids.values())
    origins = hierarchy.continued()
    if origins:
        before = {lab: origins[(level, lab)] for lab in rest if (level, lab) in origins}
        _continued(rest, before, by_object, level_and_threshold, used, level_ids)
    old = [c for c in candidates if c.id not in used]
    parents = hierarchy.parents[level]
    parent_ids = {lab: parent_id(level - 1, parents[lab]) for lab in rest if lab in parents}
    level_ids.update(match_level(rest, parent_ids, old, threshold))
    for label in sorted(rest):
        if label not in level_ids:
            level_ids[label] = f"\x00unmatched-{label}"  # no previous id equals it
            fresh.append((level, label))
    return level_ids


def _assign_placed(
    hierarchy: Hierarchy,
    made: frozenset[tuple[int, int]],
    since: Labelled,
    human_ids: HumanIds,
    threshold: float,
) -> StableCommunities:
    """``assign_community_ids`` for a hierarchy that names the labels it placed: a label it
    did not place has the members object, parent and children it had (``Hierarchy.made``),
    so it is the previous community at that label; the placed labels are matched as in the
    whole pass, against the previous communities whose labels went or were placed again
    (the others keep their ids, which no other community can take)."""
    levels = hierarchy.levels
    old_labels = since.by_label
    placed: list[list[int]] = [[] for _ in levels]
    for level, label in made:
        placed[level].append(label)
    ids: list[dict[int, str]] = []  # the placed labels' ids

    def parent_id(level: int, label: int) -> str:
        """The placed label's id, else the previous run's at that label (not placed)."""
        found = ids[level].get(label)
        return old_labels[level][label].id if found is None else found

    fresh: list[tuple[int, int]] = []
    # per level, the previous communities not known to be kept: their labels went or were placed
    loose: list[list[Community]] = []
    for level, communities in enumerate(levels):
        before = old_labels[level] if level < len(old_labels) else {}
        labels = sorted(placed[level])
        went = sorted(before.keys() - communities.keys())
        loose.append(
            [before[lab] for lab in sorted({*went, *(lab for lab in labels if lab in before)})]
        )
        by_object = {id(c.entity_keys): c for c in loose[level]}
        ids.append(
            _level_ids(
                hierarchy,
                (level, threshold),
                {lab: communities[lab] for lab in labels},
                by_object,
                loose[level],
                parent_id,
                fresh,
            )
        )
    for level in range(len(levels), len(old_labels)):
        loose.append([old_labels[level][lab] for lab in sorted(old_labels[level])])
    taken = {c.id for c in since.communities} if fresh else set()
    human_ids = _give_fresh(human_ids, ids, fresh, taken)
    by_label, after, reused = _placed_communities(hierarchy, placed, ids, since, loose)
    out = tuple(chain.from_iterable(map(level.__getitem__, sorted(level)) for level in by_label))
    delta = Delta(tuple(c for level in loose for c in level if c.id not in reused), tuple(after))
    return StableCommunities(
        out,
        human_ids.assign(COMMUNITY_KIND, (c.id for c in after)),
        delta,
        Labelled(hierarchy, out, tuple(by_label)),
    )


def _placed_communities(
    hierarchy: Hierarchy,
    placed: list[list[int]],
    ids: list[dict[int, str]],
    since: Labelled,
    loose: list[list[Community]],
) -> tuple[list[dict[int, Community]], list[Community], set[str]]:
    """The communities by label (the previous ones where not placed, with those that went
    taken out), the placed ones that are not the previous object with their id, in order,
    and the ids of the placed ones that are. A placed label is built as in ``_communities``;
    its children are the placed labels under it, or, for a previous community kept in place
    whose subtree stayed, the ones it had (its children were not placed)."""
    levels, parents = hierarchy.levels, hierarchy.parents
    below: dict[tuple[int, int], list[tuple[frozenset[str], str]]] = {}
    for level in range(1, len(levels)):
        for label in placed[level]:
            up = parents[level].get(label)
            if up is not None:
                below.setdefault((level - 1, up), []).append(
                    _child(levels[level][label], ids[level][label])
                )
    kids_of = {at: _in_order(kids) for at, kids in below.items()}
    by_label: list[dict[int, Community]] = []
    after: list[Community] = []
    reused: set[str] = set()
    for level, communities in enumerate(levels):
        previous = since.by_label[level] if level < len(since.by_label) else {}
        here = dict(previous)
        for gone in previous.keys() - communities.keys():
            del here[gone]
        prior = {c.id: c for c in loose[level]}
        for label in sorted(placed[level]):
            cid, members = ids[level][label], communities[label]
            up = parents[level].get(label)
            parent_id = None if up is None else by_label[level - 1][up].id
            at = previous.get(label)
            if (level, label) in kids_of or at is None or at.entity_keys is not members:
                kids = kids_of.get((level, label), ())
            else:
                kids = at.children  # kept in place: its subtree is as it was
            was = prior.get(cid)
            community = _built(was, (cid, level, parent_id, kids, members))
            if community is was:
                reused.add(cid)
            else:
                after.append(community)
            here[label] = community
        by_label.append(here)
    return by_label, after, reused


def _continued(
    rest: dict[int, frozenset[str]],
    continues: Mapping[int, frozenset[str]],
    by_object: Mapping[int, Community],
    level_and_threshold: tuple[int, float],
    used: set[str],
    level_ids: dict[int, str],
) -> None:
    """Labels of ``rest`` whose previous community (``continues``: the member set each
    continues) shares more than half of their union with them take its id (moved from
    ``rest`` to ``level_ids``). Jaccard above 1/2 means a majority of each side is in the
    other, which no other community of either level can also hold: the pair is matched by
    ``match_level``'s greedy rule whatever the rest of the level is (when the threshold is
    not above what they share)."""
    level, threshold = level_and_threshold
    for label, was in continues.items():
        old = by_object.get(id(was))
        if old is None or old.entity_keys is not was or old.level != level or old.id in used:
            continue
        members = rest[label]
        shared = len(members & was)
        union = len(members) + len(was) - shared
        if 2 * shared > union and shared >= threshold * union:
            level_ids[label] = old.id
            used.add(old.id)
            del rest[label]


def match_level(
    new: Mapping[int, frozenset[str]],
    new_parent_ids: Mapping[int, str],
    old: Sequence[Community],
    threshold: float,
) -> dict[int, str]:
    """Greedy one-to-one matching of one level's new labels to previous ids (rule in the
    module docstring). Returns label → previous id for the matched labels.

    A new community with exactly a previous one's members (most of them, in a run that
    changed little) is matched to it first: Jaccard 1 sorts before every other candidate and
    pairs are disjoint within a level, so the greedy rule would match them anyway; only the
    others go through the overlap counting, whose cost then follows the change."""
    same = {c.entity_keys: i for i, c in enumerate(old)}
    result: dict[int, str] = {}
    used: set[str] = set()
    rest: list[tuple[int, frozenset[str]]] = []
    for label, members in new.items():
        i = same.pop(members, None)
        if i is None:
            rest.append((label, members))
        else:
            result[label] = old[i].id
            used.add(old[i].id)
    remaining = set(same.values())
    owner = {key: i for i in remaining for key in old[i].entity_keys}
    candidates: list[tuple[float, bool, int, str, str, int]] = []
    for label, members in rest:
        overlap: dict[int, int] = {}
        for key in members:
            i = owner.get(key)
            if i is not None:
                overlap[i] = overlap.get(i, 0) + 1
        for i, inter in overlap.items():
            o = old[i]
            jaccard = inter / (len(members) + len(o.entity_keys) - inter)
            if jaccard >= threshold:
                other_lineage = o.parent is None or o.parent != new_parent_ids.get(label)
                candidates.append((-jaccard, other_lineage, -inter, o.id, min(members), label))
    candidates.sort()
    for *_, old_id, _, label in candidates:
        if label not in result and old_id not in used:
            result[label] = old_id
            used.add(old_id)
    return result


def _fresh_ids(human_ids: HumanIds, count: int, taken: set[str]) -> tuple[list[str], HumanIds]:
    """``count`` ids ``c-<n>`` from the community counter, skipping any id already in use (a
    state whose counter lags its communities must not produce a duplicate)."""
    known = human_ids.assigned.get(COMMUNITY_KIND, {})
    n = human_ids.next_id(COMMUNITY_KIND)
    given: dict[str, int] = {}
    while len(given) < count:
        candidate = f"c-{n}"
        if candidate not in taken and candidate not in known:
            given[candidate] = n
        n += 1
    if not given:
        return [], human_ids
    return list(given), human_ids.given(COMMUNITY_KIND, given, n)


def _communities(
    hierarchy: Hierarchy, ids: list[dict[int, str]], previous: Sequence[Community]
) -> tuple[Community, ...]:
    """The communities with their ids and links; a previous ``Community`` that is the same in
    every field (most of them, run after run) is reused instead of built again."""
    below: dict[tuple[int, int], list[tuple[frozenset[str], str]]] = {}
    for level in range(1, len(hierarchy.levels)):
        communities = hierarchy.levels[level]
        for label, parent in hierarchy.parents[level].items():
            below.setdefault((level - 1, parent), []).append(
                _child(communities[label], ids[level][label])
            )
    children = {at: _in_order(kids) for at, kids in below.items()}
    before = {c.id: c for c in previous}
    out: list[Community] = []
    for level, communities in enumerate(hierarchy.levels):
        level_ids, parents = ids[level], hierarchy.parents[level]
        above = ids[level - 1] if level else {}
        for label in sorted(communities):
            cid, members = level_ids[label], communities[label]
            up = parents.get(label)
            parent_id = None if up is None else above[up]
            kids = children.get((level, label), ())
            out.append(_built(before.get(cid), (cid, level, parent_id, kids, members)))
    return tuple(out)


def _built(
    was: Community | None,
    fields: tuple[str, int, str | None, tuple[str, ...], frozenset[str]],
) -> Community:
    """``was`` (the previous community with the id) when it has every one of ``fields`` (id,
    level, parent, children, members: the same object), else a community made of them."""
    _, level, parent, children, members = fields
    if (
        was is not None
        and was.entity_keys is members
        and was.parent == parent
        and was.children == children
        and was.level == level
    ):
        return was
    return Community(*fields)


def _labelled(hierarchy: Hierarchy, out: tuple[Community, ...]) -> Labelled:
    """``out`` (level by level, in label order) indexed by label."""
    by_label: list[dict[int, Community]] = []
    start = 0
    for communities in hierarchy.levels:
        labels = sorted(communities)
        by_label.append(dict(zip(labels, out[start : start + len(labels)], strict=True)))
        start += len(labels)
    return Labelled(hierarchy, out, tuple(by_label))


def _child(members: frozenset[str], cid: str) -> tuple[frozenset[str], str]:
    return (members, cid)


def _in_order(kids: list[tuple[frozenset[str], str]]) -> tuple[str, ...]:
    """Children ids by descending size, then smallest member key: the order a whole-graph
    run labels them in, whatever labels a maintained hierarchy kept or gave. The smallest
    key is looked for only among children of equal size (a hub's child has thousands of
    members, and siblings that large rarely tie)."""
    sizes = [len(members) for members, _ in kids]
    tied = {size for size, n in Counter(sizes).items() if n > 1}
    order = sorted(
        range(len(kids)),
        key=lambda i: (-sizes[i], min(kids[i][0]) if sizes[i] in tied else ""),
    )
    return tuple(kids[i][1] for i in order)
