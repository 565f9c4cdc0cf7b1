"""Time to update the whole community hierarchy after +1% edges, warm-started vs from scratch.

Usage: ``.venv/bin/python bench/hierarchy.py [--full] [--sizes N …] [--repeat R] [--out PATH]``

Graph: planted communities of 50 nodes, ~5 edges per node (m = 5n), 90% of edges inside a
planted community and 10% uniform between any two nodes, weight 1. The update adds 1% more edges
drawn from the same model (so most planted communities are touched: a worst case for reuse).
The quick run covers 10,000 nodes; ``--full`` covers 10,000 and 100,000 nodes.

For each size: an initial from-scratch run (hierarchy + ids; the "previous run", timed once:
it makes the warm state), then on the updated graph, side by side in the same process:

* **warm**: ``build_graph`` + ``hierarchical_leiden(previous=…)`` (level-0 Leiden warm-started,
  the recursion into every oversized community, reuse of unchanged sub-hierarchies) +
  ``assign_community_ids`` against the previous run's communities;
* **scratch**: the same three steps with no previous hierarchy (ids still matched, so the
  number of ids kept is comparable).

The timed span starts from the raw edge list (key strings and weights) and ends with the
communities carrying stable ids: graph build + level-0 Leiden + recursion + id matching.
Lineage classification is timed separately. Nothing is read from or written to disk inside it.
Each timed step is repeated ``--repeat`` times (3) from the same previous run: ``seconds`` and
each phase are the median with min and max. Reported: those, the ratio of warm to scratch
time, level-0 modularity of each, NMI between the two at level 0 and over the leaves, NMI of
each against the previous run, and ids kept.

Target: the 100k-node hierarchy updated (warm) in <= 10 s on this 2-core machine (full run).
Writes its run into ``bench/results/hierarchy.json`` (``bench.record``).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any

import igraph as ig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Target, mode_argument, ratio, record, timing
from graph.communities.human_ids import HumanIds
from graph.communities.ids import StableCommunities, assign_community_ids
from graph.communities.leiden import DEFAULT_SEED, Hierarchy, hierarchical_leiden
from graph.communities.leiden_graph import build_graph
from graph.communities.lineage import classify

PLANTED = 50
EDGES_PER_NODE = 5
P_OUT = 0.1
QUICK_SIZES = (10_000,)
FULL_SIZES = (10_000, 100_000)
REPEAT = 3

TARGETS = {
    "warm_update_100k_s": Target("/runs/100000/warm/seconds/median", "<=", 10.0),
}

Edge = tuple[str, str, float]


def planted_edges(n: int, count: int, rng: random.Random, seen: set[tuple[int, int]]) -> list[Edge]:
    """``count`` new distinct edges from the planted model."""
    out: list[Edge] = []
    while len(out) < count:
        a = rng.randrange(n)
        if rng.random() < P_OUT:
            b = rng.randrange(n)
        else:
            base = a - a % PLANTED
            b = base + rng.randrange(min(PLANTED, n - base))
        pair = (a, b) if a < b else (b, a)
        if a != b and pair not in seen:
            seen.add(pair)
            out.append((f"n{a:07d}", f"n{b:07d}", 1.0))
    return out


def partition_nmi(a: list[frozenset[str]], b: list[frozenset[str]]) -> float:
    la_ = {k: i for i, m in enumerate(a) for k in m}
    lb = {k: i for i, m in enumerate(b) for k in m}
    keys = sorted(la_.keys() & lb.keys())
    return float(ig.compare_communities([la_[k] for k in keys], [lb[k] for k in keys], "nmi"))


def timed_update(
    nodes: list[str],
    edges: list[Edge],
    previous: Hierarchy | None,
    before: StableCommunities,
    iterations: int | None,
) -> tuple[float, Hierarchy, StableCommunities, dict[str, float]]:
    t0 = time.perf_counter()
    graph = build_graph(nodes, edges)
    t1 = time.perf_counter()
    h = hierarchical_leiden(graph, previous=previous, seed=DEFAULT_SEED, n_iterations=iterations)
    t2 = time.perf_counter()
    s = assign_community_ids(h, before.communities, before.human_ids)
    t3 = time.perf_counter()
    phases = {"build_s": t1 - t0, "leiden_hierarchy_s": t2 - t1, "id_matching_s": t3 - t2}
    return t3 - t0, h, s, phases


class Side:
    """The repeats of one way to update (warm or scratch): their times and the last result
    (each repeat starts from the same previous run with the same seed)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.phases: dict[str, list[float]] = {}
        self.h: Hierarchy | None = None
        self.s: StableCommunities | None = None

    def add(self, run: tuple[float, Hierarchy, StableCommunities, dict[str, float]]) -> None:
        seconds, self.h, self.s, phases = run
        self.seconds.append(seconds)
        for k, v in phases.items():
            self.phases.setdefault(k, []).append(v)


