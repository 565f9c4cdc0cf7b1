"""`kgrag trends` as a user runs it: as of an earlier version, and compared with one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.settings import Settings, get_settings
from core.tables.opening import open_graph_store
from kgrag.cli import app
from tests.unit.test_query_service import grown


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    monkeypatch.delenv("KGRAG_CONFIG", raising=False)
    monkeypatch.setenv("KGRAG_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KGRAG_NAMESPACE", "clitrends")
    monkeypatch.setenv("KGRAG_COMMUNITY__KEEP_SNAPSHOTS", "3")
    get_settings.cache_clear()
    yield get_settings()
    get_settings.cache_clear()


def test_trends_as_of_and_compared_with_an_earlier_version(settings: Settings) -> None:
    store = open_graph_store(settings)
    for version in range(1, 6):  # three kept: versions 3, 4 and 5
        store.write(grown(version))
    runner = CliRunner()
    now = runner.invoke(app, ["trends", "--json", "--compare", "3"])
    assert now.exit_code == 0, now.output
    body = json.loads(now.output)
    assert body["snapshot_version"] == 5 and body["compared"]["snapshot_version"] == 3
    assert body["communities"] and set(body["compared"]["then"]) == {
        c["id"] for c in body["communities"]
    }
    then = runner.invoke(app, ["trends", "--json", "--as-of", "4"])
    assert then.exit_code == 0 and json.loads(then.output)["snapshot_version"] == 4
    table = runner.invoke(app, ["trends", "--compare", "4"])
    assert table.exit_code == 0 and "v4" in table.output, table.output
    gone = runner.invoke(app, ["trends", "--compare", "1"])
    assert gone.exit_code == 1
    assert "oldest version kept is 3" in gone.output and "Traceback" not in gone.output
