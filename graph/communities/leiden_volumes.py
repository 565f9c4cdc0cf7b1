"""Level-0 community volumes (weight inside each community, sum of its members' weighted
degrees) and the modularity they give, kept in the ``Hierarchy`` so a maintained run updates
modularity from the edges that changed instead of a pass over every edge."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from graph.communities.cluster_input import ClusterInput
from graph.communities.leiden import Hierarchy


def with_volumes(ci: ClusterInput, hierarchy: Hierarchy) -> Hierarchy:
    """``hierarchy`` (from a whole-graph run on ``ci``'s graph) with its level-0 volumes
    counted, so the next maintained run starts from them instead of a pass over every edge."""
    if not hierarchy.levels:
        return hierarchy
    label0: dict[str, int] = {}
    for label, members in hierarchy.levels[0].items():
        label0.update(dict.fromkeys(members, label))
    volumes = current_volumes(ci, hierarchy, label0, {})
    return Hierarchy(
        hierarchy.levels,
        hierarchy.parents,
        hierarchy.modularity,
        hierarchy.digests,
        hierarchy.placed_strengths(),
        volumes,
    )


def current_volumes(
    ci: ClusterInput,
    prev: Hierarchy,
    label0: Mapping[str, int],
    deltas: Mapping[tuple[str, str], float],
) -> dict[int, tuple[float, float]]:
    """The volumes of the previous level-0 communities' member sets on the graph as it is
    now: the kept ones brought up to date by the weight changes of their edges (or counted
    afresh once, for a hierarchy without them)."""
    kept = prev.level_zero_volumes()
    inside: dict[int, float] = {}
    degree: dict[int, float] = {}
    pairs: Iterable[tuple[tuple[str, str], float]]
    if kept is None:
        pairs = ci.edge_weights()
        for v, s in ci.strengths.items():
            if (lab := label0.get(v)) is not None:
                degree[lab] = degree.get(lab, 0.0) + s
    else:
        pairs = deltas.items()
        for lab, (ins, deg) in kept.items():
            inside[lab], degree[lab] = ins, deg
    for (a, b), w in pairs:
        la_, lb = label0.get(a), label0.get(b)
        if la_ is not None and la_ == lb:
            inside[la_] = inside.get(la_, 0.0) + w
        if kept is not None:
            for lab in (la_, lb):
                if lab is not None:
                    degree[lab] = degree.get(lab, 0.0) + w
    return {lab: (inside.get(lab, 0.0), deg) for lab, deg in degree.items()}


def level_zero_modularity(volumes: Mapping[int, tuple[float, float]], total: float) -> float:
    """Weighted modularity (resolution 1) of level 0 from its communities' volumes;
    ``total`` is the sum of every node's weighted degree (twice the graph's weight)."""
    if total <= 0:
        return 0.0
    inside = math.fsum(i for i, _ in volumes.values())
    spread = math.fsum((d / total) ** 2 for _, d in volumes.values())
    return 2 * inside / total - spread
