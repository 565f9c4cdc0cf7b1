"""The community job's child process: state, runs, snapshots, checkpoints.

Runs in a long-lived ``spawn`` child so Leiden and context building never block the job's
event loop. The state lives in this process between runs (``_STATE``) and in a checkpoint
file written atomically after every run, so a restarted job resumes from the last run's
offsets with the same hierarchy, ids and report bases: it re-clusters and re-decides, and
regenerates nothing that did not change. A run that raises leaves no half-applied state
behind: this process forgets it and the next run starts from the checkpoint, which the
parent re-feeds from the checkpoint's offsets.

One refused LLM call costs one item, never the run: a report or summary the endpoint will not
write (a 4xx such as a content filter or an over-long context, rate limits that outlast the
retries, output that does not parse twice) is recorded in ``JobState.failures`` with its
reason; the previous text stays (a community that never had a report gets an offline one,
marked ``mode: offline``), and a later run tries again once its backoff has passed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.settings import Settings
from graph.community_run import (
    HISTORY_CAP,
    JobState,
    RunParams,
    SummaryPolicy,
    SummaryRecord,
    SummaryRequest,
    assemble,
    assign_record_ids,
    cluster,
    evidence_graph,
    join_descriptions,
    lineage,
    newest_time,
    plan_reports,
    record_failure,
    report_graph,
    report_groups,
    report_record,
    retry_blocked,
    summaries_needed,
    upgrade_state,
)
from graph.evidence import ReportBasis
from graph.lineage import LineageEvent
from graph.model import Community
from graph.offline_report import write_offline_report
from graph.offline_summary import summarize_descriptions
from graph.report_context import ChildReport, ReportContext, ReportContextBuilder
from graph.snapshot_model import SnapshotMeta, SnapshotReport
from streams.codecs import PayloadError, decode_graph_change

log = logging.getLogger(__name__)

_STATE: dict[str, JobState] = {}
CHECKPOINT = "checkpoint.pickle"


def _job_dir(settings: Settings) -> Path:
    return settings.data_dir / settings.namespace / "community-job"


def load_state(settings: Settings) -> JobState:
    """This process's state, else the checkpoint on disk, else an empty state."""
    if settings.namespace in _STATE:
        return _STATE[settings.namespace]
    path = _job_dir(settings) / CHECKPOINT
    state = JobState()
    if path.exists():
        with open(path, "rb") as fh:
            state = upgrade_state(pickle.load(fh))  # our own file, written by save_state below
    _STATE[settings.namespace] = state
    return state


