"""Explicit topic creation: the configured partition count, never broker auto-creation.

Auto-created topics get one partition, which breaks faust's co-partitioning, and faust
tables cannot be repartitioned later; so every topic is created up front with
``kafka.partitions`` partitions and an existing topic with another count is an error.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from core.errors import ConfigError
from core.settings import Settings
from streams.topology import changelog_topics

COMPACTED = {"cleanup.policy": "compact"}  # what faust sets on a table's changelog


async def ensure_topics(settings: Settings) -> list[str]:
    """Create the namespace's topics and the worker's table changelogs that do not exist yet;
    return the ones created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        # the documents topic keeps the latest version of every document and forgets a
        # deleted one (its tombstone) in time; a changelog keeps the latest row per key
        compacted = {*changelog_topics(settings), settings.topics.documents}
        changelogs = set(changelog_topics(settings))
        wanted = [*settings.all_topics(), *sorted(changelogs)]
        missing = [t for t in wanted if t not in existing]
        if missing:
            # another process may create them between our list and create
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics(
                    [
                        NewTopic(
                            t,
                            settings.kafka.partitions,
                            settings.kafka.replication_factor,
                            topic_configs=COMPACTED if t in compacted else {},
                        )
                        for t in missing
                    ]
                )
        present = [t for t in wanted if t in existing]
        if present:
            await _check_partitions(admin, present, settings.kafka.partitions)
        if missing:
            await _wait_for_leaders(admin, missing)
        return missing
    finally:
        await admin.close()


async def _check_partitions(admin: AIOKafkaAdminClient, topics: list[str], expected: int) -> None:
    described = await admin.describe_topics(topics)
    for t in described:
        n = len(t.get("partitions", []))
        if n and n != expected:
            raise ConfigError(
                f"topic {t.get('topic')} has {n} partitions but KGRAG_KAFKA__PARTITIONS is "
                f"{expected}; faust tables cannot be repartitioned: use a new KGRAG_NAMESPACE "
                "or set the partition count back"
            )


async def _wait_for_leaders(
    admin: AIOKafkaAdminClient, topics: list[str], timeout: float = 30.0
) -> None:
    """New partitions answer NOT_LEADER until the controller elects their leader; wait for it
    so the first produce does not go through a round of retries."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        described = await admin.describe_topics(topics)
        ready = all(
            t.get("partitions") and all(p.get("leader", -1) >= 0 for p in t["partitions"])
            for t in described
        )
        if ready:
            return
        await asyncio.sleep(0.2)


async def delete_namespace_topics(settings: Settings) -> None:
    """Remove this namespace's topics and the app's internal ones (tests and demo resets)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka.bootstrap_servers)
    await admin.start()
    try:
        prefixes = (f"{settings.namespace}.", f"{settings.app_id}-")
        doomed = [t for t in await admin.list_topics() if t.startswith(prefixes)]
        if doomed:
            await admin.delete_topics(doomed)
    finally:
        await admin.close()
