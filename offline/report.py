"""Extractive community reports for offline mode (no LLM configured).

Same JSON shape as the LLM report (title, summary, rating, rating_explanation, findings with
summary and explanation) plus ``"mode": "offline"``; the title ends in "(offline)" and the
summary starts with "Offline extractive report:", so nobody mistakes it for model prose.

Everything comes from the report context, so a finding can only cite rows the context holds:
the title names the highest-degree entities; the summary adds the most informative distinct
sentences of their descriptions; each finding is an entity (or a sub-community report the
context used) with its description and the relationships around it, citing
``[Data: Entities (ids); Relationships (ids, +more)]`` with at most five ids per dataset. The
rating is a size measure, not a judgement of impact:
``min(10, log2(1 + entities) + log2(1 + total relationship weight) / 2)``, one decimal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from graph.model import Community
from graph.reports.context import (
    ChildReport,
    Hrid,
    ReportContext,
    ReportEntity,
    ReportRelationship,
)
from offline.summary import distinct_sentences, summarize_descriptions, truncate

MODE = "offline"
TITLE_MARK = " (offline)"
SUMMARY_MARK = "Offline extractive report: "
MAX_IDS = 5


@dataclass(frozen=True, slots=True)
class Finding:
    summary: str
    explanation: str


@dataclass(frozen=True, slots=True)
class OfflineReport:
    title: str
    summary: str
    rating: float
    rating_explanation: str
    findings: tuple[Finding, ...]
    mode: str = MODE

    def as_dict(self) -> dict[str, object]:
        """The report as the JSON object an LLM report would be (plus ``mode``)."""
        return {
            "title": self.title,
            "summary": self.summary,
            "rating": self.rating,
            "rating_explanation": self.rating_explanation,
            "findings": [
                {"summary": f.summary, "explanation": f.explanation} for f in self.findings
            ],
            "mode": self.mode,
        }


def format_citation(datasets: Sequence[tuple[str, Sequence[Hrid]]]) -> str:
    """``[Data: Entities (1, 2); Relationships (3, 4, 5, 6, 7, +more)]``; empty datasets
    are left out, and so is the whole citation when nothing is cited."""
    parts = []
    for name, ids in datasets:
        if ids:
            shown = [str(i) for i in ids[:MAX_IDS]] + (["+more"] if len(ids) > MAX_IDS else [])
            parts.append(f"{name} ({', '.join(shown)})")
    return f"[Data: {'; '.join(parts)}]" if parts else ""


def _join_names(names: Sequence[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def _top_entities(context: ReportContext) -> list[ReportEntity]:
    return sorted(context.entities, key=lambda e: (-e.degree, e.key))


def _title(context: ReportContext, community: Community) -> str:
    names = [e.name for e in _top_entities(context)[:3]]
    if not names:
        names = [_bare(r.title) for r in context.child_reports[:2]]
    return (_join_names(names) or f"Community {community.id}") + TITLE_MARK


def _bare(title: str) -> str:
    """A child report's title without its offline mark, so marks do not pile up."""
    return title.removesuffix(TITLE_MARK)


def _summary(context: ReportContext, community: Community, top: Sequence[ReportEntity]) -> str:
    types = sorted({e.type for e in context.entities if e.type})
    kinds = f" ({', '.join(types)})" if types else ""
    lead = f"a community of {len(community.entity_keys)} entities{kinds}"
    if top:
        lead += f" around {_join_names([e.name for e in top[:3]])}"
    if context.child_reports:
        lead += f", including {_join_names([_bare(r.title) for r in context.child_reports])}"
    texts = [e.description for e in top[:5]] + [r.description for r in context.relationships[:5]]
    sentences = distinct_sentences(texts, [e.name for e in top[:3]])[:2]
    body = " ".join(s.text for s in sentences)
    return truncate(f"{SUMMARY_MARK}{lead}. {body}".strip(), 800)


def _rating(context: ReportContext, community: Community) -> tuple[float, str]:
    weight = sum(r.weight for r in context.relationships)
    size = len(community.entity_keys)
    rating = round(min(10.0, math.log2(1 + size) + math.log2(1 + weight) / 2), 1)
    why = (
        f"Offline rating from size, not impact: {size} entities, "
        f"{len(context.relationships)} relationships in the context with total weight {weight:g}."
    )
    return rating, why


def _entity_finding(entity: ReportEntity, context: ReportContext) -> Finding:
    rels = [r for r in context.relationships if entity.key in (r.source, r.target)]
    names = {e.key: e.name for e in context.entities}
    partners = [names.get(r.target if r.source == entity.key else r.source, "") for r in rels]
    text = summarize_descriptions(entity.name, [entity.description], max_chars=300)
    if partners:
        text += f" Connected to {_join_names([p for p in partners[:3] if p])}"
        text += f"{' and others' if len(partners) > 3 else ''}."
    if rels:
        text += " " + summarize_descriptions(
            (names.get(rels[0].source, ""), names.get(rels[0].target, "")),
            [rels[0].description],
            max_chars=200,
        )
    citation = format_citation(
        [("Entities", [entity.human_readable_id]), ("Relationships", _rel_ids(rels))]
    )
    kind = f" ({entity.type})" if entity.type else ""
    return Finding(f"{entity.name}{kind}", f"{text} {citation}".strip())


def _rel_ids(rels: Sequence[ReportRelationship]) -> list[Hrid]:
    return [r.human_readable_id for r in rels]


def _report_finding(report: ChildReport) -> Finding:
    text = summarize_descriptions(report.title, [report.content], max_chars=300)
    citation = format_citation([("Reports", [report.human_readable_id])])
    return Finding(report.title, f"{text} {citation}".strip())


def write_offline_report(
    community: Community, context: ReportContext, *, max_findings: int = 5
) -> OfflineReport:
    """An extractive report of ``community`` from its report context (deterministic)."""
    top = _top_entities(context)
    n_reports = max(1, max_findings // 2) if top else max_findings
    findings = [_report_finding(r) for r in context.child_reports[:n_reports]]
    findings += [_entity_finding(e, context) for e in top[: max_findings - len(findings)]]
    rating, why = _rating(context, community)
    return OfflineReport(
        title=_title(context, community),
        summary=_summary(context, community, top),
        rating=rating,
        rating_explanation=why,
        findings=tuple(findings),
    )
