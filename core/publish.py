"""Sending documents to the ``documents`` topic: ``kgrag publish`` and ``POST /v1/documents``.

``DocumentPublisher`` is the one way a document reaches the topic: an idempotent producer
(``acks=all``) that sends a validated ``Document`` as the JSON the worker decodes, keyed by
its id so re-publishing an id lands on the same partition as its earlier version. The CLI
opens one per run and pipelines its sends; the HTTP API keeps one for its lifetime, started
by the first document, so the service starts while Kafka is down.

``publish`` reads JSONL files: each line is validated with the same rules the worker applies;
a bad line is reported with its file, line number and reason, and the good ones are still
sent.

Deleting (``kgrag delete``, ``DELETE /v1/documents/{id}``) sends a tombstone: the id as key and
no value, which the worker turns into the retraction of everything the document contributed
(``agents.chunker``) and the topic's compaction removes in time. ``plan_deletion`` asks the
graph tables first, so an id never indexed is an error a person sees, and one deleted
already is said to be so, rather than a tombstone that silently changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiokafka import AIOKafkaProducer

from core.errors import KgragError
from core.settings import Settings
from graph.errors import InvalidDocumentError
from graph.extraction.documents import document_to_obj, parse_document
from graph.model import Document

if TYPE_CHECKING:  # the tables' imports (pyarrow, deltalake) are left to those who read them
    from core.tables.store import GraphTables


class DocumentPublisher:
    """One producer for the ``documents`` topic, started on first use and stopped by ``stop``.

    ``linger_ms`` trades latency for batching: the CLI, which sends many documents at once,
    waits a little to fill batches; the API sends each document as it comes.
    """

    def __init__(self, settings: Settings, *, linger_ms: int = 0) -> None:
        self.topic = settings.topics.documents
        self._settings = settings
        self._linger_ms = linger_ms
        self._producer: AIOKafkaProducer | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> AIOKafkaProducer:
        """Connect, once; a failed start is not kept, so the next call tries again."""
        if self._producer is not None:
            return self._producer
        async with self._lock:
            if self._producer is None:
                producer = AIOKafkaProducer(
                    bootstrap_servers=self._settings.kafka.bootstrap_servers,
                    acks="all",
                    enable_idempotence=True,
                    linger_ms=self._linger_ms,
                    max_request_size=self._settings.kafka.max_message_bytes,
                )
                await producer.start()
                self._producer = producer
            return self._producer

    async def send(self, doc: Document) -> asyncio.Future[Any]:
        """Queue ``doc`` for sending; the returned future resolves once the broker has it."""
        producer = await self.start()
        payload = orjson.dumps(document_to_obj(doc))
        return await producer.send(self.topic, payload, key=doc.id.encode())

    async def publish(self, doc: Document) -> None:
        """Send ``doc`` and wait until the broker has it."""
        await (await self.send(doc))

    async def delete(self, doc_id: str) -> None:
        """Send the tombstone of ``doc_id`` and wait until the broker has it."""
        producer = await self.start()
        await (await producer.send(self.topic, None, key=doc_id.encode()))

    async def stop(self) -> None:
        async with self._lock:
            if self._producer is not None:
                producer, self._producer = self._producer, None
                await producer.stop()


@dataclass
class BadLine:
    path: Path
    line: int
    reason: str


@dataclass
class PublishSummary:
    sent: int = 0
    bad: list[BadLine] = field(default_factory=list)
    files: int = 0


def input_files(target: Path) -> list[Path]:
    if target.is_dir():
        files = sorted([*target.glob("*.jsonl"), *target.glob("*.json")])
        if not files:
            raise KgragError(f"{target} holds no .jsonl or .json files")
        return files
    if not target.exists():
        raise KgragError(f"{target} does not exist; give a JSONL file or a directory of them")
    return [target]


def read_documents(
    files: list[Path], *, max_chars: int, limit: int | None = None
) -> Iterator[Document | BadLine]:
    count = 0
    for path in files:
        with open(path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                try:
                    yield parse_document(raw.strip(), max_chars=max_chars)
                except InvalidDocumentError as e:
                    yield BadLine(path, lineno, str(e))
                count += 1
                if limit is not None and count >= limit:
                    return


async def publish(
    settings: Settings,
    target: Path,
    *,
    limit: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> PublishSummary:
    files = input_files(target)
    summary = PublishSummary(files=len(files))
    publisher = DocumentPublisher(settings, linger_ms=20)
    await publisher.start()
    try:
        pending = []
        for item in read_documents(
            files, max_chars=settings.chunking.max_document_chars, limit=limit
        ):
            if isinstance(item, BadLine):
                summary.bad.append(item)
                continue
            pending.append(await publisher.send(item))
            summary.sent += 1
            if on_progress:
                on_progress(summary.sent, len(summary.bad))
        for fut in pending:
            await fut
    finally:
        await publisher.stop()
    return summary


@dataclass
class DeletionPlan:
    """What deleting some ids means, as the graph tables know them."""

    send: list[str] = field(default_factory=list)  # indexed: a tombstone retracts them
    already: list[str] = field(default_factory=list)  # deleted before: nothing to do
    unknown: list[str] = field(default_factory=list)  # never indexed (or not yet)


UNKNOWN_HINT = (
    "check the id (ids are case-sensitive); a document published moments ago is committed "
    "within seconds, or force the deletion to send it anyway"
)


def plan_deletion(store: GraphTables, ids: Iterable[str], *, force: bool = False) -> DeletionPlan:
    """Sort ``ids`` by what the latest graph version says of them. ``force``: send a tombstone
    for every id (one not indexed yet is deleted when the worker reaches it; for one never
    published it changes nothing)."""
    wanted = list(dict.fromkeys(i.strip() for i in ids if i.strip()))
    status = store.document_status(wanted)
    plan = DeletionPlan()
    for doc_id in wanted:
        live = status.get(doc_id)
        if live or force:
            plan.send.append(doc_id)
        elif live is None:
            plan.unknown.append(doc_id)
        else:
            plan.already.append(doc_id)
    return plan


async def delete_documents(settings: Settings, ids: Iterable[str]) -> None:
    """Send the tombstones of ``ids`` (see ``plan_deletion`` for which to send)."""
    publisher = DocumentPublisher(settings, linger_ms=20)
    try:
        for doc_id in ids:
            await publisher.delete(doc_id)
    finally:
        await publisher.stop()
