"""The community job: one leader at a time, debounced, CPU work in its own process.

- **Leader.** Every job process joins the consumer group ``<app id>-community`` on the
  one-partition topic ``<namespace>.community-leader``; whoever is assigned that partition
  leads. A leader that loses the partition stops starting runs; a run already under way may
  finish, but the snapshot store only accepts versions above its pointer, so a deposed leader
  can never move the pointer back.
- **Feed.** The leader reads every partition of ``graph-changes`` from the offsets recorded
  in its checkpoint (a restart resumes; nothing is replayed from the start) and buffers them.
  A term that starts on changes light commits folded but no run took in (``state.lead_start``)
  starts dirty, so a run follows without waiting for another change.
- **Debounce.** A run starts when the feed has been quiet for ``debounce_s`` or dirty for
  ``max_wait_s``, whichever comes first, and never while another run is under way.
- **Run.** The buffered changes go to a long-lived child process (``agents.community.runner``)
  that folds them into its graph view, re-clusters, regenerates what materially changed,
  writes the snapshot and returns the lineage events, which the leader publishes on
  ``community-events``; then the child saves the state (``runner.save``) while the leader
  goes on reading, and the leader's next call into the child waits for that save, so a new
  version is out without waiting for it. The event loop only does I/O, so the consumer keeps
  heartbeating however long the run takes. A run is also made with no new change when the
  last one said work is due (a refused report's retry, a deferred summary reaching its age).
- **Light commits.** Between runs, changes are handed to the child at most
  ``fresh_commit_s`` after they arrive (sooner when the feed pauses), which commits the rows
  they wrote as a graph version of their own (``runner.absorb``), so new articles are
  searchable without waiting for a run. While a run works the leader keeps reading and puts
  what is due in the child's inbox; the run makes those commits between its phases.
- **Failure.** A run that raises, or a child that dies (``BrokenProcessPool``), costs that
  run, not the job: the pool is replaced if it broke, the leader waits with a doubling
  backoff, and leads again from the checkpoint's offsets, so the changes of the failed run are
  read again. A save that fails is handled the same way (the child goes back to the last save,
  as after a crash between a run's commit and its save). What the job is doing is written to
  a status file (``core.job_status``) that ``kgrag status``, ``/healthz`` and ``/metrics``
  read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import time
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from agents.community import runner
from agents.community.child import Child, RunFailed
from agents.community.feed import Feed
from agents.community.result import RunResult, Saved
from agents.community.state import lead_start
from core.job_status import (
    FAILED_ITEMS_SHOWN,
    HEARTBEAT_S,
    FailedItem,
    JobStatus,
    LastRun,
    LightCommit,
    StatusUploader,
    read_status,
    write_status,
)
from core.settings import Settings
from graph.job.state import ItemFailure

log = logging.getLogger(__name__)


class _Leadership(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.leader = asyncio.Event()

    async def on_partitions_revoked(self, revoked: Any) -> None:
        if revoked:
            log.info("community job: leadership lost")
        self.leader.clear()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned:
            log.info("community job: this process leads")
            self.leader.set()


def leader_topic(settings: Settings) -> str:
    return f"{settings.namespace}.community-leader"


async def _ensure_leader_topic(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        if leader_topic(settings) not in set(await admin.list_topics()):
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(
                    [NewTopic(leader_topic(settings), 1, settings.kafka.replication_factor)]
                )
    finally:
        await admin.close()


def _failed_items(failures: dict[str, ItemFailure]) -> tuple[FailedItem, ...]:
    items = []
    for key, f in list(failures.items())[:FAILED_ITEMS_SHOWN]:
        kind, _, item = key.partition(":")
        items.append(
            FailedItem(kind, item, f.reason, f.attempts, f.first_failed_at, f.next_retry_at)
        )
    return tuple(items)


class CommunityJob:
    """The leader loop; ``run_forever`` until cancelled."""

    def __init__(
        self,
        settings: Settings,
        *,
        poll_s: float = 0.5,
        supervisor_restarts: int = 0,
        failure_backoff_s: float = 2.0,
        failure_backoff_max_s: float = 120.0,
    ) -> None:
        self.settings = settings
        self.poll_s = poll_s
        self.feed = Feed()
        self.runs = 0
        self.failure_backoff_s = failure_backoff_s
        self.failure_backoff_max_s = failure_backoff_max_s
        self._consecutive_failures = 0
        self._next_due_at: float | None = None  # unix time
        self._saving: asyncio.Future[Saved] | None = None  # the last run's save
        self._settings_json = settings.child_json()
        self._child = Child(
            self._settings_json,
            settings.community.child_regrowth,
            settings.community.child_min_growth_mib,
        )
        self.status = JobStatus(
            "starting",
            os.getpid(),
            time.time(),
            time.time(),
            supervisor_restarts=supervisor_restarts,
        )
        self._last_status_write = 0.0
        self._uploader = StatusUploader(settings) if settings.tables.remote else None

    def _set_status(self, **changes: Any) -> None:
        """Record a change; written at once, and by ``_heartbeat`` at least every few seconds."""
        due = self._next_due_at is not None and self._next_due_at <= time.time()
        changes = {
            "pending_changes": len(self.feed.changes),
            "run_due": self.feed.first_at is not None or due,
            **changes,
        }
        self.status = replace(self.status, **changes, updated_at=time.time())
        self._last_status_write = time.monotonic()
        try:
            write_status(self.settings, self.status)
        except OSError as e:  # the status is for readers; the job goes on without it
            log.warning("community job status not written: %s", e)
        if self._uploader is not None:
            self._uploader.submit(orjson.dumps(asdict(self.status)))

    def _heartbeat(self) -> None:
        if time.monotonic() - self._last_status_write >= HEARTBEAT_S:
            self._set_status()

    @contextlib.asynccontextmanager
    async def _heartbeats(self) -> AsyncIterator[None]:
        """Write the status every ``HEARTBEAT_S`` while the body awaits (a run in the child)."""

        async def beat() -> None:
            while True:
                await asyncio.sleep(HEARTBEAT_S)
                self._set_status()

        task = asyncio.ensure_future(beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run_forever(self) -> None:
        await _ensure_leader_topic(self.settings)
        bootstrap = self.settings.kafka.bootstrap_servers
        leadership = _Leadership()
        elector = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=f"{self.settings.app_id}-community",
            enable_auto_commit=False,
        )
        elector.subscribe([leader_topic(self.settings)], listener=leadership)
        await elector.start()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            while True:
                await elector.getmany(timeout_ms=200)  # keeps the membership alive
                if leadership.leader.is_set():
                    try:
                        await self._lead(elector, leadership, producer)
                    except RunFailed as e:
                        await self._after_failure(e, elector)
        finally:
            if leadership.leader.is_set():
                self._set_status(state="stopped")
            if self._uploader is not None:
                await asyncio.to_thread(self._uploader.close)
            await producer.stop()
            await elector.stop()
            self._child.shutdown()

    async def _after_failure(self, error: RunFailed, elector: AIOKafkaConsumer) -> None:
        """Wait (doubling, capped) before leading again; keep the group membership alive."""
        self._consecutive_failures += 1
        wait = min(
            self.failure_backoff_max_s,
            self.failure_backoff_s * 2 ** (self._consecutive_failures - 1),
        )
        if error.transient:
            wait = self.failure_backoff_s
        log.error(
            "community run failed (%s); leading again from the checkpoint in %.0fs", error, wait
        )
        self._set_status(state="restarting", last_error=str(error), last_error_at=time.time())
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            await elector.getmany(timeout_ms=200)

    async def _in_pool(self, fn: Any, *args: Any) -> Any:
        """Call ``fn`` in the child (``Child.call``); the status counts replaced children."""
        try:
            return await self._child.call(fn, *args)
        finally:
            self.status = replace(self.status, pool_restarts=self._child.broken)

    @property
    def _pool(self) -> ProcessPoolExecutor:
        return self._child.pool

    @property
    def _inbox(self) -> Any:
        return self._child.inbox

    async def _saved(self) -> None:
        """Wait for the save the last run left to the child (``runner.save``); a failed save
        fails the caller as a failed run does (the child has gone back to the last save, so
        the job leads again from its offsets)."""
        saving, self._saving = self._saving, None
        if saving is not None:
            saved: Saved = await saving
            await self._child.saved(saved.resident_mib)
            self._set_status(
                last_save_s=saved.seconds,
                child_recycles=self._child.recycled,
                child_handovers=self._child.handed_over,
            )

    async def _settle_save(self) -> None:
        """The pending save done before leadership ends; a failure only logged (the child
        went back to the last save, which whoever leads next starts from)."""
        try:
            await self._saved()
        except RunFailed as e:
            log.error("community job: the state was not saved after the last run (%s)", e)

    def _clear_inbox(self) -> None:
        """Drop what a failed run left unread: leading again re-reads it from Kafka."""
        with contextlib.suppress(queue.Empty, OSError, ValueError):
            while True:
                self._inbox.get_nowait()

    async def _lead(
        self, elector: AIOKafkaConsumer, leadership: _Leadership, producer: AIOKafkaProducer
    ) -> None:
        self._clear_inbox()
        await self._saved()
        start = await self._in_pool(lead_start, self._settings_json)
        topic = self.settings.topics.graph_changes
        feed_consumer = AIOKafkaConsumer(
            bootstrap_servers=self.settings.kafka.bootstrap_servers,
            enable_auto_commit=False,
            group_id=None,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        await feed_consumer.start()
        try:
            # ensure_topics created graph-changes with exactly this many partitions (and
            # refuses to run against a topic with another count)
            partitions = range(self.settings.kafka.partitions)
            tps = [TopicPartition(topic, p) for p in partitions]
            feed_consumer.assign(tps)
            for tp in tps:
                if tp.partition in start.offsets:
                    feed_consumer.seek(tp, start.offsets[tp.partition])
                else:
                    await feed_consumer.seek_to_beginning(tp)
            self.feed = Feed(offsets=dict(start.offsets))
            if start.run_due:  # folded by light commits, not yet taken in by a run
                self.feed.mark_dirty(time.monotonic())
            self._set_status(state="waiting", **self._carried_over())
            cfg = self.settings.community
            while leadership.leader.is_set():
                # changes waiting for a light commit: poll often enough to make it in time
                poll_s = min(self.poll_s, cfg.fresh_commit_s / 10) if self.feed.changes else None
                batch = await feed_consumer.getmany(
                    timeout_ms=int((poll_s or self.poll_s) * 1000), max_records=5000
                )
                for tp, msgs in batch.items():
                    for m in msgs:
                        self.feed.add(tp.partition, m.offset, m.value)
                await elector.getmany(timeout_ms=0)
                if self._saving is not None and self._saving.done():
                    await self._saved()
                now = time.monotonic()
                due = self._next_due_at is not None and time.time() >= self._next_due_at
                if due or self.feed.due(cfg.debounce_s, cfg.max_wait_s, now):
                    await self._run(producer, feed_consumer)
                elif self.feed.fresh_due(cfg.fresh_commit_s, now):
                    await self._absorb()
                else:
                    self._heartbeat()
        finally:
            await feed_consumer.stop()
            await self._settle_save()

    def _carried_over(self) -> dict[str, Any]:
        """What a new leader keeps of the last leader's status: its last run and refused
        items (still in the checkpoint), so a restart does not blank them until a run."""
        if self.status.last_run is not None:
            return {}
        previous = read_status(self.settings)
        if previous is None or previous.last_run is None:
            return {}
        return {
            "last_run": previous.last_run,
            "failed_items_total": previous.failed_items_total,
            "failed_items": previous.failed_items,
        }

    async def _feed_during(self, call: asyncio.Future[Any], feed: AIOKafkaConsumer) -> None:
        """While a run works, keep reading ``graph-changes`` and send the child what is due
        for a light commit, which it makes between the run's phases (``inbox.Absorber``)."""
        cfg = self.settings.community
        if cfg.fresh_commit_s <= 0:
            return
        while not call.done():
            batch = await feed.getmany(timeout_ms=int(cfg.fresh_commit_s * 100), max_records=5000)
            for tp, msgs in batch.items():
                for m in msgs:
                    self.feed.add(tp.partition, m.offset, m.value)
            if self.feed.fresh_due(cfg.fresh_commit_s, time.monotonic()):
                self._inbox.put(self.feed.take_pending())

    async def _absorb(self) -> None:
        """A light commit of the rows the pending changes wrote (see ``runner.absorb``)."""
        await self._saved()
        changes, offsets = self.feed.take_pending()
        result = await self._in_pool(runner.absorb, self._settings_json, changes, offsets)
        if result.version is not None:
            self._set_status(
                light_commits=self.status.light_commits + 1,
                last_light_commit=LightCommit(
                    result.version, time.time(), len(changes), result.seconds
                ),
            )
        else:
            self._heartbeat()

    async def _run(self, producer: AIOKafkaProducer, feed: AIOKafkaConsumer | None = None) -> None:
        await self._saved()
        changes, offsets = self.feed.take()
        started = time.monotonic()
        self._set_status(state="running", pending_changes=len(changes))
        async with self._heartbeats():  # a long run must not look like a dead job
            call = asyncio.ensure_future(
                self._in_pool(runner.run, self._settings_json, changes, offsets)
            )
            if feed is not None:
                await self._feed_during(call, feed)
            result: RunResult = await call
        self.runs += 1
        self._consecutive_failures = 0
        self._next_due_at = result.next_due_at
        events = await self._publish(producer, result)
        duration = time.monotonic() - started
        self._record_run(result, len(changes), events, duration)
        _log_run(result, len(changes), events, duration)
        # the state is saved once the version is out: the next call into the child waits
        self._saving = asyncio.ensure_future(self._in_pool(runner.save, self._settings_json))

    async def _publish(self, producer: AIOKafkaProducer, result: RunResult) -> int:
        """The lineage events, keyed by community (each one's events in order), then the run's
        headline digest under one key, so a reader gets it in rank order; how many."""
        events = [*result.events, *result.headlines]
        topic = self.settings.topics.community_events
        for event in events:
            key = "headline" if event.get("kind") == "headline" else event.get("community_id")
            await producer.send(topic, orjson.dumps(event), key=str(key or "").encode())
        await producer.flush()
        return len(events)

    def _record_run(self, result: RunResult, changes: int, events: int, duration: float) -> None:
        """The run in the job's status: its ``last_run``, the light commits made between its
        phases, and the items waiting for a retry."""
        light = result.light_commits
        if light:  # made between the run's phases
            self.status = replace(
                self.status,
                light_commits=self.status.light_commits + len(light),
                last_light_commit=LightCommit(light[-1], time.time(), 0, 0.0),
            )
        self._set_status(
            state="waiting",
            runs=self.status.runs + 1,
            last_run=LastRun(
                version=result.version,
                finished_at=time.time(),
                duration_s=round(duration, 3),
                changes=changes,
                events=events,
                reports_regenerated=result.regenerated,
                reports_deferred=result.reports_deferred,
                summaries_written=result.summaries_written,
                failed_items=len(result.failed_this_run),
                llm_calls=dict(result.llm_calls),
                phases=dict(result.timings),
                phase_peak_mib=dict(result.phase_peak_mib),
                llm_tokens=dict(result.llm_tokens),
                cost_usd=result.cost_usd,
            ),
            failed_items_total=len(result.failures),
            failed_items=_failed_items(result.failures),
        )


def _log_run(result: RunResult, changes: int, events: int, duration: float) -> None:
    log.info(
        "community run %s: %d changes, %d events, %d reports, %d summaries, %d refused, %.1fs",
        result.version,
        changes,
        events,
        result.regenerated,
        result.summaries_written,
        len(result.failed_this_run),
        duration,
    )
    drift = result.drift
    if drift:
        log.info(
            "community run %s: modularity %.4f maintained, %.4f fresh (gap %.2f%%)%s",
            result.version,
            drift.maintained,
            drift.scratch,
            100 * drift.gap,
            ": re-balanced" if drift.rebalanced else "",
        )
