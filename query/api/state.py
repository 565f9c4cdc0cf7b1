"""What the HTTP routes share across requests: the served index, the clients, the metrics,
the document publisher (``ServiceState``), and the holder that swaps graph versions
(``IndexHolder``).

Version swaps without restart or failed request: every request reads the holder's current
``QueryIndex`` once and uses only that object to the end, so a swap never changes the data
under a request. Each request also stats the graph tables' version log (one ``stat``); when it
moved, a single background task builds the new version's index in a worker thread
(``asyncio.to_thread``) while requests keep being served from the previous index, then the
reference is replaced. The new index follows the one in service row by row through the rows
the versions since changed (``query.index_update``), so a swap costs what changed, not the
whole graph. A background refresher does the same every ``refresh_interval_s``, so the index
is usually warm before the first request after a commit. Only the very first version is
waited for; before it, query endpoints answer 503 and say what to do. ``at`` serves an older
version asked for by ``as_of``.

Kafka is touched lazily (topics on the first request that needs them, the publisher on the
first document), so the service starts and answers /healthz while Kafka is down.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, TypeVar

from fastapi import Depends, Request

from core.publish import DocumentPublisher
from core.settings import Settings
from core.tables.errors import (
    GraphStoreUnavailableError,
    GraphTablesError,
    SnapshotNotFoundError,
    SnapshotStoreError,
)
from core.tables.migration import legacy_hint
from core.tables.reader import release_memory
from core.tables.store import GraphTables
from core.tables.versions import PointerStamp, VersionInfo, parse_as_of
from graph.communities.leiden_graph import gc_paused
from query.api.errors import ApiError, api_error
from query.deps import QueryDeps
from query.index import QueryIndex
from query.index_update import follow
from query.kafka_probes import LagProbe, PendingProbe
from query.metrics import QueryMetrics
from query.text_store import BULK

log = logging.getLogger(__name__)

T = TypeVar("T")

NO_VERSION = (
    "the index is not built yet: no graph snapshot has been published. Run a worker "
    "(`kgrag worker`), publish documents (`kgrag publish <file.jsonl>` or POST /v1/documents) "
    "and wait for the community job to write the first snapshot"
)

_UNSEEN: PointerStamp = (-1, -1, -1)
_OLDER_KEPT = 2  # indexes of as-of versions kept besides the one in service


class IndexHolder:
    """The ``QueryIndex`` in service, replaced (never mutated) when a newer version appears."""

    def __init__(
        self,
        store: GraphTables,
        metrics: QueryMetrics | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.store = store
        self._settings = settings
        self.last_error: Exception | None = None
        self.failing_since: float | None = None  # unix time the store first failed, if failing
        self._metrics = metrics
        self._index: QueryIndex | None = None
        self._stamp: PointerStamp | None = _UNSEEN
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[QueryIndex | None] | None = None
        self.swapped_at: float | None = None  # unix time the version in service was swapped in
        self._older: dict[int, QueryIndex] = {}  # as-of versions asked for, oldest first

    @property
    def index(self) -> QueryIndex | None:
        return self._index

    async def refresh(self) -> QueryIndex | None:
        """Put the latest graph version in service, off the event loop, if it is newer."""
        async with self._lock:
            held = self._index
            index = await asyncio.to_thread(self._next_index, held)
            if index is None or index is held:
                return held
            self._index, self.swapped_at = index, time.time()
            if self._metrics is not None:
                self._metrics.version_swaps.inc()
            return index

    def _poll(self) -> PointerStamp | None:
        """The store's change stamp, or the last one seen when the store cannot be reached
        (the failure is kept in ``last_error`` for /healthz). Runs in a worker thread."""
        try:
            return self.store.pointer_stamp()
        except GraphStoreUnavailableError as err:
            self._failed(err)
            return self._stamp

    def _failed(self, err: SnapshotStoreError) -> None:
        if str(err) != str(self.last_error):
            held = self._index
            log.warning("keeping version %s: %s", None if held is None else held.version, err)
        if self.last_error is None:
            self.failing_since = time.time()
        self.last_error = err

    @property
    def unreachable(self) -> GraphStoreUnavailableError | None:
        """Why the graph tables cannot be read now (None while they can)."""
        err = self.last_error
        return err if isinstance(err, GraphStoreUnavailableError) else None

    def _text_dir(self) -> Path | None:
        """Where the index's bulk text is mapped from: under the data directory (the local
        disk), else (no settings, or a directory that cannot be made) the system's
        temporary directory."""
        if self._settings is None:
            return None
        path = self._settings.data_dir / "query-text"
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError:
            return None
        return path

    def _text_unwritable(self, err: OSError) -> str:
        where = self._text_dir() or "the temporary directory"
        return (
            f"cannot write the query index's text under {where}: {err.strerror or err}; "
            "free space there or point data_dir at a writable disk"
        )

    def _follow(self, held: QueryIndex, latest: VersionInfo) -> QueryIndex | None:
        """``held`` followed to ``latest`` row by row; None (read the whole version instead)
        if that fails, which is a defect: it is logged with its traceback."""
        try:
            # reading the changed rows allocates a burst of acyclic objects, like following
            # them: without the pause a full collection over the index in service took a
            # second in one swap of ten at 8,000 articles
            with gc_paused():
                changes = self.store.changes(held.version, latest.version, split=BULK)
                lean = not self.store.reads("communities", "text_unit_ids")
                index = follow(held, latest.meta, changes, lean=lean)
        except SnapshotStoreError:
            raise
        except Exception:
            log.exception("could not follow version %d to %d", held.version, latest.version)
            return None
        rows = sum(len(c.upserts) + len(c.deletes) for c in changes.values())
        log.info("version %d: %d changed rows since %d", latest.version, rows, held.version)
        return index

    def _next_index(self, held: QueryIndex | None) -> QueryIndex | None:
        """The latest version's index: the one in service followed row by row through the
        versions since (``query.index_update``) while it is within retention, else built from
        the whole version. A version that cannot be read keeps the one in service."""
        started = time.perf_counter()
        try:
            self._stamp = self.store.pointer_stamp()
            infos = self.store.version_infos()
            if not infos or (held is not None and infos[-1].version <= held.version):
                return held
            latest = infos[-1]
            index = None
            how = "whole"
            if held is not None and held.version >= infos[0].version:
                index = self._follow(held, latest)
                how = "followed"
            if index is None:
                index = QueryIndex.read(self.store, latest.version, self._text_dir())
                how = "whole"
        except (SnapshotStoreError, OSError) as err:
            if isinstance(err, OSError):  # the local disk the index's bulk text goes to
                err = GraphStoreUnavailableError(self._text_unwritable(err))
            self._failed(err)
            # an unreachable store is tried again at the next poll; a broken version waits
            # for the next version instead
            if isinstance(err, GraphStoreUnavailableError):
                self._stamp = _UNSEEN
            return held
        if self.last_error is not None:
            log.info("graph tables readable again (%s)", self.store.root)
        self.last_error = None
        self.failing_since = None
        release_memory()
        took = time.perf_counter() - started
        if self._metrics is not None:
            self._metrics.swap_seconds.labels(how).observe(took)
        log.info("serving graph version %d (%s, in %.2fs)", index.version, how, took)
        return index

    def _refresh_in_background(self) -> asyncio.Task[QueryIndex | None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.refresh(), name="version-refresh")
        return self._task

    async def get(self) -> QueryIndex | None:
        """The index to answer one request with: the current one, after starting a refresh
        when the pointer moved; only the first version is waited for."""
        # a local store is asked at once (one stat); an object store only by ``run``'s polls,
        # in a worker thread, so no request waits on the network for it
        if not self.store.remote and self._poll() != self._stamp:
            self._refresh_in_background()
        task = self._task
        if self._index is None and task is not None and not task.done():
            return await asyncio.shield(task)
        return self._index

    async def at(self, as_of: str | int | None) -> QueryIndex:
        """The index of the version a request asks for (``as_of``: a version number or an
        ISO time; None: the one in service). Older versions are loaded on demand and the
        last few kept; one older than retention is a 404 naming the oldest version kept."""
        if as_of is None:
            return await self.require()
        try:
            wanted = parse_as_of(as_of)
            info = await asyncio.to_thread(self.store.resolve, wanted)
        except GraphTablesError as e:
            raise ApiError(422, "invalid_as_of", str(e)) from None
        except SnapshotNotFoundError as e:
            raise ApiError(404, "version_not_found", str(e)) from None
        held = self._index
        if held is not None and held.version == info.version:
            return held
        cached = self._older.get(info.version)
        if cached is None:
            try:
                cached = await asyncio.to_thread(
                    QueryIndex.read, self.store, info.version, self._text_dir()
                )
            except OSError as err:
                raise ApiError(503, "index_text_unwritable", self._text_unwritable(err)) from None
            self._older[info.version] = cached
            while len(self._older) > _OLDER_KEPT:
                del self._older[next(iter(self._older))]
        return cached

    async def require(self) -> QueryIndex:
        index = await self.get()
        if index is None:
            hint = None if self._settings is None else legacy_hint(self._settings, self.store)
            raise ApiError(503, "index_not_built", hint or NO_VERSION)
        return index

    async def run(self, interval_s: float) -> None:
        """Poll the pointer so the index is warm before the next request needs it."""
        while True:
            stamp = await asyncio.to_thread(self._poll) if self.store.remote else self._poll()
            if stamp != self._stamp or self.unreachable is not None:
                await self._refresh_in_background()
            await asyncio.sleep(interval_s)

    async def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@dataclass
class ServiceState:
    settings: Settings
    holder: IndexHolder
    metrics: QueryMetrics
    lag: LagProbe
    pending: PendingProbe
    publisher: DocumentPublisher
    deps: QueryDeps | None = None  # set by the app's lifespan
    topics_ready: bool = False
    topics_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def require_deps(self) -> QueryDeps:
        if self.deps is None:
            raise ApiError(503, "starting", "the service is still starting; retry in a moment")
        return self.deps

    def check_question(self, question: str) -> str:
        limit = self.settings.api.max_question_chars
        if len(question) > limit:
            raise ApiError(
                413,
                "question_too_long",
                f"the question has {len(question)} characters; the limit is {limit} "
                "(KGRAG_API__MAX_QUESTION_CHARS)",
            )
        if not question.strip():
            raise ApiError(422, "invalid_query", "the question is empty")
        return question

    async def ensure_topics(self) -> None:
        """Create the namespace's topics once, before the first read or write of one."""
        if self.topics_ready:
            return
        async with self.topics_lock:
            if not self.topics_ready:
                from streams.admin import ensure_topics

                await ensure_topics(self.settings)
                self.topics_ready = True

    async def timed(self, method: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work``, observe its duration and outcome under ``method``, and raise the
        errors the query layer means as their ``ApiError``."""
        started = time.perf_counter()
        outcome = "ok"
        try:
            return await work()
        except Exception as e:
            outcome = "error"
            mapped = api_error(e)
            if mapped is None or mapped is e:
                raise
            raise mapped from e
        finally:
            self.metrics.observe(method, time.perf_counter() - started, outcome)

    async def close(self) -> None:
        await self.holder.stop()
        await self.publisher.stop()


def service_state(request: Request) -> ServiceState:
    """The app's ``ServiceState`` (``create_app`` puts it on ``app.state``), for ``Depends``."""
    state: ServiceState = request.app.state.service
    return state


# A route handler's parameter ``state: Service`` receives the app's ``ServiceState``.
Service = Annotated[ServiceState, Depends(service_state)]