def bench_size(n: int, iterations: int | None, repeat: int) -> dict[str, Any]:
    rng = random.Random(n)
    seen: set[tuple[int, int]] = set()
    nodes = [f"n{i:07d}" for i in range(n)]
    edges = planted_edges(n, EDGES_PER_NODE * n, rng, seen)
    empty = StableCommunities((), HumanIds.empty())
    t_init, h0, s0, _ = timed_update(nodes, edges, None, empty, iterations)
    updated = edges + planted_edges(n, len(edges) // 100, rng, seen)

    warm, cold = Side(), Side()
    lineage: list[float] = []
    for _ in range(repeat):  # interleaved: a change of load on the machine hits both sides
        warm.add(timed_update(nodes, updated, h0, s0, iterations))
        assert warm.s is not None
        t0 = time.perf_counter()
        events = classify(s0.communities, warm.s.communities)
        lineage.append(time.perf_counter() - t0)
        cold.add(timed_update(nodes, updated, None, s0, iterations))
    assert warm.h and warm.s and cold.h and cold.s
    h_warm, h_cold = warm.h, cold.h
    old_ids = {c.id for c in s0.communities}

    def kept(s: StableCommunities) -> float:
        return round(len(old_ids & {c.id for c in s.communities}) / len(old_ids), 4)

    def top(h: Hierarchy) -> list[frozenset[str]]:
        return list(h.levels[0].values())

    def side(x: Side) -> dict[str, Any]:
        assert x.h is not None and x.s is not None
        return {
            "seconds": timing(x.seconds, 3),
            **{k: timing(v, 3) for k, v in x.phases.items()},
            "modularity": round(x.h.modularity, 5),
            "levels": [len(lv) for lv in x.h.levels],
            "ids_kept": kept(x.s),
            "nmi_vs_previous_level0": round(partition_nmi(top(h0), top(x.h)), 4),
            "nmi_vs_previous_leaves": round(partition_nmi(h0.leaves(), x.h.leaves()), 4),
        }

    warm_side, cold_side = side(warm), side(cold)
    return {
        "nodes": n,
        "edges_before": len(edges),
        "edges_added": len(updated) - len(edges),
        # one run: it makes the previous run every repeat starts from
        "initial_from_scratch_s": round(t_init, 3),
        "warm": warm_side,
        "scratch": cold_side,
        "warm_over_scratch_time": ratio(warm_side["seconds"], cold_side["seconds"]),
        "modularity_gap_pct": round(
            100 * (h_cold.modularity - h_warm.modularity) / h_cold.modularity, 3
        ),
        "nmi_warm_vs_scratch_level0": round(partition_nmi(top(h_warm), top(h_cold)), 4),
        "nmi_warm_vs_scratch_leaves": round(partition_nmi(h_warm.leaves(), h_cold.leaves()), 4),
        "lineage_s": timing(lineage, 3),
        "lineage_events": dict(Counter(e.kind for e in events)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    mode_argument(parser)
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=None, help="default: 10000 quick, 10000 100000 full"
    )
    parser.add_argument("--repeat", type=int, default=REPEAT, help="repeats of each timed step")
    parser.add_argument(
        "--iterations", type=int, default=None, help="leidenalg n_iterations (default: library's)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    mode = "full" if args.full else "quick"
    sizes = args.sizes or list(FULL_SIZES if args.full else QUICK_SIZES)
    runs: dict[str, Any] = {}
    for n in sizes:
        runs[str(n)] = bench_size(n, args.iterations, args.repeat)
        warm, scratch = (runs[str(n)][side]["seconds"] for side in ("warm", "scratch"))
        print(f"[{n}] warm {warm} s, scratch {scratch} s", flush=True)
    settings = {
        "graph": f"planted communities of {PLANTED}, m = {EDGES_PER_NODE}n, p_out = {P_OUT}",
        "update": "+1% edges from the same planted model",
        "timed_span": "build_graph from raw (key, key, weight) edges + level-0 Leiden + "
        "recursion into oversized communities + stable-id matching; lineage timed apart",
        "sizes": sizes,
        "repeat": args.repeat,
        "seed": DEFAULT_SEED,
        "n_iterations": args.iterations,
        "leidenalg": version("leidenalg"),
        "igraph": version("igraph"),
    }
    record("hierarchy", mode, {"runs": runs}, TARGETS, settings, path=args.out)


if __name__ == "__main__":
    main()
