"""A process a bench starts dies with the bench, even one killed with -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A bench-like owner: starts a long sleep the way bench/live.py starts its processes, prints
# the child's pid, then waits to be killed.
_OWNER = """
import subprocess, sys, time
from bench.live import dies_with_us
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         preexec_fn=dies_with_us())
print(child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_a_child_of_a_killed_bench_dies_with_it() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    owner = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, env=env)
    try:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())
        assert child != owner.pid and _alive(child)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        gone = not _alive(child)
        if not gone:
            os.kill(child, signal.SIGKILL)  # do not leak it from the test either
        assert gone, "the bench's child outlived the killed bench"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


def test_a_child_of_a_living_bench_runs_on() -> None:
    from bench.live import dies_with_us

    child = subprocess.run(
        [sys.executable, "-c", "print('ran')"],
        preexec_fn=dies_with_us(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == "ran"
