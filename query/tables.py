"""Context tables in GraphRAG's delimited form, filled row by row within a token budget.

A table is ``-----Name-----``, a header line starting with ``id``, then one ``|``-separated
row per record whose first cell is the record's human-readable id, the id citations use.
Cells lose their line breaks and ``|`` characters so a row stays one parseable line.

Costs are counted per line (tokens of the line plus one for its line break), so the sum of
the parts bounds the whole table for any tokenizer that does not merge across line breaks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

TokenCounter = Callable[[str], int]

_SPACE = re.compile(r"\s+")


def clean_cell(value: object) -> str:
    return _SPACE.sub(" ", str(value).replace("|", "/")).strip()


def render_row(cells: Sequence[object]) -> str:
    return "|".join(clean_cell(c) for c in cells)


def line_cost(line: str, count: TokenCounter) -> int:
    return count(line) + 1


@dataclass(slots=True)
class Table:
    """One table being filled; ``ids`` are the record ids in the order they were added."""

    name: str
    header: tuple[str, ...]
    count: TokenCounter
    lines: list[str] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    tokens: int = 0

    def header_cost(self) -> int:
        return line_cost(f"-----{self.name}-----", self.count) + line_cost(
            render_row(self.header), self.count
        )

    def try_add(self, record_id: int, cells: Sequence[object], budget: int) -> bool:
        """Add the row when it (and the header, for the first row) fits in ``budget``."""
        line = render_row((record_id, *cells))
        return self.try_add_line(record_id, line, line_cost(line, self.count), budget)

    def try_add_line(self, record_id: int, line: str, cost: int, budget: int) -> bool:
        """``try_add`` for a row rendered (and costed) beforehand."""
        cost += 0 if self.lines else self.header_cost()
        if self.tokens + cost > budget:
            return False
        self.lines.append(line)
        self.ids.append(record_id)
        self.tokens += cost
        return True

    def render(self) -> str:
        if not self.lines:
            return ""
        return "\n".join([f"-----{self.name}-----", render_row(self.header), *self.lines])


class RowCache:
    """Rendered rows and their costs, so trying several selections counts each row once."""

    def __init__(self, count: TokenCounter) -> None:
        self.count = count
        self._rows: dict[tuple[str, int], tuple[str, int]] = {}

    def row(
        self, kind: str, record_id: int, cells: Callable[[], Sequence[object]]
    ) -> tuple[str, int]:
        key = (kind, record_id)
        cached = self._rows.get(key)
        if cached is None:
            line = render_row((record_id, *cells()))
            cached = (line, line_cost(line, self.count))
            self._rows[key] = cached
        return cached


def fill(table: Table, rows: Iterable[tuple[int, Sequence[object]]], budget: int) -> Table:
    """Add rows best first; a row too big for what is left is skipped, not a reason to stop,
    so one long record cannot starve the smaller ones after it."""
    for record_id, cells in rows:
        table.try_add(record_id, cells, budget)
    return table


def join_tables(tables: Iterable[Table]) -> str:
    return "\n\n".join(t for t in (t.render() for t in tables) if t)


def truncate_to_tokens(text: str, budget: int, count: TokenCounter) -> str:
    """The longest word prefix of ``text`` within ``budget`` tokens (binary search on words)."""
    if count(text) <= budget:
        return text
    words = text.split()
    lo, hi = 0, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def within_budget(
    blocks: Iterable[str], budget: int, count: TokenCounter, *, skip_over: bool = False
) -> list[str]:
    """The ``blocks`` that fit ``budget`` tokens together, in order. A block too big for what
    is left ends the list, or with ``skip_over`` is passed over for the smaller ones after it."""
    kept: list[str] = []
    used = 0
    for block in blocks:
        cost = sum(line_cost(line, count) for line in block.splitlines()) + 1
        if used + cost > budget:
            if skip_over:
                continue
            break
        kept.append(block)
        used += cost
    return kept
