"""What the community job needs as the news grows, measured on the real worker through Kafka.

Usage: ``.venv/bin/python bench/scale.py [--full] [--baseline] [--huge]``

For each corpus size it makes a fresh namespace on the local Kafka and Weaviate, starts
``kgrag worker`` (stream agents, the vector worker and the community job, as a user runs it,
offline mode), publishes that many articles of ``bench/synthetic.py``'s corpus (the dev
articles, then renamed copies), and waits until a community run's version holds everything
published and no report is put off to a later run (the job writes at most
``community.reports_per_run`` per run). Then, three times, it publishes 40 more articles and
waits for the run that holds them (and writes every report they call for), reading from the
job's status the time and commit time of every run (and light commit) since the last complete
version: the job may take a +40 in more than one run. All along a
thread samples the proportional set size (``Pss`` of ``/proc/<pid>/smaps_rollup``) of the
community job's processes (the ``kgrag community-job`` process and its pool) and of the
worker's whole tree (the job, the stream worker and the vector worker; Kafka, Weaviate and
the object store are not started by the worker and are not counted); the figures keep the
maximum of each sum over time.

Figures per corpus: ``articles``, ``job_pss_mib``, ``worker_tree_pss_mib``, ``ingest_s`` (to
the first complete run), ``plus40_run_s`` (the runs without their commits), ``plus40_commit_s``
(the runs' commit phases, plus light commits of the same articles made before them),
``plus40_total_s`` (their sum per repeat), each a median of 3 with min and max;
``plus40_runs`` (how many runs took each +40 in) and ``plus40_phases`` (each run's seconds
by phase); for where memory goes (not scored):
``job_pss_peak`` (at the peak: seconds since the sampling began, the job's own process and its
children, and the job's status then), ``largest_run`` (the longest run its status named, with
the reports it wrote and put off), ``fullest_run`` (the run whose process grew largest, with
its resident peak in each phase: where a run's memory goes) and ``job_pss_timeline``
(seconds, MiB each minute); then ``job_kib_per_article`` (the growth of ``job_pss_mib``
between the two sizes, per article) and the ratio of the +40 totals. ``--baseline`` writes
the same figures under ``baseline`` too (the measurement of the code before the
bounded-memory work); later runs carry the baseline over with the commit it was measured at.

Quick: 1,000 and 4,000 articles. Full: 8,000 and 100,000 (about an hour and a half on 2
cores, most of it the offline extraction of 100,000 articles; longer while the job's reports
wait, ``reports_per_run``). ``--full --huge``: 300,000 instead of 100,000, written to
``bench/results/scale_huge.json``. ``--sizes N … --out FILE``: any sizes, written to ``FILE``
only (outside ``bench/results``; nothing judged).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.incremental import DATA, load_documents
from bench.live import fresh_namespace, start_worker, stop, wait_ready
from bench.record import (
    Target,
    mode_argument,
    provenance,
    ratio,
    record,
    result_path,
    timing,
)
from bench.run_all import descendants
from bench.synthetic import Corpus
from core.job_status import JobStatus, LastRun, read_status
from core.lag import reflects_everything
from core.publish import DocumentPublisher
from core.settings import Settings, load_settings
from core.tokenizer import ensure_offline_bpe
from graph.model import Document

QUICK = (1000, 4000)
FULL = (8000, 100_000)
HUGE = 300_000
ADDED = 40
REPEATS = 3
MEASURES = ("bench/synthetic.py", "bench/live.py", "bench/incremental.py")

TARGETS = {
    "job_pss_mib_100000": Target("/corpora/100000/job_pss_mib", "<=", 3072),
    "job_kib_per_article": Target("/job_kib_per_article", "<=", 25),
    "plus40_total_s_100000": Target("/corpora/100000/plus40_total_s/median", "<=", 2.5),
    "plus40_total_s_100000_vs_8000": Target(
        "/ratios/plus40_total_s_100000_vs_8000/median", "<=", 2.0
    ),
}
HUGE_TARGETS = {
    "job_pss_mib_300000": Target("/corpora/300000/job_pss_mib", "<=", 8192),
    "plus40_total_s_300000": Target("/corpora/300000/plus40_total_s/median", "<=", 4.0),
}


# ---- memory ----


def pss_kib(pid: int) -> int:
    """The proportional set size of one process (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def is_job(pid: int) -> bool:
    try:
        return b"community-job" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


@dataclass
class PssSampler:
    """Samples, every ``period_s``, the summed PSS of the worker's tree and of the job's.
    For where the peak comes from (figures, not targets): the job's PSS at the peak split
    between the job's own process and its children, with what the job's status said then,
    the largest run the status named, and the job's PSS every ``timeline_s``."""

    worker_pid: int
    settings: Settings | None = None
    period_s: float = 1.0
    timeline_s: float = 60.0
    job_max_kib: int = 0
    tree_max_kib: int = 0
    samples: int = 0
    peak: dict[str, Any] = field(default_factory=dict)
    largest_run: dict[str, Any] = field(default_factory=dict)
    fullest_run: dict[str, Any] = field(default_factory=dict)
    timeline: list[tuple[float, float]] = field(default_factory=list)
    _started: float = field(default_factory=time.monotonic)
    _stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        tree = [self.worker_pid, *descendants(self.worker_pid)]
        jobs = [p for p in tree if is_job(p)]
        own = sum(pss_kib(j) for j in jobs)
        children = sum(pss_kib(p) for j in jobs for p in descendants(j))
        at = round(time.monotonic() - self._started, 1)
        status = read_status(self.settings) if self.settings is not None else None
        run = status.last_run if status is not None else None
        if run is not None and run.duration_s > self.largest_run.get("duration_s", -1.0):
            self.largest_run = {
                "version": run.version,
                "duration_s": run.duration_s,
                "reports_regenerated": run.reports_regenerated,
                "reports_deferred": run.reports_deferred,
                "phases": run.phases,
                "phase_peak_mib": run.phase_peak_mib,
            }
        if run is not None and max(run.phase_peak_mib.values(), default=0.0) > max(
            self.fullest_run.get("phase_peak_mib", {}).values(), default=-1.0
        ):
            self.fullest_run = {
                "version": run.version,
                "changes": run.changes,
                "reports_regenerated": run.reports_regenerated,
                "phase_peak_mib": run.phase_peak_mib,
            }
        if own + children > self.job_max_kib:
            self.job_max_kib = own + children
            self.peak = {
                "at_s": at,
                "job_process_mib": round(own / 1024, 1),
                "children_mib": round(children / 1024, 1),
                "state": status.state if status is not None else None,
                "pending_changes": status.pending_changes if status is not None else None,
                "last_version": run.version if run is not None else None,
                "reports_deferred": run.reports_deferred if run is not None else None,
                "light_commits": status.light_commits if status is not None else None,
            }
        if not self.timeline or at - self.timeline[-1][0] >= self.timeline_s:
            self.timeline.append((at, round((own + children) / 1024, 1)))
        self.tree_max_kib = max(self.tree_max_kib, sum(pss_kib(p) for p in tree))
        self.samples += 1

    def progress(self) -> str:
        """One line on where the job stands, for the log of a long ingest."""
        status = read_status(self.settings) if self.settings is not None else None
        run = status.last_run if status is not None else None
        now = round(self.timeline[-1][1]) if self.timeline else 0
        said = "no run yet"
        if status is not None and run is not None:
            said = (
                f"{status.state}, last run v{run.version} ({run.duration_s:.0f} s, "
                f"{run.reports_regenerated} reports, {run.reports_deferred} waiting), "
                f"{status.light_commits} light commits"
            )
        return f"{said}; job PSS {now} MiB (max {self.job_max_kib // 1024})"

    def start(self) -> threading.Thread:
        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.sample()

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


@dataclass
class RunWatch:
    """Polls the job's status every ``period_s`` and keeps every run and light commit it names,
    by version: a +40 can be taken in by more than one run (the job runs when the first of its
    changes are due), so its cost is the sum of every run and light commit after the last
    complete version up to the one that holds it."""

    settings: Settings
    period_s: float = 0.2
    runs: dict[int, LastRun] = field(default_factory=dict)
    lights: dict[int, float] = field(default_factory=dict)  # version -> seconds
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)  # the thread adds, between reads
    taken: list[dict[str, Any]] = field(default_factory=list)  # the runs ``between`` summed

    def poll(self) -> JobStatus | None:
        status = read_status(self.settings)
        with self._lock:
            if status is None:
                return None
            if status.last_run is not None:
                self.runs[status.last_run.version] = status.last_run
            light = status.last_light_commit
            if light is not None and light.seconds > 0:
                self.lights[light.version] = light.seconds
        return status

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.poll()

        threading.Thread(target=loop, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def between(self, after: int, upto: int, timeout_s: float = 600) -> tuple[float, float, int]:
        """(run seconds without commits, commit seconds, runs) of everything after version
        ``after`` up to ``upto``; waits for the status to name ``upto`` (it is written when the
        run's process has returned: after the version and the checkpoint, which over a large
        history takes tens of seconds)."""
        deadline = time.monotonic() + timeout_s
        while upto not in self.runs:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the job's status did not name version {upto} in {timeout_s:.0f} s"
                )
            status = self.poll()
            if status is not None and status.last_run and status.last_run.version > upto:
                raise RuntimeError(f"version {upto}'s run was not seen in the job's status")
            time.sleep(self.period_s)
        with self._lock:
            runs = [r for v, r in self.runs.items() if after < v <= upto]
            light = sum(s for v, s in self.lights.items() if after < v <= upto)
        commits = [r.phases.get("snapshot", r.phases.get("commit", 0.0)) for r in runs]
        run_s = sum(r.duration_s for r in runs) - sum(commits)
        self.taken = [
            {
                "version": r.version,
                "changes": r.changes,
                "phases": r.phases,
                "phase_peak_mib": r.phase_peak_mib,
            }
            for r in runs
        ]
        return run_s, sum(commits) + light, len(runs)


