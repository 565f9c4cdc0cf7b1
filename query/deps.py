"""The clients a query needs: what they are (``QueryDeps``) and how they are built from
settings (``open_deps``), once at start-up and passed in (no module singletons).

``llm`` is ``None`` in offline mode; the search functions that need a model refuse to run
without one, and ``query.offline_answers`` answers instead. The HTTP service, the CLI and the
demo all build their clients with ``open_deps``, so each answers with the same clients.

The search modules import this module for ``QueryDeps`` and ``ask`` alone, so the Weaviate
and OpenAI client libraries are imported only when ``open_deps`` builds the clients.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.settings import Settings
from core.settings.llm import ModelPrice
from core.tokenizer import get_encoding
from graph.protocols import LLM, Embedder, VectorHit, VectorStore
from prompts import PromptLibrary
from query.context import LocalContext, LocalContextConfig, local_context
from query.errors import QueryError
from query.history import HistoryTurn
from query.index import QueryIndex
from query.results import LLMUsage
from query.tables import TokenCounter
from query.time_window import TimeWindow

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from core.vector_store import WeaviateStore

log = logging.getLogger(__name__)

OnText = Callable[[str], Awaitable[None]]  # takes an answer's text as it is written


@dataclass(frozen=True, slots=True)
class QueryDeps:
    embedder: Embedder
    store: VectorStore
    prompts: PromptLibrary
    count_tokens: TokenCounter
    llm: LLM | None = None
    price: ModelPrice | None = None  # of the chat model; None: not priced (or offline)

    def require_llm(self) -> LLM:
        if self.llm is None:
            raise QueryError("no LLM is configured (offline mode): use query.offline_answers")
        return self.llm

    async def local_context(
        self,
        question: str,
        index: QueryIndex,
        *,
        config: LocalContextConfig | None = None,
        window: TimeWindow | None = None,
        history: Sequence[HistoryTurn] = (),
    ) -> LocalContext:
        """Local search's context for ``question`` through these clients
        (``query.context.local_context``)."""
        return await local_context(
            question,
            index=index,
            embedder=self.embedder,
            store=self.store,
            config=config or LocalContextConfig(),
            count_tokens=self.count_tokens,
            window=window,
            history=history,
        )


async def ask(
    llm: LLM,
    usage: LLMUsage,
    *,
    purpose: str,
    user: str,
    system: str | None = None,
    json_mode: bool = False,
    max_tokens: int | None = None,
    on_text: OnText | None = None,
) -> str:
    """One chat call, tallied in ``usage``. Prompts that carry data go in the system message
    and the user's question is the user message (GraphRAG's layout). ``on_text``: hand the
    answer over piece by piece as the model writes it (a model that cannot stream hands it
    over whole)."""
    messages = _messages(user, system)
    stream = getattr(llm, "chat_stream", None)
    if on_text is not None and stream is not None and not json_mode:
        result = await stream(messages, on_text, max_tokens=max_tokens, purpose=purpose)
    else:
        result = await llm.chat(
            messages, json_mode=json_mode, max_tokens=max_tokens, purpose=purpose
        )
        if on_text is not None:
            await on_text(result.text)
    usage.add(purpose, result)
    return result.text


async def forget(
    llm: LLM,
    *,
    user: str,
    system: str | None = None,
    json_mode: bool = False,
    max_tokens: int | None = None,
) -> None:
    """Drop the cached answer of the same call (one that did not parse), so that asking again
    reaches the model instead of replaying the same output. A model without a cache (no
    ``forget``) has nothing to drop."""
    drop = getattr(llm, "forget", None)
    if drop is not None:
        await drop(_messages(user, system), json_mode=json_mode, max_tokens=max_tokens)


def _messages(user: str, system: str | None) -> Sequence[dict[str, str]]:
    return [
        *([{"role": "system", "content": system}] if system is not None else []),
        {"role": "user", "content": user},
    ]


class LazyVectorStore:
    """``VectorStore`` over Weaviate that connects on first use and again after a failed
    connect, so the service starts (and answers /healthz) while Weaviate is still down."""

    def __init__(self, store: WeaviateStore) -> None:
        self._store = store
        self._connected = False
        self._lock = asyncio.Lock()

    async def _ready(self) -> WeaviateStore:
        if not self._connected:
            async with self._lock:
                if not self._connected:
                    await self._store.connect()
                    self._connected = True
        return self._store

    async def upsert(
        self, kind: str, items: Sequence[tuple[str, list[float], dict[str, Any]]]
    ) -> None:
        await (await self._ready()).upsert(kind, items)

    async def delete(self, kind: str, keys: Sequence[str]) -> None:
        await (await self._ready()).delete(kind, keys)

    async def search(
        self,
        kind: str,
        vector: list[float],
        limit: int,
        filters: dict[str, Any] | None = None,
        *,
        text: str | None = None,
    ) -> list[VectorHit]:
        return await (await self._ready()).search(kind, vector, limit, filters, text=text)

    async def close(self) -> None:
        if self._connected:
            await self._store.close()


def token_counter(encoding: str) -> TokenCounter:
    enc = get_encoding(encoding)

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    return count


@asynccontextmanager
async def open_deps(
    settings: Settings, registry: CollectorRegistry | None = None
) -> AsyncIterator[QueryDeps]:
    """The clients a query needs, closed on exit; the model's counters go on ``registry``
    (the HTTP service's metrics) when one is given."""
    from core.clients import build_embedder, build_llm
    from core.vector_store import VectorStoreError, WeaviateStore

    store = LazyVectorStore(WeaviateStore(settings))
    try:
        try:
            await store._ready()
        except VectorStoreError as e:
            log.warning("%s; will retry on the first query", e)
        llm = build_llm(settings, registry)
        embedder = build_embedder(settings)
        try:
            yield QueryDeps(
                embedder=embedder,
                store=store,
                prompts=PromptLibrary(settings.extraction.prompts_dir),
                count_tokens=token_counter(settings.chunking.encoding),
                llm=llm,
                price=None if llm is None else settings.llm.price(),
            )
        finally:
            # Their HTTP connections, else left open until the garbage collector finds them.
            for client in (llm, embedder):
                close = getattr(client, "aclose", None)
                if close is not None:
                    await close()
    finally:
        await store.close()
