"""What the community job carries from one run to the next (``JobState``), and the record of
items the LLM refused.

The state: the graph view folded from ``graph-changes``, the consumed offsets, the last
hierarchy and communities, the human-readable id allocator, every current report with the
basis it was written from, the description summaries with the descriptions they summarise,
each community's size history, and the items the LLM refused with when to try them again. It
is pickled as the job's checkpoint (``agents.community.state``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graph.aliases.indexes import AliasState
from graph.aliases.resolution import Resolution, confirmed
from graph.aliases.view import KeptNames
from graph.communities.cluster_input import ClusterInput
from graph.communities.human_ids import HumanIds
from graph.communities.ids import Labelled
from graph.communities.leiden import Hierarchy
from graph.job.committed import Committed
from graph.job.dailies import Dailies
from graph.merge.view import GraphView
from graph.model import Community
from graph.pickling import by_fields
from graph.reports.evidence import EvidenceIndex, ReportBasis
from graph.reports.rows import RowCosts
from graph.versions.model import SnapshotReport
from graph.versions.rows import KnownRows

HISTORY_CAP = 50  # size-history points kept per community


@dataclass
class JobState:
    view: GraphView = field(default_factory=GraphView)
    offsets: dict[int, int] = field(default_factory=dict)
    version: int = 0
    hierarchy: Hierarchy | None = None
    communities: tuple[Community, ...] = ()
    human_ids: HumanIds = field(default_factory=HumanIds.empty)
    reports: dict[str, SnapshotReport] = field(default_factory=dict)
    bases: dict[str, ReportBasis] = field(default_factory=dict)
    summaries: dict[str, SummaryRecord] = field(default_factory=dict)
    size_history: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    # "report:<community id>" or "summary:<slot>" -> why the LLM did not write it, and when
    # to try again
    failures: dict[str, ItemFailure] = field(default_factory=dict)
    # description-set slots the last run found changed but did not summarise (deferred, or
    # waiting for a retry): the next run looks at them again even if nothing touches them (as
    # it does at refused ones); None: unknown
    summaries_pending: set[str] | None = field(default_factory=set)
    # the fingerprints of every entity, relationship and claim, updated run by run from what
    # changes touched; None: not built yet (the next run builds it from the whole view)
    evidence: EvidenceIndex | None = None
    # a digest of every row of the graph version this job committed last, to commit only the
    # rows that change; None: read that version back first
    tables_known: KnownRows | None = None
    # token costs of report-context rows with the cells they were counted from
    # (graph.reports.rows.Rows), so a run counts only the rows that changed
    row_costs: RowCosts = field(default_factory=dict)
    # the graph Leiden clusters, with each node's edge digest and weighted degree, updated
    # run by run from what changes touched; None: not built yet (the next run builds it)
    cluster_input: ClusterInput | None = None
    # the communities by level and hierarchy label, for the hierarchy and communities above
    # (checked by identity), from which the next run's ids visit only the labels it placed;
    # None: not known (the next run matches every community)
    labelled: Labelled | None = None
    # which keys name one thing (graph.aliases.resolution), as the last run resolved them; None:
    # never resolved (the next run resolves the whole graph and reports every merge as made)
    resolution: Resolution | None = None
    # the indexes resolution reads, kept up to date run by run; None: built by the next run
    aliases: AliasState | None = None
    # the model's verdicts on uncertain alias decisions (graph.aliases.resolution.decision_id ->
    # same)
    alias_verdicts: dict[str, bool] = field(default_factory=dict)
    # the storylines headlined so far (community id -> its documents in the window then), so
    # a storyline is headlined again only when it grows further (graph.trends.storylines)
    headlined: dict[str, int] = field(default_factory=dict)
    # the communities whose report regeneration a run put off (``reports_per_run``), oldest
    # first: the runs that follow plan them again
    reports_deferred: dict[str, None] = field(default_factory=dict)
    # each community's mentions per day and emerging score, in memory only (pickled empty;
    # handed from a retiring child to the next, graph.job.warm, as are the two below)
    dailies: Dailies = field(default_factory=Dailies, compare=False, repr=False)
    # the community and report rows the last commit wrote, in memory only (pickled empty)
    committed: Committed = field(default_factory=Committed, compare=False, repr=False)
    # the entities alias resolution read, kept between runs in memory only (pickled empty)
    kept_names: KeptNames = field(default_factory=KeptNames, compare=False, repr=False)

    def __setstate__(self, data: dict[str, object]) -> None:
        # a state saved before it kept these memory-only caches gets empty ones (saved ones
        # pickle empty anyway), and nothing put off when it predates putting off
        caches = {"dailies": Dailies(), "committed": Committed(), "kept_names": KeptNames()}
        self.__dict__.update({**caches, "reports_deferred": {}, **data})

    def names_resolved(self) -> Resolution | None:
        """The resolution in force: the last run's, less the decisions a model rejected and
        the proposals it has not confirmed."""
        return confirmed(self.resolution, self.alias_verdicts)


@by_fields
@dataclass(frozen=True, slots=True)
class SummaryRecord:
    """A description summary and what it was written from."""

    fingerprint: str  # description_fingerprint of the set it summarises
    text: str
    basis: frozenset[str]  # the descriptions it summarises
    written_at: float  # unix time
    by: str = "llm"  # "llm", or a free writer: "joined", "offline"


@dataclass(frozen=True, slots=True)
class ItemFailure:
    """A report or summary the LLM refused (an error other than a passing rate limit, or
    output that did not parse after retries). The previous text stays; a later run retries
    once ``next_retry_at`` has passed, with the wait doubling at every failure."""

    reason: str
    attempts: int
    first_failed_at: float  # unix time
    next_retry_at: float  # unix time


def record_failure(
    state: JobState, item: str, reason: str, now: float, *, base_s: float, max_s: float
) -> ItemFailure:
    previous = state.failures.get(item)
    attempts = 1 if previous is None else previous.attempts + 1
    wait = min(max_s, base_s * 2 ** (attempts - 1))
    failure = ItemFailure(
        reason[:500],
        attempts,
        now if previous is None else previous.first_failed_at,
        now + wait,
    )
    state.failures[item] = failure
    return failure


def retry_blocked(state: JobState, item: str, now: float) -> bool:
    """True while a failed item waits for its next retry."""
    failure = state.failures.get(item)
    return failure is not None and failure.next_retry_at > now
