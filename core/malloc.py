"""A cap on the C library's malloc arenas for long-lived processes that read Arrow tables, and
a trim of the pages malloc keeps after a large piece of work.

glibc gives each thread that allocates concurrently an arena of its own, up to eight per
core, and keeps the pages freed in each. The query service runs the Delta reader's runtime
threads, Arrow's I/O and CPU pools and a thread pool for index builds (28 threads serving
8,000 articles); with the default the pages every arena kept after one version's read added
about 30 MiB to its resident memory (``bench/graph_tables.py``). Python holds the GIL for most
of what those threads allocate, so fewer arenas cost little contention.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)

_M_ARENA_MAX = -8  # mallopt parameter number in glibc's malloc.h


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, looked up once (``find_library`` may run ``ldconfig``)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c"))
    except (OSError, TypeError):
        return None


def trim_heap() -> bool:
    """Give the C library's free pages back to the system (glibc ``malloc_trim``): the
    community job calls it after each save, since a run over many articles frees most of
    what it allocated (a 2,000-article run at 100,000 articles: about 1 GiB) and glibc keeps
    such pages otherwise, so the process would stay at its largest run's size. False where
    the C library has no such call."""
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is None:
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))


def cap_malloc_arenas(arenas: int) -> bool:
    """Limit glibc to ``arenas`` malloc arenas (0: leave its default). Call it before the
    process starts threads. True when the C library took the setting; False elsewhere
    (another C library: nothing to do)."""
    if arenas <= 0:
        return False
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    taken = bool(mallopt(_M_ARENA_MAX, arenas))
    if not taken:
        log.info("the C library refused a cap of %d malloc arenas", arenas)
    return taken


def _status_mib(field: str) -> float | None:
    """One size line of ``/proc/self/status`` (``VmRSS``, ``VmHWM``), MiB; None where
    ``/proc`` does not say (not Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            size = next((line.split()[1] for line in fh if line.startswith(f"{field}:")), None)
    except OSError:
        return None
    return None if size is None else round(int(size) / 1024, 1)


def resident_mib() -> float | None:
    """This process's resident size now (``VmRSS``), MiB."""
    return _status_mib("VmRSS")


def peak_rss_mib(*, reset: bool = False) -> float | None:
    """This process's largest resident size since it started or since the last reset
    (``VmHWM``), MiB; with ``reset``, the mark then starts again from the current size
    (``/proc/self/clear_refs``), so the next call gives the peak of what ran between the two.
    None where ``/proc`` does not say (not Linux)."""
    peak = _status_mib("VmHWM")
    if reset and peak is not None:
        with (
            contextlib.suppress(OSError),
            open("/proc/self/clear_refs", "w", encoding="ascii") as fh,
        ):
            fh.write("5")
    return peak


class PhasePeaks:
    """A process's resident peak in each phase of a piece of work (``peaks``, MiB), with the
    work done inside phases but not of them (the community run's light commits, made while
    it waits) counted under its own name instead of the phase it fell in."""

    def __init__(self, first: dict[str, float] | None = None) -> None:
        self.peaks: dict[str, float] = dict(first or {})
        self._carried = 0.0  # the phase's peak before its last piece of work apart

    def lap(self, phase: str) -> None:
        """``phase`` ends now: its peak since the last lap, what ran apart left out."""
        peak = peak_rss_mib(reset=True)
        if peak is not None:
            self.peaks[phase] = max(peak, self._carried)
        self._carried = 0.0

    @contextlib.contextmanager
    def apart(self, name: str) -> Iterator[None]:
        before = peak_rss_mib(reset=True)
        self._carried = max(self._carried, before or 0.0)
        try:
            yield
        finally:
            after = peak_rss_mib(reset=True)
            if after is not None:
                self.peaks[name] = max(self.peaks.get(name, 0.0), after)
