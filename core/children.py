"""Helper processes a command starts and must not outlive (Linux: the kernel kills them), and
the supervisor that keeps a long-running helper (the community job) alive.

The worker's community job runs in its own process so a crash, a memory blow-up or a wedged
pool there cannot take the stream worker down. The other side of that isolation is that its
death goes unnoticed unless something waits for it: :class:`Supervisor` waits, says why the
child ended (exit code or signal), and starts it again after an exponential backoff, telling the
new process how many restarts came before it (``--supervisor-restarts N``) so the job can report
it in its status.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
RESTARTS_OPTION = "--supervisor-restarts"


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up once: resolving it in a freshly forked child (``dlopen``)
    is what a ``preexec_fn`` must avoid while other threads may hold the loader's locks."""
    try:
        fn: Callable[..., int] = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux: the atexit stops below still end children on a normal exit
    return fn


def die_with_parent(expected_parent: int | None = None) -> None:
    """Ask the kernel to send this process SIGTERM when its parent dies (Linux).

    Used as ``preexec_fn`` of child processes and as the ``initializer`` of process pools: a
    ``ProcessPoolExecutor`` worker otherwise outlives a parent that was killed, blocked for
    ever on its call queue (it holds that pipe's write end itself, so it never sees EOF). The
    kernel ties the signal to the *thread* that started the child, so a supervisor starts its
    child from the thread that lives as long as the child should. ``expected_parent`` (the
    starter's pid) detects a parent that died before the request was in place even when the
    orphan is adopted by a subreaper rather than by init.
    """
    prctl = _prctl()
    if prctl is None:
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    parent = os.getppid()
    if parent == 1 or (expected_parent is not None and parent != expected_parent):
        os._exit(0)


def kgrag_argv(args: Sequence[str]) -> list[str]:
    """The command line of ``kgrag <args>`` run by this interpreter."""
    return [sys.executable, "-m", "kgrag.cli", *args]


# ---- supervision ---------------------------------------------------------------------------


