"""Helper processes a command starts and must not outlive (Linux: the kernel kills them)."""

from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask the kernel to send this process SIGTERM when its parent dies (Linux).

    Used as ``preexec_fn`` of ``start_child`` and as the ``initializer`` of process pools: a
    ``ProcessPoolExecutor`` worker otherwise outlives a parent that was killed, blocked for
    ever on its call queue (it holds that pipe's write end itself, so it never sees EOF).
    """
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        return  # not Linux: atexit below still stops the child on a normal exit
    if os.getppid() == 1:  # the parent died before the request was in place
        os._exit(0)


def start_child(args: Sequence[str]) -> subprocess.Popen[bytes]:
    """``kgrag <args>`` as a child that ends when this process ends, however it ends."""
    proc = subprocess.Popen([sys.executable, "-m", "kgrag.cli", *args], preexec_fn=die_with_parent)

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
