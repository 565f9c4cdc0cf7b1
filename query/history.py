"""Conversation history as context: the most recent turns, within their own token budget.

Follows GraphRAG's conversation context: turns are listed most recent first, because when the
budget runs out it is the oldest turns that matter least. A turn that does not fit ends the
history (an older turn after a skipped one would read out of order).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from query.errors import QueryError
from query.tables import Table, TokenCounter, join_tables

HistoryTurn = Mapping[str, str]  # {"role": "user" | "assistant", "content": "..."}


def history_table(
    history: Sequence[HistoryTurn],
    *,
    budget: int,
    count: TokenCounter,
    max_turns: int = 10,
    user_turns_only: bool = False,
) -> str:
    """The history rendered as a ``Conversation`` table, or "" when there is none."""
    table = Table("Conversation", ("turn", "role", "content"), count)
    turns = [t for t in history if str(t.get("content", "")).strip()]
    if user_turns_only:
        turns = [t for t in turns if t.get("role", "user") == "user"]
    for n, turn in enumerate(reversed(turns[-max_turns:] if max_turns else []), start=1):
        cells = (str(turn.get("role", "user")), str(turn.get("content", "")))
        if not table.try_add(n, cells, budget):
            break
    return join_tables([table])


def earlier_questions(history: Sequence[HistoryTurn]) -> list[str]:
    """The user's own turns, oldest first (what question generation must not repeat)."""
    return [
        str(t.get("content", "")).strip()
        for t in history
        if t.get("role", "user") == "user" and str(t.get("content", "")).strip()
    ]


HISTORY_FORMAT = (
    'a JSON list of {"role": "user" or "assistant", "content": "…"} turns, oldest first '
    '(as the API\'s "history"), an object with that list under "history", or one turn per line'
)


def read_history(path: Path) -> tuple[HistoryTurn, ...]:
    """The turns of a conversation file (``HISTORY_FORMAT``), checked as the API checks them;
    a ``QueryError`` says what is wrong where."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise QueryError(f"cannot read the history file {path}: {e}") from e
    try:
        data = json.loads(text) if text.strip() else []
    except ValueError:
        data = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except ValueError as e:
                raise QueryError(
                    f"{path}:{n} is not JSON ({e.args[0]}); write {HISTORY_FORMAT}"
                ) from e
    if isinstance(data, dict) and "history" in data:
        data = data["history"]
    elif isinstance(data, dict) and "content" in data:
        data = [data]  # a file of one turn
    if not isinstance(data, list):
        raise QueryError(f"{path} holds no list of turns; write {HISTORY_FORMAT}")
    turns: list[HistoryTurn] = []
    for n, turn in enumerate(data, start=1):
        role = turn.get("role", "user") if isinstance(turn, dict) else None
        content = turn.get("content") if isinstance(turn, dict) else None
        if role not in ("user", "assistant") or not isinstance(content, str):
            raise QueryError(
                f'{path}: turn {n} must be an object with role "user" or "assistant" and a '
                f"string content, got {json.dumps(turn)[:80]}"
            )
        turns.append({"role": role, "content": content})
    return tuple(turns)
