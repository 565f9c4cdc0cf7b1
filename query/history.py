"""Conversation history as context: the most recent turns, within their own token budget.

Follows GraphRAG's conversation context: turns are listed most recent first, because when the
budget runs out it is the oldest turns that matter least. A turn that does not fit ends the
history (an older turn after a skipped one would read out of order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
