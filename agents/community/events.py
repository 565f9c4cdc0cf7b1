"""The run's events for ``community-events``: lineage, report updates, alias merges made or undone.

Each event is the JSON object published as it is (the topic's payload), so it is built here
as a plain dict with the fields every reader of the topic relies on: ``kind``,
``community_id``, ``level``, ``title``, ``snapshot_version`` and ``newest_document_time``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graph.aliases.resolution import AliasChange
from graph.communities.lineage import LineageEvent
from graph.job.state import JobState
from graph.model import Community
from graph.reports.evidence import RegenerationPlan


def lineage_events(
    state: JobState,
    events: list[LineageEvent],
    regenerated: set[str],
    plan: RegenerationPlan,
    previous: dict[str, Community],
    version: int,
    newest: str,
) -> list[dict[str, Any]]:
    """What changed in the communities (``unchanged`` left out), then a ``report_updated``
    for each regenerated report of a community that existed before, with its reason."""
    out = []
    # once per run, not per event: a scan of the whole graph
    current = {c.id: c for c in state.communities}
    stamp = {"snapshot_version": version, "newest_document_time": newest}
    for e in events:
        if e.kind == "unchanged":
            continue
        out.append(
            _event_dict(
                state,
                current.get(e.community_id or ""),
                e.kind,
                e.community_id,
                e.level,
                e.size,
                e.previous_size,
                stamp,
                predecessors=e.predecessors,
                successors=e.successors,
            )
        )
    reasons = {d.community_id: d.reason for d in plan.decisions}
    for cid in sorted(regenerated):
        if cid in previous and reasons.get(cid) != "no_report":
            c = current[cid]
            out.append(
                _event_dict(
                    state,
                    c,
                    "report_updated",
                    cid,
                    c.level,
                    len(c.entity_keys),
                    len(previous[cid].entity_keys),
                    stamp,
                    reason=reasons.get(cid),
                )
            )
    return out


def alias_events(
    state: JobState, changes: Sequence[AliasChange], version: int, newest: str
) -> list[dict[str, Any]]:
    """An audit event per merge made or undone, with its evidence, on the lineage stream;
    ``community_id`` is the level-0 community of the name it resolves to."""
    if not changes:
        return []
    view = state.view
    wanted = {a.canonical for a in changes}
    home = {
        k: c.id
        for c in state.communities
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
    state: JobState,
    community: Community | None,
    kind: str,
    cid: str | None,
    level: int,
    size: int,
    previous_size: int,
    stamp: Mapping[str, Any],
    **extra: Any,
) -> dict[str, Any]:
    """One community's event: its report's title and its five most mentioned entities."""
    report = state.reports.get(cid or "")
    view = state.view
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
        **stamp,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in extra.items()},
    }
