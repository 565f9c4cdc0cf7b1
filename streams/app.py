"""The faust application the worker runs, with the guards our at-least-once bookkeeping needs.

Topics and tables are declared by ``streams.topology``; which agents run, in which order, is
decided by the composition root (``kgrag.worker``).
"""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Any

import faust
from faust.tables import TableManager
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlEvent

from core.settings import Settings
from streams.acks import guard_acks
from streams.flow import GuardedFlowControl, guard_seeks
from streams.internals import check_consumer, check_modules
from streams.log_limits import quiet_bursts

log = logging.getLogger(__name__)


class WorkerApp(faust.App):
    """faust's App with two guards around its at-least-once bookkeeping:

    - acks (``streams.acks``): no offset is committed for a message skipped or finished
      while a rebalance hands partitions over;
    - flow (``streams.flow``): resuming a running flow after table recovery neither drops
      the messages already in the agents' queues nor lets the commit skip them.
    """

    def _new_consumer(self) -> Any:
        consumer = super()._new_consumer()
        check_consumer(consumer)
        guard_acks(self, consumer)
        guard_seeks(consumer)
        return consumer

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        return GuardedFlowControl(self, loop=self.loop)


class PromptTableManager(TableManager):
    """faust's table manager without the one-second pause it takes at start for tables
    registered late. Every table is declared (``streams.topology``) before the worker starts,
    and one declared later still fails loudly ("Too late to add tables"); the pause was a
    second of every restart's recovery, before partitions are even assigned."""

    async def on_start(self) -> None:
        if not self.should_stop:
            await self._update_channels()
            await self.recovery.start()


def freeze_startup_heap() -> None:
    """Move every object alive now (the imported modules, the app and its topology) out of
    the cyclic collector's reach, just before a worker starts: they live as long as the
    process, and faust's RocksDB store calls ``gc.collect()`` for every table on every
    rebalance, which otherwise re-scans all of them (a tenth of a second a table, most of a
    second of a restarted worker's recovery)."""
    gc.freeze()


def create_app(settings: Settings, *, vectors: bool = False) -> faust.App:
    """The graph worker's app (group ``app_id``), or with ``vectors`` the embedders' (group
    ``vector_app_id``, its own data directory and static-membership id)."""
    check_modules()
    quiet_bursts()
    folder = "faust-vectors" if vectors else "faust"
    datadir = Path(settings.data_dir) / settings.namespace / folder
    datadir.mkdir(parents=True, exist_ok=True)
    instance_id = settings.kafka.instance_id
    if vectors and instance_id:
        instance_id = f"{instance_id}-vectors"
    return WorkerApp(
        settings.vector_app_id if vectors else settings.app_id,
        broker=f"kafka://{settings.kafka.bootstrap_servers}",
        store="rocksdb://",
        datadir=str(datadir),
        topic_partitions=settings.kafka.partitions,
        topic_replication_factor=settings.kafka.replication_factor,
        processing_guarantee=settings.kafka.processing_guarantee,
        producer_max_request_size=settings.kafka.max_message_bytes,
        producer_linger_ms=5,
        consumer_auto_offset_reset="earliest",
        consumer_group_instance_id=instance_id,
        broker_commit_every=500,
        broker_commit_interval=1.0,
        table_standby_replicas=0,
        web_enabled=False,
        autodiscover=False,
        TableManager=PromptTableManager,
    )
