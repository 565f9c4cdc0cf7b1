"""The community job's child process: one run over the job's state, its snapshot and events.

Runs in a long-lived ``spawn`` child so Leiden and context building never block the job's
event loop. A run folds the buffered graph changes into the state (``agents.community.state``),
then takes the pure steps of ``graph.job.run`` in order, with the summaries and reports
written by the writers chosen once for the run (``agents.community.writers``). This module
only orchestrates, and reads top to bottom in ``Runner._run``; each concern it calls on has
its module: the texts and their failures (``texts``), alias confirmation (``aliases``), the
commits (``commit``), light commits made while a run works (``inbox``), the events and the
headline digest (``events``, ``headlines``), report vectors (``vectors``) and what the run
hands back to the job (``result``). A run that raises leaves no half-applied state behind:
this process forgets it and the next run starts from the checkpoint, which the parent
re-feeds from the checkpoint's offsets. The state is saved by ``save``, which the job calls
after each run, once the run's version and events are out.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from agents.community.aliases import confirm_aliases
from agents.community.commit import (
    adopt_committed_ids,
    commit_run,
    forget_store,
    light_commit,
    next_version,
    restamp,
    run_meta,
    writer_store,
)
from agents.community.events import alias_events, lineage_events
from agents.community.headlines import headlines
from agents.community.inbox import Absorber, fold, fold_inbox
from agents.community.result import AliasCounts, LightCommitResult, RunResult, Saved
from agents.community.state import forget_state, load_state, save_state
from agents.community.texts import Texts
from agents.community.vectors import write_report_vectors
from agents.community.writers import Writers, build_writers
from core.malloc import PhasePeaks, peak_rss_mib, resident_mib, trim_heap
from core.settings import Settings
from core.settings.llm import cost_usd
from core.tables.store import GraphTables
from core.tokenizer import count_tokens, get_encoding
from graph.aliases.resolution import AliasChange, Resolution, alias_changes
from graph.aliases.view import resolve_view
from graph.communities.ids import StableCommunities
from graph.communities.leiden import Hierarchy
from graph.communities.lineage import LineageEvent
from graph.job.run import (
    DriftCheck,
    RunParams,
    ScopeEvidence,
    assign_record_ids,
    budgeted,
    cluster,
    evidence_index,
    lineage,
    plan_reports,
    planning_scope,
    waiting_to_plan,
)
from graph.job.state import HISTORY_CAP, JobState
from graph.job.summaries import SummaryPlan, summaries_needed
from graph.job.version_tables import fresh_ids, newest_time
from graph.merge.view import Touched
from graph.model import Community
from graph.reports.evidence import LiveEvidence, RegenerationPlan
from graph.versions.model import SnapshotCommunity, SnapshotReport

log = logging.getLogger(__name__)


def run(settings_json: str, changes: Sequence[bytes], offsets: dict[int, int]) -> RunResult:
    """Fold ``changes``, run once and write the snapshot; return events. The state is saved
    by ``save``, which the job calls next, once the run's version is out."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings.model_validate_json(settings_json)
    peak_rss_mib(reset=True)
    state = load_state(settings)
    try:
        fold_inbox(state)  # sent for a run that had ended: older than ``changes``
        fold(state, changes, offsets)
        runner = Runner(settings, state, fold_peak_mib=peak_rss_mib(reset=True))
        return asyncio.run(runner.run())
    except BaseException:
        forget_state(settings)
        forget_store(settings)
        raise


def save(settings_json: str) -> Saved:
    """Save the state the last run left (the rows it changed, ``agents.community.state``).
    Apart from ``run`` so a new version is published without waiting for it: nothing else
    reaches the state before it (the job's child takes one call at a time, and the job waits
    for the save before its next call). A save that raises leaves the last save as the state,
    as a crash after the run's commit would."""
    settings = Settings.model_validate_json(settings_json)
    started = time.monotonic()
    try:
        save_state(settings, load_state(settings))
    except BaseException:
        forget_state(settings)
        forget_store(settings)
        raise
    seconds = round(time.monotonic() - started, 3)
    trim_heap()  # what the run freed, given back rather than kept at its largest size
    return Saved(seconds, resident_mib())


def warm(settings_json: str) -> None:
    """Load the state in a new child before its first call (``agents.community.child``)."""
    load_state(Settings.model_validate_json(settings_json))