def save_state(settings: Settings, state: JobState) -> None:
    directory = _job_dir(settings)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{CHECKPOINT}.{os.getpid()}"
    with open(tmp, "wb") as fh:
        pickle.dump(state, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(directory / CHECKPOINT)


def checkpoint_offsets(settings_json: str) -> dict[int, int]:
    settings = Settings.model_validate_json(settings_json)
    return dict(load_state(settings).offsets)


def run(settings_json: str, changes: Sequence[bytes], offsets: dict[int, int]) -> dict[str, Any]:
    """Fold ``changes``, run once, write the snapshot and the checkpoint; return events."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = Settings.model_validate_json(settings_json)
    state = load_state(settings)
    try:
        for raw in changes:
            try:
                state.view.apply(decode_graph_change(raw))
            except PayloadError as e:
                log.warning("skipping undecodable graph change: %s", e)
        state.offsets = dict(offsets)
        result = asyncio.run(Runner(settings, state).run())
        save_state(settings, state)
    except BaseException:
        _STATE.pop(settings.namespace, None)  # half-applied: the next run reloads the checkpoint
        raise
    return result


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
        cfg = settings.community
        self.params = RunParams(
            cfg.max_cluster_size,
            cfg.seed,
            cfg.jaccard_threshold,
            cfg.materiality_threshold,
            cfg.report_max_tokens,
            cfg.membership_tolerance,
        )
        self.timings: dict[str, float] = {}
        self.llm: Any = llm
        self._owns_llm = llm is None and not settings.llm.offline
        if self._owns_llm:
            from core.llm import OpenAILLM

            self.llm = OpenAILLM(settings.llm, settings.llm_cache_dir)
        self.now = time.time()  # one clock reading per run for backoffs and summary ages
        self.llm_calls: dict[str, int] = {}  # calls that reached the endpoint, by purpose
        self.failed: list[str] = []  # items that failed in this run
        self.summaries_written = 0
        self.summary_policy = (
            None
            if self.llm is None
            else SummaryPolicy(cfg.summary_new_share, cfg.summary_max_age_s)
        )

    def _tick(self, phase: str, started: float) -> float:
        now = time.monotonic()
        self.timings[phase] = round(now - started, 3)
        return now

    async def run(self) -> dict[str, Any]:
        try:
            return await self._run()
        finally:
            if self._owns_llm:
                await self.llm.aclose()

    async def _run(self) -> dict[str, Any]:
        state, view = self.state, self.state.view
        t = time.monotonic()
        summary_plan = summaries_needed(view, state, self.summary_policy, self.now)
        await self._summaries(summary_plan.requests)
        t = self._tick("summaries", t)
        state.human_ids = assign_record_ids(view, state.human_ids)
        hierarchy, communities, human_ids = cluster(view, state, self.params)
        t = self._tick("leiden_and_ids", t)
        events = lineage(state.communities, communities)
        graph_ev = evidence_graph(view)
        evidence = {c.id: graph_ev.community_evidence(c.entity_keys) for c in communities}
        plan = plan_reports(communities, evidence, state, self.params)
        t = self._tick("evidence", t)
        state.hierarchy, state.human_ids = hierarchy, human_ids
        version = self._next_version()
        regenerated = await self._reports(communities, plan.to_regenerate, evidence, version)
        t = self._tick("reports", t)
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
        self._record_history(communities, version)
        meta = self._meta(version, communities, regenerated, plan.unreflected_after, hierarchy)
        snapshot = assemble(view, state, communities, meta)
        self._write(snapshot)
        await self._report_vectors(snapshot.community_reports, previous, by_id, regenerated)
        self._tick("snapshot", t)
        state.version = version
        return {
            "version": version,
            "events": self._events(events, regenerated, plan, by_id, previous, version),
            "timings": self.timings,
            "regenerated": len(regenerated),
            "communities": len(communities),
            "modularity": hierarchy.modularity,
            "summaries_written": self.summaries_written,
            "summaries_deferred": summary_plan.deferred,
            "llm_calls": dict(self.llm_calls),
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

    async def _chat(self, messages: list[dict[str, str]], purpose: str, **kw: Any) -> Any:
        result = await self.llm.chat(messages, purpose=purpose, **kw)
        if not getattr(result, "cached", False):
            self.llm_calls[purpose] = self.llm_calls.get(purpose, 0) + 1
        return result

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
        from core.llm import LLMError

        join_max = self.settings.community.summary_join_max_tokens

        async def one(req: SummaryRequest) -> tuple[SummaryRequest, str | None, str]:
            if len(req.descriptions) < 2:
                return req, req.descriptions[0] if req.descriptions else "", "joined"
            if self.llm is None:
                names = req.names[0] if len(req.names) == 1 else req.names
                return req, summarize_descriptions(names, req.descriptions), "offline"
            joined = join_descriptions(req.descriptions)
            if join_max and self._count_tokens(joined) <= join_max:
                return req, joined, "joined"
            from prompts import PromptLibrary, render_summarize_descriptions

            lib = PromptLibrary(self.settings.extraction.prompts_dir)
            prompt = render_summarize_descriptions(
                lib, entity_name=" -> ".join(req.names), descriptions=req.descriptions
            )
            messages = [{"role": "user", "content": prompt}]
            try:
                result = await self._chat(messages, "summarize_descriptions")
            except LLMError as e:
                self._failed(f"summary:{req.slot}", e.reason)
                return req, None, "llm"
            text = result.text.strip()
            if not text:
                await self.llm.forget(messages)
                self._failed(f"summary:{req.slot}", "the model answered an empty summary")
                return req, None, "llm"
            self.summaries_written += 1
            return req, text, "llm"

        for req, text, by in await asyncio.gather(*(one(r) for r in requests)):
            if text is None:
                continue  # the previous summary (or the first description) stays
            self.state.failures.pop(f"summary:{req.slot}", None)
            self.state.summaries[req.slot] = SummaryRecord(
                req.fingerprint, text, frozenset(req.descriptions), self.now, by
            )

    def _count_tokens(self, text: str) -> int:
        from core.tokenizer import get_encoding

        return len(get_encoding(self.settings.chunking.encoding).encode_ordinary(text))

    # ---- reports ----------------------------------------------------------------------

    async def _reports(
        self,
        communities: tuple[Community, ...],
        to_regenerate: Sequence[str],
        evidence: dict[str, Any],
        version: int,
    ) -> set[str]:
        """Regenerate the stale reports, deepest level first, so parents see new children."""
        from core.tokenizer import get_encoding

        enc = get_encoding(self.settings.chunking.encoding)
        builder = ReportContextBuilder(
            report_graph(self.state.view, self.state), lambda s: len(enc.encode_ordinary(s))
        )
        by_id = {c.id: c for c in communities}
        wanted = {
            cid for cid in to_regenerate if not retry_blocked(self.state, f"report:{cid}", self.now)
        }
        period = newest_time(self.state.view)[:10]
        done: set[str] = set()
        for level in sorted({c.level for c in communities}, reverse=True):
            batch = [c for c in communities if c.level == level and c.id in wanted]
            contexts = [self._context(builder, c, by_id) for c in batch]
            written = await self._write_level(batch, contexts)
            for c, ctx, (content, mode) in zip(batch, contexts, written, strict=True):
                if content is None:  # refused: keep what there is, else an offline stand-in
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
                    c, content, ids=self.state.human_ids, period=period, mode=mode, version=version
                )
                self.state.bases[c.id] = ReportBasis(
                    c.entity_keys, evidence.get(c.id, frozenset()), ctx.used_child_reports
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

    async def _write_level(
        self, batch: Sequence[Community], contexts: Sequence[ReportContext]
    ) -> list[tuple[dict[str, Any] | None, str]]:
        """The reports of one level: small communities several to a call, the rest alone."""
        cfg = self.settings.community
        if self.llm is None or cfg.report_batch_size <= 1:
            return list(
                await asyncio.gather(
                    *(self._write_report(c, x) for c, x in zip(batch, contexts, strict=True))
                )
            )
        groups = report_groups(
            [x.token_count for x in contexts],
            small=cfg.report_batch_context_tokens,
            size=cfg.report_batch_size,
            budget=cfg.report_max_tokens,
        )
        out: list[tuple[dict[str, Any] | None, str]] = [(None, "llm")] * len(batch)

        async def write(group: list[int]) -> None:
            if len(group) == 1:
                out[group[0]] = await self._write_report(batch[group[0]], contexts[group[0]])
                return
            written = await self._write_reports(
                [batch[i] for i in group], [contexts[i] for i in group]
            )
            for i, content in zip(group, written, strict=True):
                out[i] = (
                    (content, "llm")
                    if content is not None
                    else await self._write_report(batch[i], contexts[i])
                )

        await asyncio.gather(*(write(g) for g in groups))
        return out

    async def _write_reports(
        self, batch: Sequence[Community], contexts: Sequence[ReportContext]
    ) -> list[dict[str, Any] | None]:
        """One call for several small communities; a community whose report is missing or
        unusable (or every one, when the call is refused) gets ``None`` and a call of its own,
        so one refused community still costs only itself."""
        import orjson
        from pydantic import ValidationError

        from core.llm import LLMError
        from prompts import BatchedReport, PromptLibrary, render_community_reports

        ids = [str(self.state.human_ids.get("community", c.id) or c.id) for c in batch]
        lib = PromptLibrary(self.settings.extraction.prompts_dir)
        prompt = render_community_reports(
            lib, contexts=[(i, x.text) for i, x in zip(ids, contexts, strict=True)]
        )
        messages = [{"role": "user", "content": prompt}]
        try:
            result = await self._chat(messages, "community_reports", json_mode=True)
        except LLMError as e:
            log.info("batched reports refused (%s); writing them one by one", e.reason)
            return [None] * len(batch)
        found: dict[str, dict[str, Any]] = {}
        try:
            items = orjson.loads(result.text).get("reports", [])
        except (orjson.JSONDecodeError, AttributeError):
            items = []
        for item in items if isinstance(items, list) else []:
            try:
                report = BatchedReport.model_validate(item)
            except ValidationError:
                continue
            found.setdefault(report.community, report.model_dump(exclude={"community"}))
        if len(found) < len(batch):
            await self.llm.forget(messages, json_mode=True)
            log.info("batched reports: %d of %d usable", len(found), len(batch))
        return [found.get(i) for i in ids]

    async def _write_report(
        self, c: Community, ctx: ReportContext
    ) -> tuple[dict[str, Any] | None, str]:
        """The report's JSON and the mode that wrote it; ``None`` when the LLM refused it."""
        if self.llm is None:
            return write_offline_report(c, ctx).as_dict(), "offline"
        from pydantic import ValidationError

        from core.llm import LLMError
        from prompts import CommunityReportResponse, PromptLibrary, render_community_report

        lib = PromptLibrary(self.settings.extraction.prompts_dir)
        messages = [{"role": "user", "content": render_community_report(lib, input_text=ctx.text)}]
        problem = ""
        for attempt in range(2):
            try:
                result = await self._chat(messages, "community_report", json_mode=True)
            except LLMError as e:
                self._failed(f"report:{c.id}", e.reason)
                return None, "llm"
            try:
                parsed = CommunityReportResponse.model_validate_json(result.text)
                return parsed.model_dump(), "llm"
            except ValidationError as e:
                problem = f"answer did not parse as a report: {e.errors()[0]['msg']}"
                log.info("report for %s did not parse (attempt %d): %s", c.id, attempt + 1, e)
                await self.llm.forget(messages, json_mode=True)
        self._failed(f"report:{c.id}", f"{problem} (twice)")
        return None, "llm"

    # ---- snapshot, vectors, events ----------------------------------------------------

    def _store(self) -> Any:
        from core.snapshot_store import SnapshotStore

        return SnapshotStore(
            self.settings.snapshots_dir, keep=self.settings.community.keep_snapshots
        )

    def _next_version(self) -> int:
        return max(self.state.version, self._store().latest_version() or 0) + 1

    def _write(self, snapshot: Any) -> None:
        store = self._store()
        store.write(snapshot)
        store.prune()

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
            mode="offline" if self.llm is None else "llm",
            reports_regenerated=len(regenerated),
            unreflected_max=max(values),
            unreflected_mean=sum(values) / len(values),
        )

    def _record_history(self, communities: tuple[Community, ...], version: int) -> None:
        hist = self.state.size_history
        live = {c.id for c in communities}
        for c in communities:
            hist[c.id] = (*hist.get(c.id, ()), (version, len(c.entity_keys)))[-HISTORY_CAP:]
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
        from core.clients import build_embedder
        from core.vector_store import VectorStoreError, WeaviateStore

        fresh = [r for r in reports if r.id in regenerated]
        gone = [cid for cid in previous if cid not in current]
        if not self.write_vectors or (not fresh and not gone):
            return
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
    ) -> list[dict[str, Any]]:
        out = []
        for e in events:
            if e.kind == "unchanged":
                continue
            out.append(
                self._event_dict(
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

    def _event_dict(
        self,
        kind: str,
        cid: str | None,
        level: int,
        size: int,
        previous_size: int,
        version: int,
        **extra: Any,
    ) -> dict[str, Any]:
        report = self.state.reports.get(cid or "")
        community = next((c for c in self.state.communities if c.id == cid), None)
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
            "newest_document_time": newest_time(view),
            **{k: list(v) if isinstance(v, tuple) else v for k, v in extra.items()},
        }


def _with_unreflected(report: SnapshotReport, share: float) -> SnapshotReport:
    from dataclasses import replace

    return replace(report, unreflected=share)
