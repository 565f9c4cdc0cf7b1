"""The run's texts: summaries of description sets and community reports, by the run's writers.

One refused LLM call costs one item, never the run: a report or summary the writers could not
get is recorded in ``JobState.failures`` with its reason and a backoff (``record_failure``);
the previous text stays (a community that never had a report gets an offline one, marked
``mode: offline``), and a later run tries again once its backoff has passed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence

from agents.community.writers import Refused, Writers
from core.settings.community import CommunitySettings
from graph.job.run import report_graph
from graph.job.state import JobState, SummaryRecord, record_failure, retry_blocked
from graph.job.summaries import SummaryRequest
from graph.job.version_tables import newest_time, report_record
from graph.model import Community
from graph.reports.context import ChildReport, ReportContext
from graph.reports.context_builder import ReportContextBuilder
from graph.reports.evidence import LiveEvidence, ReportBasis
from offline.report import write_offline_report

log = logging.getLogger(__name__)


class Texts:
    """One run's summaries and reports, written into ``state``; ``now`` is the run's clock
    reading for backoffs and summary ages. ``failed`` lists the items refused this run."""

    def __init__(
        self,
        writers: Writers,
        state: JobState,
        cfg: CommunitySettings,
        count_tokens: Callable[[str], int],
        now: float,
    ) -> None:
        self.writers = writers
        self.state = state
        self.cfg = cfg
        self.count_tokens = count_tokens
        self.now = now
        self.failed: list[str] = []  # items that failed in this run
        self.summaries_written = 0  # by the model

    async def summaries(self, requests: Sequence[SummaryRequest]) -> None:
        """Write the description sets' summaries; a refused one keeps the previous text."""
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

    async def reports(
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
            max_tokens=self.cfg.report_max_tokens,
            sub_communities=subs,
            child_reports=children,
        )

    def _failed(self, item: str, reason: str) -> None:
        cfg = self.cfg
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