# ---- the pipeline ----


async def send(settings: Settings, docs: Iterable[Document]) -> int:
    """Publish ``docs`` and wait until the broker has every one; how many."""
    publisher = DocumentPublisher(settings, linger_ms=20)
    sent = 0
    try:
        pending = []
        for doc in docs:
            pending.append(await publisher.send(doc))
            sent += 1
            if len(pending) >= 5000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await publisher.stop()
    return sent


async def complete_run(
    settings: Settings,
    after: int,
    timeout_s: float,
    progress: Callable[[], str] | None = None,
    every_s: float = 300.0,
) -> int:
    """The first community-run version newer than ``after`` that holds everything published,
    with no report put off to a later run (``reports_per_run``: its status says so); printing
    ``progress()`` every ``every_s`` while it waits."""
    from core.tables.opening import open_graph_store

    store = open_graph_store(settings)
    started = time.monotonic()
    deadline, told = started + timeout_s, started
    while time.monotonic() < deadline:
        if progress is not None and time.monotonic() - told >= every_s:
            told = time.monotonic()
            print(f"  … {told - started:.0f} s: {progress()}", flush=True)
        with contextlib.suppress(Exception):  # no tables yet, or a version being written
            infos = [v for v in store.version_infos_all() if v.version > after]
            runs = [v for v in infos if v.meta.kind != "rows"]
            if runs and await reflects_everything(settings, runs[-1].meta.consumed_offsets):
                status = read_status(settings)
                last = status.last_run if status is not None else None
                settled = last is not None and not last.reports_deferred
                if settled and last is not None and last.version >= runs[-1].version:
                    return runs[-1].version
        await asyncio.sleep(0.5)
    raise TimeoutError(f"no complete community run after version {after} in {timeout_s:.0f} s")


