"""The run's headline digest: the storylines that emerged or surged lately, each with why.

Of the ``community.headlines_per_run`` best storylines that emerged or surged in the last
``headline_window_days`` of document time (``graph.trends.storylines``), those not headlined before
are published, one ``headline`` event each; one headlined before is left out until its
documents in the window grow by ``headline_regrowth`` since (``JobState.headlined`` keeps the
counts). Only the communities the window's documents mention are scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import date
from typing import Any

from core.settings.community import CommunitySettings
from graph.job.state import JobState
from graph.job.version_tables import newest_time
from graph.trends.story_detail import StoryDetail, ViewStories, describe
from graph.trends.storylines import (
    Daily,
    Storyline,
    fold,
    newsworthy,
    window_back,
    window_documents,
    window_nodes,
)
from graph.versions.model import SnapshotCommunity


def headlines(
    cfg: CommunitySettings,
    state: JobState,
    rows: Sequence[SnapshotCommunity],
    version: int,
    *,
    llm: bool,
) -> list[dict[str, Any]]:
    """The run's ``headline`` events, in rank order; ``llm``: the run writes with a model
    (then every report's title names its storyline, else only those a model wrote)."""
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
    lookup = ViewStories(state.view)
    out: list[dict[str, Any]] = []
    for rank, row in enumerate(_front(cfg, state, rows, since, end, llm=llm), 1):
        ids = (row.node.id, *row.folded)
        before = max((state.headlined.get(i, 0) for i in ids), default=0)
        if before and row.documents < before * (1.0 + cfg.headline_regrowth):
            continue
        for i in ids:
            state.headlined.pop(i, None)
        state.headlined[row.node.id] = row.documents
        detail = describe(row, lookup, since, end)
        out.append(_headline(rank, row, detail, bool(before), since, end, version, newest))
    return out


def _front(
    cfg: CommunitySettings,
    state: JobState,
    rows: Sequence[SnapshotCommunity],
    since: date,
    end: date,
    *,
    llm: bool,
) -> list[Storyline]:
    """The window's newsworthy storylines, best first, at most ``headlines_per_run``."""
    heads = state.committed.heads_of(state.reports)  # not every report read again
    llm_titles = {
        c.community: c.title for c in rows if c.id in heads and (llm or heads[c.id].mode == "llm")
    }
    view = state.view
    docs = view.unit_documents()
    window = [
        (docs[u], date.fromisoformat(day), view.unit_entities.get(u, ()))
        for u, day in view.units_between(since.isoformat(), end.isoformat())
    ]
    keys = {k for _, _, unit_keys in window for k in unit_keys}
    documents = window_documents(window, _member_of(rows, state, keys), since, end)
    sums = state.dailies.sums  # the commit's rows carry no day series: the job's sums

    def daily(c: SnapshotCommunity) -> Daily:
        kept = sums.get(c.id)
        return tuple(sorted(kept[1].items())) if kept is not None else ()

    nodes, baseline = window_nodes(rows, documents, llm_titles, daily)
    ranked = fold(
        nodes,
        since,
        end,
        limit=cfg.headlines_per_run * 5,
        documents=documents,
        baseline=baseline,
        reach=False,  # a headline does not list what its row holds
    )
    return newsworthy(
        ranked,
        min_documents=cfg.headline_min_documents,
        min_ratio=cfg.headline_min_ratio,
        min_significance=cfg.headline_min_significance,
    )[: cfg.headlines_per_run]


def _member_of(
    rows: Sequence[SnapshotCommunity], state: JobState, keys: set[str]
) -> dict[str, list[int]]:
    """Each of ``keys`` with the communities holding it (by number, in ``rows``' order): an
    intersection of sets per community rather than a pass over every member of every one."""
    members = {c.id: c.entity_keys for c in state.communities}
    member_of: dict[str, list[int]] = {}
    for row in rows:
        held = members.get(row.id)
        for k in keys & (held if held is not None else frozenset(row.entity_ids)):
            member_of.setdefault(k, []).append(row.community)
    return member_of


def _headline(
    rank: int,
    row: Storyline,
    detail: StoryDetail,
    again: bool,
    since: date,
    end: date,
    version: int,
    newest: str,
) -> dict[str, Any]:
    return {
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
            "again": again,
        },
        "new_entities": [asdict(m) for m in detail.new_entities],
        "top_documents": [asdict(d) for d in detail.top_documents],
        "top_entities": list(detail.top_entities),
        "folded": list(row.folded),
        "snapshot_version": version,
        "newest_document_time": newest,
    }
