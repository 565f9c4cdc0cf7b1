"""``kgrag publish``: send documents from JSONL files to the ``documents`` topic.

Each line is validated with the same rules the worker applies; a bad line is reported with
its file, line number and reason, and the good ones are still sent (keyed by document id, so
re-publishing an id lands on the same partition as its earlier version).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiokafka import AIOKafkaProducer

from core.errors import KgragError
from core.settings import Settings
from graph.documents import document_to_obj, parse_document
from graph.errors import InvalidDocumentError
from graph.model import Document


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
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.kafka.bootstrap_servers,
        acks="all",
        enable_idempotence=True,
        linger_ms=20,
        max_request_size=settings.kafka.max_message_bytes,
    )
    await producer.start()
    topic = settings.topic("documents")
    try:
        pending = []
        for item in read_documents(
            files, max_chars=settings.chunking.max_document_chars, limit=limit
        ):
            if isinstance(item, BadLine):
                summary.bad.append(item)
                continue
            payload = orjson.dumps(document_to_obj(item))
            pending.append(await producer.send(topic, payload, key=item.id.encode()))
            summary.sent += 1
            if on_progress:
                on_progress(summary.sent, len(summary.bad))
        for fut in pending:
            await fut
    finally:
        await producer.stop()
    return summary
