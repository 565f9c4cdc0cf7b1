"""The community job's child process: a spawn pool of one, with the inbox light commits travel
through; replaced when it dies, and when its memory has grown past what its state needs.

Why replace a healthy child: a run allocates and frees hundreds of MiB (report contexts, rows,
the clustering), and what it frees stays with the process, scattered through Python's arenas
and the C library's heap. Measured on the replayed change stream of 5,000 articles, after a
run, a collection and a heap trim: 92 MB of live Python blocks in 233 MiB of arenas, 95 MB in
use of a 210 MiB malloc heap; a fresh process loading the same state holds 180 MiB. Through
a 20,000-article ingest the real job's child grew from 280 MiB to 1.7 GiB (a fresh process
loading the state there, imports included: 280 MiB), and a run's peak stacks on top. The
state is on disk after every save, so a child replaced between a save and the next call
loses nothing: the next one loads the state (lazily: its maps stay on disk) and starts with
a compact heap.

The rule is relative, so it follows the graph's size: the child's resident size after its
first save is its floor, and a save that leaves it above ``regrowth`` times the floor
(``community.child_regrowth``, 1.25; 0 never does) and at least ``min_growth_mib`` above it
(``community.child_min_growth_mib``, 256: a small graph's child, a few hundred MiB of mostly
imports, is not replaced to give back tens of MiB) retires it. Small runs barely move a warm
child, so a steady stream keeps its caches; a burst of large runs replaces it now and then (at
1.5, a 20,000-article ingest replaced it twice and left it at 1.97 GiB, just under its
threshold). The new child is started at once and loads the state while the leader waits for
changes, with the caches the retiring child handed over (``graph.job.warm``): without them
its first run rebuilds them from the whole graph.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from agents.community import inbox, runner
from agents.community.state import hand_over
from core.tables.errors import GraphStoreUnavailableError

log = logging.getLogger(__name__)


class RunFailed(Exception):
    """A run raised or its child process died; the leader re-leads from the checkpoint.

    ``transient``: the graph tables' storage could not be reached (an object-store outage);
    the leader tries again at the base backoff instead of doubling it, so it catches up within
    seconds of the store coming back."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class Child:
    """The job's child process and its inbox; ``call`` runs a function in it."""

    def __init__(self, settings_json: str, regrowth: float, min_growth_mib: float) -> None:
        self.settings_json = settings_json
        self.regrowth = regrowth
        self.min_growth_mib = min_growth_mib
        self.broken = 0  # pools replaced because the child died
        self.recycled = 0  # children retired because their memory grew
        self.handed_over = 0  # of those, children that handed their caches to the next
        self.floor_mib: float | None = None  # resident after this child's first save
        self._context = multiprocessing.get_context("spawn")
        self.inbox: Any = None
        self.pool = self._new_pool(fresh_inbox=True)

    def _new_pool(self, *, fresh_inbox: bool) -> ProcessPoolExecutor:
        """One child; with a fresh inbox after a child died (what it left in the old one is
        read again from Kafka, from the checkpoint's offsets), else the same inbox, which may
        hold changes sent as the last run ended, for the next run to fold."""
        if fresh_inbox or self.inbox is None:
            self.inbox = self._context.Queue()
        self.floor_mib = None
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=self._context,
            # never outlive a job process that was killed; keep the inbox
            initializer=inbox.child_init,
            initargs=(self.inbox,),
        )

    async def call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in the child; a dead child gets a new pool and fails this call only."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.pool, fn, *args)
        except BrokenProcessPool as e:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = self._new_pool(fresh_inbox=True)
            self.broken += 1
            raise RunFailed(f"the run's child process died ({e or 'BrokenProcessPool'})") from e
        except GraphStoreUnavailableError as e:
            raise RunFailed(f"{type(e).__name__}: {e}", transient=True) from e
        except Exception as e:
            raise RunFailed(f"{type(e).__name__}: {e}") from e

    async def saved(self, resident_mib: float | None) -> bool:
        """After a save (the child idle, its state on disk): retire the child when it has
        grown past ``regrowth`` times its floor, and start the next one loading the state.
        The retiring child first hands its in-memory caches over with that save
        (``agents.community.state.hand_over``), so the next one's first run is not a cold
        one. True when it retired the child."""
        if resident_mib is None or self.regrowth <= 0:
            return False
        if self.floor_mib is None:
            self.floor_mib = resident_mib
            return False
        if resident_mib <= max(
            self.regrowth * self.floor_mib, self.floor_mib + self.min_growth_mib
        ):
            return False
        log.info(
            "community job: child process at %.0f MiB after its save (%.0f after its first); "
            "replaced by a new one, which loads the saved state",
            resident_mib,
            self.floor_mib,
        )
        try:
            self.handed_over += bool(await self.call(hand_over, self.settings_json))
        except RunFailed as e:  # derived data: the next child's first run rebuilds them
            log.warning("community job: the child's caches were not handed over (%s)", e)
        await asyncio.to_thread(self.pool.shutdown, wait=True)
        self.pool = self._new_pool(fresh_inbox=False)
        self.recycled += 1
        warm: Future[Any] = self.pool.submit(runner.warm, self.settings_json)
        warm.add_done_callback(_log_warm_failure)
        return True

    def shutdown(self, *, wait: bool = True) -> None:
        self.pool.shutdown(wait=wait, cancel_futures=True)


def _log_warm_failure(done: Future[Any]) -> None:
    """A new child that could not load the state says so here; the next call fails as well
    and is handled as any failed run."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("community job: the new child did not load the state: %s", done.exception())
