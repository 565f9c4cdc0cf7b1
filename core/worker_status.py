"""What each stream worker's stall watchdog has seen and done, in small files others can read.

The watchdog (``streams.watchdog``) runs inside the graph worker and the vector worker; a
failure there (a faust or aiokafka upgrade that moved the private state it reads, a repair the
consumer refused) used to reach only the worker's log. Each worker process writes
``<data_dir>/<namespace>/workers/<group>-<name>.json`` after every check (atomically: temporary
file + rename), where ``name`` is the static-membership id when there is one, else host and
pid; a worker that stops cleanly removes its file. The query service's ``/healthz`` and
``/metrics`` and ``kgrag status`` read every file: a worker not heard from for ``STALE_S`` is
gone (its file stays until ``FORGET_S``, so a crash is visible), and a watchdog failure in
the last ``FAILURE_SHOWN_S`` makes the service degraded with the failure as the reason.

The files live on the worker's disk: a query service on another machine (graph tables in a
bucket) sees them only through a shared ``data_dir``; the figures are also in each worker's
log. Nothing here may fail a reader: an unreadable file is skipped.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson

from core.settings import Settings

log = logging.getLogger(__name__)

WORKERS_DIR = "workers"
STALE_S = 60.0  # the watchdog writes every 10 s; three missed writes and more is gone
FORGET_S = 24 * 3600.0  # a dead worker's file is removed by the next worker after this
FAILURE_SHOWN_S = 600.0  # a watchdog failure keeps the service degraded this long


@dataclass(slots=True)
class WatchdogFigures:
    """What a stall watchdog saw and did since its worker started (kept by the watchdog)."""

    checks: int = 0  # checks run
    stalls: int = 0  # stalled partitions found
    repairs: int = 0  # rebalances asked for (stalls and SIGHUP)
    failures: int = 0  # checks or repairs that raised
    last_failure: str | None = None
    last_failure_at: float | None = None
    last_stall: str | None = None  # "topic/partition: what faust believed"
    last_stall_at: float | None = None


@dataclass(frozen=True, slots=True)
class WatchdogStatus:
    group: str  # "graph" or "vectors"
    name: str  # static-membership id, or host-pid
    pid: int
    started_at: float  # unix time
    updated_at: float  # unix time of this write
    figures: WatchdogFigures = field(default_factory=WatchdogFigures)

    def age_s(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.updated_at)

    def alive(self, now: float | None = None) -> bool:
        return self.age_s(now) <= STALE_S

    def failing(self, now: float | None = None) -> bool:
        """A watchdog failure recent enough to report."""
        now = time.time() if now is None else now
        at = self.figures.last_failure_at
        return at is not None and now - at <= FAILURE_SHOWN_S

    def to_json(self, now: float | None = None) -> dict[str, Any]:
        """Flat: the worker's identity, its figures, and whether it is alive."""
        out = {k: v for k, v in asdict(self).items() if k != "figures"}
        return {**out, **asdict(self.figures), "alive": self.alive(now)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WatchdogStatus:
        known = {f.name for f in fields(WatchdogFigures)}
        figures = WatchdogFigures(**{k: v for k, v in data.items() if k in known})
        own = {f.name for f in fields(cls)} - {"figures"}
        return cls(**{k: v for k, v in data.items() if k in own}, figures=figures)


def worker_name(settings: Settings) -> str:
    return settings.kafka.instance_id or f"{socket.gethostname()}-{os.getpid()}"


def _folder(settings: Settings) -> Path:
    return settings.data_dir / settings.namespace / WORKERS_DIR


def status_file(settings: Settings, group: str, name: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return _folder(settings) / f"{group}-{safe}.json"


def write_watchdog_status(settings: Settings, status: WatchdogStatus) -> None:
    path = status_file(settings, status.group, status.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    data = status.to_json()
    del data["alive"]  # the reader judges that by the time it reads
    tmp.write_bytes(orjson.dumps(data))
    tmp.replace(path)


def remove_watchdog_status(settings: Settings, group: str, name: str) -> None:
    status_file(settings, group, name).unlink(missing_ok=True)


def forget_dead(settings: Settings, now: float | None = None) -> None:
    """Remove the files of workers not heard from for ``FORGET_S``."""
    now = time.time() if now is None else now
    for status in read_watchdog_statuses(settings):
        if now - status.updated_at > FORGET_S:
            remove_watchdog_status(settings, status.group, status.name)


def read_watchdog_statuses(settings: Settings) -> list[WatchdogStatus]:
    """Every worker's last status in this namespace, by group and name."""
    out = []
    for path in sorted(_folder(settings).glob("*.json")):
        try:
            data = orjson.loads(path.read_bytes())
            out.append(WatchdogStatus.from_json(data))
        except (OSError, ValueError, TypeError) as e:
            log.debug("worker status %s not read: %s", path, e)
    return out


def describe_failures(statuses: list[WatchdogStatus], now: float | None = None) -> list[str]:
    """One health reason per worker whose watchdog failed lately."""
    now = time.time() if now is None else now
    return [
        f"the stall watchdog of the {s.group} worker {s.name} failed {s.figures.failures} "
        f"time(s), last {round(now - (s.figures.last_failure_at or now))} s ago: "
        f"{s.figures.last_failure}; stalled "
        "partitions are not repaired until it works (see the worker's log)"
        for s in statuses
        if s.failing(now)
    ]
