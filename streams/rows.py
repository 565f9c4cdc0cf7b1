"""The rows one batch reads and writes, held until the batch's outputs are delivered.

A batch may touch the same key several times; every read after the first sees the batch's own
earlier writes, and nothing reaches the table until ``flush``, which the agent calls only once
its outputs are delivered (``streams.batching.write_rows``). Table access re-enters each
event's context (``as_current``), because faust routes a table read or write to the partition
of the current event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.batching import as_current
from streams.topology import Tables


class RowCache:
    """Rows read or written within one batch, so repeated keys see the batch's own writes."""

    def __init__(self, tables: Tables, flush_rank: Mapping[str, int]) -> None:
        """``flush_rank``: the order tables are written in (lower first; unnamed tables 1)."""
        self.tables = tables
        self.flush_rank = flush_rank
        self.rows: dict[tuple[str, str], Any] = {}
        self.events: dict[tuple[str, str], Any] = {}

    def get(self, event: Any, table: str, key: str) -> Any:
        if (table, key) not in self.rows:
            with as_current(event):
                self.rows[(table, key)] = self.tables.named(table).get(key)
        return self.rows[(table, key)]

    def scan(self, event: Any, table: str, prefix: str) -> dict[str, Any]:
        """Every present row of ``table`` whose key starts with ``prefix``, in ``event``'s
        partition, as the batch sees it (its own writes over the stored rows)."""
        with as_current(event):
            rows = dict(self.tables.named(table).prefix_items(prefix))
        for (name, key), value in self.rows.items():
            if name == table and key.startswith(prefix):
                rows[key] = value
        return {key: value for key, value in rows.items() if value is not None}

    def put(self, event: Any, table: str, key: str, value: Any) -> None:
        self.rows[(table, key)] = value
        self.events[(table, key)] = event

    def flush(self) -> None:
        """Write the batch's rows, table by table in ``flush_rank`` order, each in the context
        of the event that wrote it (so it lands on that event's partition)."""
        order = sorted(self.events.items(), key=lambda kv: self.flush_rank.get(kv[0][0], 1))
        for (table, key), event in order:
            value = self.rows[(table, key)]
            with as_current(event):
                if value is None:
                    self.tables.named(table).pop(key, None)
                else:
                    self.tables.named(table)[key] = value
