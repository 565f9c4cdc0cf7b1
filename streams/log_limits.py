"""Log lines that come in bursts, held to one per interval with a count of the rest.

After a stall (Weaviate down for a minute, say) the backlog drains in a rush, and faust's
producer logs "producer buffer full" and "producer flush took …" for nearly every batch of
table writes: thousands of lines that bury everything else. ``Throttle`` lets the first such
line through, drops the repeats for ``every_s`` seconds, and appends to the next one how many
it held back, so the log still says that it happened and how often.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

# (logger, message prefixes) that repeat in bursts
BURSTY = (("faust.transport.producer", ("producer buffer full", "producer flush took")),)


class Throttle(logging.Filter):
    """At most one record per ``every_s`` seconds for each message prefix of ``prefixes``."""

    def __init__(
        self,
        every_s: float,
        prefixes: tuple[str, ...],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.every_s = every_s
        self.prefixes = prefixes
        self.clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        prefix = next((p for p in self.prefixes if message.startswith(p)), None)
        if prefix is None:
            return True
        now = self.clock()
        last = self._last.get(prefix)
        if last is not None and now - last < self.every_s:
            self._held[prefix] = self._held.get(prefix, 0) + 1
            return False
        held = self._held.pop(prefix, 0)
        self._last[prefix] = now
        if held and last is not None:
            record.msg = f"{message} ({held} more like this in the last {now - last:.0f} s)"
            record.args = ()
        return True


def quiet_bursts(every_s: float = 30.0) -> None:
    """Throttle the bursty loggers (idempotent: one filter per logger)."""
    for name, prefixes in BURSTY:
        logger = logging.getLogger(name)
        if not any(isinstance(f, Throttle) for f in logger.filters):
            logger.addFilter(Throttle(every_s, prefixes))
