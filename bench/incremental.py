"""What +1% documents cost the community job: reports regenerated, partition quality, time.

Usage: ``.venv/bin/python bench/incremental.py [--base 4000] [--added 40] [--data PATH]``

In process and offline, for speed: the first ``base`` articles of
``../shared/data/reuters-1987-dev.jsonl`` (skipped with a message when the file is absent) are
chunked (600/100 tokens, o200k_base), extracted by the offline extractor and folded through the
merge rules into the job's ``GraphView`` exactly as the stream would (``chunk_contributions`` →
``absorb_*`` → ``*_changed`` → ``GraphView.apply``). Then the job's ``Runner`` (offline report
and summary writers, no vectors, snapshots in a temporary directory):

1. **base run** on ``base`` articles (every report written);
2. **+1% run**: ``added`` more articles folded in, one run, warm-started from the base run;
3. **full rerun**: a fresh state on all ``base + added`` articles, which writes every report —
   what a system that regenerates everything would pay.

Reported: reports regenerated / total and the reasons of the regeneration plan; report-writer
calls against the full rerun (offline, one writer call stands for one LLM call); unreflected
evidence left (max, mean over reports); modularity of the warm-started partition against a
from-scratch ``hierarchical_leiden(previous=None)`` on the same graph and the NMI between the
two (level 0, and leaves); the run's wall time by phase (``Runner.timings``); and the hierarchy
update figures for synthetic 10k/100k-node graphs from ``bench/results/hierarchy.json`` (made by
``bench/hierarchy.py``). Writes ``bench/results/incremental.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import igraph as ig
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import agents.community.runner as runner_module
from agents.community.runner import Runner
from bench.results_io import (
    CLUSTERING_MACHINE,
    RESULTS,
    REUTERS_DEV,
    ROOT,
    machine,
    now_iso,
    write_result,
)
from core.settings import CommunitySettings, LLMSettings, Settings, load_settings
from core.snapshot_store import SnapshotStore
from core.tokenizer import ensure_offline_bpe, get_encoding
from graph.chunking import chunk_document
from graph.community_run import clustering_graph, whole_aliases
from graph.evidence import RegenerationPlan
from graph.graph_view import GraphView
from graph.job_state import JobState
from graph.leiden import Hierarchy, hierarchical_leiden
from graph.local_merge import LocalMerger
from graph.model import Document
from offline.extraction import extract_offline

DATA = REUTERS_DEV
RESULT = RESULTS / "incremental.json"
HIERARCHY = RESULTS / "hierarchy.json"
TARGET_SHARE = 0.10
TARGET_MODULARITY_GAP = 0.01


# ---- documents → graph view, through the merge rules ------------------------------------------


class Folder(LocalMerger):
    """Documents chunked and extracted offline, merged in memory (``graph.local_merge``)."""

    def __init__(self, max_descriptions: int) -> None:
        super().__init__(max_descriptions=max_descriptions)
        self.enc = get_encoding("o200k_base")

    def add(self, doc: Document) -> None:
        self.add_document(doc)
        for chunk in chunk_document(
            doc, encode=self.enc.encode_ordinary, decode=self.enc.decode, size=600, overlap=100
        ):
            self.absorb(extract_offline(chunk))


def load_documents(path: Path, n: int) -> list[Document]:
    docs: list[Document] = []
    with open(path, "rb") as fh:
        for line in fh:
            d = orjson.loads(line)
            if not str(d.get("text", "")).strip():
                continue
            docs.append(
                Document(
                    str(d["id"]),
                    str(d.get("title", "")),
                    str(d["text"]),
                    str(d["published_at"]),
                    str(d.get("source", "")),
                )
            )
            if len(docs) == n:
                break
    return docs


# ---- runs ---------------------------------------------------------------------------------------


class PlanRecorder:
    """Wraps ``plan_reports`` in the runner's module to keep the last run's plan."""

    def __init__(self) -> None:
        self.plan: RegenerationPlan | None = None
        self._inner = runner_module.plan_reports

    def __call__(self, *args: Any, **kwargs: Any) -> RegenerationPlan:
        self.plan = self._inner(*args, **kwargs)
        return self.plan


def settings_for(data_dir: Path) -> Settings:
    base = load_settings()
    return base.model_copy(
        update={
            "namespace": "bench",
            "data_dir": data_dir,
            "llm": LLMSettings(base_url=None),
            "community": CommunitySettings(),
        }
    )


async def run_once(settings: Settings, state: JobState) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    result = await Runner(settings, state, write_vectors=False).run()
    return result, time.monotonic() - started


def reasons(plan: RegenerationPlan | None) -> dict[str, int]:
    if plan is None:
        return {}
    return dict(Counter(d.reason for d in plan.decisions if d.reason is not None))


def reasons_by_level(plan: RegenerationPlan | None) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {}
    for d in plan.decisions if plan else ():
        bucket = out.setdefault(str(d.level), Counter())
        bucket["total"] += 1
        if d.reason is not None:
            bucket[d.reason] += 1
    return {k: dict(v) for k, v in sorted(out.items())}


def membership_drift(
    state_before: Any, plan: RegenerationPlan | None, after: Any
) -> dict[str, Any]:
    """For communities regenerated because their members changed: how many members moved."""
    if plan is None:
        return {}
    before = {c.id: c.entity_keys for c in state_before}
    now = {c.id: c.entity_keys for c in after}
    drifts = []
    for d in plan.decisions:
        if d.reason == "membership_changed" and d.community_id in before:
            old, new = before[d.community_id], now[d.community_id]
            drifts.append((len(old ^ new), len(old ^ new) / max(1, len(old | new))))
    if not drifts:
        return {}
    counts = sorted(n for n, _ in drifts)
    shares = sorted(s for _, s in drifts)
    return {
        "communities": len(drifts),
        "members_moved_median": counts[len(counts) // 2],
        "members_moved_le_1": sum(1 for n in counts if n <= 1),
        "members_moved_le_2": sum(1 for n in counts if n <= 2),
        "jaccard_distance_median": round(shares[len(shares) // 2], 4),
        "jaccard_distance_le_0.1": sum(1 for s in shares if s <= 0.1),
    }


def drift_tolerance_what_if(
    before: Any, plan: RegenerationPlan | None, after: Any, threshold: float
) -> dict[str, Any]:
    """Not implemented in the job, only measured: how many reports a rule that tolerates small
    membership drift would regenerate. Under it a community whose members changed by a
    Jaccard distance ≤ ``tol`` is judged on evidence alone (the new members' facts already
    count as unreflected), and a parent is regenerated for a child only when its context used
    that child's report (none did in this run: every context fit its budget)."""
    if plan is None:
        return {}
    old = {c.id: c.entity_keys for c in before}
    now = {c.id: c.entity_keys for c in after}
    out: dict[str, Any] = {}
    for tol in (0.1, 0.2):
        kept = 0
        for d in plan.decisions:
            if d.reason != "membership_changed" or d.community_id not in old:
                continue
            a, b = old[d.community_id], now[d.community_id]
            if len(a ^ b) / max(1, len(a | b)) <= tol and d.unreflected_before <= threshold:
                kept += 1
        regenerated = len(plan.to_regenerate) - kept
        out[f"jaccard_distance_le_{tol}"] = {
            "reports_spared": kept,
            "reports_regenerated": regenerated,
            "regenerated_share": round(regenerated / max(1, len(plan.decisions)), 4),
        }
    return out


