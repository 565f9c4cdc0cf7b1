"""What +1% documents cost the community job: reports regenerated, partition quality, time.

Usage: ``.venv/bin/python bench/incremental.py [--full] [--base N] [--added N] [--repeat R]
[--data PATH] [--out PATH]``

In process and offline, for speed: the first ``base`` articles of
``../shared/data/reuters-1987-dev.jsonl`` (skipped with a message when the file is absent) are
chunked (600/100 tokens, o200k_base), extracted by the offline extractor and folded through the
merge rules into the job's ``GraphView`` exactly as the stream would (``chunk_contributions`` →
``absorb_*`` → ``*_changed`` → ``GraphView.apply``). Then the job's ``Runner`` (offline report
and summary writers, no vectors, graph tables in a temporary directory):

1. **base run** on ``base`` articles (every report written), once: it makes the warm state
   (the folded graph, the job's state and its data directory);
2. **+1% run**: ``added`` more articles folded into a copy of the warm state, one run in a
   copy of its data directory; ``--repeat`` times, each from a fresh copy;
3. **full rerun**: a fresh state on all ``base + added`` articles, which writes every report —
   what a system that regenerates everything would pay; ``--repeat`` times.

The quick run takes 1,000 + 10 articles; ``--full`` 4,000 + 40. Reported: reports regenerated
/ total and the reasons of the regeneration plan; report-writer calls against the full rerun
(offline, one writer call stands for one LLM call); unreflected evidence left (max, mean over
reports); modularity of the warm-started partition against a from-scratch
``hierarchical_leiden(previous=None)`` on the same graph and the NMI between the two (level 0,
and leaves); the runs' wall time and each phase (``Runner.timings``) as the median, min and max
of the repeats. The hierarchy update on synthetic 10k/100k-node graphs is
``bench/hierarchy.py``'s. Writes its run into ``bench/results/incremental.json``
(``bench.record``); targets are judged on the full run.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import shutil
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
from agents.community.result import RunResult
from agents.community.runner import Runner
from bench.record import Target, mode_argument, record, timing
from bench.results_io import REUTERS_DEV
from core.settings import Settings, load_settings
from core.settings.community import CommunitySettings
from core.settings.llm import LLMSettings
from core.tables.opening import open_graph_store
from core.tokenizer import ensure_offline_bpe, get_encoding
from graph.communities.leiden import Hierarchy, hierarchical_leiden
from graph.extraction.chunking import chunk_document
from graph.job.run import clustering_graph, whole_aliases
from graph.job.state import JobState
from graph.merge.local import LocalMerger
from graph.merge.view import GraphView
from graph.model import Document
from graph.reports.evidence import RegenerationPlan
from offline.extraction import extract_offline

DATA = REUTERS_DEV
QUICK = (1000, 10)  # base articles, added articles
FULL = (4000, 40)
REPEAT = 3

TARGETS = {
    "regenerated_share": Target("/incremental_run/regenerated_share", "<=", 0.10),
    "modularity_gap_pct": Target("/partition/modularity_gap_pct", "<=", 1.0),
}


# ---- documents → graph view, through the merge rules ------------------------------------------


class Folder(LocalMerger):
    """Documents chunked and extracted offline, merged in memory (``graph.merge.local``)."""

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
            # every report a run plans is written in that run: these benchmarks measure what
            # the method costs, not the job's pacing of a backlog (``reports_per_run``)
            "community": CommunitySettings(reports_per_run=0),
        }
    )


async def run_once(settings: Settings, state: JobState) -> tuple[RunResult, float]:
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
    """The graph ``graph.job.run.cluster`` clusters (alias glue included)."""
    return clustering_graph(view, whole_aliases(state))


def memberships(h: Hierarchy, nodes: tuple[str, ...]) -> tuple[list[int], list[int]]:
    """Level-0 label and leaf index per node, in ``nodes`` order."""
    level0 = {k: lab for lab, members in h.levels[0].items() for k in members}
    leaf = {k: i for i, members in enumerate(h.leaves()) for k in members}
    return [level0[k] for k in nodes], [leaf[k] for k in nodes]


def nmi(a: list[int], b: list[int]) -> float:
    return float(ig.compare_communities(a, b, method="nmi"))


# ---- warm state ---------------------------------------------------------------------------------


def freeze(folder: Folder, state: JobState | None = None) -> bytes:
    """The folded graph (and the job's state) as bytes, to start each repeat from a copy."""
    enc = folder.enc
    del folder.enc  # a tiktoken encoding does not pickle
    try:
        return pickle.dumps((folder, state), protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        folder.enc = enc


def thaw(data: bytes) -> tuple[Folder, JobState]:
    folder, state = pickle.loads(data)
    folder.enc = get_encoding("o200k_base")
    return folder, state


def phase_timings(runs: list[RunResult]) -> dict[str, Any]:
    """Each phase of ``Runner.timings`` over the repeats (the phases every repeat had)."""
    phases = [k for k in runs[0].timings if all(k in r.timings for r in runs)]
    return {k: timing([r.timings[k] for r in runs], 3) for k in phases}


# ---- main ---------------------------------------------------------------------------------------


async def bench(data: Path, n_base: int, n_added: int, repeat: int, work: Path) -> dict[str, Any]:
    docs = load_documents(data, n_base + n_added)
    settings = settings_for(work / "warm")
    folder = Folder(settings.extraction.max_descriptions)
    t = time.monotonic()
    for doc in docs[:n_base]:
        folder.add(doc)
    fold_s = time.monotonic() - t
    print(
        f"folded {n_base} articles in {fold_s:.1f}s: {len(folder.view.entities)} entities, "
        f"{len(folder.view.relationships)} relationships, {len(folder.view.text_units)} "
        "text units",
        flush=True,
    )
    recorder = PlanRecorder()
    runner_module.plan_reports = recorder
    try:
        state = JobState(view=folder.view)
        base, base_s = await run_once(settings, state)
        print(f"base run: {base.communities} communities in {base_s:.1f}s {base.timings}")
        previous_communities = state.communities
        base_levels = previous_and_levels(state)
        warm = freeze(folder, state)
        del folder, state

        # the +1% run, each repeat from a copy of the warm state and of its data directory
        incs: list[RunResult] = []
        walls: list[float] = []
        for i in range(repeat):
            folder_i, state_i = thaw(warm)
            shutil.copytree(settings.data_dir, work / f"try{i}")
            settings_i = settings_for(work / f"try{i}")
            for doc in docs[n_base:]:
                folder_i.add(doc)
            inc_i, wall = await run_once(settings_i, state_i)
            print(f"+{n_added} run: {inc_i.regenerated}/{inc_i.communities} in {wall:.1f}s")
            incs.append(inc_i)
            walls.append(wall)
            if i == 0:  # the figures of the run itself: every repeat makes the same
                folder, state, plan, inc = folder_i, state_i, recorder.plan, inc_i
                snap = open_graph_store(settings_i).load()
            else:
                shutil.rmtree(work / f"try{i}", ignore_errors=True)
            del folder_i, state_i
        unreflected = [r.unreflected for r in snap.community_reports]
        view = folder.view

        graph = job_graph(view, state)
        assert state.hierarchy is not None
        scratch_times = []
        for _ in range(repeat):
            t = time.monotonic()
            scratch = hierarchical_leiden(
                graph,
                max_cluster_size=settings.community.max_cluster_size,
                seed=settings.community.seed,
                previous=None,
            )
            scratch_times.append(time.monotonic() - t)
        warm0, warm_leaf = memberships(state.hierarchy, graph.nodes)
        cold0, cold_leaf = memberships(scratch, graph.nodes)
        warm_q, cold_q = state.hierarchy.modularity, scratch.modularity

        # the full rerun: a fresh state on a copy of the same graph, each in its own directory
        after = freeze(folder)
        fulls: list[RunResult] = []
        full_walls: list[float] = []
        for i in range(repeat):
            fresh, _ = thaw(after)
            fresh_state = JobState(view=fresh.view)
            full, full_s = await run_once(settings_for(work / f"full{i}"), fresh_state)
            print(f"full rerun: {full.regenerated} reports in {full_s:.1f}s")
            fulls.append(full)
            full_walls.append(full_s)
            shutil.rmtree(work / f"full{i}", ignore_errors=True)
            del fresh, fresh_state
    finally:
        runner_module.plan_reports = recorder._inner

    share = inc.regenerated / max(1, inc.communities)
    gap = (cold_q - warm_q) / cold_q if cold_q else 0.0
    full = fulls[0]
    return {
        "graph": {
            "articles": n_base + n_added,
            "text_units": len(view.text_units),
            "entities": len(view.entities),
            "relationships": len(view.relationships),
            "clustered_nodes": len(graph.nodes),
            "edges": len(graph.edges),
            "fold_base_s": round(fold_s, 2),  # once: it makes the warm state
        },
        "base_run": {  # once: it makes the warm state
            "communities": base.communities,
            "reports_written": base.regenerated,
            "levels": base_levels,
            "wall_s": round(base_s, 2),
            "timings": base.timings,
        },
        "incremental_run": {
            "added_articles": n_added,
            "communities": inc.communities,
            "reports_regenerated": inc.regenerated,
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
            "events": dict(Counter(e["kind"] for e in inc.events)),
            "unreflected_max": round(max(unreflected, default=0.0), 4),
            "unreflected_mean": round(sum(unreflected) / max(1, len(unreflected)), 4),
            "reports_with_unreflected": sum(1 for u in unreflected if u > 0),
            "wall_s": timing(walls, 2),
            "timings": phase_timings(incs),
        },
        "full_rerun": {
            "communities": full.communities,
            "report_writer_calls": full.regenerated,
            "wall_s": timing(full_walls, 2),
            "timings": phase_timings(fulls),
        },
        "report_calls_incremental_vs_full": round(inc.regenerated / max(1, full.regenerated), 4),
        "partition": {
            "modularity_warm": round(warm_q, 5),
            "modularity_scratch": round(cold_q, 5),
            "modularity_gap_pct": round(100 * gap, 3),
            "nmi_level0": round(nmi(warm0, cold0), 4),
            "nmi_leaves": round(nmi(warm_leaf, cold_leaf), 4),
            "scratch_hierarchy_s": timing(scratch_times, 2),
            "levels_warm": [len(lv) for lv in state.hierarchy.levels],
            "levels_scratch": [len(lv) for lv in scratch.levels],
        },
    }


def previous_and_levels(state: JobState) -> list[int]:
    return [len(lv) for lv in state.hierarchy.levels] if state.hierarchy else []


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode_argument(parser)
    parser.add_argument("--base", type=int, default=None, help="default: 1000 quick, 4000 full")
    parser.add_argument("--added", type=int, default=None, help="default: 10 quick, 40 full")
    parser.add_argument("--repeat", type=int, default=REPEAT, help="repeats of each timed run")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"skipped: {args.data} is absent (the Reuters sample is not in the repository)")
        return
    mode = "full" if args.full else "quick"
    n_base, n_added = FULL if args.full else QUICK
    n_base, n_added = args.base or n_base, args.added or n_added
    ensure_offline_bpe()
    with tempfile.TemporaryDirectory(prefix="kgrag-bench-incremental-") as work:
        figures = asyncio.run(bench(args.data, n_base, n_added, args.repeat, Path(work)))
    settings = {
        "data": f"first {n_base} + {n_added} non-empty articles of {args.data.name}",
        "how": "offline (extractor, summaries, report writer); no vectors; in process",
        "base": n_base,
        "added": n_added,
        "repeat": args.repeat,
        "community": settings_for(Path(tempfile.gettempdir())).community.model_dump(),
    }
    record("incremental", mode, figures, TARGETS, settings, path=args.out)


if __name__ == "__main__":
    main()
