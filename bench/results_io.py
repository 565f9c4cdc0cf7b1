"""What every bench shares around its figures: where data and results live, reading a JSONL
data file, the machine it ran on, the date, a target checked against a figure, and writing
``bench/results/<name>.json``.

``machine(*keys)`` returns the named facts in the given order under the names each result
file already uses (``cores``, ``cpus`` and ``nproc`` are the same count), so every result
keeps its keys while the facts are read in one place.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
REUTERS_DEV = Path("/work/shared/data/reuters-1987-dev.jsonl")


def read_jsonl(path: Path, n: int | None = None) -> list[dict[str, Any]]:
    """The objects of a JSONL file (blank lines skipped), the first ``n`` when ``n`` is given."""
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows[:n] if n else rows


def mode_corpus(
    args: argparse.Namespace, quick_articles: int, namespaces: Mapping[str, str]
) -> tuple[str, int, Settings, list[dict[str, Any]]] | None:
    """A corpus bench's mode, article count (0: all), settings in the mode's namespace and
    articles, from its ``--full``, ``--n`` and ``--data``; None (said) when the data is absent."""
    if not args.data.exists():
        print(f"skipped: {args.data} not found")
        return None
    mode = "full" if args.full else "quick"
    n = args.n if args.n is not None else (0 if args.full else quick_articles)
    settings = Settings().model_copy(update={"namespace": namespaces[mode]})
    return mode, n, settings, read_jsonl(args.data, n or None)


# ---- the machine ----


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    mem_kb = next(
        int(ln.split()[1])
        for ln in Path("/proc/meminfo").read_text().splitlines()
        if ln.startswith("MemTotal")
    )
    return round(mem_kb / 1024 / 1024, 1)


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _igraph_version() -> str:
    try:
        return version("python-igraph")
    except PackageNotFoundError:
        return version("igraph")


_FACTS: dict[str, Callable[[], Any]] = {
    "cpu": _cpu_model,
    "cores": os.cpu_count,
    "cpus": os.cpu_count,
    "nproc": os.cpu_count,
    "memory_gib": _memory_gib,
    "python": platform.python_version,
    "platform": platform.platform,
    "load_avg_at_start": os.getloadavg,  # unrounded, as ingest.json has it
    "load_average_at_start": _load_average,
    "load_average_at_end": _load_average,
    "load_at_start": lambda: round(os.getloadavg()[0], 2),  # the 1-minute figure only
    "leidenalg": lambda: version("leidenalg"),
    "python-igraph": _igraph_version,
}


# the facts of the clustering benches (hierarchy.json, incremental.json)
CLUSTERING_MACHINE = (
    "cpu",
    "cores",
    "load_average_at_start",
    "python",
    "platform",
    "leidenalg",
    "python-igraph",
)


def machine(*keys: str) -> dict[str, Any]:
    """The named facts about this machine, read now, in the order given."""
    return {key: _FACTS[key]() for key in keys}


def machine_line() -> str:
    """The machine in one line: ``x86_64 2 cpus, Python 3.11.7``."""
    return (
        f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}"
    ).replace("  ", " ")


# ---- dates, targets, results ----


def now_iso() -> str:
    """UTC now as ``2026-03-28T12:00:00+00:00``."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def now_zulu() -> str:
    """UTC now as ``2026-03-28T12:00:00Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def target(value: float | bool, limit: float | bool, op: str) -> dict[str, Any]:
    """A figure against its target: ``{"value", "limit", "op", "met"}``; ``op`` is one of
    ``<=``, ``>=``, ``==``."""
    met = {"<=": lambda: value <= limit, ">=": lambda: value >= limit, "==": lambda: value == limit}
    return {"value": value, "limit": limit, "op": op, "met": bool(met[op]())}


def print_targets(result: dict[str, Any], path: Path) -> None:
    """Each target of ``result`` on a line (met or NOT met), then where it was written."""
    for name, t in result["targets"].items():
        print(f"{name}: {t['value']} {t['op']} {t['limit']} {'met' if t['met'] else 'NOT met'}")
    print(f"wrote {path}")


def write_result(path: Path, result: dict[str, Any], *, ensure_ascii: bool = True) -> None:
    """``result`` as indented JSON with a final newline (its folder made when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=2, ensure_ascii=ensure_ascii) + "\n"
    path.write_text(text, encoding="utf-8")
