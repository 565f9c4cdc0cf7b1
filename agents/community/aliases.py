"""Alias confirmation: the chat model's verdict on merges that rest on weak evidence.

``graph.aliases.resolution`` decides which keys name one thing by rules; a decision whose evidence
is weak (``uncertain``) is put to the model once, with passages naming both, and the verdict is
kept in ``JobState.alias_verdicts`` by decision id, where the next resolution reads it.
"""

from __future__ import annotations

import asyncio

from agents.community.writers import Writers
from graph.aliases.resolution import Merge, Resolution, UnitAlias, decision_id, uncertain
from graph.job.state import JobState
from graph.merge.view import GraphView


async def confirm_aliases(
    writers: Writers, state: JobState, resolution: Resolution, limit: int
) -> None:
    """In LLM mode, ask the model about decisions resting on weak evidence it has not
    judged yet (at most ``limit`` a run; the rest wait for the next runs). A refused or
    unreadable answer leaves the decision standing, unjudged."""
    verdicts = state.alias_verdicts
    if writers.mode != "llm" or limit <= 0:
        return
    asks = []
    for d in uncertain(resolution):
        unit = d.unit if isinstance(d, UnitAlias) else None
        ident = decision_id(d.alias, d.canonical, unit)
        if ident not in verdicts:
            asks.append((ident, d, unit))
        if len(asks) >= limit:
            break
    view = state.view
    answers = await asyncio.gather(
        *(
            writers.confirm_alias(
                _name(view, d.alias), _name(view, d.canonical), d.evidence, _passages(view, d, unit)
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


def _passages(view: GraphView, d: Merge | UnitAlias, unit: str | None) -> list[str]:
    """The text the model reads: the decision's unit, else those naming both, else one of each."""
    if unit is not None:
        units = [unit]
    elif isinstance(d, Merge) and d.units:
        units = list(d.units)
    else:  # no unit names both: one of each
        units = [min(view.entity_units.get(k, ()), default="") for k in (d.alias, d.canonical)]
    return [view.text_units[u].text for u in units if u in view.text_units]


def _name(view: GraphView, key: str) -> str:
    return view.entities[key].name if key in view.entities else key
