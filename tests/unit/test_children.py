"""Helper processes never outlive the process that started them, even one killed with -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

# A process that starts a spawn-context pool the way the community job does, prints its pool
# worker's pid, then waits to be killed.
_POOL_OWNER = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from kgrag.children import die_with_parent
pool = ProcessPoolExecutor(
    max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=die_with_parent
)
print(pool.submit(os.getpid).result(), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by init) counts as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_a_pool_worker_dies_when_its_owner_is_killed() -> None:
    owner = subprocess.Popen([sys.executable, "-c", _POOL_OWNER], stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None
        worker = int(owner.stdout.readline())
        assert worker != owner.pid and _alive(worker)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        gone = not _alive(worker)
        if not gone:
            os.kill(worker, signal.SIGKILL)  # do not leak it from the test either
        assert gone, "the pool worker outlived its killed owner"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