def absorb(
    settings_json: str, changes: Sequence[bytes], offsets: dict[int, int]
) -> LightCommitResult:
    """Fold ``changes`` and make a light commit of the rows they wrote (no re-clustering, no
    reports): what makes new articles searchable between runs. The state is saved by the
    next run; after a crash the parent re-feeds from the saved offsets, folding is idempotent,
    and rows already committed compare equal and are not written again."""
    settings = Settings.model_validate_json(settings_json)
    state = load_state(settings)
    try:
        started = time.monotonic()
        fold_inbox(state)
        fold(state, changes, offsets)
        version = light_commit(
            writer_store(settings),
            state,
            "offline" if settings.llm.offline else "llm",
            settings.llm.price(),
        )
    except BaseException:
        forget_state(settings)
        forget_store(settings)
        raise
    return LightCommitResult(version, round(time.monotonic() - started, 3))


@dataclass(frozen=True, slots=True)
class _Aliased:
    """The run's alias resolution, the merges it made or undid, the keys it re-decided."""

    resolution: Resolution
    changes: list[AliasChange]
    decided: int


@dataclass(frozen=True, slots=True)
class _Clustered:
    """The run's clustering, its lineage, and the reports it plans to regenerate."""

    hierarchy: Hierarchy
    stable: StableCommunities
    drift: DriftCheck | None
    events: list[LineageEvent]
    plan: RegenerationPlan
    evidence: dict[str, LiveEvidence]