# ---- partition quality --------------------------------------------------------------------------


def job_graph(view: GraphView, state: JobState) -> Any:
    """The graph ``graph.community_run.cluster`` clusters (alias glue included)."""
    return clustering_graph(view, whole_aliases(state))


def memberships(h: Hierarchy, nodes: tuple[str, ...]) -> tuple[list[int], list[int]]:
    """Level-0 label and leaf index per node, in ``nodes`` order."""
    level0 = {k: lab for lab, members in h.levels[0].items() for k in members}
    leaf = {k: i for i, members in enumerate(h.leaves()) for k in members}
    return [level0[k] for k in nodes], [leaf[k] for k in nodes]


def nmi(a: list[int], b: list[int]) -> float:
    return float(ig.compare_communities(a, b, method="nmi"))


# ---- main ---------------------------------------------------------------------------------------


def hierarchy_figures() -> dict[str, Any]:
    if not HIERARCHY.exists():
        return {"missing": str(HIERARCHY.relative_to(ROOT))}
    data = json.loads(HIERARCHY.read_text())
    return {
        "source": "bench/results/hierarchy.json (bench/hierarchy.py)",
        "date": data.get("date"),
        "load_average_at_start": data.get("machine", {}).get("load_average_at_start"),
        "timed_span": data.get("timed_span"),
        "graph": data.get("graph"),
        "update": data.get("update"),
        "target": data.get("target"),
        "target_met": data.get("target_met"),
        "runs": [
            {
                "nodes": r["nodes"],
                "edges_before": r["edges_before"],
                "edges_added": r["edges_added"],
                "warm_s": r["warm"]["seconds"],
                "warm_leiden_hierarchy_s": r["warm"]["leiden_hierarchy_s"],
                "scratch_s": r["scratch"]["seconds"],
                "modularity_gap_pct": r["modularity_gap_pct"],
                "nmi_warm_vs_scratch_level0": r["nmi_warm_vs_scratch_level0"],
                "nmi_warm_vs_scratch_leaves": r["nmi_warm_vs_scratch_leaves"],
                "ids_kept_warm": r["warm"]["ids_kept"],
            }
            for r in data.get("runs", [])
        ],
    }


