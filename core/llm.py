"""LLM and embedding clients for any OpenAI-compatible endpoint.

Requests go through ``core.llm_calls`` (bounded concurrency, our retries honouring
Retry-After, counters) and chat answers through the disk cache of ``core.llm_cache``.
Identical concurrent chat requests share one call; the answers of those that joined one already
in flight are marked ``cached``, as cache hits are: they spent no tokens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import openai
from prometheus_client import CollectorRegistry

from core.errors import LLMError
from core.llm_cache import ResponseCache, cache_key
from core.llm_calls import Caller, LLMStats, Metrics, RetryPolicy, openai_client
from core.settings.llm import EmbeddingSettings, LLMSettings
from graph.protocols import ChatResult

log = logging.getLogger(__name__)


# ---- chat ----------------------------------------------------------------------------------


class OpenAILLM:
    """``graph.protocols.LLM`` over ``openai.AsyncOpenAI`` for any compatible ``base_url``.

    ``cache_dir`` defaults to ``settings.cache_dir``; with neither, nothing is cached (pass
    ``Settings.llm_cache_dir`` in production). Identical concurrent requests share one call.
    """

    def __init__(
        self,
        settings: LLMSettings,
        cache_dir: Path | None = None,
        *,
        registry: CollectorRegistry | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ) -> None:
        self.settings = settings
        self._client = openai_client(settings.base_url, settings.api_key, settings.timeout_s)
        directory = cache_dir or settings.cache_dir
        self.cache = ResponseCache(directory) if directory is not None else None
        self.metrics = Metrics("kgrag_llm", registry, settings.concurrency)
        policy = RetryPolicy(
            settings.max_retries, backoff_base_s, backoff_max_s, settings.rate_limit_budget_s
        )
        self._caller = Caller(settings.concurrency, policy, self.metrics)
        self._pending: dict[str, asyncio.Future[ChatResult]] = {}

    def _params(self, json_mode: bool, max_tokens: int | None) -> dict[str, Any]:
        return {
            "temperature": self.settings.temperature,
            "max_tokens": max_tokens,
            "json_mode": json_mode,
        }

    def key(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> str:
        return cache_key(self.settings.model, messages, self._params(json_mode, max_tokens))

    async def chat(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> ChatResult:
        key = self.key(messages, json_mode=json_mode, max_tokens=max_tokens)
        if self.cache is not None and (hit := await self.cache.get(key)) is not None:
            self.metrics.add("cache_hits")
            return hit
        if (pending := self._pending.get(key)) is not None:
            self.metrics.add("cache_hits")
            try:  # the owner of the request spent its tokens: this answer cost nothing more
                return replace(await asyncio.shield(pending), cached=True)
            except asyncio.CancelledError:
                if not pending.cancelled():
                    raise  # we were cancelled ourselves
                # the request we were sharing was cancelled by its owner: make our own
                return await self.chat(
                    messages, json_mode=json_mode, max_tokens=max_tokens, purpose=purpose
                )
        future: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            result = await self._fetch(messages, json_mode, max_tokens, purpose)
            if self.cache is not None:
                await self.cache.put(key, result)
            future.set_result(result)
            return result
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: nobody else may be waiting
            raise
        finally:
            del self._pending[key]

    async def _fetch(
        self,
        messages: Sequence[dict[str, str]],
        json_mode: bool,
        max_tokens: int | None,
        purpose: str,
    ) -> ChatResult:
        extra: dict[str, Any] = {}
        if json_mode:
            extra["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            extra["max_tokens"] = max_tokens
        self.metrics.add("calls")
        log.debug("LLM call purpose=%s messages=%d", purpose, len(messages))
        response = await self._caller.call(
            lambda: self._client.chat.completions.create(
                model=self.settings.model,
                messages=list(messages),  # type: ignore[arg-type]
                temperature=self.settings.temperature,
                **extra,
            )
        )
        if not response.choices:
            raise LLMError("response has no choices", retryable=True)
        usage = response.usage
        result = ChatResult(
            text=response.choices[0].message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )
        self.metrics.add("prompt_tokens", result.prompt_tokens)
        self.metrics.add("completion_tokens", result.completion_tokens)
        return result

    async def chat_stream(
        self,
        messages: Sequence[dict[str, str]],
        on_text: Callable[[str], Awaitable[None]],
        *,
        max_tokens: int | None = None,
        purpose: str = "chat",
    ) -> ChatResult:
        """``chat``, with the answer's text handed to ``on_text`` piece by piece as the model
        writes it (OpenAI streaming); returns the whole answer, which is cached like any
        other. A cached answer is handed over in one piece. Failures before the first piece
        are retried as for ``chat``; one after it is an ``LLMError`` (the pieces are out)."""
        key = self.key(messages, max_tokens=max_tokens)
        if self.cache is not None and (hit := await self.cache.get(key)) is not None:
            self.metrics.add("cache_hits")
            await on_text(hit.text)
            return hit
        request: dict[str, Any] = {
            "model": self.settings.model,
            "messages": list(messages),
            "temperature": self.settings.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            **({} if max_tokens is None else {"max_tokens": max_tokens}),
        }
        self.metrics.add("calls")
        log.debug("LLM stream purpose=%s messages=%d", purpose, len(messages))
        create: Any = self._client.chat.completions.create
        stream = await self._caller.call(lambda: create(**request))
        parts: list[str] = []
        usage: Any = None
        try:
            async for chunk in stream:
                usage = chunk.usage or usage
                for choice in chunk.choices:
                    if choice.delta.content:
                        parts.append(choice.delta.content)
                        await on_text(choice.delta.content)
        except openai.OpenAIError as e:
            self.metrics.add("failures")
            raise LLMError(f"the answer's stream broke off: {e}", retryable=False) from e
        result = ChatResult(
            text="".join(parts),
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )
        self.metrics.add("prompt_tokens", result.prompt_tokens)
        self.metrics.add("completion_tokens", result.completion_tokens)
        if self.cache is not None:
            await self.cache.put(key, result)
        return result

    async def forget(
        self,
        messages: Sequence[dict[str, str]],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> bool:
        """Drop a cached answer, e.g. one that did not parse, so that asking again reaches the
        model instead of replaying the same bad output. True when there was one."""
        if self.cache is None:
            return False
        key = self.key(messages, json_mode=json_mode, max_tokens=max_tokens)
        return await self.cache.delete(key)

    def stats(self) -> LLMStats:
        return self.metrics.stats()

    async def aclose(self) -> None:
        await self._client.close()
        if self.cache is not None:
            self.cache.close()

    async def __aenter__(self) -> OpenAILLM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# ---- embeddings ----------------------------------------------------------------------------


class OpenAIEmbedder:
    """``graph.protocols.Embedder`` over ``/v1/embeddings`` with the chat client's retry policy.

    ``dimensions`` is requested from the server only for models that accept it
    (``text-embedding-3*``, or ``request_dimensions=True``); every answer is checked against
    ``settings.dimensions`` so a mismatched model fails at once, not in the vector store.
    """

    def __init__(
        self,
        settings: EmbeddingSettings,
        *,
        concurrency: int = 4,
        max_retries: int = 6,
        timeout_s: float = 60.0,
        batch_size: int = 64,
        request_dimensions: bool | None = None,
        registry: CollectorRegistry | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ) -> None:
        self.settings = settings
        self._client = openai_client(settings.base_url, settings.api_key, timeout_s)
        self.batch_size = batch_size
        self._send_dims = (
            settings.model.startswith("text-embedding-3")
            if request_dimensions is None
            else request_dimensions
        )
        self.metrics = Metrics("kgrag_embed", registry, concurrency)
        policy = RetryPolicy(max_retries, backoff_base_s, backoff_max_s)
        self._caller = Caller(concurrency, policy, self.metrics)

    @property
    def dimensions(self) -> int:
        return self.settings.dimensions

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        batches = [
            list(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)
        ]
        results = await asyncio.gather(*(self._embed_batch(b) for b in batches))
        return [vector for batch in results for vector in batch]

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        extra: dict[str, Any] = {"dimensions": self.dimensions} if self._send_dims else {}
        self.metrics.add("calls")
        response = await self._caller.call(
            lambda: self._client.embeddings.create(
                model=self.settings.model, input=batch, encoding_format="float", **extra
            )
        )
        if response.usage is not None:
            self.metrics.add("prompt_tokens", response.usage.prompt_tokens)
        vectors = [list(d.embedding) for d in sorted(response.data, key=lambda d: d.index)]
        if len(vectors) != len(batch):
            raise LLMError(f"asked for {len(batch)} vectors, got {len(vectors)}", retryable=True)
        if vectors and len(vectors[0]) != self.dimensions:
            raise LLMError(
                f"model {self.settings.model} returned {len(vectors[0])}-dimensional vectors, "
                f"settings say {self.dimensions}: set KGRAG_EMBEDDINGS__DIMENSIONS",
                retryable=False,
            )
        return vectors

    def stats(self) -> LLMStats:
        return self.metrics.stats()

    async def aclose(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> OpenAIEmbedder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