class Runner:
    """One run's I/O around the pure steps of ``graph.job.run``."""

    def __init__(
        self,
        settings: Settings,
        state: JobState,
        *,
        llm: Any = None,
        write_vectors: bool = True,
        fold_peak_mib: float | None = None,
    ) -> None:
        """``llm`` overrides the client built from settings (tests); ``write_vectors=False``
        keeps report vectors out of Weaviate (pure runs in unit tests and benchmarks);
        ``fold_peak_mib``: the process's peak while the run's changes were folded."""
        self.settings = settings
        self.state = state
        self.write_vectors = write_vectors
        self._tables: GraphTables | None = None
        cfg = settings.community
        self.params = RunParams(
            cfg.max_cluster_size,
            cfg.seed,
            cfg.jaccard_threshold,
            cfg.materiality_threshold,
            cfg.report_max_tokens,
            cfg.membership_tolerance,
            cfg.frontier_tolerance,
            cfg.drift_check_every,
            cfg.rebalance_gap,
            cfg.reports_per_run,
        )
        self.timings: dict[str, float] = {}
        self.peaks = PhasePeaks(None if fold_peak_mib is None else {"fold": fold_peak_mib})
        self._mark = time.monotonic()  # when the phase under way began
        encoding = get_encoding(settings.chunking.encoding).name
        self.count_tokens = partial(count_tokens, encoding)
        self.writers: Writers = build_writers(settings, llm, self.count_tokens, self._hrid)
        self.now = time.time()  # one clock reading per run for backoffs and summary ages
        self.texts = Texts(self.writers, state, cfg, self.count_tokens, self.now)
        self.planned = 0  # communities whose report decision this run revisited
        self.absorber = Absorber(state, self._light_commit)

    def _hrid(self, c: Community) -> str:
        return str(self.state.human_ids.get("community", c.id) or c.id)

    def _lap(self, phase: str) -> None:
        """Record the phase that ends now; the next begins."""
        now = time.monotonic()
        self.timings[phase] = round(now - self._mark, 3)
        self._mark = now
        self.peaks.lap(phase)

    def _store(self) -> GraphTables:
        if self._tables is None:
            self._tables = writer_store(self.settings)
        return self._tables

    def _light_commit(self) -> int | None:
        price = self.settings.llm.price()
        with self.peaks.apart("light_commits"):
            return light_commit(self._store(), self.state, self.writers.mode, price)

    async def run(self) -> RunResult:
        try:
            async with self.absorber.polling():
                with _state_frozen():
                    return await self._run()
        finally:
            await self.writers.aclose()

    async def _run(self) -> RunResult:
        """The phases in order. The two ``held()`` sections hold copies a light commit would
        invalidate (the view's fresh rows and ``human_ids`` while ids and the clustering are
        computed; the tables' digests until the version is written); light commits of what
        the leader sends meanwhile are made before each, and while the run awaits outside."""
        state, view = self.state, self.state.view
        touched = view.take_touched()  # what changed since the last run (None: everything)
        self._mark = time.monotonic()
        slots = None if touched is None else touched.slots
        summary_plan = summaries_needed(
            view, state, self.writers.summary_policy, self.now, touched=slots
        )
        await self.texts.summaries(summary_plan.requests)
        self._lap("summaries")
        with self.absorber.held():
            self._number_rows(touched)
            self._lap("record_ids")
            aliased = await self._resolve_aliases(touched)
            self._lap("aliases")
            clustered = self._cluster(touched)
        version = next_version(self._store(), state)
        communities = clustered.stable.communities
        regenerated = await self.texts.reports(
            communities, clustered.plan.to_regenerate, clustered.evidence, version
        )
        self._lap("reports")
        with self.absorber.held():
            version = restamp(self._store(), state, version)
            previous = self._settle(clustered, regenerated, version)
            rows, reports = self._commit(version, clustered, regenerated, touched, summary_plan)
            self._lap("snapshot")
            llm = self.writers.mode == "llm"
            digest = headlines(self.settings.community, state, rows, version, llm=llm)
            self._lap("headlines")
        if self.write_vectors:
            current = {c.id: c for c in communities}
            await write_report_vectors(self.settings, reports, previous, current, regenerated)
        self._lap("report_vectors")
        state.version = version
        return self._result(
            version, clustered, aliased, regenerated, previous, digest, summary_plan
        )

    def _commit(
        self,
        version: int,
        clustered: _Clustered,
        regenerated: set[str],
        touched: Touched | None,
        summary_plan: SummaryPlan,
    ) -> tuple[tuple[SnapshotCommunity, ...], tuple[SnapshotReport, ...]]:
        """Commit the run's version (``commit.commit_run``); its communities and reports."""
        self.state.committed.take_reports(self.state.reports)
        meta = run_meta(
            self.state,
            version,
            clustered.hierarchy,
            regenerated,
            mode=self.writers.mode,
            price=self.settings.llm.price(),
        )
        summarised = {r.slot for r in summary_plan.requests}
        return commit_run(self._store(), self.state, touched, summarised, meta, self.timings)

    def _number_rows(self, touched: Touched | None) -> None:
        """Give human ids to the rows written since the last commit (each commit numbers what
        it takes): those alone, unless what changed is not known."""
        state, view = self.state, self.state.view
        adopt_committed_ids(self._store(), state)
        state.human_ids = (
            assign_record_ids(view, state.human_ids)
            if touched is None
            else fresh_ids(view, state.human_ids, view.fresh)
        )

    async def _resolve_aliases(self, touched: Touched | None) -> _Aliased:
        """Which keys name one thing: before clustering, which glues aliases to their names."""
        state, view, cfg = self.state, self.state.view, self.settings.community
        since = _with_absorbed(touched, view.touched_so_far())
        resolution, alias_state, decided = Resolution(), None, 0
        if cfg.resolve_aliases:
            resolution, alias_state, decided = resolve_view(
                view,
                state.resolution,
                state.aliases,
                None if since is None else since.entities,
                () if since is None else {s[2:] for s in since.slots if s.startswith("r:")},
                full_every=cfg.aliases_full_every,
                names_kept=state.kept_names,
            )
        state.aliases = alias_state
        in_force = state.names_resolved()
        state.resolution = resolution
        await confirm_aliases(self.writers, state, resolution, cfg.confirm_aliases)
        changes = alias_changes(in_force, state.names_resolved() or Resolution())
        return _Aliased(resolution, changes, decided)

    def _cluster(self, touched: Touched | None) -> _Clustered:
        """Re-cluster with stable ids, then plan which reports to regenerate."""
        state, view = self.state, self.state.view
        hierarchy, stable, drift = cluster(
            view, state, self.params, _with_absorbed(touched, view.touched_so_far())
        )
        communities = stable.communities
        self._lap("leiden_and_ids")
        events = lineage(state.communities, communities, stable.delta)
        limit = self.params.reports_per_run
        waiting = waiting_to_plan(state, limit)
        scope = planning_scope(
            communities, None if touched is None else touched.entities, state, stable.delta, waiting
        )
        index = evidence_index(view, state, touched)
        sizes = {c.id: len(c.entity_keys) for c in scope}  # a rewritten child is planned
        kept: dict[str, LiveEvidence] = {}
        decided = plan_reports(scope, ScopeEvidence(index, scope), state, self.params, sizes, kept)
        index.end_update({c.id for c in communities})
        plan, later = budgeted(decided, limit)
        evidence = {cid: kept[cid] for cid in plan.to_regenerate}
        live = {c.id for c in communities}
        planned = set(waiting)
        still = [k for k in state.reports_deferred if k not in planned and k in live]
        state.reports_deferred = dict.fromkeys([*still, *later])
        self.planned = len(scope)
        self._lap("evidence")
        state.hierarchy, state.human_ids = hierarchy, stable.human_ids
        return _Clustered(hierarchy, stable, drift, events, plan, evidence)

    def _settle(
        self, clustered: _Clustered, regenerated: set[str], version: int
    ) -> dict[str, Community]:
        """Make the run's communities the state's: reports and failures of dissolved ones go,
        kept reports record what they leave out; returns the communities before the run."""
        state, plan = self.state, clustered.plan
        communities = clustered.stable.communities
        live = {c.id for c in communities}
        for cid in [c for c in state.reports if c not in live]:
            del state.reports[cid]
            state.bases.pop(cid, None)
        for item in [i for i in state.failures if i.startswith("report:") and i[7:] not in live]:
            del state.failures[item]
        before = {d.community_id: d.unreflected_before for d in plan.decisions}
        for cid, share in plan.unreflected_after.items():
            if cid in state.reports and cid not in regenerated:
                kept = before[cid] if cid in plan.to_regenerate else share
                state.reports[cid] = _with_unreflected(state.reports[cid], kept)
        previous = {c.id: c for c in state.communities}
        state.communities = communities
        state.labelled = clustered.stable.labelled
        self._record_history(communities, version)
        return previous

    def _result(
        self,
        version: int,
        clustered: _Clustered,
        aliased: _Aliased,
        regenerated: set[str],
        previous: dict[str, Community],
        digest: list[dict[str, Any]],
        summary_plan: SummaryPlan,
    ) -> RunResult:
        state, tokens = self.state, self.writers.tokens
        newest = newest_time(state.view)
        resolution = aliased.resolution
        return RunResult(
            version=version,
            events=[
                *lineage_events(
                    state, clustered.events, regenerated, clustered.plan, previous, version, newest
                ),
                *alias_events(state, aliased.changes, version, newest),
            ],
            headlines=digest,
            aliases=AliasCounts(
                merged=len(resolution.merges),
                per_unit=len(resolution.unit_aliases),
                changed=len(aliased.changes),
                keys_decided=aliased.decided,
            ),
            timings=self.timings,
            phase_peak_mib=self.peaks.peaks,
            regenerated=len(regenerated),
            reports_deferred=len(state.reports_deferred),
            communities=len(state.communities),
            planned=self.planned,
            drift=clustered.drift,
            modularity=clustered.hierarchy.modularity,
            summaries_written=self.texts.summaries_written,
            light_commits=list(self.absorber.versions),
            summaries_deferred=summary_plan.deferred,
            llm_calls=dict(self.writers.calls),
            llm_tokens=dict(tokens),
            cost_usd=cost_usd(
                self.settings.llm.price(), tokens.get("prompt", 0), tokens.get("completion", 0)
            ),
            failed_this_run=list(self.texts.failed),
            failures=dict(sorted(state.failures.items(), key=lambda x: x[1].first_failed_at)),
            next_due_at=self._next_due(summary_plan.next_due_at),
        )

    def _next_due(self, summaries_due: float | None) -> float | None:
        """When a run is worth making even if no change arrives: a refused item's retry, a
        deferred summary reaching its maximum age, reports put off by this run."""
        times = [f.next_retry_at for f in self.state.failures.values()]
        if summaries_due is not None:
            times.append(summaries_due)
        if self.state.reports_deferred:
            times.append(self.now)  # reports put off: the next run is due at once
        return min(times) if times else None

    def _record_history(self, communities: tuple[Community, ...], version: int) -> None:
        hist = self.state.size_history
        live = {c.id for c in communities}
        for c in communities:  # a point when the size changed: a step function of versions
            points = hist.get(c.id, ())
            if not points or points[-1][1] != len(c.entity_keys):
                hist[c.id] = (*points, (version, len(c.entity_keys)))[-HISTORY_CAP:]
        for cid in [k for k in hist if k not in live]:
            del hist[cid]


@contextlib.contextmanager
def _state_frozen() -> Iterator[None]:
    """Python's cyclic collector kept off what was alive when the run began (the job's
    state: tens of millions of objects at 100,000 articles), so the collections a run's
    allocations trigger scan what the run made, not the whole state, which a full
    collection would otherwise walk. Objects that die are still freed (by reference
    counting); the state is thawed when the run ends. Left alone in a process where someone
    else froze the heap already (the stream worker does)."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _with_absorbed(taken: Touched | None, since: Touched | None) -> Touched | None:
    """What the run's view holds changed since the last run: what was taken at its start and
    what it folded since (folded again into the next run's, where it is looked at anew)."""
    if taken is None or since is None:
        return None
    return Touched(taken.entities | since.entities, taken.slots | since.slots)


def _with_unreflected(report: SnapshotReport, share: float) -> SnapshotReport:
    return replace(report, unreflected=share)
