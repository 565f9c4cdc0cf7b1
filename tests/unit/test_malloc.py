"""The C library's heap trim (``core.malloc.trim_heap``) that the community job makes after
each save: pages a large run freed go back to the system."""

from __future__ import annotations

import sys

import pytest

from core.malloc import trim_heap


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
