"""bench/chaos.py's private services do not outlive the bench: its guard stops them when the
bench is killed with -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A chaos-like owner: a "service" started in a session of its own and recorded as the
# launcher records one, and the guard; prints the service's pid, then waits to be killed.
_OWNER = """
import subprocess, sys, time
from pathlib import Path
from bench.chaos import start_guard
from kgrag.services.process import ServiceRecord
state = Path(sys.argv[1])
argv = [sys.executable, "-c", "import time; time.sleep(120)"]
service = subprocess.Popen(argv, start_new_session=True)
ServiceRecord("fake", service.pid, {}, "0", argv, time.time()).save(state / "fake" / "service.json")
start_guard(state)
print(service.pid, flush=True)
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
def test_the_guard_stops_the_services_of_a_killed_bench(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(tmp_path)], stdout=subprocess.PIPE, env=env
    )
    service = None
    try:
        assert owner.stdout is not None
        service = int(owner.stdout.readline())
        assert _alive(service)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 30
        while _alive(service) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(service), "the private service outlived the killed bench"
    finally:
        if service is not None and _alive(service):
            os.kill(service, signal.SIGKILL)  # do not leak it from the test either
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
