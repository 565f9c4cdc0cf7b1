"""What a small change costs the community job as the graph grows: the run's wall time, the
nodes re-clustered, the reports regenerated and the lineage events, against a full rerun.

Usage: ``.venv/bin/python bench/change_cost.py [--full] [--drift-steps 20]``

In process and offline (the offline extractor, the merge rules and the offline writers, no
vectors), as ``bench/incremental.py`` does, on the corpus of ``bench/synthetic.py``: the dev
articles of ``../shared/data/reuters-1987-dev.jsonl`` first, then renamed copies of them. The
quick run covers 2,000 articles; ``--full`` covers 2,000, 8,000 and ~100,000 articles, with
``--drift-steps`` (20) consecutive +1% runs on the 8,000.

Each corpus runs in its own process, so ``peak_rss_mib`` is that corpus's: folding, its runs,
its full rerun, and the benchmark's own copies of the warm state (up to four at a time), so it
overstates what the community job alone needs. Its *warm state* (the folded graph and the
community job's state after a first run) is cached under ``bench/.cache`` keyed by the corpus
size and the source of the code that builds it, so a second benchmark does not re-index from
nothing. From the warm state, runs for **+40 articles** and for **+1%**, each a row of ``runs``:

- ``run_s``: the run's wall time without the snapshot phase (assembling and writing the
  output tables, which the versioned-tables issue replaces), the median of ``--repeat``
  runs from fresh copies of the warm state, with min and max; ``phases`` has every phase;
- ``nodes_reclustered``: the nodes on the frontier, free to move in re-clustering;
- ``reports_regenerated`` of ``reports_total``, ``planned`` (communities whose report
  decision the run revisited), ``events`` by kind.

Per corpus ``full_rerun_s`` and ``full_rerun_reports``: a fresh job on the +1% graph. On the
8,000-article corpus, ``drift``: that many consecutive +1% runs, each with the maintained
level-0 modularity against a from-scratch ``hierarchical_leiden`` on the same graph, and
whether the job re-balanced in that run (``community.drift_check_every``,
``community.rebalance_gap``). Writes its run into ``bench/results/change_cost.json``
(``bench.record``); targets are judged on the full run.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import pickle
import resource
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.community.result import RunResult
from agents.community.runner import Runner
from bench.incremental import DATA, Folder, load_documents, settings_for
from bench.record import Target, mode_argument, ratio, record, timing
from bench.results_io import ROOT
from bench.synthetic import Corpus
from bench.warm_state import Warm
from core.children import die_with_parent
from core.settings import Settings
from graph.communities.leiden import frontier_nodes, hierarchical_leiden
from graph.job.run import clustering_graph, whole_aliases
from graph.job.state import JobState

CACHE = ROOT / "bench" / ".cache"
SMALL_CHANGE = 40
DEFAULT_CORPORA = (2000, 8000)
QUICK_CORPUS = 2000
# the bench code its figures also depend on, besides the product packages
MEASURES = ("bench/incremental.py", "bench/synthetic.py", "bench/warm_state.py")
LARGE_CORPUS = 100_000
DRIFT_CORPUS = 8000


def code_digest() -> str:
    """The source that decides a warm state: extraction, merge rules, graph, community job."""
    h = hashlib.sha256()
    for folder in ("offline", "graph", "agents/community", "core"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in {".py", ".txt", ".json", ".tsv"}:
                h.update(path.relative_to(ROOT).as_posix().encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:16]


async def job_run(settings: Settings, state: JobState) -> tuple[RunResult, float]:
    started = time.monotonic()
    result = await Runner(settings, state, write_vectors=False).run()
    return result, time.monotonic() - started


def warm_state(corpus: Corpus, n: int, work: Path) -> Warm:
    path = CACHE / f"warm-{n}-{code_digest()}.pickle"
    if path.exists():
        with open(path, "rb") as fh:
            warm: Warm = pickle.load(fh)
        print(f"[{n}] warm state from {path.relative_to(ROOT)}", flush=True)
        return warm
    folder = Folder(settings_for(work).extraction.max_descriptions)
    t = time.monotonic()
    for doc in corpus.articles(0, n):
        folder.add(doc)
    fold_s = time.monotonic() - t
    state = JobState(view=folder.view)
    result, base_s = asyncio.run(job_run(settings_for(work / "base"), state))
    print(
        f"[{n}] folded in {fold_s:.0f}s, first run {base_s:.0f}s: {result.communities} communities",
        flush=True,
    )
    warm = Warm(folder, state, base_s, fold_s)
    CACHE.mkdir(parents=True, exist_ok=True)
    for stale in CACHE.glob(f"warm-{n}-*.pickle"):
        stale.unlink()
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump(warm, fh, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    return warm


def change_run(
    warm: Warm, corpus: Corpus, n: int, added: int, work: Path, repeat: int
) -> dict[str, Any]:
    """``added`` articles folded into a copy of the warm state, then one run; ``repeat``
    times from fresh copies, the median run kept (this machine's timings vary by ±30%).
    Each try's state is dropped before the next copy: at 100,000 articles a copy is
    gigabytes."""
    tries = []
    for i in range(repeat):
        w = warm.copy()
        for doc in corpus.articles(n, added):
            w.folder.add(doc)
        settings = settings_for(work / f"try{i}")
        assert w.state.hierarchy is not None
        graph = clustering_graph(w.state.view, whole_aliases(w.state))
        cfg = settings.community
        frontier = frontier_nodes(graph, w.state.hierarchy, cfg.frontier_tolerance)
        result, wall = asyncio.run(job_run(settings, w.state))
        run_s = wall - result.timings.get("snapshot", 0.0)
        tries.append((run_s, wall, result, len(frontier), len(graph.nodes)))
        del w, graph
    tries.sort(key=lambda t: t[0])
    run_s, wall, result, reclustered, nodes = tries[len(tries) // 2]
    phases = dict(result.timings)
    events = dict(sorted(Counter(e["kind"] for e in result.events).items()))
    row = {
        "corpus_articles": n,
        "added_articles": added,
        "run_s": timing([t[0] for t in tries], 3),
        "wall_s": round(wall, 3),
        "phases": phases,
        "nodes_reclustered": reclustered,
        "nodes_total": nodes,
        "planned": result.planned,
        "reports_regenerated": result.regenerated,
        "reports_total": result.communities,
        "reports_share": round(result.regenerated / max(1, result.communities), 4),
        "events": events,
        # community lineage only: report updates and alias merges are not structural
        "structural_events": sum(v for k, v in events.items() if k not in NOT_STRUCTURAL),
    }
    print(f"[{n}] +{added}: {row}", flush=True)
    return row


def drift(warm: Warm, corpus: Corpus, n: int, steps: int, work: Path) -> list[dict[str, Any]]:
    """``steps`` consecutive +1% runs from the warm state; the maintained level-0 modularity
    against a from-scratch clustering of the same graph after each."""
    w = warm.copy()
    settings = settings_for(work)
    cfg = settings.community
    out = []
    at = n
    for step in range(1, steps + 1):
        added = max(1, at // 100)
        for doc in corpus.articles(at, added):
            w.folder.add(doc)
        at += added
        result, wall = asyncio.run(job_run(settings, w.state))
        assert w.state.hierarchy is not None
        scratch = hierarchical_leiden(
            clustering_graph(w.state.view, whole_aliases(w.state)),
            max_cluster_size=cfg.max_cluster_size,
            seed=cfg.seed,
        )
        row = {
            "step": step,
            "articles": at,
            "modularity_maintained": round(w.state.hierarchy.modularity, 5),
            "modularity_scratch": round(scratch.modularity, 5),
            "rebalanced": bool(result.drift and result.drift.rebalanced),
            "drift_checked": result.drift is not None,
            "reports_regenerated": result.regenerated,
            "run_s": round(wall - result.timings.get("snapshot", 0.0), 3),
        }
        print(f"[{n}] drift {row}", flush=True)
        out.append(row)
    return out


def measure_corpus(n: int, drift_steps: int, repeat: int) -> dict[str, Any]:
    """One corpus, in its own process."""
    corpus = Corpus(load_documents(DATA, 10**9))
    work = Path(tempfile.mkdtemp(prefix=f"kgrag-bench-change-cost-{n}-"))
    warm = warm_state(corpus, n, work)
    size = {"entities": len(warm.state.view.entities), "rels": len(warm.state.view.relationships)}
    runs = [
        change_run(warm, corpus, n, added, work / f"plus{added}", repeat)
        for added in (SMALL_CHANGE, max(1, n // 100))
    ]
    # the full rerun: the graph after the last change, clustered and reported from nothing
    # (the warm state itself where no drift run needs it afterwards: no copy of gigabytes)
    last = warm.copy() if n == DRIFT_CORPUS and drift_steps else warm
    for doc in corpus.articles(n, runs[-1]["added_articles"]):
        last.folder.add(doc)
    t = time.monotonic()
    full, _ = asyncio.run(job_run(settings_for(work / "full"), JobState(view=last.folder.view)))
    full_s = time.monotonic() - t
    out: dict[str, Any] = {
        "corpus_articles": n,
        "entities": size["entities"],
        "relationships": size["rels"],
        "runs": runs,
        "full_rerun_s": round(full_s, 2),
        "full_rerun_reports": full.regenerated,
    }
    if n == DRIFT_CORPUS and drift_steps:
        out["drift"] = drift(warm, corpus, n, drift_steps, work / "drift")
    out["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


# community lineage only: report updates and alias merges (aliased, unaliased) are not
# changes of a community's structure
NOT_STRUCTURAL = frozenset({"report_updated", "aliased", "unaliased"})

TARGETS = {
    "plus40_run_s_8000_vs_2000": Target("/ratios/plus40_run_s_8000_vs_2000/median", "<=", 1.5),
    "plus40_run_s_8000": Target("/corpora/8000/runs/plus40/run_s/median", "<=", 3.0),
    "plus40_reports_share_8000": Target("/corpora/8000/runs/plus40/reports_share", "<=", 0.015),
    "plus40_structural_events_8000": Target(
        "/corpora/8000/runs/plus40/structural_events", "<=", 60
    ),
    "plus1pct_reports_share_8000": Target("/corpora/8000/runs/plus1pct/reports_share", "<=", 0.05),
    "drift_modularity_gap_max": Target("/drift/modularity_gap_max", "<=", 0.01),
    "drift_rebalances": Target("/drift/rebalances", "<=", 2),
    "plus40_run_s_large_vs_2000": Target(
        f"/ratios/plus40_run_s_{LARGE_CORPUS}_vs_2000/median", "<=", 3.0
    ),
}


def figures(corpora: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The run's figures: per corpus its runs by change (``plus40``, ``plus1pct``), the
    ratios of +40 run times to the smallest corpus's, and the drift summary."""
    keyed = {
        str(n): {**c, "runs": {_change_name(r["added_articles"]): r for r in c["runs"]}}
        for n, c in corpora.items()
    }
    small = min(corpora)
    ratios = {
        f"plus40_run_s_{n}_vs_{small}": ratio(
            keyed[str(n)]["runs"]["plus40"]["run_s"], keyed[str(small)]["runs"]["plus40"]["run_s"]
        )
        for n in corpora
        if n != small
    }
    steps = corpora.get(DRIFT_CORPUS, {}).pop("drift", [])
    for c in keyed.values():
        c.pop("drift", None)
    drift_summary: dict[str, Any] = {"steps": steps}
    if steps:
        drift_summary["modularity_gap_max"] = round(
            max(
                (s["modularity_scratch"] - s["modularity_maintained"]) / s["modularity_scratch"]
                for s in steps
            ),
            4,
        )
        drift_summary["rebalances"] = sum(s["rebalanced"] for s in steps)
    return {"corpora": keyed, "ratios": ratios, "drift": drift_summary}


def _change_name(added: int) -> str:
    return "plus40" if added == SMALL_CHANGE else "plus1pct"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode_argument(parser)
    parser.add_argument("--drift-steps", type=int, default=None, help="default: 20 full, 3 quick")
    parser.add_argument("--repeat", type=int, default=5, help="runs per change (median kept)")
    parser.add_argument(
        "--large-repeat",
        type=int,
        default=3,
        help="runs per change at ~100,000 articles (each from a copy of a state of gigabytes)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not DATA.exists():
        print(f"skipped: {DATA} is not there (see ../shared/data/README.md)")
        return
    mode = "full" if args.full else "quick"
    sizes = [*DEFAULT_CORPORA, LARGE_CORPUS] if args.full else [QUICK_CORPUS]
    drift_steps = args.drift_steps if args.drift_steps is not None else (20 if args.full else 0)
    repeat = args.repeat if args.full else 3
    if args.full:
        print("full: folding 100,000 articles and its runs take about an hour on 2 cores")
    corpora: dict[int, dict[str, Any]] = {}
    for n in sizes:  # one process per corpus, one at a time: its peak RSS is its own
        with ProcessPoolExecutor(
            max_workers=1, mp_context=get_context("spawn"), initializer=die_with_parent
        ) as pool:
            reps = args.large_repeat if n == LARGE_CORPUS else repeat
            corpora[n] = pool.submit(measure_corpus, n, drift_steps, reps).result()
    cfg = settings_for(Path(tempfile.mkdtemp())).community
    settings = {
        "data": f"{DATA.name}, then renamed copies (bench/synthetic.py)",
        "how": "offline (extractor, summaries, report writer); no vectors; in process",
        "corpora": sizes,
        "repeat": repeat,
        "large_repeat": args.large_repeat,
        "drift_steps": drift_steps,
        "membership_tolerance": cfg.membership_tolerance,
        "materiality_threshold": cfg.materiality_threshold,
        "frontier_tolerance": cfg.frontier_tolerance,
        "drift_check_every": cfg.drift_check_every,
        "rebalance_gap": cfg.rebalance_gap,
        "max_cluster_size": cfg.max_cluster_size,
    }
    record("change_cost", mode, figures(corpora), TARGETS, settings, MEASURES, path=args.out)


if __name__ == "__main__":
    main()
