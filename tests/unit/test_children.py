"""Helper processes never outlive the process that started them, even one killed with -9, and
the supervisor restarts the one that must keep running."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.children import Supervisor, backoff_s, describe_exit, kgrag_argv

# A process that starts a spawn-context pool the way the community job does, prints its pool
# worker's pid, then waits to be killed.
_POOL_OWNER = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from core.children import die_with_parent
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


# ---- the supervisor ------------------------------------------------------------------------

# A child that records each start ("<restarts passed> <time>") in the file named by argv[1],
# then behaves as the plan for that start says: "exit:N", "kill:SIG", "sleep:S" (run S seconds,
# then exit 3), or "forever" (until terminated; "stubborn" also ignores SIGTERM).
_PLANNED_CHILD = """
import os, signal, sys, time
log, plan = sys.argv[1], sys.argv[2].split(",")
restarts = int(sys.argv[sys.argv.index("--supervisor-restarts") + 1])
run = len(open(log).read().splitlines()) if os.path.exists(log) else 0
kind, _, arg = plan[min(run, len(plan) - 1)].partition(":")
if kind == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(log, "a") as f:
    f.write(f"{restarts} {time.time()}\\n")
if kind == "exit":
    sys.exit(int(arg))
if kind == "kill":
    os.kill(os.getpid(), getattr(signal, arg))
if kind == "sleep":
    time.sleep(float(arg))
    sys.exit(3)
time.sleep(120)
"""

BASE = 0.05  # seconds: a fast backoff for tests


def planned(tmp_path: Path, *plan: str, **options: Any) -> tuple[Supervisor, Path]:
    log = tmp_path / "starts.log"
    argv = [sys.executable, "-c", _PLANNED_CHILD, str(log), ",".join(plan)]
    options.setdefault("backoff_base_s", BASE)
    return Supervisor(argv, name="planned", **options), log


def starts(log: Path) -> list[tuple[int, float]]:
    if not log.exists():
        return []
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(int(n), float(t)) for n, t in rows]


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def stop_later() -> Iterator[list[Supervisor]]:
    """Supervisors a test started, stopped even when the test fails."""
    started: list[Supervisor] = []
    yield started
    for sup in started:
        sup.stop()


class TestSupervisor:
    def test_restarts_with_the_count_and_a_growing_backoff(
        self, tmp_path: Path, stop_later: list[Supervisor]
    ) -> None:
        sup, log = planned(tmp_path, "exit:3", "exit:3", "forever")
        stop_later.append(sup.start())
        wait_until(lambda: len(starts(log)) == 3 and sup.pid is not None)
        seen = starts(log)
        assert [n for n, _ in seen] == [0, 1, 2]
        assert [e.returncode for e in sup.exits] == [3, 3]
        assert all(e.reason == "exited with code 3" for e in sup.exits)
        assert [e.restart_in_s for e in sup.exits] == [BASE, 2 * BASE]
        gaps = [b - a for (_, a), (_, b) in itertools.pairwise(seen)]
        assert gaps[0] >= BASE and gaps[1] >= 2 * BASE
        pid = sup.pid
        assert sup.restarts == 2 and pid is not None and _alive(pid)

    def test_stop_ends_the_child_and_it_is_not_restarted(
        self, tmp_path: Path, stop_later: list[Supervisor]
    ) -> None:
        sup, log = planned(tmp_path, "forever")
        stop_later.append(sup.start())
        wait_until(lambda: len(starts(log)) == 1 and sup.pid is not None)
        pid = sup.pid
        assert pid is not None
        sup.stop()
        assert not _alive(pid) and not sup.running
        time.sleep(4 * BASE)
        assert len(starts(log)) == 1 and sup.exits == () and sup.restarts == 0

    def test_stop_during_the_backoff_cancels_the_restart(
        self, tmp_path: Path, stop_later: list[Supervisor]
    ) -> None:
        sup, log = planned(tmp_path, "exit:1", backoff_base_s=30.0, backoff_max_s=30.0)
        stop_later.append(sup.start())
        wait_until(lambda: len(sup.exits) == 1)
        began = time.monotonic()
        sup.stop()
        assert time.monotonic() - began < 2.0
        assert not sup.running and len(starts(log)) == 1

    def test_a_child_ignoring_sigterm_is_killed_on_stop(
        self, tmp_path: Path, stop_later: list[Supervisor], caplog: pytest.LogCaptureFixture
    ) -> None:
        sup, log = planned(tmp_path, "stubborn", stop_timeout_s=0.3)
        stop_later.append(sup.start())
        wait_until(lambda: len(starts(log)) == 1 and sup.pid is not None)
        pid = sup.pid
        assert pid is not None
        with caplog.at_level(logging.WARNING, logger="core.children"):
            sup.stop()
        assert not _alive(pid) and sup.exits == ()
        assert any("ignored SIGTERM" in r.getMessage() for r in caplog.records)

    def test_death_by_signal_is_logged_by_name(
        self, tmp_path: Path, stop_later: list[Supervisor], caplog: pytest.LogCaptureFixture
    ) -> None:
        sup, log = planned(tmp_path, "kill:SIGKILL", "forever")
        with caplog.at_level(logging.WARNING, logger="core.children"):
            stop_later.append(sup.start())
            wait_until(lambda: len(starts(log)) == 2)
        assert sup.exits[0].returncode == -signal.SIGKILL
        assert sup.exits[0].reason == "killed by SIGKILL"
        assert any(
            "planned" in r.getMessage() and "killed by SIGKILL" in r.getMessage()
            for r in caplog.records
        )

    def test_a_stable_run_resets_the_backoff(
        self, tmp_path: Path, stop_later: list[Supervisor]
    ) -> None:
        sup, log = planned(
            tmp_path, "exit:3", "exit:3", "sleep:1.2", "exit:3", "forever", stable_after_s=1.0
        )
        stop_later.append(sup.start())
        wait_until(lambda: len(starts(log)) == 5)
        assert [e.restart_in_s for e in sup.exits] == [BASE, 2 * BASE, BASE, 2 * BASE]
        assert [n for n, _ in starts(log)] == [0, 1, 2, 3, 4]

    def test_a_command_that_cannot_start_is_retried(
        self, tmp_path: Path, stop_later: list[Supervisor]
    ) -> None:
        sup = Supervisor([str(tmp_path / "no-such-program")], name="missing", backoff_base_s=BASE)
        stop_later.append(sup.start())
        wait_until(lambda: len(sup.exits) >= 2)
        assert sup.exits[0].pid is None and sup.exits[0].reason.startswith("could not start")
        assert sup.running


# An owner process that supervises a long-running child, prints its pid, then waits.
_SUPERVISOR_OWNER = """
import sys, time
from core.children import Supervisor
sup = Supervisor([sys.executable, "-c", "import time; time.sleep(120)"], name="c").start()
while sup.pid is None:
    time.sleep(0.01)
