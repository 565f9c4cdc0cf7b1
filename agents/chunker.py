"""Chunker agent: validate each raw document, cut it into text units, send them on.

- A bad payload (not UTF-8, not JSON, missing or wrong-typed fields, empty or oversized text)
  goes to ``documents.dlq`` with the reason and the original bytes; the offset moves on.
- An unchanged document (same content hash as the version already absorbed) changes nothing.
- A new version of a known id retracts the chunks the old version had and the new one lacks,
  then adds the new chunks: a corrected article replaces its earlier version.
- A document whose message key is not its id is re-published under its id first, so every
  version of an id meets the same partition and table row.
- A tombstone (key = document id, null value: ``kgrag delete``) retracts every chunk of the
  document and announces its removal on ``graph-changes``; the row stays as a small deletion
  marker, so a second tombstone, or a redelivered one, changes nothing. A later document with
  that id is indexed afresh. A tombstone for an id never indexed changes nothing either.

Which of these applies, and what it sends and writes, is decided by ``agents.chunk_plan``;
this agent batches the stream, looks rows up, sends the plan and writes the rows.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from typing import Any

from agents.chunk_plan import DocumentPlan, DocumentRow, plan
from core.tokenizer import get_encoding
from graph.extraction.chunking import chunk_document
from graph.model import Chunk, Document
from streams.batching import as_current, deliver, finished_batches, key_text, write_rows
from streams.codecs import (
    encode_chunk_add,
    encode_document,
    encode_document_removed,
    encode_retraction,
)
from streams.dlq import send_dead_letter
from streams.topology import Topology

log = logging.getLogger(__name__)


def chunk(topo: Topology, doc: Document) -> list[Chunk]:
    cfg = topo.settings.chunking
    enc = get_encoding(cfg.encoding)
    return chunk_document(
        doc, encode=enc.encode_ordinary, decode=enc.decode, size=cfg.size, overlap=cfg.overlap
    )


def _known(
    table: Any, written: dict[str, DocumentRow], event: Any, doc_id: str
) -> DocumentRow | None:
    """A document's row: the one this batch wrote (the table gets it only after the batch's
    outputs are delivered, and a correction in the same batch as its original must see the
    original's chunks to retract them), else the table's."""
    if doc_id in written:
        return written[doc_id]
    with as_current(event):
        row = table.get(doc_id)
    return None if row is None else DocumentRow.from_row(row)


async def _send(topo: Topology, event: Any, p: DocumentPlan) -> list[Any]:
    """Send what ``p`` says, in its order; the futures of the sends."""
    topics = topo.topics
    if p.dead_letter is not None:
        return [
            await send_dead_letter(
                topics.documents_dlq, event, reason=p.dead_letter, stage="chunker"
            )
        ]
    if p.rekey:
        return [await topics.documents.send(key=p.doc_id, value=event.value)]
    sent = [
        await topics.chunks.send(key=p.doc_id, value=encode_retraction(cid, p.doc_id))
        for cid in p.retract
    ]
    sent += [await topics.chunks.send(key=p.doc_id, value=encode_chunk_add(c)) for c in p.add]
    if p.change is not None:
        sent.append(await topics.graph_changes.send(key=p.doc_id, value=encode_document(p.change)))
    if p.removed:
        sent.append(
            await topics.graph_changes.send(key=p.doc_id, value=encode_document_removed(p.doc_id))
        )
    return sent


def register(topo: Topology) -> None:
    max_chars = topo.settings.chunking.max_document_chars
    table = topo.tables.documents
    cut = partial(chunk, topo)

    @topo.app.agent(topo.topics.documents, name=f"{topo.settings.namespace}.chunker")
    async def chunker(stream: Any) -> None:
        async for batch in finished_batches(stream, 100, within=topo.settings.kafka.batch_within_s):
            pending: list[Any] = []
            writes: list[tuple[Any, str, DocumentRow]] = []
            written: dict[str, DocumentRow] = {}  # rows this batch wrote, by document id
            for n, event in enumerate(batch, 1):
                if not n % 10:
                    await asyncio.sleep(0)  # tokenising is CPU work: let LLM calls in between
                known = partial(_known, table, written, event)
                p = plan(key_text(event.key), event.value, known, max_chars=max_chars, cut=cut)
                pending.extend(await _send(topo, event, p))
                if p.row is not None:
                    writes.append((event, p.doc_id, p.row))
                    written[p.doc_id] = p.row
            await deliver(pending)

            def write(writes: list[tuple[Any, str, DocumentRow]] = writes) -> None:
                for event, doc_id, row in writes:
                    with as_current(event):
                        table[doc_id] = row.as_row()

            if not await write_rows(topo.app, write):
                return  # shutting down: see streams.batching.stopping
