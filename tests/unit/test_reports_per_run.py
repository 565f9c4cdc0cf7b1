"""A run regenerates at most ``reports_per_run`` reports; the rest wait, oldest first, for the
runs that follow at once, until every community has the report a run without a limit gives."""

from __future__ import annotations

from pathlib import Path

from graph.job.run import budgeted
from graph.reports.evidence import Decision, Reason, RegenerationPlan
from tests.unit.test_community_run import Job, base_world, settings_for


def _decision(cid: str, level: int, regenerate: bool, before: float) -> Decision:
    reason: Reason = "no_report" if before == 1.0 else "new_evidence"
    return Decision(cid, level, regenerate, reason if regenerate else None, before, 0.0)


def test_a_budget_keeps_the_reports_missing_or_leaving_out_most_and_puts_off_the_rest() -> None:
    plan = RegenerationPlan(
        (
            _decision("a", 2, True, 0.3),
            _decision("b", 2, False, 0.1),
            _decision("c", 1, True, 1.0),
            _decision("d", 1, True, 0.6),
            _decision("e", 0, True, 0.2),
        )
    )
    assert budgeted(plan, 0) == (plan, []) and budgeted(plan, 4) == (plan, [])
    kept, later = budgeted(plan, 2)
    assert kept.to_regenerate == ("c", "d")  # in the plan's order, deepest level first
    assert later == ["a", "e"]  # leaving out most first
    put_off = {d.community_id: d for d in kept.decisions}["a"]
    assert put_off.reason is None and put_off.unreflected_after == 0.3  # kept as it is
    assert [d.community_id for d in kept.decisions] == ["a", "b", "c", "d", "e"]


async def test_reports_put_off_are_written_by_the_runs_that_follow(tmp_path: Path) -> None:
    world = base_world()
    whole = Job(settings_for(tmp_path / "whole"))
    await whole.run(world.view)
    every = {r.id: r.title for r in whole.snapshot().community_reports}
    assert len(every) > 3

    job = Job(settings_for(tmp_path / "limited", reports_per_run=2))
    first = await job.run(world.view)
    assert first.regenerated == 2 and first.reports_deferred == len(every) - 2
    assert first.next_due_at is not None  # a run is due with no new change
    runs = 1
    while job.last is not None and job.last.reports_deferred:
        result = await job.run(world.view)
        assert result.regenerated <= 2
        runs += 1
        assert runs <= len(every)  # each run writes some: the queue drains
    assert job.last is not None and job.last.next_due_at is None
    assert {r.id: r.title for r in job.snapshot().community_reports} == every