print(sup.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_a_supervised_child_dies_when_its_owner_is_killed() -> None:
    owner = subprocess.Popen([sys.executable, "-c", _SUPERVISOR_OWNER], stdout=subprocess.PIPE)
    try:
        assert owner.stdout is not None
        child = int(owner.stdout.readline())
        assert _alive(child)
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
        wait_until(lambda: not _alive(child), timeout=10)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


def test_backoff_doubles_up_to_its_cap() -> None:
    assert [backoff_s(i, 0.5, 3.0) for i in range(6)] == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert backoff_s(10_000, 1.0, 60.0) == 60.0


def test_exit_reasons() -> None:
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(-signal.SIGTERM) == "killed by SIGTERM"


def test_community_job_accepts_the_restart_count() -> None:
    from typer.testing import CliRunner

    from kgrag.cli import app

    result = CliRunner().invoke(app, ["community-job", "--supervisor-restarts", "2", "--help"])
    assert result.exit_code == 0, result.output
    assert kgrag_argv(["community-job"])[1:] == ["-m", "kgrag.cli", "community-job"]


class TestGraphWorkerHelpers:
    """``kgrag worker`` starts its helpers (the community job, the vector worker) once it is
    ready, so a restarted worker does not share the cores with their start-up; a worker that
    never gets ready still starts them after a while."""

    @staticmethod
    def worker(helpers: list[Supervisor], after_s: float) -> Any:
        import faust

        from kgrag.worker import GraphWorker

        app = faust.App("helpers-test", broker="kafka://127.0.0.1:1", autodiscover=False)
        return GraphWorker(app, helpers=helpers, loglevel="warning", helpers_after_s=after_s)

    def test_ready_starts_the_helpers_once(
        self, tmp_path: Path, stop_later: list[Supervisor]
    ) -> None:
        import asyncio

        sup, log = planned(tmp_path, "forever")
        stop_later.append(sup)
        worker = self.worker([sup], after_s=60)
        time.sleep(0.3)
        assert starts(log) == [] and not sup.running, "a helper started before the worker was ready"
        asyncio.run(worker.on_startup_finished())
        wait_until(lambda: len(starts(log)) == 1)
        worker.start_helpers()  # the timer firing afterwards must not start it twice
        time.sleep(0.3)
        assert len(starts(log)) == 1 and sup.running

    def test_a_worker_never_ready_starts_them_after_the_timeout(
        self, tmp_path: Path, stop_later: list[Supervisor]
    ) -> None:
        sup, log = planned(tmp_path, "forever")
        stop_later.append(sup)
        t0 = time.time()
        self.worker([sup], after_s=0.5)
        wait_until(lambda: len(starts(log)) == 1)
        assert starts(log)[0][1] - t0 >= 0.5
