"""The community job saves its state after a run's version is out, not inside the run: the
child's ``run`` leaves the state unsaved and ``save`` writes it; a save that fails leaves the
last save as the state; the job waits for a pending save before its next call into the child,
records how long it took, and fails its leadership on a failed save as on a failed run."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agents.community.runner as runner_module
from agents.community.job import CommunityJob, RunFailed
from agents.community.state import close_state, load_state, read_offsets, save_state
from core.job_status import read_status
from core.settings import Settings
from tests.unit.test_community_run import settings_for


class _Quick:
    """A run that commits nothing: what is tested is what happens around it."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    async def run(self) -> str:
        return "ran"


@pytest.fixture
def quick_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """A child whose runs commit nothing, on a saved empty state."""
    settings = settings_for(tmp_path)
    monkeypatch.setattr(runner_module, "Runner", _Quick)
    try:
        save_state(settings, load_state(settings))
        yield settings
    finally:
        close_state(settings)


def test_a_run_leaves_the_state_unsaved_and_save_writes_it(quick_child: Settings) -> None:
    settings = quick_child
    assert read_offsets(settings) == {}
    assert runner_module.run(settings.child_json(), [], {0: 12, 1: 3}) == "ran"
    assert read_offsets(settings) == {}  # the version is out; the state not saved yet
    saved = runner_module.save(settings.child_json())
    assert saved.seconds >= 0.0
    if sys.platform.startswith("linux"):  # the child's size, for the job to judge its growth
        assert saved.resident_mib is not None and saved.resident_mib > 10
    assert read_offsets(settings) == {0: 12, 1: 3}


def test_a_failed_save_leaves_the_last_save_as_the_state(
    quick_child: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = quick_child
    runner_module.run(settings.child_json(), [], {0: 12})

    def full_disk(*_: Any) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(runner_module, "save_state", full_disk)
    with pytest.raises(OSError, match="No space left"):
        runner_module.save(settings.child_json())
    assert load_state(settings).offsets == {}  # the state of the last save, not the run's
    assert read_offsets(settings) == {}


def _done(value: Any) -> asyncio.Future[Any]:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    if isinstance(value, BaseException):
        future.set_exception(value)
    else:
        future.set_result(value)
    return future


async def test_the_job_waits_for_the_save_and_records_it(tmp_path: Path) -> None:
    job = CommunityJob(settings_for(tmp_path))
    try:
        release = asyncio.Event()

        async def slow_save() -> runner_module.Saved:
            await release.wait()
            return runner_module.Saved(0.25, None)

        job._saving = asyncio.ensure_future(slow_save())
        waiting = asyncio.ensure_future(job._saved())
        await asyncio.sleep(0.05)
        assert not waiting.done()  # the next call into the child waits for the save
        release.set()
        await waiting
        status = read_status(job.settings)
        assert status is not None and status.last_save_s == 0.25
        assert job._saving is None
        await job._saved()  # nothing pending: returns at once
    finally:
        job._pool.shutdown(cancel_futures=True)


async def test_a_failed_save_fails_the_leadership_as_a_failed_run_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    job = CommunityJob(settings_for(tmp_path))
    try:
        job._saving = _done(RunFailed("OSError: No space left on device"))
        with pytest.raises(RunFailed, match="No space left"):
            await job._saved()
        job._saving = _done(RunFailed("OSError: disk gone"))
        with caplog.at_level(logging.ERROR):
            await job._settle_save()  # as leadership ends: said, not raised
        assert "not saved after the last run (OSError: disk gone)" in caplog.text
    finally:
        job._pool.shutdown(cancel_futures=True)
