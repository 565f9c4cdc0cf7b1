"""The community job's child process: one run over the job's state, its snapshot and events.

Runs in a long-lived ``spawn`` child so Leiden and context building never block the job's
event loop. A run folds the buffered graph changes into the state (``agents.community.state``),
then takes the pure steps of ``graph.community_run`` in order, with the summaries and reports
written by the writers chosen once for the run (``agents.community.writers``). A run that
raises leaves no half-applied state behind: this process forgets it and the next run starts
from the checkpoint, which the parent re-feeds from the checkpoint's offsets.

One refused LLM call costs one item, never the run: a report or summary the writers could not
get is recorded in ``JobState.failures`` with its reason; the previous text stays (a community
that never had a report gets an offline one, marked ``mode: offline``), and a later run tries
again once its backoff has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import queue
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from datetime import UTC, date, datetime
from functools import partial
from typing import Any

from agents.community.state import forget_state, load_state, save_state_soon
from agents.community.writers import Refused, Writers, build_writers
from core.children import die_with_parent
from core.graph_tables import GraphTables, open_graph_store
from core.settings import ModelPrice, Settings, cost_usd
from core.tokenizer import count_tokens, get_encoding
from graph.alias_view import resolve_view
from graph.aliases import (
    AliasChange,
    Merge,
    Resolution,
    UnitAlias,
    alias_changes,
    alias_rows,
    decision_id,
    uncertain,
)
from graph.community_run import (
    RunParams,
    assign_record_ids,
    cluster,
    evidence_index,
    lineage,
    plan_reports,
    planning_scope,
    report_graph,
)
from graph.evidence import LiveEvidence, ReportBasis
from graph.graph_view import GraphView, Touched
from graph.job_state import HISTORY_CAP, JobState, SummaryRecord, record_failure, retry_blocked
from graph.lineage import LineageEvent
from graph.model import Community
from graph.report_context import ChildReport, ReportContext
from graph.report_context_builder import ReportContextBuilder
from graph.snapshot_assembly import (
    assemble,
    community_tables,
    fresh_ids,
    newest_time,
    report_record,
    row_tables,
)
from graph.snapshot_model import SnapshotCommunity, SnapshotMeta, SnapshotReport
from graph.story_detail import ViewStories, describe
from graph.storylines import (
    fold,
    newsworthy,
    window_back,
    window_documents,
    window_nodes,
)
from graph.summaries import SummaryRequest, summaries_needed
from offline.report import write_offline_report
from streams.codecs import PayloadError, decode_graph_change

log = logging.getLogger(__name__)


def run(settings_json: str, changes: Sequence[bytes], offsets: dict[int, int]) -> dict[str, Any]:
    """Fold ``changes``, run once, write the snapshot and the checkpoint; return events."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings.model_validate_json(settings_json)
    state = load_state(settings)
    try:
        _fold_inbox(state)  # sent for a run that had ended: older than ``changes``
        _fold(state, changes, offsets)
        result = asyncio.run(Runner(settings, state).run())
        save_state_soon(settings, state)
    except BaseException:
        forget_state(settings)
        _STORES.pop(settings.tables_uri, None)
        raise
    return result


_STORES: dict[str, GraphTables] = {}  # tables uri -> the store this process writes
# what the leader sends while this process is busy with a run: (changes, offsets) for light
# commits made between the run's phases (None outside the job's child, e.g. in tests)
_INBOX: Any = None
INBOX_POLL_S = 0.05


def child_init(inbox: Any) -> None:
    """The pool's initializer: die with the job process, and keep the leader's inbox."""
    global _INBOX
    die_with_parent()
    _INBOX = inbox


def _fold(state: JobState, changes: Sequence[bytes], offsets: dict[int, int]) -> None:
    for raw in changes:
        try:
            state.view.apply(decode_graph_change(raw))
        except PayloadError as e:
            log.warning("skipping undecodable graph change: %s", e)
    state.offsets = dict(offsets)


def _fold_inbox(state: JobState) -> int:
    """Fold what the leader sent meanwhile, oldest first; how many batches there were."""
    batches = 0
    while _INBOX is not None:
        try:
            changes, offsets = _INBOX.get_nowait()
        except queue.Empty:
            return batches
        _fold(state, changes, offsets)
        batches += 1
    return batches


