"""Run every benchmark, quick (``make bench``) or full (``make bench-full``), one at a time.

Each benchmark runs as its own process in its own session. This runner makes itself the
*subreaper* of everything below it (Linux ``PR_SET_CHILD_SUBREAPER``), so a worker, a query
service or a pool process a benchmark started is re-parented here, not to init, when the
benchmark ends or is killed; after each benchmark, and when this runner is interrupted, every
process left below it is terminated, then killed. A killed benchmark leaves nothing behind.

Usage: ``python -m bench.run_all [--full] [--only NAME …] [--timeout S]``
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results_io import ROOT

_PR_SET_CHILD_SUBREAPER = 36

# In order: the quick, in-process ones first, the live pipelines after.
BENCHES = (
    "offline_extractor",
    "hub_entity",
    "aliases",
    "hierarchy",
    "incremental",
    "change_cost",
    "graph_tables",
    "graph_tables_s3",
    "retrieval",
    "query",
    "storylines",
    "ingest",
    "llm_mode",
    "freshness",
    "chaos",
    "scale",
    "state_store",
)


def become_subreaper() -> None:
    """Adopt the orphans of everything started below (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1)


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        out.append(child)
        todo.extend(children.get(child, []))
    return out


def reap_all(grace_s: float = 10.0) -> int:
    """Terminate, then kill, every process left below this one; how many there were."""
    left = descendants(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and descendants(os.getpid()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(-1, os.WNOHANG)
            time.sleep(0.1)
        left = descendants(os.getpid())
        if not left:
            break
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    return len(left)


def argv_for(name: str, full: bool) -> list[str]:
    """The command line of one benchmark (``graph_tables_s3`` is ``graph_tables --store s3``)."""
    script, extra = ("graph_tables", ["--store", "s3"]) if name == "graph_tables_s3" else (name, [])
    return [sys.executable, str(ROOT / "bench" / f"{script}.py"), *extra, *(["--full"] * full)]


def run_one(name: str, full: bool, timeout_s: float) -> int:
    """Run one benchmark to its end (or its timeout); its exit code (124: timed out)."""
    print(f"== {name} ({'full' if full else 'quick'})", flush=True)
    started = time.monotonic()
    proc = subprocess.Popen(argv_for(name, full), cwd=ROOT, start_new_session=True)
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        print(f"{name}: timed out after {timeout_s:.0f} s", file=sys.stderr)
        code = 124
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        left = reap_all()
        if left:
            print(f"{name}: {left} process(es) outlived it and were stopped", file=sys.stderr)
    print(f"== {name}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="full runs (targets are judged)")
    parser.add_argument("--only", nargs="+", choices=BENCHES, help="these benchmarks only")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per benchmark")
    args = parser.parse_args(argv)
    become_subreaper()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    failed = []
    try:
        for name in args.only or BENCHES:
            if run_one(name, args.full, args.timeout) != 0:
                failed.append(name)
    finally:
        reap_all()
    print(f"benchmarks failed: {', '.join(failed)}" if failed else "every benchmark ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
