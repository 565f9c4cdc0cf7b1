"""Extractor agent: entities, relationships and claims of each chunk, by LLM or offline.

A batch of chunks is extracted concurrently (the LLM client bounds the concurrency) and the
results are sent in input order, so a retraction that follows a chunk on its partition also
follows that chunk's extraction downstream. A chunk whose extraction fails after the LLM
client's last retry goes to ``extractions.dlq`` with the reason and is not merged at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from graph.llm_extraction import ClaimSpec, ExtractionFailedError, ExtractionPrompts, extract_chunk
from graph.model import Chunk, ChunkExtraction
from graph.offline_extraction import extract_offline
from kgrag.errors import KgragError
from kgrag.settings import Settings
from prompts import (
    PromptLibrary,
    render_extract_claims,
    render_extract_graph,
    render_glean_continue,
    render_glean_loop,
)
from streams.app import Topology
from streams.batching import deliver
from streams.codecs import (
    PayloadError,
    Retraction,
    decode_chunk_event,
    encode_extraction,
    encode_retraction,
)
from streams.dlq import send_dead_letter

log = logging.getLogger(__name__)

Extract = Callable[[Chunk], Awaitable[ChunkExtraction]]


def build_extractor(settings: Settings) -> Extract:
    """The LLM extractor when an endpoint is configured, else the offline one."""
    cfg = settings.extraction
    if settings.llm.offline:

        async def offline(chunk: Chunk) -> ChunkExtraction:
            return extract_offline(chunk, entity_types=cfg.entity_types)

        return offline

    from kgrag.llm import OpenAILLM

    llm = OpenAILLM(settings.llm, settings.llm_cache_dir)
    lib = PromptLibrary(cfg.prompts_dir)
    prompts = ExtractionPrompts(
        extract_graph=partial(render_extract_graph, lib, entity_types=cfg.entity_types),
        glean_continue=render_glean_continue(lib),
        glean_loop=render_glean_loop(lib),
        extract_claims=partial(render_extract_claims, lib),
    )
    claims = (
        ClaimSpec(cfg.claim_entity_specification, cfg.claim_description)
        if cfg.claims_enabled
        else None
    )

    async def with_llm(chunk: Chunk) -> ChunkExtraction:
        return await extract_chunk(
            chunk, llm, prompts, max_gleanings=cfg.max_gleanings, claims=claims
        )

    return with_llm


async def _extract_or_reason(extract: Extract, chunk: Chunk) -> ChunkExtraction | str:
    try:
        return await extract(chunk)
    except ExtractionFailedError as e:
        return f"extraction output unusable: {e.reason}"
    except KgragError as e:  # the LLM client gave up after its retries
        return f"LLM failed after retries: {e}"


def register(topo: Topology) -> None:
    extract = build_extractor(topo.settings)
    extractions, dlq = topo.topic("extractions"), topo.topic("extractions_dlq")
    batch_size = topo.settings.extraction.batch_size

    @topo.app.agent(topo.topic("chunks"), name=f"{topo.settings.namespace}.extractor")
    async def extractor(stream: Any) -> None:
        async for batch in stream.take_events(batch_size, within=0.5):
            items: list[tuple[Any, Chunk | Retraction | str]] = []
            for event in batch:
                try:
                    items.append((event, decode_chunk_event(event.value)))
                except PayloadError as e:
                    items.append((event, str(e)))
            chunks = [item for _, item in items if isinstance(item, Chunk)]
            results = await asyncio.gather(*(_extract_or_reason(extract, c) for c in chunks))
            by_chunk = dict(zip((c.id for c in chunks), results, strict=True))
            pending: list[Any] = []
            for event, item in items:
                if isinstance(item, Retraction):
                    value = encode_retraction(item.chunk_id, item.document_id)
                    pending.append(await extractions.send(key=event.key, value=value))
                    continue
                outcome = by_chunk[item.id] if isinstance(item, Chunk) else item
                if isinstance(outcome, ChunkExtraction):
                    value = encode_extraction(outcome)
                    pending.append(await extractions.send(key=event.key, value=value))
                    continue
                pending.append(
                    await send_dead_letter(dlq, event, reason=outcome, stage="extractor")
                )
            await deliver(pending)
