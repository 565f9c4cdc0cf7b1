"""The community job's child is retired after a save once its memory has grown past
``community.child_regrowth`` times its size after its first save, and the next child loads
the saved state (``agents.community.child``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agents.community import inbox
from agents.community.child import Child
from agents.community.state import close_state, load_state, save_state
from core.settings.community import CommunitySettings
from tests.unit.test_community_run import settings_for

MIN_GROWTH_MIB = CommunitySettings().child_min_growth_mib


async def test_a_grown_child_is_replaced_and_the_next_one_loads_the_state(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    save_state(settings, load_state(settings))
    close_state(settings)
    child = Child(settings.child_json(), 1.5, MIN_GROWTH_MIB)
    assert 400.0 + MIN_GROWTH_MIB > 1.5 * 400.0  # the absolute floor decides below
    try:
        first = await child.call(os.getpid)
        assert not await child.saved(400.0)  # the first save sets the floor
        assert not await child.saved(600.0)  # within 1.5 times
        assert not await child.saved(650.0)  # past 1.5 times, but less than MIN_GROWTH_MIB more
        assert await child.call(os.getpid) == first
        child.inbox.put(("changes sent as the run ended", {0: 1}))
        assert await child.saved(400.0 + MIN_GROWTH_MIB + 1)
        assert child.recycled == 1 and child.broken == 0 and child.floor_mib is None
        assert child.handed_over == 0  # it had loaded no state: nothing to hand over
        second = await child.call(os.getpid)
        assert second != first
        # the new child has the same inbox: what was sent for the next run is not lost
        assert await child.call(_inbox_item) == ("changes sent as the run ended", {0: 1})
        assert not await child.saved(500.0)  # the new child's own floor
    finally:
        child.shutdown()


async def test_no_regrowth_keeps_the_child(tmp_path: Path) -> None:
    child = Child(settings_for(tmp_path).child_json(), 0.0, MIN_GROWTH_MIB)
    try:
        first = await child.call(os.getpid)
        for size in (100.0, 1000.0, 10000.0, None):
            assert not await child.saved(size)
        assert await child.call(os.getpid) == first and child.recycled == 0
    finally:
        child.shutdown()


def _inbox_item() -> Any:
    """What the child's inbox holds first (called in the child)."""
    return inbox._INBOX.get(timeout=10)
