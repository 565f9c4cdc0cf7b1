"""bench/scale.py's reading of the job's status: a +40 taken in by several runs costs them all."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from bench.scale import PssSampler, RunWatch, main
from core.job_status import JobStatus, LastRun, LightCommit, write_status
from core.settings import Settings, get_settings


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    monkeypatch.delenv("KGRAG_CONFIG", raising=False)
    monkeypatch.setenv("KGRAG_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KGRAG_NAMESPACE", "benchscale")
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


def a_run(version: int, duration_s: float, commit_s: float) -> LastRun:
    return LastRun(
        version=version,
        finished_at=time.time(),
        duration_s=duration_s,
        changes=40,
        events=0,
        reports_regenerated=1,
        summaries_written=0,
        failed_items=0,
        phases={"snapshot": commit_s},
    )


def a_status(run: LastRun, light: LightCommit | None = None) -> JobStatus:
    now = time.time()
    return JobStatus(
        state="waiting",
        pid=1,
        started_at=now,
        updated_at=now,
        last_run=run,
        last_light_commit=light,
        light_commits=0 if light is None else 1,
    )


def test_every_run_and_light_commit_after_the_last_complete_version_is_summed(
    settings: Settings,
) -> None:
    watch = RunWatch(settings)
    write_status(settings, a_status(a_run(10, 9.0, 4.0)))  # the run before the +40
    watch.poll()
    write_status(settings, a_status(a_run(10, 9.0, 4.0), LightCommit(11, time.time(), 12, 0.5)))
    watch.poll()
    write_status(settings, a_status(a_run(12, 2.0, 0.5)))  # took the first of the 40 in
    watch.poll()
    write_status(settings, a_status(a_run(13, 1.5, 0.25)))  # and the rest
    run_s, commit_s, runs = watch.between(10, 13, timeout_s=1)
    assert runs == 2
    assert run_s == pytest.approx((2.0 - 0.5) + (1.5 - 0.25))
    assert commit_s == pytest.approx(0.5 + 0.25 + 0.5)


def test_a_version_the_status_never_names_times_out_with_its_number(settings: Settings) -> None:
    write_status(settings, a_status(a_run(4, 1.0, 0.1)))
    with pytest.raises(TimeoutError, match="version 5"):
        RunWatch(settings, period_s=0.05).between(4, 5, timeout_s=0.3)


def test_a_run_missed_between_polls_is_an_error_not_a_smaller_figure(settings: Settings) -> None:
    watch = RunWatch(settings)
    write_status(settings, a_status(a_run(7, 1.0, 0.1)))
    with pytest.raises(RuntimeError, match="version 6"):
        watch.between(5, 6, timeout_s=1)


def test_the_progress_line_names_the_last_run_and_what_waits(settings: Settings) -> None:
    sampler = PssSampler(worker_pid=os.getpid(), settings=settings)
    assert sampler.progress().startswith("no run yet")
    run = replace(a_run(9, 61.0, 2.0), reports_regenerated=2000, reports_deferred=5310)
    write_status(settings, a_status(run, LightCommit(10, time.time(), 12, 0.5)))
    line = sampler.progress()
    assert "last run v9 (61 s, 2000 reports, 5310 waiting), 1 light commits" in line


@pytest.mark.parametrize("out", [None, Path(__file__).parents[2] / "bench/results/x.json"])
def test_sizes_of_ones_choosing_are_never_written_among_the_results(
    out: Path | None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--sizes", "10", *(["--out", str(out)] if out is not None else [])]
    with pytest.raises(SystemExit):
        main(argv)
    assert "--sizes writes to --out only" in capsys.readouterr().err
