"""What the community job is doing, in a small JSON file other processes can read.

The job runs in its own process (and its CPU work in a child of that), so the query service,
``kgrag status`` and the benchmarks cannot ask it directly. The leading job process writes
``<data_dir>/<namespace>/community-job/status.json`` whenever its state changes and at least
every ``HEARTBEAT_S`` seconds while it leads; writes are atomic (temporary file + rename), so
a reader sees the old or the new status, never a torn one. A reader tells a live job from a
dead one by ``updated_at``: a leader that stopped writing for ``3 × HEARTBEAT_S`` is gone.

With the graph tables in a bucket (``tables.uri = s3://…``) the status is also put beside them
(``<namespace>/community-job/status.json``) by a thread of the job's own (``StatusUploader``),
so a query service on another machine reads it there; the job never waits on the object store.

Items the LLM refused (a report or a description summary) are listed with their reason and
when they will be tried again; the list is bounded, the count is not.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from core.object_store import ObjectFile, ObjectStoreError
from core.settings import Settings

log = logging.getLogger(__name__)

STATUS_KEY = "community-job/status.json"  # under the namespace, on disk or in the bucket
HEARTBEAT_S = 5.0
FAILED_ITEMS_SHOWN = 50

JobState = Literal["starting", "waiting", "running", "restarting", "stopped"]


@dataclass(frozen=True, slots=True)
class FailedItem:
    """A report or summary the LLM did not write; the previous text (or an offline one, marked
    ``mode: offline``) stays in place until a later run's retry succeeds."""

    kind: str  # "report" or "summary"
    item: str  # community id, or "e:<entity key>" / "r:<relationship key>"
    reason: str  # what the endpoint answered, e.g. "HTTP 400: ... content filter"
    attempts: int  # runs that tried it and failed
    first_failed_at: float  # unix time
    next_retry_at: float  # unix time; not tried before then


@dataclass(frozen=True, slots=True)
class LastRun:
    version: int
    finished_at: float  # unix time
    duration_s: float
    changes: int  # graph changes folded in
    events: int  # lineage events published
    reports_regenerated: int
    summaries_written: int
    failed_items: int  # items that failed in this run
    llm_calls: dict[str, int] = field(default_factory=dict)  # by purpose
    phases: dict[str, float] = field(default_factory=dict)  # seconds by phase of the run
    llm_tokens: dict[str, int] = field(default_factory=dict)  # "prompt", "completion"
    cost_usd: float = 0.0  # those tokens at the chat model's price (``llm.prices``)
    reports_deferred: int = 0  # reports put off to the runs that follow (``reports_per_run``)
    # the run's process at its largest during each phase, MiB (where the memory goes); the
    # light commits made while it ran under "light_commits"
    phase_peak_mib: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LightCommit:
    """The last light commit: the rows of new articles, committed between runs."""

    version: int
    committed_at: float  # unix time
    changes: int  # graph changes folded in
    seconds: float  # fold and commit, in the child


@dataclass(frozen=True, slots=True)
class JobStatus:
    state: JobState
    pid: int
    started_at: float  # unix time this process started
    updated_at: float  # unix time of this write (the heartbeat)
    runs: int = 0  # runs completed by this process
    pending_changes: int = 0  # graph changes buffered for the next run
    # a run is owed now: changes arrived that no run has taken in (some may already be folded
    # by light commits, so ``pending_changes`` can be 0), or retries and put-off work are due
    run_due: bool = False
    supervisor_restarts: int = 0  # times the worker restarted a job process that died
    pool_restarts: int = 0  # times this process replaced a child pool that broke
    # children retired after a save because their memory had grown (``community.child_regrowth``)
    child_recycles: int = 0
    # of those, the children that handed their caches to the next (``graph.job.warm``)
    child_handovers: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    last_run: LastRun | None = None
    failed_items_total: int = 0
    failed_items: tuple[FailedItem, ...] = ()  # the first FAILED_ITEMS_SHOWN, oldest first
    light_commits: int = 0  # made by this process
    last_light_commit: LightCommit | None = None
    # seconds the last save of the job's state took (after its run's version was out)
    last_save_s: float | None = None

    @property
    def restarts(self) -> int:
        return self.supervisor_restarts + self.pool_restarts

    def age_s(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.updated_at)

    def alive(self, now: float | None = None) -> bool:
        """Still heard from (a stopped job says so; a killed one goes quiet)."""
        return self.state != "stopped" and self.age_s(now) <= 3 * HEARTBEAT_S

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["failed_items"] = [asdict(f) for f in self.failed_items]
        out["alive"] = self.alive()
        out["restarts"] = self.restarts
        return out


def status_path(settings: Settings) -> Path:
    return settings.data_dir / settings.namespace / STATUS_KEY


def write_status(settings: Settings, status: JobStatus) -> None:
    path = status_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(orjson.dumps(asdict(status)))
    tmp.replace(path)


def read_status(settings: Settings) -> JobStatus | None:
    """The last status written, or None when no job has ever led this namespace (or the file
    cannot be read: a reader must never fail because of it)."""
    try:
        if settings.tables.remote:
            raw = ObjectFile(settings, STATUS_KEY).read()
            if raw is None:
                return None
        else:
            raw = status_path(settings).read_bytes()
        data = orjson.loads(raw)
        last = data.get("last_run")
        light = data.get("last_light_commit")
        return JobStatus(
            **{
                **data,
                "last_run": LastRun(**last) if last else None,
                "last_light_commit": LightCommit(**light) if light else None,
                "failed_items": tuple(FailedItem(**f) for f in data.get("failed_items", ())),
            }
        )
    except ObjectStoreError as e:
        log.debug("community job status not read: %s", e)
        return None
    except (OSError, ValueError, TypeError):
        return None


class StatusUploader:
    """Puts the newest status into the bucket from a thread of its own: the job hands over
    bytes and goes on; a status superseded before it was sent is skipped, and one the store
    refused is sent again (unless a newer one came) every ``retry_s``."""

    def __init__(self, settings: Settings, retry_s: float = 2.0) -> None:
        self._file = ObjectFile(settings, STATUS_KEY)
        self._retry_s = retry_s
        self._pending: bytes | None = None
        self._closed = False
        self._busy = False
        self._cond = threading.Condition()
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name="status-upload", daemon=True)
        self._thread.start()

    def submit(self, data: bytes) -> None:
        with self._cond:
            self._pending = data
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    return
                data, self._pending, self._busy = self._pending, None, True
            try:
                self._file.write(data)
                if self.last_error is not None:
                    log.info("community job status written to %s again", self._file.uri)
                self.last_error = None
            except ObjectStoreError as e:
                if self.last_error is None:
                    log.warning("community job status not written: %s", e)
                self.last_error = str(e)
                with self._cond:
                    if self._pending is None and not self._closed:
                        self._pending = data
                        self._cond.wait(self._retry_s)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is pending (the job's last status), waiting at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while (self._pending is not None or self._busy) and self.last_error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            self._closed = True
            self._pending = None
            self._cond.notify_all()
