"""Check every committed benchmark result against its provenance and its own figures.

Run by ``make test``: ``python -m bench.check_results``. Fails (exit 1) when a results file
names no commit, a commit not in this history, a dirty tree, a mode other than its key, or
when a target's ``value``, ``met`` or ``marginal`` does not follow from the figure its
``from`` pointer names; when a full run's timed figure has fewer than 3 repeats or a
percentile fewer than 100 samples. Prints, without failing, the runs whose commit is older
than the last change to the code they measure: their figures may no longer describe it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.record import MIN_PERCENTILE_SAMPLES, MIN_REPEATS, MODES, recheck
from bench.results_io import RESULTS, ROOT

PROVENANCE = ("commit", "dirty", "date", "machine", "mode", "settings", "measures", "figures")
MACHINE = ("cpu", "cores", "load_at_start")


def _git_ok(*args: str) -> bool:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True).returncode == 0


def in_history(commit: str) -> bool:
    """Whether ``commit`` is a commit of HEAD's history."""
    return _git_ok("merge-base", "--is-ancestor", commit, "HEAD")


def changed_since(commit: str, paths: list[str]) -> list[str]:
    """Commits after ``commit`` that touch ``paths`` (short hashes), newest first."""
    out = subprocess.run(
        ["git", "log", "--format=%h", f"{commit}..HEAD", "--", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return out.stdout.split()


def _sampled(node: Any, pointer: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every timing (``median``/``min``/``max``/``n``) and percentile set (``p…``/``n``)."""
    if isinstance(node, dict):
        keys = set(node)
        if "n" in keys and ("median" in keys or any(re.fullmatch(r"p\d+", k) for k in keys)):
            yield pointer, node
        for key, value in node.items():
            yield from _sampled(value, f"{pointer}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _sampled(value, f"{pointer}/{i}")


def run_problems(mode: str, run: Any) -> list[str]:
    """What is wrong with one stamped run."""
    if not isinstance(run, dict):
        return [f"{mode}: not an object"]
    wrong = [f"{mode}: lacks {key}" for key in PROVENANCE if key not in run]
    if wrong:
        return wrong
    commit = str(run["commit"])
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        wrong.append(f"{mode}: commit {commit!r} is not a git hash")
    elif not in_history(commit):
        wrong.append(f"{mode}: commit {commit[:10]} is not in this history")
    if run["dirty"] is not False:
        wrong.append(f"{mode}: measured on a dirty tree ({run['dirty']!r})")
    if run["mode"] != mode:
        wrong.append(f"{mode}: its mode says {run['mode']!r}")
    wrong += [f"{mode}: machine lacks {k}" for k in MACHINE if k not in run["machine"]]
    if mode == "full":
        for pointer, node in _sampled(run["figures"]):
            least = MIN_REPEATS if "median" in node else MIN_PERCENTILE_SAMPLES
            if int(node["n"]) < least:
                wrong.append(f"full: {pointer} from {node['n']} samples, fewer than {least}")
    return wrong


def file_problems(document: Any) -> list[str]:
    """What is wrong with one results file (empty: nothing)."""
    if not isinstance(document, dict) or "bench" not in document:
        return ["not a stamped results file (no 'bench')"]
    runs = [m for m in MODES if m in document]
    if not runs:
        return ["holds neither a full nor a quick run"]
    wrong = [p for mode in runs for p in run_problems(mode, document[mode])]
    targets = document.get("targets", {})
    if targets and "full" not in document:
        wrong.append("targets without a full run to judge them on")
    for name, target in targets.items():
        wrong += [f"target {name}: {p}" for p in recheck(target, document)]
    return wrong


def stale(document: dict[str, Any]) -> list[str]:
    """One line per run whose measured code changed after its commit."""
    lines = []
    for mode in MODES:
        run = document.get(mode)
        if not isinstance(run, dict) or not in_history(str(run.get("commit", ""))):
            continue
        later = changed_since(run["commit"], list(run.get("measures", [])))
        if later:
            lines.append(
                f"{mode} run of {run['commit'][:10]}: {len(later)} later commit(s) change "
                f"the code it measures (newest {later[0]})"
            )
    return lines


def main(results: Path = RESULTS) -> int:
    failed = 0
    files = sorted(results.glob("*.json"))
    for path in files:
        document = json.loads(path.read_text(encoding="utf-8"))
        for line in file_problems(document):
            print(f"{path.name}: {line}", file=sys.stderr)
            failed = 1
        for line in stale(document) if isinstance(document, dict) else []:
            print(f"{path.name}: stale: {line}")
    if not files:
        print(f"no results files in {results}", file=sys.stderr)
        return 1
    print(f"bench results: {len(files)} file(s) checked, {'errors above' if failed else 'ok'}")
    return failed


if __name__ == "__main__":
    sys.exit(main())
