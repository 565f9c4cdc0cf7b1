"""Time to update the whole community hierarchy after +1% edges, warm-started vs from scratch.

Usage: ``.venv/bin/python bench/hierarchy.py [--sizes 10000 100000] [--iterations N]``

Graph: planted communities of 50 nodes, ~5 edges per node (m = 5n), 90% of edges inside a
planted community and 10% uniform between any two nodes, weight 1. The update adds 1% more edges
drawn from the same model (so most planted communities are touched: a worst case for reuse).

For each size: an initial from-scratch run (hierarchy + ids; the "previous run"), then on the
updated graph, side by side in the same process:

* **warm**: ``build_graph`` + ``hierarchical_leiden(previous=…)`` (level-0 Leiden warm-started,
  the recursion into every oversized community, reuse of unchanged sub-hierarchies) +
  ``assign_community_ids`` against the previous run's communities;
* **scratch**: the same three steps with no previous hierarchy (ids still matched, so the
  number of ids kept is comparable).

The timed span starts from the raw edge list (key strings and weights) and ends with the
communities carrying stable ids: graph build + level-0 Leiden + recursion + id matching.
Lineage classification is timed separately. Nothing is read from or written to disk inside it.
Reported: seconds of each, their ratio, level-0 modularity of each, NMI between the two at
level 0 and over the leaves, NMI of each against the previous run, and ids kept.

Target: the 100k-node hierarchy updated (warm) in <= 10 s on this 2-core machine.
Writes bench/results/hierarchy.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import igraph as ig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results_io import CLUSTERING_MACHINE, RESULTS, machine, now_iso, write_result
from graph.community_ids import HumanIds, StableCommunities, assign_community_ids
from graph.leiden import DEFAULT_SEED, Hierarchy, hierarchical_leiden
from graph.leiden_graph import build_graph
from graph.lineage import classify

RESULT = RESULTS / "hierarchy.json"
PLANTED = 50
EDGES_PER_NODE = 5
P_OUT = 0.1

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
    return t3 - t0, h, s, {k: round(v, 3) for k, v in phases.items()}


def bench_size(n: int, iterations: int | None) -> dict[str, object]:
    rng = random.Random(n)
    seen: set[tuple[int, int]] = set()
    nodes = [f"n{i:07d}" for i in range(n)]
    edges = planted_edges(n, EDGES_PER_NODE * n, rng, seen)
    empty = StableCommunities((), HumanIds.empty())
    t_init, h0, s0, _ = timed_update(nodes, edges, None, empty, iterations)
    updated = edges + planted_edges(n, len(edges) // 100, rng, seen)

    t_warm, h_warm, s_warm, warm_phases = timed_update(nodes, updated, h0, s0, iterations)
    t0 = time.perf_counter()
    events = classify(s0.communities, s_warm.communities)
    t_lineage = time.perf_counter() - t0
    t_cold, h_cold, s_cold, cold_phases = timed_update(nodes, updated, None, s0, iterations)

    old_ids = {c.id for c in s0.communities}

    def kept(s: StableCommunities) -> float:
        return round(len(old_ids & {c.id for c in s.communities}) / len(old_ids), 4)

    def top(h: Hierarchy) -> list[frozenset[str]]:
        return list(h.levels[0].values())

    def side(
        seconds: float, phases: dict[str, float], h: Hierarchy, s: StableCommunities
    ) -> dict[str, object]:
        return {
            "seconds": round(seconds, 3),
            **phases,
            "modularity": round(h.modularity, 5),
            "levels": [len(lv) for lv in h.levels],
            "ids_kept": kept(s),
            "nmi_vs_previous_level0": round(partition_nmi(top(h0), top(h)), 4),
            "nmi_vs_previous_leaves": round(partition_nmi(h0.leaves(), h.leaves()), 4),
        }

    return {
        "nodes": n,
        "edges_before": len(edges),
        "edges_added": len(updated) - len(edges),
        "initial_from_scratch_s": round(t_init, 3),
        "warm": side(t_warm, warm_phases, h_warm, s_warm),
        "scratch": side(t_cold, cold_phases, h_cold, s_cold),
        "warm_over_scratch_time": round(t_warm / t_cold, 3),
        "modularity_gap_pct": round(
            100 * (h_cold.modularity - h_warm.modularity) / h_cold.modularity, 3
        ),
        "nmi_warm_vs_scratch_level0": round(partition_nmi(top(h_warm), top(h_cold)), 4),
        "nmi_warm_vs_scratch_leaves": round(partition_nmi(h_warm.leaves(), h_cold.leaves()), 4),
        "lineage_s": round(t_lineage, 3),
        "lineage_events": dict(Counter(e.kind for e in events)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--iterations", type=int, default=None, help="leidenalg n_iterations (default: library's)"
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    info = machine(*CLUSTERING_MACHINE)
    runs = []
    for n in args.sizes:
        result = bench_size(n, args.iterations)
        runs.append(result)
        print(json.dumps(result, indent=2), flush=True)
    info.update(machine("load_average_at_end"))
    big = next((r for r in runs if r["nodes"] == 100_000), None)
    report = {
        "bench": "hierarchy",
        "date": now_iso(),
        "machine": info,
        "graph": f"planted communities of {PLANTED}, m = {EDGES_PER_NODE}n, p_out = {P_OUT}",
        "update": "+1% edges from the same planted model",
        "timed_span": "build_graph from raw (key, key, weight) edges + level-0 Leiden + "
        "recursion into oversized communities + stable-id matching; lineage timed apart",
        "seed": DEFAULT_SEED,
        "n_iterations": args.iterations,
        "target": "100k-node hierarchy updated (warm) in <= 10 s",
        "target_met": None if big is None else big["warm"]["seconds"] <= 10.0,  # type: ignore[index]
        "runs": runs,
    }
    if not args.no_write:
        write_result(RESULT, report)
        print(f"wrote {RESULT}")


if __name__ == "__main__":
    main()