# the graph tables holding human-readable ids, by the ``HumanIds`` kind that numbers them
_ID_TABLES = (
    ("entity", "entities"),
    ("relationship", "relationships"),
    ("text_unit", "text_units"),
    ("document", "documents"),
    ("claim", "claims"),
    ("community", "communities"),
)


def adopt_committed_ids(store: GraphTables, state: JobState) -> bool:
    """Keep the human-readable ids of versions the state does not know of; whether any.

    Light commits are not checkpointed (the next run is), and a crash can also fall between
    a run's commit and its checkpoint: a restarted job then holds counters behind the ids
    the tables already gave. Left so, it gave those numbers again to other rows, and until
    its replay had rewritten every row of the lost versions two rows shared an id (a query
    service resolving a context's relationship ids failed on them). So before it numbers
    anything, the job adopts the ids of rows the tables hold and it has not numbered, and
    moves each counter past every id the tables ever held. Community ids are matched by
    members each run, so only their counter moves."""
    latest = store.latest_listed()
    known = state.tables_known
    if latest is None or (known is not None and known.version == latest):
        return False
    ids = before = state.human_ids
    for kind, table in _ID_TABLES:
        top, given = store.human_ids(table, latest)
        ids = ids.adopt(kind, {} if kind == "community" else given, top)
    state.human_ids = ids
    if ids is not before:
        log.info("kept the ids of graph versions committed after the checkpoint (up to %d)", latest)
    return ids is not before


def writer_store(settings: Settings) -> GraphTables:
    """The graph tables this process writes, opened once: it keeps the Delta tables it has
    read and counts its commits towards the next maintenance across runs."""
    store = _STORES.get(settings.tables_uri)
    if store is None:
        store = _STORES[settings.tables_uri] = open_graph_store(settings, convert=True)
    return store


def absorb(settings_json: str, changes: Sequence[bytes], offsets: dict[int, int]) -> dict[str, Any]:
    """Fold ``changes`` and make a light commit of the rows they wrote (no re-clustering, no
    reports): what makes new articles searchable between runs. The checkpoint is left to the
    next run (writing it costs what the whole state weighs); after a crash the parent re-feeds
    from the checkpoint's offsets, folding is idempotent, and rows already committed compare
    equal and are not written again."""
    settings = Settings.model_validate_json(settings_json)
    state = load_state(settings)
    try:
        started = time.monotonic()
        _fold_inbox(state)
        _fold(state, changes, offsets)
        version = light_commit(
            writer_store(settings),
            state,
            "offline" if settings.llm.offline else "llm",
            settings.llm.price(),
        )
    except BaseException:
        forget_state(settings)
        _STORES.pop(settings.tables_uri, None)
        raise
    return {"version": version, "seconds": round(time.monotonic() - started, 3)}


def ingest_cost(view: GraphView, price: ModelPrice | None) -> dict[str, Any]:
    """A version's ``ingest_tokens`` and ``ingest_cost_usd``: what extracting its documents
    spent (the sums of their rows, which the version holds), at ``price``.

    Why here, with the documents: the tables are written by the one community job and read
    by every process, outlive restarts of the workers and count each text unit once however
    many workers extracted, and however often a chunk was redelivered (``GraphView._spent``);
    a worker's own Prometheus counters say what that process spent since it started."""
    prompt, completion = view.ingest_tokens()
    return {
        "ingest_tokens": {"prompt": prompt, "completion": completion},
        "ingest_cost_usd": cost_usd(price, prompt, completion),
    }


def light_commit(
    store: GraphTables, state: JobState, mode: str, price: ModelPrice | None = None
) -> int | None:
    """Commit the rows upserted since the last commit as a ``rows`` version; its number, or
    None when no row differs from what the tables hold. Rows deleted meanwhile stay until the
    run, so every id a kept community or row names still resolves. ``price``: the chat
    model's, for the version's ingest cost."""
    view = state.view
    keys = view.take_fresh()
    if not keys:
        return None
    adopt_committed_ids(store, state)
    infos = store.version_infos_all()
    state.human_ids = fresh_ids(view, state.human_ids, keys)
    rows = row_tables(view, state, keys)
    # before the first run there are no communities or reports yet: the version says so
    base = infos[-1].meta if infos else SnapshotMeta(0, "", "", mode=mode)
    reports_version, reports_at = base.reports_from if infos else (0, "")
    newest = max(
        [
            base.newest_document_time,
            *(view.text_units[u].published_at for u in keys.text_units if u in view.text_units),
        ]
    )
    meta = replace(
        base,
        version=max(state.version, infos[-1].version if infos else 0) + 1,
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        newest_document_time=newest,
        consumed_offsets={str(k): v for k, v in sorted(state.offsets.items())},
        reports_regenerated=0,
        kind="rows",
        reports_version=reports_version,
        reports_at=reports_at,
        **ingest_cost(view, price),
    )
    known = store.write_rows(meta, rows, state.tables_known)
    if known is None:
        return None
    state.tables_known = known
    return meta.version


