"""Each live benchmark's targets read figures its own code writes: every ``from`` pointer
resolves on figures built by the bench's functions, and the verdicts follow the limits."""

from __future__ import annotations

from typing import Any

from bench import freshness
from bench.record import derive


def _judged(figures: dict[str, Any], targets: dict[str, Any]) -> dict[str, Any]:
    return derive({"full": {"figures": figures}}, targets)


def test_freshness_targets_read_the_p95_of_every_probe() -> None:
    found = [{"basic_s": 0.5 + i / 100, "local_s": 1.0} for i in range(99)]
    found.append({"basic_s": None, "local_s": 1.0})  # never found: counts as the timeout
    figures = freshness.found_figures(found)
    assert figures["basic_found"] == 99 and figures["basic_s"]["n"] == 100
    assert figures["basic_s"]["max"] == freshness.FIND_TIMEOUT_S
    judged = _judged(figures, freshness.TARGETS)
    assert judged["basic_p95_s"]["met"] and judged["basic_p95_s"]["value"] == 1.44
    assert judged["local_p95_s"]["met"]
    slow = freshness.found_figures([{"basic_s": 3.0, "local_s": 1.0}] * 100)
    assert not _judged(slow, freshness.TARGETS)["basic_p95_s"]["met"]
