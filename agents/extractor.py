"""Extractor agent: entities, relationships and claims of each chunk, by LLM or offline.

A batch of chunks is extracted concurrently (the LLM client bounds the concurrency) and the
results are sent in input order, so a retraction that follows a chunk on its partition also
follows that chunk's extraction downstream. A chunk whose extraction fails after the LLM
client's last retry goes to ``extractions.dlq`` with the reason and is not merged at all.

Each extraction record carries the tokens its LLM calls spent (``graph.extraction.llm``), which
the graph tables add up per document. This process's own spending since it started is on its
Prometheus registry (:class:`ExtractionMetrics`), failed extractions' calls included.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from core.clients import Clients
from core.errors import KgragError
from core.settings import Settings
from core.settings.llm import ModelPrice, cost_usd
from graph.extraction.llm import (
    ClaimSpec,
    ExtractionFailedError,
    ExtractionPrompts,
    TokenMeter,
    extract_chunk,
)
from graph.model import Chunk, ChunkExtraction
from graph.protocols import LLM
from offline.extraction import extract_offline
from prompts import (
    PromptLibrary,
    render_extract_claims,
    render_extract_graph,
    render_glean_continue,
    render_glean_loop,
)
from streams.codecs import (
    PayloadError,
    Retraction,
    decode_chunk_event,
    encode_extraction,
    encode_retraction,
)
from streams.dlq import send_dead_letter
from streams.topology import Topology
from streams.window import Window

log = logging.getLogger(__name__)

Extract = Callable[[Chunk], Awaitable[ChunkExtraction]]


class ExtractionMetrics:
    """What this process extracted and spent since it started (``kgrag_extraction_*``).

    Prometheus sums them across workers and takes a restart's reset in its stride; they count
    what was paid, so a chunk extracted twice (redelivered after a crash) counts twice unless
    the response cache answered it. What the graph holds, each text unit once, is in the
    graph tables (``kgrag status``).
    """

    def __init__(self, registry: CollectorRegistry | None, price: ModelPrice | None) -> None:
        reg = registry if registry is not None else CollectorRegistry()
        self.price = price
        self.tokens = Counter(
            "kgrag_extraction_llm_tokens",
            "LLM tokens the extractor spent, per kind (prompt, completion); answers from the "
            "response cache spend none",
            ["kind"],
            registry=reg,
        )
        self.cost = Counter(
            "kgrag_extraction_llm_cost_usd",
            "What the extractor's LLM tokens cost at the chat model's price (llm.prices)",
            registry=reg,
        )
        self.chunks = Counter(
            "kgrag_extraction_chunks",
            "Chunks extracted, per outcome (extracted, failed: sent to the dead letters)",
            ["outcome"],
            registry=reg,
        )
        self.documents = Counter(
            "kgrag_extraction_documents",
            "Documents whose first text unit was extracted (a correction that keeps it is "
            "not counted again)",
            registry=reg,
        )
        for kind in ("prompt", "completion"):
            self.tokens.labels(kind)
        for outcome in ("extracted", "failed"):
            self.chunks.labels(outcome)

    def spent(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.tokens.labels("prompt").inc(prompt_tokens)
        self.tokens.labels("completion").inc(completion_tokens)
        self.cost.inc(cost_usd(self.price, prompt_tokens, completion_tokens))

    def extracted(self, chunk: Chunk) -> None:
        self.chunks.labels("extracted").inc()
        if chunk.position == 0:
            self.documents.inc()


def build_extractor(
    settings: Settings, llm: LLM | None, metrics: ExtractionMetrics | None = None
) -> Extract:
    """The LLM extractor when there is a model, else the offline one (which spends nothing)."""
    cfg = settings.extraction
    counted = metrics if metrics is not None else ExtractionMetrics(None, settings.llm.price())
    if llm is None:

        async def offline(chunk: Chunk) -> ChunkExtraction:
            extraction = extract_offline(chunk, entity_types=cfg.entity_types)
            counted.extracted(chunk)
            return extraction

        return offline

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
        meter = TokenMeter(llm)  # the chunk's calls, those of a failed extraction too
        try:
            extraction = await extract_chunk(
                chunk,
                meter,
                prompts,
                max_gleanings=cfg.max_gleanings,
                claims=claims,
                attempts=cfg.parse_attempts,
            )
        except Exception:
            counted.chunks.labels("failed").inc()
            raise
        finally:
            counted.spent(meter.prompt_tokens, meter.completion_tokens)
        counted.extracted(chunk)
        return extraction

    return with_llm


async def _extract_or_reason(extract: Extract, chunk: Chunk) -> ChunkExtraction | str:
    try:
        return await extract(chunk)
    except ExtractionFailedError as e:
        return f"extraction output unusable: {e.reason}"
    except KgragError as e:  # the LLM client gave up after its retries
        return f"LLM failed after retries: {e}"


Outcome = bytes | str  # the extraction (or retraction) to send, or a dead-letter reason


async def _outcome(extract: Extract, raw: bytes) -> Outcome:
    """What one chunk event becomes; never raises, so the window cannot wedge on a bug."""
    try:
        item = decode_chunk_event(raw)
    except PayloadError as e:
        return str(e)
    if isinstance(item, Retraction):
        return encode_retraction(item.chunk_id, item.document_id)
    try:
        result = await _extract_or_reason(extract, item)
    except Exception as e:  # a bug must not stall the stream: dead-letter it, loudly
        log.exception("extractor failed on chunk %s", item.id)
        return f"unexpected extractor error: {type(e).__name__}: {e}"
    return encode_extraction(result) if isinstance(result, ChunkExtraction) else result


def register(topo: Topology, clients: Clients, registry: CollectorRegistry | None = None) -> None:
    """The extractor agent; its metrics go to ``registry`` (the worker's /metrics)."""
    metrics = ExtractionMetrics(registry, topo.settings.llm.price())
    extract = build_extractor(topo.settings, clients.llm, metrics)
    extractions, dlq = topo.topics.extractions, topo.topics.extractions_dlq
    cfg = topo.settings
    size = (  # with a model, enough chunks in flight to keep its concurrency busy
        cfg.extraction.batch_size
        if clients.llm is None
        else max(cfg.extraction.batch_size, 4 * cfg.llm.concurrency)
    )

    async def send(event: Any, outcome: Outcome) -> Any:
        if isinstance(outcome, bytes):
            return await extractions.send(key=event.key, value=outcome)
        return await send_dead_letter(dlq, event, reason=outcome, stage="extractor")

    @topo.app.agent(topo.topics.chunks, name=f"{topo.settings.namespace}.extractor")
    async def extractor(stream: Any) -> None:
        window = Window(stream, size, send)
        drainer = asyncio.ensure_future(window.drain())
        try:
            async for batch in stream.take_events(size, within=topo.settings.kafka.batch_within_s):
                for event in batch:
                    await window.admit(event, _outcome(extract, event.value), drainer)
        finally:
            drainer.cancel()