async def bench(data: Path, n_base: int, n_added: int) -> dict[str, Any]:
    load_at_start = machine(*CLUSTERING_MACHINE)
    docs = load_documents(data, n_base + n_added)
    settings_dir = Path(tempfile.mkdtemp(prefix="kgrag-bench-incremental-"))
    settings = settings_for(settings_dir / "warm")
    folder = Folder(settings.extraction.max_descriptions)
    t = time.monotonic()
    for doc in docs[:n_base]:
        folder.add(doc)
    fold_s = time.monotonic() - t
    view = folder.view
    print(
        f"folded {n_base} articles in {fold_s:.1f}s: {len(view.entities)} entities, "
        f"{len(view.relationships)} relationships, {len(view.text_units)} text units",
        flush=True,
    )
    recorder = PlanRecorder()
    runner_module.plan_reports = recorder
    state = JobState(view=view)
    base, base_s = await run_once(settings, state)
    print(f"base run: {base['communities']} communities in {base_s:.1f}s {base['timings']}")
    previous_communities = state.communities
    base_levels = previous_and_levels(state)

    for doc in docs[n_base:]:
        folder.add(doc)
    inc, inc_s = await run_once(settings, state)
    plan = recorder.plan
    snap = SnapshotStore(settings.snapshots_dir).load()
    unreflected = [r.unreflected for r in snap.community_reports]
    print(f"+{n_added} run: {inc['regenerated']}/{inc['communities']} in {inc_s:.1f}s")

    graph = job_graph(view, state)
    assert state.hierarchy is not None
    t = time.monotonic()
    scratch = hierarchical_leiden(
        graph,
        max_cluster_size=settings.community.max_cluster_size,
        seed=settings.community.seed,
        previous=None,
    )
    scratch_s = time.monotonic() - t
    warm0, warm_leaf = memberships(state.hierarchy, graph.nodes)
    cold0, cold_leaf = memberships(scratch, graph.nodes)
    warm_q, cold_q = state.hierarchy.modularity, scratch.modularity

    fresh_settings = settings_for(settings_dir / "full")
    full, full_s = await run_once(fresh_settings, JobState(view=view))
    print(f"full rerun: {full['regenerated']} reports in {full_s:.1f}s")
    runner_module.plan_reports = recorder._inner

    share = inc["regenerated"] / max(1, inc["communities"])
    gap = (cold_q - warm_q) / cold_q if cold_q else 0.0
    return {
        "bench": "incremental",
        "date": now_iso(),
        "machine": load_at_start,
        "data": f"first {n_base} + {n_added} non-empty articles of {data.name}",
        "mode": "offline (extractor, summaries, report writer); no vectors; in process",
        "settings": settings.community.model_dump(),
        "graph": {
            "articles": n_base + n_added,
            "text_units": len(view.text_units),
            "entities": len(view.entities),
            "relationships": len(view.relationships),
            "clustered_nodes": len(graph.nodes),
            "edges": len(graph.edges),
            "fold_base_s": round(fold_s, 2),
        },
        "base_run": {
            "communities": base["communities"],
            "reports_written": base["regenerated"],
            "levels": base_levels,
            "wall_s": round(base_s, 2),
            "timings": base["timings"],
        },
        "incremental_run": {
            "added_articles": n_added,
            "communities": inc["communities"],
            "reports_regenerated": inc["regenerated"],
            "reports_total": len(snap.community_reports),
            "regenerated_share": round(share, 4),
            "reasons": reasons(plan),
            "reasons_by_level": reasons_by_level(plan),
            "membership_drift": membership_drift(previous_communities, plan, state.communities),
            "what_if_drift_tolerance": drift_tolerance_what_if(
                previous_communities,
                plan,
                state.communities,
                settings.community.materiality_threshold,
            ),
            "events": dict(Counter(e["kind"] for e in inc["events"])),
            "unreflected_max": round(max(unreflected, default=0.0), 4),
            "unreflected_mean": round(sum(unreflected) / max(1, len(unreflected)), 4),
            "reports_with_unreflected": sum(1 for u in unreflected if u > 0),
            "wall_s": round(inc_s, 2),
            "timings": inc["timings"],
        },
        "full_rerun": {
            "communities": full["communities"],
            "report_writer_calls": full["regenerated"],
            "wall_s": round(full_s, 2),
            "timings": full["timings"],
        },
        "report_calls_incremental_vs_full": round(
            inc["regenerated"] / max(1, full["regenerated"]), 4
        ),
        "partition": {
            "modularity_warm": round(warm_q, 5),
            "modularity_scratch": round(cold_q, 5),
            "modularity_gap_pct": round(100 * gap, 3),
            "nmi_level0": round(nmi(warm0, cold0), 4),
            "nmi_leaves": round(nmi(warm_leaf, cold_leaf), 4),
            "scratch_hierarchy_s": round(scratch_s, 2),
            "levels_warm": [len(lv) for lv in state.hierarchy.levels],
            "levels_scratch": [len(lv) for lv in scratch.levels],
        },
        "targets": {
            "regenerated_share_max": TARGET_SHARE,
            "regenerated_share_met": share <= TARGET_SHARE,
            "modularity_within_pct": 100 * TARGET_MODULARITY_GAP,
            "modularity_met": gap <= TARGET_MODULARITY_GAP,
        },
        "hierarchy_update_synthetic": hierarchy_figures(),
    }


def previous_and_levels(state: JobState) -> list[int]:
    return [len(lv) for lv in state.hierarchy.levels] if state.hierarchy else []


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=4000)
    parser.add_argument("--added", type=int, default=40)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"skipped: {args.data} is absent (the Reuters sample is not in the repository)")
        return
    ensure_offline_bpe()
    result = asyncio.run(bench(args.data, args.base, args.added))
    write_result(args.out, result)
    print(json.dumps({k: result[k] for k in ("incremental_run", "partition", "targets")}, indent=2))


if __name__ == "__main__":
    main()
