"""Chunker agent: validate each raw document, cut it into text units, send them on.

Bad payloads (not UTF-8, not JSON, missing or wrong-typed fields, empty or oversized text)
go to ``documents.dlq`` with the reason and the original bytes; the offset moves on.
"""

from __future__ import annotations

import logging
from typing import Any

from graph.chunking import chunk_document
from graph.documents import parse_document
from graph.errors import InvalidDocumentError
from graph.model import Chunk, Document
from kgrag.tokenizer import get_encoding
from streams.app import Topology
from streams.dlq import dead_letter
from streams.records import ChunkRecord

log = logging.getLogger(__name__)


def to_record(chunk: Chunk) -> ChunkRecord:
    return ChunkRecord(
        id=chunk.id,
        document_id=chunk.document_id,
        title=chunk.title,
        published_at=chunk.published_at,
        position=chunk.position,
        text=chunk.text,
        n_tokens=chunk.n_tokens,
    )


def chunk(topo: Topology, doc: Document) -> list[Chunk]:
    cfg = topo.settings.chunking
    enc = get_encoding(cfg.encoding)
    return chunk_document(
        doc, encode=enc.encode_ordinary, decode=enc.decode, size=cfg.size, overlap=cfg.overlap
    )


def register(topo: Topology) -> None:
    max_chars = topo.settings.chunking.max_document_chars

    @topo.app.agent(topo.documents, name=f"{topo.settings.namespace}.chunker")
    async def chunker(stream: Any) -> None:
        async for event in stream.events():
            msg = event.message
            try:
                doc = parse_document(event.value, max_chars=max_chars)
            except InvalidDocumentError as e:
                log.warning(
                    "document at %s[%d]@%d rejected: %s", msg.topic, msg.partition, msg.offset, e
                )
                await topo.documents_dlq.send(
                    key=event.key,
                    value=dead_letter(
                        reason=str(e),
                        stage="chunker",
                        topic=msg.topic,
                        partition=msg.partition,
                        offset=msg.offset,
                        key=event.key,
                        value=event.value,
                    ),
                )
                continue
            for c in chunk(topo, doc):
                await topo.chunks.send(key=doc.id, value=to_record(c))