async def measure(base: Settings, corpus: Corpus, n: int, timeout_s: float) -> dict[str, Any]:
    """One corpus size, in a namespace of its own."""
    work = Path(tempfile.mkdtemp(prefix=f"kgrag-bench-scale-{n}-"))
    async with fresh_namespace(base, f"bench-scale-{n}", work) as settings:
        worker = start_worker(settings, {})
        sampler = PssSampler(worker.pid, settings)
        watch = RunWatch(settings)
        try:
            await wait_ready(settings, worker, timeout=300)
            sampler.start()
            started = time.monotonic()
            await send(settings, corpus.articles(0, n))
            version = await complete_run(settings, 0, timeout_s, sampler.progress)
            ingest_s = time.monotonic() - started
            print(f"[{n}] version {version} holds all {n} articles after {ingest_s:.0f} s")
            runs, commits, counts, phases = [], [], [], []
            watch.start()
            for i in range(REPEATS):
                await send(settings, corpus.articles(n + i * ADDED, ADDED))
                done = await complete_run(settings, version, 600)
                run_s, commit_s, count = watch.between(version, done)
                version = done
                print(
                    f"[{n}] +{ADDED} #{i + 1}: run {run_s:.2f} s, commit {commit_s:.2f} s "
                    f"({count} run(s))"
                )
                runs.append(run_s)
                phases.append(watch.taken)
                commits.append(commit_s)
                counts.append(count)
            sampler.sample()
        finally:
            sampler.stop()
            watch.stop()
            stop(worker)
    return {
        "articles": n,
        "job_pss_mib": round(sampler.job_max_kib / 1024, 1),
        "worker_tree_pss_mib": round(sampler.tree_max_kib / 1024, 1),
        "pss_samples": sampler.samples,
        "job_pss_peak": sampler.peak,
        "largest_run": sampler.largest_run,
        "fullest_run": sampler.fullest_run,
        "job_pss_timeline": sampler.timeline,
        "ingest_s": round(ingest_s, 1),
        "plus40_run_s": timing(runs, 3),
        "plus40_commit_s": timing(commits, 3),
        "plus40_total_s": timing([r + c for r, c in zip(runs, commits, strict=True)], 3),
        "plus40_runs": counts,
        "plus40_phases": phases,
    }


