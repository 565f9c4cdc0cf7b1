"""The community job's in-memory caches, handed from a retiring child process to the next one.

Three caches make a small run cheap and are kept out of the saved state, since writing them
at every save would cost what they hold rather than what the run changed: the rows the last
commit wrote (``graph.job.committed``), each community's mentions per day and score
(``graph.job.dailies``) and the entities alias resolution read (``graph.aliases.view``).
A child loading the state starts with them empty, and its first run rebuilds them from the
whole graph: measured in process on the state of a 20,000-article ingest, a +40 run took
19.7 s cold (every community row derived and compared with the tables, every community's
mentions per day summed, every report read for its head) where the real job's warm +40
runs took 5-7 s. The child is replaced when its memory has grown (``agents.community.child``),
so that cost would recur with every replacement.

So the retiring child, idle right after its save, writes the caches once beside that save
(``WarmCaches``), stamped with what identifies it (``Stamp``); a child that loads the same
save takes them over, and a load of any other state (a later save, changes folded since)
ignores them. They are derived data: taking them over changes no result, only the work.
The communities' member sets are not written again: every cached community is one of the
saved state's communities, whose sets the caches share.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from graph.aliases.view import KeptNames, Named
from graph.job.committed import ReportHead
from graph.versions.model import SnapshotCommunity

if TYPE_CHECKING:
    from graph.job.state import JobState


@dataclass(frozen=True, slots=True)
class Stamp:
    """What identifies a saved state: its version, the changes folded into its view, the
    graph version it last committed and its offsets."""

    version: int
    changes_applied: int
    tables_version: int | None
    offsets: tuple[tuple[int, int], ...]


def stamp(state: JobState) -> Stamp:
    known = state.tables_known
    return Stamp(
        state.version,
        state.view.changes_applied,
        None if known is None else known.version,
        tuple(sorted(state.offsets.items())),
    )


@dataclass(frozen=True, slots=True)
class WarmCaches:
    """The caches of the state ``stamp`` names; a part is None when it was not known."""

    stamp: Stamp
    # graph.job.committed.Committed (its communities are the state's)
    rows: dict[str, SnapshotCommunity] | None
    reports_changed: frozenset[str] | None
    heads: dict[str, ReportHead] | None
    # graph.job.dailies.Dailies (each sum's members are its community's)
    daily: dict[str, dict[date, int]] | None
    scores: dict[str, float]
    as_of: date | None
    names: dict[str, Named]


def _committed_current(state: JobState) -> bool:
    """Whether the last commit's communities are the state's (they are right after a save)."""
    held = state.committed.communities
    if not state.committed.known() or held is None or len(held) != len(state.communities):
        return False
    return all((h := held.get(c.id)) is c or h == c for c in state.communities)


def _dailies_current(state: JobState) -> bool:
    """Whether the sums are of the state's communities, each over its members."""
    sums = state.dailies.sums
    if len(sums) != len(state.communities):
        return False
    for c in state.communities:
        held = sums.get(c.id)
        if held is None or (held[0] is not c.entity_keys and held[0] != c.entity_keys):
            return False
    return True


def handed_over(state: JobState) -> WarmCaches:
    """The state's caches, for the child that loads the state as it is now."""
    committed, dailies = state.committed, state.dailies
    keep_rows, keep_daily = _committed_current(state), _dailies_current(state)
    return WarmCaches(
        stamp(state),
        rows=committed.rows if keep_rows else None,
        reports_changed=(
            frozenset(committed.reports_changed)
            if keep_rows and committed.reports_changed is not None
            else None
        ),
        heads=committed.heads,
        daily={cid: daily for cid, (_, daily) in dailies.sums.items()} if keep_daily else None,
        scores=dict(dailies.scores) if keep_daily else {},
        as_of=dailies.as_of if keep_daily else None,
        names=dict(state.kept_names),
    )


def take_over(state: JobState, caches: WarmCaches) -> bool:
    """Fill the state's empty caches from ``caches`` when they were handed over from this
    very state (same stamp); False, and nothing taken, otherwise."""
    if caches.stamp != stamp(state):
        return False
    committed, dailies = state.committed, state.dailies
    take = getattr(state.reports, "take_changes", None)
    if take is not None:
        take()  # track the reports written from here on, as the retiring child did
    if caches.rows is not None and caches.reports_changed is not None and take is not None:
        committed.communities = {c.id: c for c in state.communities}
        committed.rows = dict(caches.rows)
        committed.reports_changed = set(caches.reports_changed)
    if take is not None and caches.heads is not None:
        committed.heads = dict(caches.heads)
    if caches.daily is not None:
        by_id = {c.id: c for c in state.communities}
        dailies.sums = {cid: (by_id[cid].entity_keys, d) for cid, d in caches.daily.items()}
        dailies.scores = dict(caches.scores)
        dailies.as_of = caches.as_of
    names = KeptNames()
    names.update(caches.names)
    state.kept_names = names
    return True
