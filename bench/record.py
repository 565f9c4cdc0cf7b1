"""How a benchmark records its figures so they stay true: stamped runs, derived targets.

A results file ``bench/results/<name>.json`` holds up to two runs side by side, ``full`` and
``quick``, each with its provenance (``commit``, ``dirty``, ``date``, ``machine``, ``mode``,
``settings``, ``measures``) and its ``figures``; a quick run never overwrites a full one. The
``targets`` are derived in code from the full run only: each reads one figure by its JSON
pointer (``from``), so a target can always be checked against the figure it came from, and no
figure is copied between files.

A timed figure is the median of repeats with its spread (``timing``); percentiles come with
their sample count (``percentiles``). A target whose limit lies within the measured min-max
spread of its figure is ``marginal`` and does not count as met: one lucky sample at the limit
is not a result.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.results_io import RESULTS, ROOT, machine, now_iso

MODES = ("full", "quick")
OPS = ("<=", ">=", "==")
# what a benchmark measures unless it says otherwise: the product packages
PRODUCT = ("kgrag", "core", "streams", "agents", "offline", "graph", "query", "prompts")
MIN_REPEATS = 3  # a full run's timed figures: medians of at least this many repeats
MIN_PERCENTILE_SAMPLES = 100  # a full run's percentiles: from at least this many samples


@dataclass(frozen=True, slots=True)
class Target:
    """A limit on one figure of the full run: ``pointer`` is the figure's JSON pointer inside
    the run's ``figures`` (``/corpora/8000/plus40_run_s/median``)."""

    pointer: str
    op: str
    limit: float | bool


# ---- figures ----


def timing(samples: Sequence[float], digits: int = 4) -> dict[str, Any]:
    """Repeats of one timed step as ``{"median", "min", "max", "n"}``."""
    if not samples:
        raise ValueError("a timing needs at least one sample")
    return {
        "median": round(statistics.median(samples), digits),
        "min": round(min(samples), digits),
        "max": round(max(samples), digits),
        "n": len(samples),
    }


def ratio(numerator: Mapping[str, Any], denominator: Mapping[str, Any]) -> dict[str, Any]:
    """The ratio of two timings, with the widest spread their repeats allow."""
    return {
        "median": round(numerator["median"] / denominator["median"], 4),
        "min": round(numerator["min"] / denominator["max"], 4),
        "max": round(numerator["max"] / denominator["min"], 4),
        "n": min(numerator["n"], denominator["n"]),
    }


def percentiles(samples: Sequence[float], qs: Sequence[int] = (50, 95), digits: int = 2) -> dict:
    """``{"p50": …, "p95": …, "min", "max", "n"}`` by the nearest-rank method."""
    if not samples:
        raise ValueError("percentiles need at least one sample")
    ordered = sorted(samples)
    out: dict[str, Any] = {}
    for q in qs:
        rank = max(1, math.ceil(q / 100 * len(ordered)))
        out[f"p{q}"] = round(ordered[rank - 1], digits)
    out.update(min=round(ordered[0], digits), max=round(ordered[-1], digits), n=len(ordered))
    return out


# ---- provenance ----


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def dirty() -> bool:
    """Whether the work tree differs from its commit, results files aside (a run of several
    benchmarks writes them as it goes)."""
    return bool(_git("status", "--porcelain", "--", ".", ":(exclude)bench/results"))


def provenance(
    mode: str, settings: Mapping[str, Any], measures: Sequence[str] = ()
) -> dict[str, Any]:
    """Where a run's figures come from: the commit, whether the tree was dirty, the date, the
    machine, the mode, the settings, and the paths of the code it measures."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": dirty(),
        "date": now_iso(),
        "machine": {
            **machine("cpu", "cores", "memory_gib", "python"),
            "load_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "mode": mode,
        "settings": dict(settings),
        "measures": sorted({*PRODUCT, *measures}),
    }


# ---- targets ----


def resolve(document: Any, pointer: str) -> Any:
    """The value at a JSON pointer (RFC 6901) in ``document``; KeyError when absent."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        raise KeyError(f"a JSON pointer starts with '/': {pointer!r}")
    node = document
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            if not token.isdigit() or int(token) >= len(node):
                raise KeyError(pointer)
            node = node[int(token)]
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            raise KeyError(pointer)
    return node


