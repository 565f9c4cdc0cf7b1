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
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import orjson

from core.tokenizer import get_encoding
from graph.chunking import chunk_document
from graph.documents import document_to_obj, parse_document
from graph.errors import InvalidDocumentError
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


# the table row of a deleted document: no version, no chunks
DELETED: dict[str, Any] = {"hash": "", "chunks": [], "deleted": True}


def document_hash(doc: Document) -> str:
    body = orjson.dumps(document_to_obj(doc), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(body).hexdigest()[:32]


def chunk(topo: Topology, doc: Document) -> list[Chunk]:
    cfg = topo.settings.chunking
    enc = get_encoding(cfg.encoding)
    return chunk_document(
        doc, encode=enc.encode_ordinary, decode=enc.decode, size=cfg.size, overlap=cfg.overlap
    )


def register(topo: Topology) -> None:
    max_chars = topo.settings.chunking.max_document_chars
    documents, chunks_topic = topo.topics.documents, topo.topics.chunks
    changes, dlq = topo.topics.graph_changes, topo.topics.documents_dlq
    table = topo.tables.documents

    @topo.app.agent(documents, name=f"{topo.settings.namespace}.chunker")
    async def chunker(stream: Any) -> None:
        async for batch in finished_batches(stream, 100, within=topo.settings.kafka.batch_within_s):
            pending: list[Any] = []
            writes: list[tuple[Any, str, dict[str, Any]]] = []
            # rows this batch wrote, by document id: the table gets them only after the
            # batch's outputs are delivered, and a correction in the same batch as its
            # original must see the original's chunks (to retract them)
            written: dict[str, dict[str, Any]] = {}
            for n, event in enumerate(batch, 1):
                if not n % 10:
                    await asyncio.sleep(0)  # tokenising is CPU work: let LLM calls in between
                if event.value is None:
                    doc_id = key_text(event.key)
                    if not doc_id:
                        reason = (
                            "a message with no value deletes the document its key names, and "
                            "this one has no key: use `kgrag delete ID`"
                        )
                        pending.append(
                            await send_dead_letter(dlq, event, reason=reason, stage="chunker")
                        )
                        continue
                    if doc_id in written:
                        known = written[doc_id]
                    else:
                        with as_current(event):
                            known = table.get(doc_id)
                    if known is None or known.get("deleted"):
                        continue  # never indexed, or deleted already: nothing to retract
                    for cid in known.get("chunks", []):
                        pending.append(
                            await chunks_topic.send(
                                key=doc_id, value=encode_retraction(cid, doc_id)
                            )
                        )
                    pending.append(
                        await changes.send(key=doc_id, value=encode_document_removed(doc_id))
                    )
                    writes.append((event, doc_id, DELETED))
                    written[doc_id] = DELETED
                    continue
                try:
                    doc = parse_document(event.value, max_chars=max_chars)
                except InvalidDocumentError as e:
                    pending.append(
                        await send_dead_letter(dlq, event, reason=str(e), stage="chunker")
                    )
                    continue
                if key_text(event.key) != doc.id:
                    pending.append(await documents.send(key=doc.id, value=event.value))
                    continue
                if doc.id in written:
                    known = written[doc.id]
                else:
                    with as_current(event):
                        known = table.get(doc.id)
                digest = document_hash(doc)
                if known is not None and known.get("hash") == digest:
                    # a redelivery or a re-publish of the same version: nothing to send, but
                    # the row is written again, so a changelog that missed it (a worker
                    # killed between its local write and the changelog send) gets it back
                    writes.append((event, doc.id, known))
                    written[doc.id] = known
                    continue
                pieces = chunk(topo, doc)
                new_ids = [c.id for c in pieces]
                old_ids = list(known.get("chunks", [])) if known else []
                for cid in old_ids:
                    if cid not in set(new_ids):
                        pending.append(
                            await chunks_topic.send(
                                key=doc.id, value=encode_retraction(cid, doc.id)
                            )
                        )
                for c in pieces:
                    if c.id not in set(old_ids):
                        pending.append(
                            await chunks_topic.send(key=doc.id, value=encode_chunk_add(c))
                        )
                pending.append(await changes.send(key=doc.id, value=encode_document(doc)))
                writes.append((event, doc.id, {"hash": digest, "chunks": new_ids}))
                written[doc.id] = writes[-1][2]
            await deliver(pending)

            def write(writes: list[tuple[Any, str, dict[str, Any]]] = writes) -> None:
                for event, doc_id, row in writes:
                    with as_current(event):
                        table[doc_id] = row

            if not await write_rows(topo.app, write):
                return  # shutting down: see streams.batching.stopping