def growth(corpora: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``job_kib_per_article`` and the +40 ratio between the smallest and largest sizes."""
    small, large = sorted(corpora.values(), key=lambda c: c["articles"])[:: len(corpora) - 1]
    span = large["articles"] - small["articles"]
    name = f"plus40_total_s_{large['articles']}_vs_{small['articles']}"
    return {
        "job_kib_per_article": round(
            (large["job_pss_mib"] - small["job_pss_mib"]) * 1024 / span, 2
        ),
        "ratios": {name: ratio(large["plus40_total_s"], small["plus40_total_s"])},
    }


def carried_baseline(mode: str) -> dict[str, Any] | None:
    """The baseline an earlier run recorded for this mode, with the commit it measured."""
    path = result_path("scale")
    if not path.exists():
        return None
    run = json.loads(path.read_text()).get(mode) or {}
    return (run.get("figures") or {}).get("baseline")


async def explore(args: argparse.Namespace) -> None:
    """``--sizes``: the same measurement at sizes of one's choosing, written to ``--out``
    alone (never to ``bench/results``: no target is judged on it), to see how the job grows
    between the quick and full sizes in less than the full run's hour and a half."""
    base = load_settings()
    ensure_offline_bpe()
    corpus = Corpus(load_documents(DATA, 10**9))
    stamp = {**provenance("quick", {"sizes": args.sizes}, MEASURES), "mode": "sizes"}
    corpora = {str(n): await measure(base, corpus, n, args.timeout) for n in args.sizes}
    args.out.write_text(json.dumps({**stamp, "corpora": corpora}, indent=1))
    print(f"wrote sizes {args.sizes} to {args.out}")


async def main_async(args: argparse.Namespace) -> None:
    if args.sizes:
        await explore(args)
        return
    mode = "full" if args.full else "quick"
    sizes = QUICK if not args.full else (FULL[0], HUGE if args.huge else FULL[1])
    base = load_settings()
    ensure_offline_bpe()
    corpus = Corpus(load_documents(DATA, 10**9))
    corpora = {str(n): await measure(base, corpus, n, args.timeout) for n in sizes}
    figures: dict[str, Any] = {"corpora": corpora, **growth(corpora)}
    if args.baseline:
        stamp = provenance(mode, {})
        figures["baseline"] = {"commit": stamp["commit"], "date": stamp["date"], **figures}
    elif (baseline := carried_baseline(mode)) is not None:
        figures["baseline"] = baseline
    settings = {
        "data": f"{DATA.name}, then renamed copies (bench/synthetic.py)",
        "how": "kgrag worker (offline mode) through Kafka; PSS sampled every second",
        "corpora": list(sizes),
        "added": ADDED,
        "repeats": REPEATS,
        "debounce_s": base.community.debounce_s,
        "max_wait_s": base.community.max_wait_s,
        "kafka_partitions": base.kafka.partitions,
    }
    # the huge run is its own file: it never replaces the ~100,000 figures
    name, targets = ("scale_huge", HUGE_TARGETS) if args.huge else ("scale", TARGETS)
    record(name, mode, figures, targets, settings, ("bench/scale.py", *MEASURES), path=args.out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode_argument(parser)
    parser.add_argument("--baseline", action="store_true", help="record as the baseline too")
    parser.add_argument("--huge", action="store_true", help="300,000 articles (with --full)")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per ingest")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--sizes", type=int, nargs="+", help="articles per corpus, written to --out only"
    )
    args = parser.parse_args(argv)
    results = result_path("scale").parent.resolve()
    if args.sizes and (args.out is None or args.out.resolve().parent == results):
        parser.error("--sizes writes to --out only, outside bench/results (no target judged)")
    if not DATA.exists():
        print(f"skipped: {DATA} is not there (see ../shared/data/README.md)")
        return
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