class Runner:
    """One run's I/O around the pure steps of ``graph.community_run``."""

    def __init__(
        self, settings: Settings, state: JobState, *, llm: Any = None, write_vectors: bool = True
    ) -> None:
        """``llm`` overrides the client built from settings (tests); ``write_vectors=False``
        keeps report vectors out of Weaviate (pure runs in unit tests and benchmarks)."""
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
        )
        self.timings: dict[str, float] = {}
        encoding = get_encoding(settings.chunking.encoding).name
        self.count_tokens = partial(count_tokens, encoding)
        self.writers: Writers = build_writers(settings, llm, self.count_tokens, self._hrid)
        self.now = time.time()  # one clock reading per run for backoffs and summary ages
        self.failed: list[str] = []  # items that failed in this run
        self.summaries_written = 0
        self.planned = 0  # communities whose report decision this run revisited
        self.light_commits: list[int] = []  # versions committed between this run's phases
        # while False the run holds copies a light commit would invalidate (see absorb_now)
        self._absorbing = True

    def _hrid(self, c: Community) -> str:
        return str(self.state.human_ids.get("community", c.id) or c.id)

    def _tick(self, phase: str, started: float) -> float:
        now = time.monotonic()
        self.timings[phase] = round(now - started, 3)
        return now

    async def run(self) -> dict[str, Any]:
        absorber = asyncio.create_task(self._absorb_meanwhile()) if _INBOX is not None else None
        try:
            with _state_frozen():
                return await self._run()
        finally:
            if absorber is not None:
                absorber.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await absorber
            await self.writers.aclose()

    def absorb_now(self) -> None:
        """Fold what the leader sent while this run works and make it a light commit, so new
        articles stay searchable however long the run takes. Called only where the run holds
        no copy of what a light commit changes (the view's rows, ``human_ids``, the tables'
        digests), and from ``_absorb_meanwhile`` while the run awaits."""
        if _fold_inbox(self.state):
            version = light_commit(
                self._store(), self.state, self.writers.mode, self.settings.llm.price()
            )
            if version is not None:
                self.light_commits.append(version)

    async def _absorb_meanwhile(self) -> None:
        while True:
            await asyncio.sleep(INBOX_POLL_S)
            if self._absorbing:
                self.absorb_now()

    async def _run(self) -> dict[str, Any]:
        state, view = self.state, self.state.view
        touched = view.take_touched()  # what changed since the last run (None: everything)
        t = time.monotonic()
        summary_plan = summaries_needed(
            view,
            state,
            self.writers.summary_policy,
            self.now,
            touched=None if touched is None else touched.slots,
        )
        await self._summaries(summary_plan.requests)
        t = self._tick("summaries", t)
        self.absorb_now()
        self._absorbing = False  # ids and the clustering are computed from the view now
        adopt_committed_ids(self._store(), state)
        # rows without a human id are among those written since the last commit (each
        # commit numbers what it takes): those alone, unless what changed is not known
        state.human_ids = (
            assign_record_ids(view, state.human_ids)
            if touched is None
            else fresh_ids(view, state.human_ids, view.fresh)
        )
        t = self._tick("record_ids", t)
        # which keys name one thing: before clustering, which glues aliases to their names
        since = _with_absorbed(touched, view.touched_so_far())
        resolution, alias_state, decided = Resolution(), None, 0
        if self.settings.community.resolve_aliases:
            resolution, alias_state, decided = resolve_view(
                view,
                state.resolution,
                state.aliases,
                None if since is None else since.entities,
                () if since is None else {s[2:] for s in since.slots if s.startswith("r:")},
                full_every=self.settings.community.aliases_full_every,
            )
        state.aliases = alias_state
        in_force = state.names_resolved()
        state.resolution = resolution
        await self._confirm_aliases(resolution)
        aliased = alias_changes(in_force, state.names_resolved() or Resolution())
        t = self._tick("aliases", t)
        hierarchy, stable, drift = cluster(
            view, state, self.params, _with_absorbed(touched, view.touched_so_far())
        )
        communities, human_ids = stable.communities, stable.human_ids
        t = self._tick("leiden_and_ids", t)
        events = lineage(state.communities, communities, stable.delta)
        scope = planning_scope(
            communities, None if touched is None else touched.entities, state, stable.delta
        )
        index = evidence_index(view, state, touched)
        evidence = {c.id: index.evidence_of(c.id, c.entity_keys) for c in scope}
        index.end_update({c.id for c in communities})
        sizes = {c.id: len(c.entity_keys) for c in scope}  # a rewritten child is planned
        plan = plan_reports(scope, evidence, state, self.params, sizes)
        self.planned = len(scope)
        t = self._tick("evidence", t)
        state.hierarchy, state.human_ids = hierarchy, human_ids
        self._absorbing = True
        version = self._next_version()
        regenerated = await self._reports(communities, plan.to_regenerate, evidence, version)
        t = self._tick("reports", t)
        self.absorb_now()
        self._absorbing = False  # until the version is written
        version = self._restamp(version, regenerated)
        by_id = {c.id: c for c in communities}
        for cid in [c for c in state.reports if c not in by_id]:
            del state.reports[cid]
            state.bases.pop(cid, None)
        for item in [i for i in state.failures if i.startswith("report:") and i[7:] not in by_id]:
            del state.failures[item]
        before = {d.community_id: d.unreflected_before for d in plan.decisions}
        for cid, share in plan.unreflected_after.items():
            if cid in state.reports and cid not in regenerated:
                kept = before[cid] if cid in plan.to_regenerate else share
                state.reports[cid] = _with_unreflected(state.reports[cid], kept)
        previous = {c.id: c for c in state.communities}
        state.communities = communities
        state.labelled = stable.labelled
        self._record_history(communities, version)
        unreflected = {cid: state.reports[cid].unreflected for cid in by_id if cid in state.reports}
        meta = self._meta(version, communities, regenerated, unreflected, hierarchy)
        summarised = {r.slot for r in summary_plan.requests}
        rows, reports = self._commit(touched, summarised, communities, meta)
        t = self._tick("snapshot", t)
        headlines = self._headlines(rows, version)
        t = self._tick("headlines", t)
        self._absorbing = True
        await self._report_vectors(reports, previous, by_id, regenerated)
        self._tick("report_vectors", t)
        state.version = version
        newest = newest_time(view)  # once per run: a scan of every text unit
        return {
            "version": version,
            "events": [
                *self._events(events, regenerated, plan, by_id, previous, version, newest),
                *self._alias_events(aliased, version, newest),
            ],
            "headlines": headlines,
            "aliases": {
                "merged": len(resolution.merges),
                "per_unit": len(resolution.unit_aliases),
                "changed": len(aliased),
                "keys_decided": decided,
            },
            "timings": self.timings,
            "regenerated": len(regenerated),
            "communities": len(communities),
            "planned": self.planned,
            "drift": None if drift is None else asdict(drift),
            "modularity": hierarchy.modularity,
            "summaries_written": self.summaries_written,
            "light_commits": list(self.light_commits),
            "summaries_deferred": summary_plan.deferred,
            "llm_calls": dict(self.writers.calls),
            "llm_tokens": dict(self.writers.tokens),
            "cost_usd": cost_usd(
                self.settings.llm.price(),
                self.writers.tokens.get("prompt", 0),
                self.writers.tokens.get("completion", 0),
            ),
            "failed_this_run": list(self.failed),
            "failures": {
                item: {
                    "reason": f.reason,
                    "attempts": f.attempts,
                    "first_failed_at": f.first_failed_at,
                    "next_retry_at": f.next_retry_at,
                }
                for item, f in sorted(state.failures.items(), key=lambda x: x[1].first_failed_at)
            },
            "next_due_at": self._next_due(summary_plan.next_due_at),
        }

    def _next_due(self, summaries_due: float | None) -> float | None:
        """When a run is worth making even if no change arrives: a refused item's retry, or a
        deferred summary reaching its maximum age."""
        times = [f.next_retry_at for f in self.state.failures.values()]
        if summaries_due is not None:
            times.append(summaries_due)
        return min(times) if times else None

    def _failed(self, item: str, reason: str) -> None:
        cfg = self.settings.community
        failure = record_failure(
            self.state, item, reason, self.now, base_s=cfg.retry_base_s, max_s=cfg.retry_max_s
        )
        self.failed.append(item)
        log.warning(
            "%s not written (attempt %d, next try in %.0fs): %s",
            item,
            failure.attempts,
            failure.next_retry_at - self.now,
            reason,
        )

    # ---- summaries --------------------------------------------------------------------

    async def _summaries(self, requests: Sequence[SummaryRequest]) -> None:
        outcomes = await asyncio.gather(*(self.writers.summary(r) for r in requests))
        for req, outcome in zip(requests, outcomes, strict=True):
            if isinstance(outcome, Refused):
                self._failed(f"summary:{req.slot}", outcome.reason)
                continue  # the previous summary (or the first description) stays
            if outcome.by == "llm":
                self.summaries_written += 1
            self.state.failures.pop(f"summary:{req.slot}", None)
            self.state.summaries[req.slot] = SummaryRecord(
                req.fingerprint, outcome.value, frozenset(req.descriptions), self.now, outcome.by
            )

    # ---- reports ----------------------------------------------------------------------

    async def _reports(
        self,
        communities: tuple[Community, ...],
        to_regenerate: Sequence[str],
        evidence: Mapping[str, LiveEvidence],
        version: int,
    ) -> set[str]:
        """Regenerate the stale reports, deepest level first, so parents see new children."""
        by_id = {c.id: c for c in communities}
        wanted = {
            cid for cid in to_regenerate if not retry_blocked(self.state, f"report:{cid}", self.now)
        }
        keys = {k for cid in wanted for k in by_id[cid].entity_keys}
        costs = self.state.row_costs
        if len(costs) > 4 * (len(self.state.view.entities) + len(self.state.view.relationships)):
            costs.clear()  # rows of entities and relationships long gone: start afresh
        builder = ReportContextBuilder(
            report_graph(self.state.view, self.state, keys), self.count_tokens, costs
        )
        period = newest_time(self.state.view)[:10]
        done: set[str] = set()
        for level in sorted({c.level for c in communities}, reverse=True):
            batch = [c for c in communities if c.level == level and c.id in wanted]
            contexts = [self._context(builder, c, by_id) for c in batch]
            written = await self.writers.reports(list(zip(batch, contexts, strict=True)))
            for c, ctx, outcome in zip(batch, contexts, written, strict=True):
                if isinstance(outcome, Refused):  # keep what there is, else an offline stand-in
                    self._failed(f"report:{c.id}", outcome.reason)
                    if c.id not in self.state.reports:
                        self.state.reports[c.id] = report_record(
                            c,
                            write_offline_report(c, ctx).as_dict(),
                            ids=self.state.human_ids,
                            period=period,
                            mode="offline",
                            version=version,
                        )
                    continue
                self.state.failures.pop(f"report:{c.id}", None)
                self.state.reports[c.id] = report_record(
                    c,
                    outcome.value,
                    ids=self.state.human_ids,
                    period=period,
                    mode=outcome.by,
                    version=version,
                )
                self.state.bases[c.id] = ReportBasis(  # a copy: the live set moves on
                    c.entity_keys, frozenset(evidence.get(c.id, ())), ctx.used_child_reports
                )
                done.add(c.id)
        return done

    def _context(
        self, builder: ReportContextBuilder, c: Community, by_id: dict[str, Community]
    ) -> ReportContext:
        subs = {ch: by_id[ch] for ch in c.children if ch in by_id}
        children = {
            ch: ChildReport(ch, r.human_readable_id, r.title, r.full_content)
            for ch in subs
            if (r := self.state.reports.get(ch)) is not None
        }
        return builder.build(
            c,
            max_tokens=self.params.report_max_tokens,
            sub_communities=subs,
            child_reports=children,
        )

    # ---- snapshot, vectors, events ----------------------------------------------------

    def _store(self) -> GraphTables:
        if self._tables is None:
            self._tables = writer_store(self.settings)
        return self._tables

    def _restamp(self, version: int, regenerated: set[str]) -> int:
        """The run's version once its reports are written: light commits made meanwhile took
        the numbers after the one the reports were stamped with, so they move up with it."""
        final = self._next_version()
        if final != version:
            for cid, report in list(self.state.reports.items()):
                if report.generated_in == version:
                    self.state.reports[cid] = replace(report, generated_in=final)
        return final

    def _next_version(self) -> int:
        return max(self.state.version, self._store().latest_listed() or 0) + 1

    def _commit(
        self,
        touched: Touched | None,
        summarised: set[str],
        communities: tuple[Community, ...],
        meta: SnapshotMeta,
    ) -> tuple[tuple[SnapshotCommunity, ...], tuple[SnapshotReport, ...]]:
        """Commit the run's version; returns its communities and reports. Every community and
        report row is compared with what the tables hold; of the other tables only the rows
        that changes or this run's summaries reached since the last commit, and the deletions
        since the last run (light commits wrote the rest). When any of that is not known (a
        checkpoint from an earlier release, a crash after a commit), the whole graph is
        compared."""
        state, view, store = self.state, self.state.view, self._store()
        fresh, removed, known = view.take_fresh(), view.take_removed(), state.tables_known
        if (
            touched is None
            or removed is None
            or known is None
            or known.version != store.latest_listed()
        ):
            snapshot = assemble(view, state, communities, meta)
            state.tables_known = store.write(snapshot, known)
            return snapshot.communities, snapshot.community_reports
        for slot in touched.slots | summarised:
            kind, _, key = slot.partition(":")
            (fresh.entities if kind == "e" else fresh.relationships).add(key)
        started = time.monotonic()
        rows: dict[str, tuple[Any, ...]] = dict(row_tables(view, state, fresh))
        rows["communities"], rows["community_reports"] = community_tables(
            view, state, communities, derived=False
        )
        rows["aliases"] = alias_rows(view, state.names_resolved())
        self.timings["snapshot_assemble"] = round(time.monotonic() - started, 3)
        store.last_maintain_s = 0.0
        written = store.write_rows(
            meta,
            rows,
            known,
            deletes={
                "entities": removed.entities,
                "relationships": removed.relationships,
                "text_units": removed.text_units,
                "claims": removed.claims,
                "documents": removed.documents,
            },
            complete=("communities", "community_reports", "aliases"),
            always=True,
        )
        assert written is not None  # always=True commits
        self.timings["snapshot_maintain"] = store.last_maintain_s
        state.tables_known = written
        return rows["communities"], rows["community_reports"]

    def _meta(
        self,
        version: int,
        communities: tuple[Community, ...],
        regenerated: set[str],
        unreflected: dict[str, float],
        hierarchy: Any,
    ) -> SnapshotMeta:
        values = [v for k, v in unreflected.items() if k not in regenerated] or [0.0]
        view = self.state.view
        return SnapshotMeta(
            version=version,
            created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            newest_document_time=newest_time(view),
            counts={
                "entities": len(view.entities),
                "relationships": len(view.relationships),
                "communities": len(communities),
                "text_units": len(view.text_units),
                "documents": len(view.documents),
                "levels": len(hierarchy.levels),
            },
            consumed_offsets={str(k): v for k, v in sorted(self.state.offsets.items())},
            mode=self.writers.mode,
            reports_regenerated=len(regenerated),
            unreflected_max=max(values),
            unreflected_mean=sum(values) / len(values),
            kind="run",
            **ingest_cost(view, self.settings.llm.price()),
        )

    def _record_history(self, communities: tuple[Community, ...], version: int) -> None:
        hist = self.state.size_history
        live = {c.id for c in communities}
        for c in communities:  # a point when the size changed: a step function of versions
            points = hist.get(c.id, ())
            if not points or points[-1][1] != len(c.entity_keys):
                hist[c.id] = (*points, (version, len(c.entity_keys)))[-HISTORY_CAP:]
        for cid in [k for k in hist if k not in live]:
            del hist[cid]

    async def _report_vectors(
        self,
        reports: Sequence[SnapshotReport],
        previous: dict[str, Community],
        current: dict[str, Community],
        regenerated: set[str],
    ) -> None:
        """Embed regenerated reports; delete the vectors of dissolved communities' reports."""
        fresh = [r for r in reports if r.id in regenerated]
        gone = [cid for cid in previous if cid not in current]
        if not self.write_vectors or (not fresh and not gone):
            return
        from core.clients import build_embedder  # the clients' imports take a second
        from core.vector_store import VectorStoreError, WeaviateStore

        embedder = build_embedder(self.settings)
        vectors = await embedder.embed([f"{r.title}\n{r.summary}" for r in fresh])
        try:
            async with WeaviateStore(self.settings) as store:
                await store.upsert(
                    "report",
                    [
                        (r.id, v, {"level": r.level, "title": r.title, "summary": r.summary})
                        for r, v in zip(fresh, vectors, strict=True)
                    ],
                )
                await store.delete("report", gone)
        except VectorStoreError as e:
            # Reports stay in the snapshot; their vectors are rewritten with the next change.
            log.warning("report vectors not written this run: %s", e)

    def _events(
        self,
        events: list[LineageEvent],
        regenerated: set[str],
        plan: Any,
        by_id: dict[str, Community],
        previous: dict[str, Community],
        version: int,
        newest: str,
    ) -> list[dict[str, Any]]:
        out = []
        # once per run, not per event: a scan of the whole graph
        current = {c.id: c for c in self.state.communities}
        for e in events:
            if e.kind == "unchanged":
                continue
            out.append(
                self._event_dict(
                    current,
                    newest,
                    e.kind,
                    e.community_id,
                    e.level,
                    e.size,
                    e.previous_size,
                    version,
                    predecessors=e.predecessors,
                    successors=e.successors,
                )
            )
        reasons = {d.community_id: d.reason for d in plan.decisions}
        for cid in sorted(regenerated):
            if cid in previous and reasons.get(cid) != "no_report":
                c = by_id[cid]
                out.append(
                    self._event_dict(
                        current,
                        newest,
                        "report_updated",
                        cid,
                        c.level,
                        len(c.entity_keys),
                        len(previous[cid].entity_keys),
                        version,
                        reason=reasons.get(cid),
                    )
                )
        return out

    def _headlines(self, rows: Sequence[SnapshotCommunity], version: int) -> list[dict[str, Any]]:
        """The run's headline digest: of the ``community.headlines_per_run`` best storylines
        that emerged or surged in the last ``headline_window_days`` of document time
        (``graph.storylines``), those not headlined before, each with why; one headlined
        before is left out until its documents in the window grow by ``headline_regrowth``
        since. Only the communities the window's documents mention are scored."""
        cfg, state = self.settings.community, self.state
        newest = newest_time(state.view)
        live = {c.id for c in rows}
        state.headlined = {k: v for k, v in state.headlined.items() if k in live}
        if cfg.headlines_per_run == 0 or not rows or not newest:
            return []
        try:
            end = date.fromisoformat(newest[:10])
        except ValueError:
            return []
        since = window_back(end, cfg.headline_window_days)
        llm = self.writers.mode == "llm"
        llm_titles = {
            r.community: r.title for r in state.reports.values() if llm or r.mode == "llm"
        }
        member_of: dict[str, list[int]] = {}
        for c in rows:
            for k in c.entity_ids:
                member_of.setdefault(k, []).append(c.community)
        first, last = since.isoformat(), end.isoformat()
        units = state.view.text_units
        documents = window_documents(
            (
                (
                    u.document_id,
                    date.fromisoformat(u.published_at[:10]),
                    state.view.unit_entities.get(u.id, ()),
                )
                for u in units.values()
                if first <= u.published_at[:10] <= last
            ),
            member_of,
            since,
            end,
        )
        nodes, baseline = window_nodes(rows, documents, llm_titles)
        ranked = fold(
            nodes,
            since,
            end,
            limit=cfg.headlines_per_run * 5,
            documents=documents,
            baseline=baseline,
            reach=False,  # a headline does not list what its row holds
        )
        front = newsworthy(
            ranked,
            min_documents=cfg.headline_min_documents,
            min_ratio=cfg.headline_min_ratio,
            min_significance=cfg.headline_min_significance,
        )[: cfg.headlines_per_run]
        lookup = ViewStories(state.view)
        out: list[dict[str, Any]] = []
        for rank, row in enumerate(front, 1):
            ids = (row.node.id, *row.folded)
            before = max((state.headlined.get(i, 0) for i in ids), default=0)
            if before and row.documents < before * (1.0 + cfg.headline_regrowth):
                continue
            for i in ids:
                state.headlined.pop(i, None)
            state.headlined[row.node.id] = row.documents
            detail = describe(row, lookup, since, end)
            out.append(
                {
                    "kind": "headline",
                    "rank": rank,  # its place among the run's newsworthy storylines
                    "community_id": row.node.id,
                    "community": row.node.community,
                    "level": row.node.level,
                    "title": detail.title,
                    "size": len(row.node.members),
                    "why": {
                        "since": since.isoformat(),
                        "until": end.isoformat(),
                        "documents": row.documents,
                        "expected_documents": round(row.expected_documents, 2),
                        "ratio": round(row.ratio, 2),
                        "significance": round(row.significance, 1),
                        "mentions": row.recent,
                        "mentions_before": row.earlier,
                        "score": round(row.score, 3),
                        "again": bool(before),
                    },
                    "new_entities": [asdict(m) for m in detail.new_entities],
                    "top_documents": [asdict(d) for d in detail.top_documents],
                    "top_entities": list(detail.top_entities),
                    "folded": list(row.folded),
                    "snapshot_version": version,
                    "newest_document_time": newest,
                }
            )
        return out

    async def _confirm_aliases(self, resolution: Resolution) -> None:
        """In LLM mode, ask the model about decisions resting on weak evidence it has not
        judged yet (at most ``community.confirm_aliases`` a run; the rest wait for the next
        runs). A refused or unreadable answer leaves the decision standing, unjudged."""
        limit = self.settings.community.confirm_aliases
        verdicts = self.state.alias_verdicts
        if self.writers.mode != "llm" or limit <= 0:
            return
        asks = []
        for d in uncertain(resolution):
            unit = d.unit if isinstance(d, UnitAlias) else None
            ident = decision_id(d.alias, d.canonical, unit)
            if ident not in verdicts:
                asks.append((ident, d, unit))
            if len(asks) >= limit:
                break
        view = self.state.view

        def passages(d: Merge | UnitAlias, unit: str | None) -> list[str]:
            if unit is not None:
                units = [unit]
            elif isinstance(d, Merge) and d.units:
                units = list(d.units)
            else:  # no unit names both: one of each
                units = [
                    min(view.entity_units.get(k, ()), default="") for k in (d.alias, d.canonical)
                ]
            return [view.text_units[u].text for u in units if u in view.text_units]

        def name(key: str) -> str:
            return view.entities[key].name if key in view.entities else key

        answers = await asyncio.gather(
            *(
                self.writers.confirm_alias(
                    name(d.alias), name(d.canonical), d.evidence, passages(d, unit)
                )
                for _, d, unit in asks
            )
        )
        for (ident, _, _), same in zip(asks, answers, strict=True):
            if same is not None:
                verdicts[ident] = same
        live = {
            decision_id(d.alias, d.canonical, d.unit if isinstance(d, UnitAlias) else None)
            for d in uncertain(resolution)
        }
        for ident in [k for k in verdicts if k not in live]:
            del verdicts[ident]  # decided otherwise now: a verdict on it is moot

    def _alias_events(
        self, changes: Sequence[AliasChange], version: int, newest: str
    ) -> list[dict[str, Any]]:
        """An audit event per merge made or undone, with its evidence, on the lineage stream;
        ``community_id`` is the level-0 community of the name it resolves to."""
        if not changes:
            return []
        view = self.state.view
        wanted = {a.canonical for a in changes}
        home = {
            k: c.id
            for c in self.state.communities
            if c.level == 0
            for k in wanted.intersection(c.entity_keys)
        }

        def name(key: str) -> str:
            return view.entities[key].name if key in view.entities else key

        return [
            {
                "kind": a.kind,
                "community_id": home.get(a.canonical),
                "level": 0,
                "title": f"{name(a.alias)} = {name(a.canonical)}",
                "alias": a.alias,
                "canonical": a.canonical,
                "rule": a.rule,
                "evidence": a.evidence,
                "text_unit_id": a.unit,
                "snapshot_version": version,
                "newest_document_time": newest,
            }
            for a in changes
        ]

    def _event_dict(
        self,
        current: Mapping[str, Community],
        newest: str,
        kind: str,
        cid: str | None,
        level: int,
        size: int,
        previous_size: int,
        version: int,
        **extra: Any,
    ) -> dict[str, Any]:
        report = self.state.reports.get(cid or "")
        community = current.get(cid or "")
        view = self.state.view
        top = []
        if community is not None:
            ranked = sorted(
                community.entity_keys,
                key=lambda k: -(view.entities[k].mention_count if k in view.entities else 0),
            )
            top = [view.entities[k].name for k in ranked[:5] if k in view.entities]
        return {
            "kind": kind,
            "community_id": cid,
            "level": level,
            "title": report.title if report else "",
            "size": size,
            "previous_size": previous_size,
            "growth": size - previous_size,
            "top_entities": top,
            "snapshot_version": version,
            "newest_document_time": newest,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in extra.items()},
        }


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
