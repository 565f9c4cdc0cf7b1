"""The child's inbox: changes the leader sends while a run works, made light commits meanwhile.

While the child is busy with a run, the leader keeps reading ``graph-changes`` and puts what
is due for a light commit in this process's inbox (a ``multiprocessing`` queue handed over by
the pool's initializer). The run folds and commits it between its phases, so new articles
stay searchable however long the run takes. It may do so only while it holds no copy of what
a light commit changes (the view's fresh rows, ``human_ids``, the tables' digests): the
``Absorber`` polls the inbox in the background and leaves it alone inside ``held()``, which
the run enters around the phases that hold such copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from core.children import die_with_parent
from graph.job.state import JobState
from streams.codecs import PayloadError, decode_graph_change

log = logging.getLogger(__name__)

# what the leader sends while this process is busy with a run: (changes, offsets) for light
# commits made between the run's phases (None outside the job's child, e.g. in tests)
_INBOX: Any = None
INBOX_POLL_S = 0.05


def child_init(inbox: Any) -> None:
    """The pool's initializer: die with the job process, and keep the leader's inbox."""
    global _INBOX
    die_with_parent()
    _INBOX = inbox


def fold(state: JobState, changes: Sequence[bytes], offsets: dict[int, int]) -> None:
    """Apply encoded graph changes to the state's view; its offsets become ``offsets``."""
    for raw in changes:
        try:
            state.view.apply(decode_graph_change(raw))
        except PayloadError as e:
            log.warning("skipping undecodable graph change: %s", e)
    state.offsets = dict(offsets)


def fold_inbox(state: JobState) -> int:
    """Fold what the leader sent meanwhile, oldest first; how many batches there were."""
    batches = 0
    while _INBOX is not None:
        try:
            changes, offsets = _INBOX.get_nowait()
        except queue.Empty:
            return batches
        fold(state, changes, offsets)
        batches += 1
    return batches


class Absorber:
    """A run's light commits of what the inbox holds: in the background while the run awaits
    outside ``held()``, and once on entering it. ``commit`` makes the light commit and returns
    its version (None when no row differed); ``versions`` lists those made."""

    def __init__(self, state: JobState, commit: Callable[[], int | None]) -> None:
        self._state = state
        self._commit = commit
        self._open = True  # False inside ``held()``
        self.versions: list[int] = []

    def absorb_now(self) -> None:
        """Fold what the leader sent and make it a light commit."""
        if fold_inbox(self._state):
            version = self._commit()
            if version is not None:
                self.versions.append(version)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A section of the run that holds copies a light commit would invalidate: it starts
        from what the inbox holds now, and nothing is absorbed until it ends. A section that
        raises ends the run, so the inbox stays closed."""
        self.absorb_now()
        self._open = False
        yield
        self._open = True

    @contextlib.asynccontextmanager
    async def polling(self) -> AsyncIterator[None]:
        """Absorb in the background for as long as the body runs (in the job's child only)."""
        task = asyncio.create_task(self._meanwhile()) if _INBOX is not None else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _meanwhile(self) -> None:
        while True:
            await asyncio.sleep(INBOX_POLL_S)
            if self._open:
                self.absorb_now()
