"""What the job's last commit wrote of the tables that follow the clustering, kept in memory so
the next commit writes only the community and report rows that changed.

A run's version holds a row per community (members, parent and children, report title,
mentions per day, emerging score, size history, how much its report leaves out) and a row per
report. Deriving every one of them and comparing it with the tables read every report of the
graph from the job's state (at 100,000 articles, tens of thousands of reports unpickled three
times each) for a +40 change that moves a few hundred. ``Committed`` keeps the community rows
and ``Community`` objects the last commit wrote, and collects which reports were written or
removed since (the reports map's ``take_changes``). A commit then derives the rows of the
communities that are new, whose ``Community`` differs, whose mentions per day or score were
summed again (``graph.job.dailies``), whose report changed, or whose children came or went;
it writes the reports that changed or whose community is new, and deletes the rows of
communities that are gone. Each report's ``unreflected`` share and mode are kept too, for the
version's summary figures (``run_meta``) and the headlines' titles, which would otherwise
read every report.

When any of that is not known (a restarted job, reports kept in a plain dict, a store
discarded after a failed run) ``known()`` is False and the commit derives every row, as
before; ``remember`` then starts the cache again. It lives in memory only: it pickles empty,
and a child retired for its memory hands it to the next one (``graph.job.warm``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from graph.model import Community
from graph.versions.model import SnapshotCommunity, SnapshotReport


@dataclass(frozen=True)
class CommunityChanges:
    """A commit's community and report rows: ``rows`` every community's (in the run's order,
    for the headlines), ``upserts`` those to write, ``reports`` the report rows to write,
    and the ids whose community or report row goes. ``whole``: the community rows to write
    are all of them (what changed was not known), and a community row not among them goes;
    the reports are then those that differ from the tables' (all read, one at a time)."""

    rows: tuple[SnapshotCommunity, ...]
    upserts: tuple[SnapshotCommunity, ...]
    reports: tuple[SnapshotReport, ...]
    gone_communities: frozenset[str] = frozenset()
    gone_reports: frozenset[str] = frozenset()
    whole: bool = False


@dataclass(frozen=True, slots=True)
class ReportHead:
    """What a commit and the headlines need of a report without reading it."""

    unreflected: float
    mode: str

    @classmethod
    def of(cls, report: SnapshotReport) -> ReportHead:
        return cls(report.unreflected, report.mode)


def _taken(reports: Mapping[str, SnapshotReport]) -> set[str] | None:
    take = getattr(reports, "take_changes", None)  # a plain dict does not track its changes
    return take() if take is not None else None


class Committed:
    """The rows the last commit wrote (None: not known) and the report ids changed since."""

    def __init__(self) -> None:
        self.communities: dict[str, Community] | None = None
        self.rows: dict[str, SnapshotCommunity] | None = None
        self.reports_changed: set[str] | None = None
        self.heads: dict[str, ReportHead] | None = None

    def __reduce__(self) -> tuple[type[Committed], tuple[Any, ...]]:
        return (Committed, ())  # memory only: a loaded state commits every row once

    def take_reports(self, reports: Mapping[str, SnapshotReport]) -> None:
        """Collect the reports written or removed since the last call (before a commit)."""
        taken = _taken(reports)
        if taken is None:
            self.reports_changed = self.heads = None
            return
        if self.reports_changed is not None:
            self.reports_changed |= taken
        if self.heads is not None:
            for cid in taken:
                report = reports.get(cid)
                if report is None:
                    self.heads.pop(cid, None)
                else:
                    self.heads[cid] = ReportHead.of(report)

    def known(self) -> bool:
        """Whether the last commit's rows and the reports changed since are known."""
        return (
            self.rows is not None
            and self.communities is not None
            and self.reports_changed is not None
        )

    def heads_of(self, reports: Mapping[str, SnapshotReport]) -> dict[str, ReportHead]:
        """Every report's head by community id (read from every report when not known, and
        each time from a map that does not name its changes)."""
        if self.heads is None or not hasattr(reports, "take_changes"):
            scan = getattr(reports, "scan", None)
            pairs = scan() if scan is not None else reports.items()
            self.heads = {cid: ReportHead.of(r) for cid, r in pairs}
        return self.heads

    def remember(self, communities: Iterable[Community], rows: Iterable[SnapshotCommunity]) -> None:
        """What a commit wrote: the next one writes what changes from it."""
        self.communities = {c.id: c for c in communities}
        self.rows = {r.id: r for r in rows}
        self.reports_changed = set()
