"""The C library's heap trim (``core.malloc.trim_heap``) that the community job makes after
each save: pages a large run freed go back to the system; and the resident peak its runs
record by phase (``core.malloc.peak_rss_mib``)."""

from __future__ import annotations

import sys

import pytest

from core.malloc import PhasePeaks, peak_rss_mib, trim_heap


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_trim_gives_back_what_a_large_piece_of_work_freed() -> None:
    blocks = [bytes(2000) for _ in range(100_000)]  # about 200 MB through malloc
    kept = blocks[::1000]  # every thousandth stays: the freed ones are holes glibc keeps
    del blocks
    before = _rss_mib()
    assert trim_heap()
    assert before - _rss_mib() > 100
    assert len(kept) == 100


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_the_peak_covers_what_ran_since_the_last_reset() -> None:
    peak_rss_mib(reset=True)
    start = peak_rss_mib()
    assert start is not None
    block = b"x" * (300 * 2**20)  # every page written, so resident
    del block
    after_work = peak_rss_mib(reset=True)
    assert after_work is not None and after_work - start >= 250
    # the mark starts again from the current size: the freed block is no longer in it
    again = peak_rss_mib()
    assert again is not None and again < after_work - 200


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_work_apart_is_counted_under_its_own_name_not_the_phase_it_fell_in() -> None:
    peaks = PhasePeaks({"fold": 1.0})
    peak_rss_mib(reset=True)
    with peaks.apart("light_commits"):
        block = b"x" * (300 * 2**20)
        del block
    peaks.lap("reports")
    assert peaks.peaks["fold"] == 1.0
    assert peaks.peaks["light_commits"] - peaks.peaks["reports"] >= 250
