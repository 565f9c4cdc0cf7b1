"""Who writes description summaries and community reports: the LLM, or the offline writers.

The choice is made once per run (:func:`build_writers`), so the runner never asks which mode
it is in. Both kinds answer with :class:`Written` or :class:`Refused`; a writer never raises
for one item the endpoint will not write (a 4xx such as a content filter or an over-long
context, rate limits that outlast the client's retries, output that does not parse twice), so
one refusal costs that item and the runner can keep its previous text.

What the LLM writer saves, and why:
- A description set short enough to read as it is (``community.summary_join_max_tokens``) is
  shown joined, without a call: a summary would not be shorter.
- Reports of small communities share a call (``community.report_batch_size``): the
  instructions and worked example a report prompt repeats outweigh a small context. A
  community whose report is missing or unusable in the shared answer, or every one when the
  shared call is refused, gets a call of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from core.errors import LLMError
from core.settings import Settings
from graph.job.run import report_groups
from graph.job.summaries import SummaryPolicy, SummaryRequest, join_descriptions
from graph.model import Community
from graph.protocols import LLM
from graph.reports.context import ReportContext
from offline.report import write_offline_report
from offline.summary import summarize_descriptions
from prompts import (
    AliasVerdict,
    BatchedReport,
    CommunityReportResponse,
    PromptLibrary,
    render_community_report,
    render_community_reports,
    render_confirm_alias,
    render_summarize_descriptions,
)

log = logging.getLogger(__name__)
# characters of each passage an alias confirmation shows (a chunk is ~1,200 tokens)
PASSAGE_CHARS = 1500


@dataclass(frozen=True, slots=True)
class Written:
    """A summary's text, or a report's JSON (title, summary, rating, findings…)."""

    value: Any  # str for a summary, dict for a report
    by: str  # "llm", or a free writer: "joined", "offline"


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str


Outcome = Written | Refused
ReportJob = tuple[Community, ReportContext]


def _single(req: SummaryRequest) -> Written | None:
    """A set of fewer than two descriptions needs no writer."""
    if len(req.descriptions) < 2:
        return Written(req.descriptions[0] if req.descriptions else "", "joined")
    return None


@dataclass
class OfflineWriters:
    """Extractive summaries and reports: free, so every change is summarised at once."""

    mode: str = "offline"
    summary_policy: SummaryPolicy | None = None
    calls: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)

    async def summary(self, req: SummaryRequest) -> Outcome:
        names = req.names[0] if len(req.names) == 1 else req.names
        return _single(req) or Written(summarize_descriptions(names, req.descriptions), "offline")

    async def reports(self, jobs: Sequence[ReportJob]) -> list[Outcome]:
        return [Written(write_offline_report(c, x).as_dict(), "offline") for c, x in jobs]

    async def confirm_alias(
        self, alias: str, canonical: str, evidence: str, passages: Sequence[str]
    ) -> bool | None:
        return None  # no model to ask: the rules' decision stands

    async def aclose(self) -> None:
        return None


class LLMWriters:
    """Summaries and reports by the chat model; ``calls`` counts the requests that reached it
    (cache hits excluded), by purpose, and ``tokens`` their prompt and completion tokens."""

    mode = "llm"

    def __init__(
        self,
        settings: Settings,
        llm: LLM,
        count_tokens: Callable[[str], int],
        *,
        owns_llm: bool,
        hrid: Callable[[Community], str],
    ) -> None:
        self.cfg = settings.community
        self.llm: Any = llm
        self.count_tokens = count_tokens
        self.owns_llm = owns_llm
        self.hrid = hrid  # the id a report prompt shows for a community
        self.prompts = PromptLibrary(settings.extraction.prompts_dir)
        self.summary_policy: SummaryPolicy | None = SummaryPolicy(
            self.cfg.summary_new_share, self.cfg.summary_max_age_s
        )
        self.calls: dict[str, int] = {}
        self.tokens: dict[str, int] = {}

    async def _chat(self, messages: list[dict[str, str]], purpose: str, **kw: Any) -> Any:
        result = await self.llm.chat(messages, purpose=purpose, **kw)
        if not getattr(result, "cached", False):
            self.calls[purpose] = self.calls.get(purpose, 0) + 1
            for kind in ("prompt", "completion"):
                used = int(getattr(result, f"{kind}_tokens", 0) or 0)
                self.tokens[kind] = self.tokens.get(kind, 0) + used
        return result

    # ---- summaries ----

    async def summary(self, req: SummaryRequest) -> Outcome:
        if (single := _single(req)) is not None:
            return single
        joined = join_descriptions(req.descriptions)
        if self.cfg.summary_join_max_tokens and (
            self.count_tokens(joined) <= self.cfg.summary_join_max_tokens
        ):
            return Written(joined, "joined")
        prompt = render_summarize_descriptions(
            self.prompts, entity_name=" -> ".join(req.names), descriptions=req.descriptions
        )
        messages = [{"role": "user", "content": prompt}]
        try:
            result = await self._chat(messages, "summarize_descriptions")
        except LLMError as e:
            return Refused(e.reason)
        text = result.text.strip()
        if not text:
            await self.llm.forget(messages)
            return Refused("the model answered an empty summary")
        return Written(text, "llm")

    # ---- reports ----

    async def reports(self, jobs: Sequence[ReportJob]) -> list[Outcome]:
        """One level's reports: small communities several to a call, the rest alone."""
        out: list[Outcome] = [Refused("not written")] * len(jobs)
        if self.cfg.report_batch_size <= 1:
            groups = [[i] for i in range(len(jobs))]
        else:
            groups = report_groups(
                [x.token_count for _, x in jobs],
                small=self.cfg.report_batch_context_tokens,
                size=self.cfg.report_batch_size,
                budget=self.cfg.report_max_tokens,
            )

        async def write(group: list[int]) -> None:
            if len(group) > 1:
                shared = await self._shared([jobs[i] for i in group])
                for i, content in zip(group, shared, strict=True):
                    if content is not None:
                        out[i] = Written(content, "llm")
            for i in group:
                if isinstance(out[i], Refused):
                    out[i] = await self._one(*jobs[i])

        await asyncio.gather(*(write(g) for g in groups))
        return out

    async def _one(self, c: Community, ctx: ReportContext) -> Outcome:
        prompt = render_community_report(self.prompts, input_text=ctx.text)
        messages = [{"role": "user", "content": prompt}]
        problem = ""
        for attempt in range(2):
            try:
                result = await self._chat(messages, "community_report", json_mode=True)
            except LLMError as e:
                return Refused(e.reason)
            try:
                parsed = CommunityReportResponse.model_validate_json(result.text)
                return Written(parsed.model_dump(), "llm")
            except ValidationError as e:
                problem = f"answer did not parse as a report: {e.errors()[0]['msg']}"
                log.info("report for %s did not parse (attempt %d): %s", c.id, attempt + 1, e)
                await self.llm.forget(messages, json_mode=True)
        return Refused(f"{problem} (twice)")

    async def _shared(self, jobs: Sequence[ReportJob]) -> list[dict[str, Any] | None]:
        """One call for several small communities; None for each report not usable."""
        ids = [self.hrid(c) for c, _ in jobs]
        prompt = render_community_reports(
            self.prompts, contexts=[(i, x.text) for i, (_, x) in zip(ids, jobs, strict=True)]
        )
        messages = [{"role": "user", "content": prompt}]
        try:
            result = await self._chat(messages, "community_reports", json_mode=True)
        except LLMError as e:
            log.info("shared report call refused (%s); writing them one by one", e.reason)
            return [None] * len(jobs)
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
        if len(found) < len(jobs):
            await self.llm.forget(messages, json_mode=True)
            log.info("shared report call: %d of %d reports usable", len(found), len(jobs))
        return [found.get(i) for i in ids]

    # ---- aliases ----

    async def confirm_alias(
        self, alias: str, canonical: str, evidence: str, passages: Sequence[str]
    ) -> bool | None:
        """Whether the model reads two names the alias rules matched as one entity; None when
        it refused or its answer did not parse (the decision stays unjudged)."""
        prompt = render_confirm_alias(
            self.prompts,
            alias=alias,
            canonical=canonical,
            evidence=evidence,
            passages=[p[:PASSAGE_CHARS] for p in passages[:3]],
        )
        messages = [{"role": "user", "content": prompt}]
        try:
            result = await self._chat(messages, "confirm_alias", json_mode=True)
        except LLMError as e:
            log.info("alias %r = %r not confirmed: %s", alias, canonical, e.reason)
            return None
        try:
            return AliasVerdict.model_validate_json(result.text).same
        except ValidationError:
            await self.llm.forget(messages, json_mode=True)
            log.info("alias %r = %r: the answer did not parse", alias, canonical)
            return None

    async def aclose(self) -> None:
        if self.owns_llm:
            await self.llm.aclose()


Writers = OfflineWriters | LLMWriters


def build_writers(
    settings: Settings,
    llm: LLM | None,
    count_tokens: Callable[[str], int],
    hrid: Callable[[Community], str],
) -> Writers:
    """The LLM writers when a model is given or configured (a configured one is closed with
    the writers), else the offline ones."""
    if llm is not None:
        return LLMWriters(settings, llm, count_tokens, owns_llm=False, hrid=hrid)
    if settings.llm.offline:
        return OfflineWriters()
    from core.clients import build_llm

    built = build_llm(settings)
    assert built is not None  # not offline
    return LLMWriters(settings, built, count_tokens, owns_llm=True, hrid=hrid)
