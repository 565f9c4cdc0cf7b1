"""Helper processes a command starts and must not outlive (Linux: the kernel kills them)."""

from __future__ import annotations

import atexit
import ctypes
import signal
import subprocess
import sys
from collections.abc import Sequence

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass  # not Linux: atexit below still stops the child on a normal exit


def start_child(args: Sequence[str]) -> subprocess.Popen[bytes]:
    """``kgrag <args>`` as a child that ends when this process ends, however it ends."""
    proc = subprocess.Popen([sys.executable, "-m", "kgrag.cli", *args], preexec_fn=_die_with_parent)

    def stop() -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    atexit.register(stop)
    return proc
