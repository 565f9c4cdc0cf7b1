"""A conversation file for ``kgrag query --history`` and ``kgrag questions --history``: the
forms it may take, and a clear error for each way it can be wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from query.errors import QueryError
from query.history import read_history

TURNS = (
    {"role": "user", "content": "What did OPEC decide?"},
    {"role": "assistant", "content": "It held output."},
)


@pytest.mark.parametrize(
    "text",
    [
        '[{"role": "user", "content": "What did OPEC decide?"},'
        ' {"role": "assistant", "content": "It held output."}]',
        '{"history": [{"content": "What did OPEC decide?"},'
        ' {"role": "assistant", "content": "It held output."}]}',
        '{"role": "user", "content": "What did OPEC decide?"}\n\n'
        '{"role": "assistant", "content": "It held output."}\n',
    ],
    ids=["list", "object", "lines"],
)
def test_a_conversation_file_in_any_of_its_forms(tmp_path: Path, text: str) -> None:
    path = tmp_path / "h.json"
    path.write_text(text, encoding="utf-8")
    assert read_history(path) == TURNS


def test_an_empty_file_is_no_history(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text("\n", encoding="utf-8")
    assert read_history(path) == ()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"role": "user", "content": "a"}\nnot json', "h.json:2 is not JSON"),
        ('{"turns": []}', "holds no list of turns"),
        ('[{"role": "system", "content": "a"}]', "turn 1 must be an object"),
        ('[{"role": "user", "content": 3}]', "turn 1 must be an object"),
        ('["just text"]', "turn 1 must be an object"),
    ],
)
def test_what_is_wrong_is_said(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "h.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(QueryError, match=said):
        read_history(path)
    with pytest.raises(QueryError, match="cannot read the history file"):
        read_history(tmp_path / "missing.json")
