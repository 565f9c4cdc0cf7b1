"""Which description sets to summarise in a run, and how a short one is shown without a writer.

LLM calls follow the news, not the runs: a description set is re-summarised only when the
descriptions its summary has not seen (added or gone) reach a share of the ones it was written
from (``SummaryPolicy``), or when a summary missing anything is older than a maximum age. Until
then the previous text stands. A summary the LLM refused waits for its retry time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from graph.job.state import JobState, SummaryRecord, retry_blocked
from graph.merge.aggregates import EntityAggregate, RelationshipAggregate, description_fingerprint
from graph.merge.view import GraphView

_Row = TypeVar("_Row")


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """An entity or relationship whose description set changed materially since its last
    summary."""

    slot: str  # "e:<key>" or "r:<key>"
    names: tuple[str, ...]  # entity name, or (source, target)
    descriptions: tuple[str, ...]
    fingerprint: str


@dataclass(frozen=True, slots=True)
class SummaryPolicy:
    """When a changed description set is worth another summary (an LLM call).

    ``new_share``: the descriptions the summary has not seen (added or gone) must reach this
    share of the ones it was written from; ``max_age_s``: a summary missing anything is
    redone once it is this old. ``None`` as a policy means every change (free writers).
    """

    new_share: float
    max_age_s: float


@dataclass(frozen=True, slots=True)
class SummaryPlan:
    requests: tuple[SummaryRequest, ...]  # sorted by slot
    deferred: int  # changed sets whose change is not material yet
    next_due_at: float | None  # unix time when a deferred or failed one becomes due


def _ranked(tally_items: Iterable[tuple[str, int]]) -> tuple[str, ...]:
    return tuple(d for d, _ in sorted(tally_items, key=lambda x: (-x[1], x[0])))


def description_sets(
    view: GraphView, slots: set[str] | None = None
) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """slot -> (fingerprint, ranked descriptions, names) of every entity and relationship (of
    those in ``slots`` when given: looked up, so a run visits what changed, not every row)."""
    out: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
    entities: Iterable[tuple[str, EntityAggregate]] = view.entities.items()
    relationships: Iterable[tuple[str, RelationshipAggregate]] = view.relationships.items()
    if slots is not None:
        entities = _rows(view.entities, slots, "e:")
        relationships = _rows(view.relationships, slots, "r:")
    for key, ent in entities:
        out[f"e:{key}"] = (
            description_fingerprint(ent),
            _ranked(ent.descriptions.items),
            (ent.name,),
        )
    for key, rel in relationships:
        out[f"r:{key}"] = (
            description_fingerprint(rel),
            _ranked(rel.descriptions.items),
            (rel.source_name, rel.target_name),
        )
    return out


def _rows(rows: Mapping[str, _Row], slots: set[str], prefix: str) -> list[tuple[str, _Row]]:
    """The rows the ``prefix`` slots of ``slots`` name that exist, by key."""
    keys = sorted(s[len(prefix) :] for s in slots if s.startswith(prefix))
    return [(k, row) for k in keys if (row := rows.get(k)) is not None]


def _slots_to_visit(state: JobState, touched: set[str] | None) -> set[str] | None:
    """The description sets that can have changed since the last run: the touched ones, the
    ones the last run deferred and the ones whose summary was refused. None: all of them."""
    pending = getattr(state, "summaries_pending", None)
    if touched is None or pending is None:
        return None
    refused = {item[8:] for item in state.failures if item.startswith("summary:")}
    return touched | pending | refused


def _row_exists(view: GraphView, slot: str) -> bool:
    """Whether the entity (``e:<key>``) or relationship (``r:<key>``) of a slot still exists."""
    rows: Mapping[str, object] = view.entities if slot.startswith("e:") else view.relationships
    return slot[2:] in rows


def _material(record: SummaryRecord, descriptions: tuple[str, ...], policy: SummaryPolicy) -> bool:
    changed = len(record.basis.symmetric_difference(descriptions))
    return changed >= policy.new_share * max(1, len(record.basis))


def summaries_needed(
    view: GraphView,
    state: JobState,
    policy: SummaryPolicy | None = None,
    now: float = 0.0,
    touched: set[str] | None = None,
) -> SummaryPlan:
    """The description sets to summarise in this run (see ``SummaryPolicy``).

    A set of fewer than two descriptions needs no writer and is always taken. A summary the
    LLM refused waits for its retry time. Summaries of rows that no longer exist are dropped.
    Only the sets that can have changed are looked at: the ``touched`` slots and those left
    pending by the last run (every set when ``touched`` is None).
    """
    out: list[SummaryRequest] = []
    deferred, due = 0, []
    pending: set[str] = set()
    visit = _slots_to_visit(state, touched)
    for slot, (fp, descs, names) in description_sets(view, visit).items():
        record = state.summaries.get(slot)
        if record is not None and record.fingerprint == fp:
            continue
        if len(descs) >= 2 and retry_blocked(state, f"summary:{slot}", now):
            due.append(state.failures[f"summary:{slot}"].next_retry_at)
            pending.add(slot)
            continue
        if (
            policy is not None
            and record is not None
            and record.by == "llm"
            and len(descs) >= 2
            and now - record.written_at < policy.max_age_s
            and not _material(record, descs, policy)
        ):
            deferred += 1
            due.append(record.written_at + policy.max_age_s)
            pending.add(slot)
            continue
        out.append(SummaryRequest(slot, names, descs, fp))
    state.summaries_pending = pending  # one refused in this run is found by its failure
    # a row removed since the last run is a touched slot: only those can have lost their row
    maybe_gone = state.summaries if visit is None else visit
    for slot in [s for s in maybe_gone if s in state.summaries and not _row_exists(view, s)]:
        del state.summaries[slot]
    for item in [
        i for i in state.failures if i.startswith("summary:") and not _row_exists(view, i[8:])
    ]:
        del state.failures[item]
    return SummaryPlan(
        tuple(sorted(out, key=lambda r: r.slot)), deferred, min(due) if due else None
    )


def join_descriptions(descriptions: Sequence[str]) -> str:
    """A short description set shown as it is: each description once, as a sentence."""
    parts = []
    for d in descriptions:
        text = d.strip()
        if text:
            parts.append(text if text[-1] in ".!?" else f"{text}.")
    return " ".join(parts)


def summary(state: JobState, slot: str, fallback: str = "") -> str:
    record = state.summaries.get(slot)
    return (record.text if record is not None else "") or fallback