def _spread(document: Any, pointer: str) -> tuple[float, float] | None:
    """The measured min and max beside a median (``…/median``), else None."""
    head, _, last = pointer.rpartition("/")
    if last != "median":
        return None
    parent = resolve(document, head)
    if isinstance(parent, dict) and "min" in parent and "max" in parent:
        return float(parent["min"]), float(parent["max"])
    return None


def judge(value: Any, limit: Any, op: str, spread: tuple[float, float] | None) -> dict[str, Any]:
    """``value`` against ``limit``: ``met``, and ``marginal`` when the limit lies within the
    measured spread (then not met, whatever the median says)."""
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, not {op!r}")
    holds = {"<=": value <= limit, ">=": value >= limit, "==": value == limit}[op]
    marginal = spread is not None and op != "==" and spread[0] <= limit <= spread[1]
    return {"met": bool(holds) and not marginal, "marginal": marginal}


def derive(document: Mapping[str, Any], specs: Mapping[str, Target]) -> dict[str, Any]:
    """Every target of ``specs`` judged on the full run of ``document``; {} without one."""
    if "full" not in document:
        return {}
    out: dict[str, Any] = {}
    for name, spec in specs.items():
        pointer = f"/full/figures{spec.pointer}"
        value = resolve(document, pointer)
        verdict = judge(value, spec.limit, spec.op, _spread(document, pointer))
        out[name] = {"value": value, "limit": spec.limit, "op": spec.op, **verdict}
        out[name]["from"] = pointer
    return out


def recheck(target: Mapping[str, Any], document: Any) -> list[str]:
    """What is wrong with one stored target against the figure it names (empty: nothing)."""
    missing = [k for k in ("value", "limit", "op", "met", "marginal", "from") if k not in target]
    if missing:
        return [f"lacks {', '.join(missing)}"]
    pointer = str(target["from"])
    if not pointer.startswith("/full/figures/"):
        return [f"reads {pointer}, not a figure of the full run"]
    try:
        value = resolve(document, pointer)
    except KeyError:
        return [f"its figure {pointer} is not in the file"]
    wrong = (
        [] if value == target["value"] else [f"value {target['value']} but {pointer} is {value}"]
    )
    try:
        verdict = judge(value, target["limit"], str(target["op"]), _spread(document, pointer))
    except (TypeError, ValueError) as e:
        return [*wrong, f"cannot be judged: {e}"]
    wrong += [
        f"{key} {target[key]} but it follows as {verdict[key]}"
        for key in ("met", "marginal")
        if target[key] != verdict[key]
    ]
    return wrong


# ---- writing ----


def result_path(name: str) -> Path:
    return RESULTS / f"{name}.json"


def record(
    name: str,
    mode: str,
    figures: Mapping[str, Any],
    targets: Mapping[str, Target],
    settings: Mapping[str, Any],
    measures: Sequence[str] = (),
    path: Path | None = None,
    script: str | None = None,
) -> dict[str, Any]:
    """Write this run into ``bench/results/<name>.json`` beside the other mode's run, derive
    the targets from the full run, print them, and return the whole document. ``script``: the
    benchmark's file, when it is not ``bench/<name>.py`` (one script may record two results)."""
    path = path or result_path(name)
    document: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if "full" not in document and "quick" not in document:
        document = {}  # a file from before runs were stamped: replaced whole
    document["bench"] = name
    document[mode] = {**provenance(mode, settings, [script or f"bench/{name}.py", *measures])}
    document[mode]["figures"] = dict(figures)
    document["targets"] = derive(document, targets)
    ordered = {k: document[k] for k in ("bench", "full", "quick", "targets") if k in document}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ordered, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print_verdicts(ordered, path, mode)
    return ordered


def print_verdicts(document: Mapping[str, Any], path: Path, mode: str) -> None:
    """Each target on a line (met, marginal or NOT met), then where the run was written."""
    if mode == "quick":
        print("quick run: targets are judged on full runs only")
    for name, t in document.get("targets", {}).items():
        verdict = "marginal" if t["marginal"] else ("met" if t["met"] else "NOT met")
        print(f"{name}: {t['value']} {t['op']} {t['limit']} {verdict}")
    print(f"wrote the {mode} run to {path}")


def mode_argument(parser: Any) -> None:
    """``--full`` on a benchmark's command line: the run whose figures targets judge."""
    parser.add_argument(
        "--full",
        action="store_true",
        help="the full run (targets are judged on it); default: a quick run",
    )