def describe_exit(returncode: int) -> str:
    """Why a child ended, for a log line: its exit code, or the name of the signal."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def backoff_s(attempt: int, base_s: float, max_s: float) -> float:
    """Delay before restart number ``attempt`` (0-based) of a run of quick failures: doubling
    from ``base_s``, capped at ``max_s``, so a crash loop costs little and a one-off crash
    is recovered from at once."""
    return min(max_s, base_s * 2.0 ** min(attempt, 64))


@dataclass(frozen=True, slots=True)
class ChildExit:
    """One end of a supervised child, as the supervisor saw it."""

    pid: int | None  # None when the process could not be started at all
    returncode: int | None  # negative: killed by that signal; None: not started
    reason: str  # "exited with code 3", "killed by SIGKILL", "could not start: ..."
    ran_s: float
    restart_in_s: float  # the backoff waited before the next start


class Supervisor:
    """Runs ``argv`` as a child process and restarts it whenever it ends, until stopped.

    A background daemon thread starts the child, waits for it and, when it ends for any reason
    other than :meth:`stop`, logs a warning with the reason and starts it again after
    :func:`backoff_s`; a child that ran for at least ``stable_after_s`` had recovered, so the
    backoff starts over. Each start appends ``--supervisor-restarts N`` (restarts so far) to
    ``argv``.

    The child never outlives this process: it asks the kernel for SIGTERM when the supervising
    thread dies (kill -9 included), and :meth:`stop`, registered with ``atexit``, terminates it
    on a normal exit. It runs in its own process group, so a Ctrl-C at the terminal reaches
    only this process, which then stops the child itself instead of seeing it "crash" and
    restarting it during shutdown.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        name: str,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        stable_after_s: float = 300.0,
        stop_timeout_s: float = 10.0,
    ) -> None:
        if not argv:
            raise ValueError("Supervisor needs a command to run")
        if backoff_base_s <= 0 or backoff_max_s < backoff_base_s:
            raise ValueError(
                f"backoff needs 0 < base <= max, got base {backoff_base_s}, max {backoff_max_s}"
            )
        self.argv = list(argv)
        self.name = name
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.stable_after_s = stable_after_s
        self.stop_timeout_s = stop_timeout_s
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._restarts = 0
        self._exits: deque[ChildExit] = deque(maxlen=100)
        _prctl()  # resolve it here, never in a forked child

    # ---- what the supervisor has seen ----

    @property
    def restarts(self) -> int:
        """How many times the child was started again after it ended."""
        return self._restarts

    @property
    def exits(self) -> tuple[ChildExit, ...]:
        """The child's unexpected ends, oldest first (the last 100)."""
        return tuple(self._exits)

    @property
    def pid(self) -> int | None:
        """The running child's pid, or None between a death and its restart."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    @property
    def running(self) -> bool:
        """True from :meth:`start` until :meth:`stop` (or until the thread failed)."""
        return self._thread is not None and self._thread.is_alive()

    # ---- control ----

    def start(self) -> Supervisor:
        """Start the child and the thread that watches it; returns ``self``."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError(f"supervisor of {self.name} was already started")
            self._thread = threading.Thread(
                target=self._watch, name=f"supervisor-{self.name}", daemon=True
            )
        atexit.register(self.stop)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Terminate the child (SIGTERM, then SIGKILL after ``stop_timeout_s``) and do not
        restart it. Safe to call more than once, and from ``atexit``."""
        with self._lock:
            self._stopping.set()
            proc = self._proc
        atexit.unregister(self.stop)
        if proc is not None and proc.poll() is None:
            proc.terminate()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        thread.join(self.stop_timeout_s)
        if thread.is_alive() and proc is not None:
            log.warning("%s ignored SIGTERM for %.0f s; killing it", self.name, self.stop_timeout_s)
            proc.kill()
            thread.join()

    # ---- the watching thread ----

    def _spawn(self) -> tuple[subprocess.Popen[bytes] | None, str]:
        """Start the child; a child that cannot be started counts as one that died at once."""
        argv = [*self.argv, RESTARTS_OPTION, str(self._restarts)]
        try:
            proc = subprocess.Popen(
                argv,
                preexec_fn=functools.partial(die_with_parent, os.getpid()),
                process_group=0,
            )
        except (OSError, subprocess.SubprocessError) as e:
            return None, f"could not start: {e}"
        return proc, ""

    def _watch(self) -> None:
        attempt = 0  # restarts since the child last ran for stable_after_s
        while True:
            with self._lock:
                if self._stopping.is_set():
                    return
                proc, reason = self._spawn()
                self._proc = proc
            started = time.monotonic()
            if proc is not None:
                reason = describe_exit(proc.wait())
            ran_s = time.monotonic() - started
            if self._stopping.is_set():
                return
            if ran_s >= self.stable_after_s:
                attempt = 0
            delay = backoff_s(attempt, self.backoff_base_s, self.backoff_max_s)
            attempt += 1
            pid = None if proc is None else proc.pid
            self._exits.append(
                ChildExit(pid, None if proc is None else proc.returncode, reason, ran_s, delay)
            )
            log.warning(
                "%s (pid %s) %s after %.1f s; restarting it in %.2f s (restart %d)",
                self.name,
                pid,
                reason,
                ran_s,
                delay,
                self._restarts + 1,
            )
            if self._stopping.wait(delay):
                return
            self._restarts += 1


def supervise_kgrag(
    args: Sequence[str],
    *,
    name: str | None = None,
    backoff_base_s: float = 1.0,
    backoff_max_s: float = 60.0,
    stable_after_s: float = 300.0,
    start: bool = True,
) -> Supervisor:
    """``kgrag <args>`` as a supervised child, started (unless ``start`` is False: the caller
    calls :meth:`Supervisor.start`): restarted when it dies, ended with this process.
    ``args`` must end where ``--supervisor-restarts N`` may follow (after the command's own
    options)."""
    supervisor = Supervisor(
        kgrag_argv(args),
        name=name or (args[0] if args else "kgrag"),
        backoff_base_s=backoff_base_s,
        backoff_max_s=backoff_max_s,
        stable_after_s=stable_after_s,
    )
    return supervisor.start() if start else supervisor
