"""The private parts of faust, mode and aiokafka that ``streams`` touches, checked at start-up.

The exactly-once guards (``streams.acks``, ``.flow``, ``.watchdog``, ``.batching``) reach into
faust's consumer bookkeeping, mode's flow-controlled queues and aiokafka's group coordinator;
the mergers' ranged reads (``DurableTable.prefix_items``) open faust's RocksDB partition stores.
Their versions are pinned in ``pyproject.toml``; if another version is installed anyway, the
worker must stop at start-up saying which attribute is missing and what to install, not fail
later in the middle of a rebalance. ``check_consumer`` runs on every consumer the app makes
(``streams.app.WorkerApp``); ``check_modules`` on what can be checked without one.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from core.errors import ConfigError

# instance attributes of faust's Consumer (set in its __init__) the guards read or write
CONSUMER_ATTRIBUTES = (
    "_unacked_messages",
    "_waiting_for_ack",
    "_buffered_partitions",
    "_committed_offset",
    "_read_offset",
    "_paused_partitions",
    "_active_partitions",
    "_thread",
)


class InternalsError(ConfigError):
    """An installed faust, mode or aiokafka lacks a private part this package relies on."""


def _missing(where: str, names: list[str]) -> InternalsError:
    installed = ", ".join(
        f"{p} {version(p)}" for p in ("faust-streaming", "mode-streaming", "aiokafka")
    )
    return InternalsError(
        f"{where} lacks {', '.join(names)}, which the worker's exactly-once guards and "
        "ranged reads use "
        f"(installed: {installed}); install the versions pyproject.toml pins "
        "(`pip install -e .` in a fresh virtualenv)"
    )


def check_modules() -> None:
    """Classes and module attributes, checked without a running app."""
    import faust.streams
    from aiokafka.consumer.group_coordinator import GroupCoordinator
    from faust.stores.rocksdb import Store as RocksDBStore
    from faust.tables import TableManager
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
    from mode.utils.queues import FlowControlEvent, FlowControlQueue

    checks: list[tuple[str, Any, str]] = [
        ("faust.streams", faust.streams, "_current_event"),
        ("faust's AIOKafkaConsumerThread", AIOKafkaConsumerThread, "_ensure_consumer"),
        ("aiokafka's GroupCoordinator", GroupCoordinator, "request_rejoin"),
        ("mode's FlowControlQueue", FlowControlQueue, "clear"),
        ("faust's TableManager", TableManager, "_update_channels"),
        ("faust's RocksDB Store", RocksDBStore, "_db_for_partition"),
    ]
    for where, owner, name in checks:
        if not hasattr(owner, name):
            raise _missing(where, [name])
    queue: FlowControlQueue[Any] = FlowControlQueue(flow_control=FlowControlEvent())
    absent = [n for n in ("_queue", "_putters") if not hasattr(queue, n)]
    if absent:
        raise _missing("mode's FlowControlQueue", absent)


def check_consumer(consumer: Any) -> None:
    """The instance attributes of a faust consumer the guards use."""
    absent = [n for n in CONSUMER_ATTRIBUTES if not hasattr(consumer, n)]
    if absent:
        raise _missing(f"faust's {type(consumer).__name__}", absent)
