"""The community job's state between runs: in the child process's memory, and in a checkpoint.

The checkpoint is written atomically after every run (a temporary file, fsync, rename; by a
forked copy of the process, so light commits go on meanwhile), so a restarted job resumes
from the last run's offsets with the same hierarchy, ids, report bases and refused items, and
regenerates nothing that did not change. A checkpoint written by an
earlier version is brought up to date on load (:func:`upgrade_state`).
"""

from __future__ import annotations

import logging
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.settings import Settings
from graph.job.state import JobState, SummaryRecord
from graph.job.summaries import description_sets
from graph.moved import moved

CHECKPOINT = "checkpoint.pickle"
log = logging.getLogger(__name__)
_STATE: dict[str, JobState] = {}  # namespace -> the state this process holds
_SAVING: dict[str, int] = {}  # namespace -> pid of the checkpoint save in flight


def job_dir(settings: Settings) -> Path:
    return settings.data_dir / settings.namespace / "community-job"


def load_state(settings: Settings) -> JobState:
    """This process's state, else the checkpoint on disk, else an empty state."""
    if settings.namespace in _STATE:
        return _STATE[settings.namespace]
    wait_saved(settings)
    path = job_dir(settings) / CHECKPOINT
    state = JobState()
    if path.exists():
        with open(path, "rb") as fh:
            state = upgrade_state(_Unpickler(fh).load())  # our file, written by save_state
    _STATE[settings.namespace] = state
    return state


class _Unpickler(pickle.Unpickler):
    """Reads checkpoints written before a class they hold moved to another module."""

    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(moved(module, name), name)


def upgrade_state(state: JobState) -> JobState:
    """Bring a checkpoint written by an earlier version to today's fields: summaries were
        ``(fingerprint, text)`` pairs (their basis is the current description set when the
        fingerprint still matches it, else unknown, which makes them due), there was no failure
        record, the view kept sets of changed keys that nothing read (dropped) and no reverse maps
    of text units (rebuilt)."""
    if not hasattr(state, "failures"):
        state.failures = {}
    if not hasattr(state, "summaries_pending"):
        state.summaries_pending = None  # not known: the next run looks at every description set
    if not hasattr(state, "row_costs"):
        state.row_costs = {}
    if not hasattr(state, "tables_known"):
        state.tables_known = None  # the next commit reads the latest graph version back
    if not hasattr(state, "evidence"):
        state.evidence = None  # built from the whole view by the next run
    if not hasattr(state, "cluster_input"):
        state.cluster_input = None  # built from the whole view by the next run
    if not hasattr(state, "labelled"):
        state.labelled = None  # the next run matches every community
    if not hasattr(state, "resolution"):
        state.resolution = None  # the next run resolves the whole graph
    if not hasattr(state, "aliases"):
        state.aliases = None
    if not hasattr(state, "alias_verdicts"):
        state.alias_verdicts = {}
    if not hasattr(state, "headlined"):
        state.headlined = {}
    if "touched" not in vars(state.view):
        state.view.touched = None  # not known: the next run plans every community
    if "unit_entities" not in vars(state.view):
        state.view.rebuild_reverse_maps()  # the checkpoint's rows were all committed
    if "claim_units" not in vars(state.view):
        # which unit states which claim was not kept: known again as claims are re-stated
        state.view.claim_units, state.view.unit_claims = {}, {}
    if "unit_tokens" not in vars(state.view):
        state.view.unit_tokens = {}  # what units folded before were extracted for is not known
        state.view.ingest_total = None  # summed from the units when first asked
    if "ingest_total" not in vars(state.view):
        state.view.ingest_total = None
    if "removed" not in vars(state.view):
        state.view.removed = None  # not known: the next run compares every row
    elif state.view.removed is not None and "documents" not in vars(state.view.removed):
        state.view.removed.documents = set()  # no document was ever deleted before
    for stale in ("dirty_entities", "dirty_relationships"):
        vars(state.view).pop(stale, None)
    current = description_sets(state.view)
    for slot, value in list(state.summaries.items()):
        if isinstance(value, tuple):
            fp, text = value
            known = current.get(slot)
            basis = frozenset(known[1]) if known is not None and known[0] == fp else frozenset()
            state.summaries[slot] = SummaryRecord(fp, text, basis, 0.0)
    return state


def forget_state(settings: Settings) -> None:
    """Drop this process's copy (half-applied after a failed run): the next load reads the
    checkpoint."""
    _STATE.pop(settings.namespace, None)


def save_state_soon(settings: Settings, state: JobState) -> None:
    """Write the checkpoint without holding up this process: a forked copy of it (the state
    as it is now, copy-on-write) pickles and writes the file while this one goes on with
    light commits; a whole state takes seconds to pickle at 8,000 articles. One save at a
    time, in order: one still running is waited for first, and so is any before the file is
    read back. Without ``fork`` the save is made in place."""
    wait_saved(settings)
    if not hasattr(os, "fork"):
        save_state(settings, state)
        return
    pid = os.fork()
    if pid == 0:  # the copy: write and leave, running nothing of the parent's on the way out
        code = 1
        try:
            save_state(settings, state)
            code = 0
        finally:
            os._exit(code)
    _SAVING[settings.namespace] = pid


def wait_saved(settings: Settings) -> None:
    """Until the checkpoint save in flight (if any) has finished."""
    pid = _SAVING.pop(settings.namespace, None)
    if pid is None:
        return
    _, status = os.waitpid(pid, 0)
    if status != 0:
        log.warning("community job checkpoint not written (save exited with %s)", status)


def save_state(settings: Settings, state: JobState) -> None:
    directory = job_dir(settings)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{CHECKPOINT}.{os.getpid()}"
    with open(tmp, "wb") as fh:
        pickle.dump(state, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(directory / CHECKPOINT)


@dataclass(frozen=True, slots=True)
class LeadStart:
    """Where a new leadership term starts: the graph-changes offsets the state has consumed,
    and whether it holds changes no run has taken in yet (light commits folded them, during a
    run or between runs, and advanced the offsets past them), so a run is due without a new
    change arriving."""

    offsets: dict[int, int]
    run_due: bool


def lead_start(settings_json: str) -> LeadStart:
    """The state's offsets and whether a run is due (called in the child process)."""
    settings = Settings.model_validate_json(settings_json)
    state = load_state(settings)
    touched = state.view.touched_so_far()
    if touched is None:  # not known: owed if anything was ever folded
        return LeadStart(dict(state.offsets), bool(state.offsets))
    return LeadStart(dict(state.offsets), bool(touched.entities or touched.slots))
