"""What the child hands back to the job: a run's result, a light commit's, a save's.

They cross the process boundary pickled (``ProcessPoolExecutor``), so they are plain frozen
dataclasses of builtins and ``graph`` records. The job turns them into its status
(``core.job_status.LastRun``) and publishes the run's events and headlines as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph.job.run import DriftCheck
from graph.job.state import ItemFailure


@dataclass(frozen=True, slots=True)
class AliasCounts:
    """What the run's alias resolution holds and changed."""

    merged: int  # whole merges in force
    per_unit: int  # aliases that hold in one text unit only
    changed: int  # merges made or undone this run (each an event)
    keys_decided: int  # keys re-decided this run


@dataclass(frozen=True, slots=True)
class RunResult:
    """One run of the community job, as the leader publishes and records it."""

    version: int  # the graph version the run committed
    # lineage, report-update and alias events, each the JSON object published on
    # ``community-events``; then the headline digest, in rank order
    events: list[dict[str, Any]]
    headlines: list[dict[str, Any]]
    aliases: AliasCounts
    timings: dict[str, float]  # seconds by phase of the run
    regenerated: int  # reports written this run
    reports_deferred: int  # reports whose regeneration waits for a later run (reports_per_run)
    communities: int  # communities the run's version holds
    planned: int  # communities whose report decision this run revisited
    drift: DriftCheck | None  # the maintained clustering against a fresh one, when checked
    modularity: float
    summaries_written: int  # by the model
    light_commits: list[int]  # versions committed between the run's phases
    summaries_deferred: int  # changed description sets whose change is not material yet
    llm_calls: dict[str, int]  # by purpose
    llm_tokens: dict[str, int]  # "prompt", "completion"
    cost_usd: float  # those tokens at the chat model's price
    failed_this_run: list[str]  # items ("report:<id>", "summary:<slot>") refused this run
    failures: dict[str, ItemFailure]  # every item waiting for a retry, oldest first
    next_due_at: float | None  # unix time a run is due with no new change, if any
    # the child process's largest resident size during each phase, MiB (Linux only)
    phase_peak_mib: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LightCommitResult:
    """A light commit made between runs."""

    version: int | None  # None: no row differed from what the tables hold
    seconds: float  # fold and commit


@dataclass(frozen=True, slots=True)
class Saved:
    """A save: its seconds, and the child's resident MiB after it (None: not known here), by
    which the job decides whether to replace the child (``agents.community.child``)."""

    seconds: float
    resident_mib: float | None
