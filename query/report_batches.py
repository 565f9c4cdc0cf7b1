"""Community reports for global search, shuffled into batches that each fit one map call.

Which reports: those of the chosen level, plus the leaves above it (a community with no
children at that level stands in for itself below it, so a small storyline is not lost by
asking at a deeper level). With a time window, only communities active in the window.

The shuffle is seeded: the same snapshot and question give the same batches, hence the same
answer from a deterministic model, while reports of one storyline (adjacent in the tables)
still spread over batches as GraphRAG intends.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from graph.versions.model import SnapshotReport
from query.activity import active_communities
from query.index import QueryIndex
from query.tables import Table, TokenCounter, render_row, truncate_to_tokens
from query.time_window import TimeWindow

REPORT_HEADER = ("id", "title", "rating", "content")


@dataclass(frozen=True, slots=True)
class ReportBatch:
    text: str  # the Reports table of this batch
    ids: tuple[int, ...]  # community numbers of the reports in it


def level_reports(index: QueryIndex, level: int, window: TimeWindow) -> list[SnapshotReport]:
    """Reports of ``level`` and of the leaves above it, active in ``window``, by number,
    with their text."""
    active = active_communities(index, window)
    numbers = sorted(c.community for c in index.communities_at_level(level))
    return [
        index.full(index.reports[n])
        for n in numbers
        if n in index.reports and (active is None or n in active)
    ]


def _content(report: SnapshotReport, use_summary: bool) -> str:
    return (report.summary if use_summary else report.body()) or report.summary


def make_batches(
    reports: Sequence[SnapshotReport],
    *,
    count: TokenCounter,
    budget: int,
    seed: int,
    use_summary: bool = False,
) -> list[ReportBatch]:
    """Seeded shuffle, then pack in order; a report too long for an empty batch is cut."""
    order = sorted(reports, key=lambda r: r.community)
    random.Random(seed).shuffle(order)
    batches: list[Table] = []
    current = Table("Reports", REPORT_HEADER, count)
    for r in order:
        cells = (r.title, r.rank, _content(r, use_summary))
        if current.try_add(r.community, cells, budget):
            continue
        if current.lines:
            batches.append(current)
            current = Table("Reports", REPORT_HEADER, count)
            if current.try_add(r.community, cells, budget):
                continue
        room = budget - current.header_cost() - count(render_row((r.community, *cells[:2]))) - 2
        cut = truncate_to_tokens(cells[2], max(0, room), count)
        current.try_add(r.community, (*cells[:2], cut), budget)
    if current.lines:
        batches.append(current)
    return [ReportBatch(t.render(), tuple(t.ids)) for t in batches]
