"""LLM and embedding clients for any OpenAI-compatible endpoint.

Retries are ours (tenacity), not the ``openai`` client's (built with ``max_retries=0``):
- one predicate, :func:`is_retryable`, decides for chat and embeddings alike;
- ``Retry-After`` (and OpenAI's ``retry-after-ms``) is always honoured, whereas the client's
  own loop ignores values above 60 s and falls back to its short backoff;
- every retry is counted, which the benchmarks need, and the number of attempts is exactly
  ``LLMSettings.max_retries + 1``;
- the concurrency slot is released while we back off, so a throttled request does not hold
  capacity that other requests could use.

Responses are cached on disk (:class:`ResponseCache`, SQLite in WAL mode, safe for several
processes) keyed by a SHA-256 of model, messages and parameters, so replaying a topic or
restarting a worker costs no LLM calls.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import openai
import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from core.errors import KgragError
from core.settings import EmbeddingSettings, LLMSettings
from graph.protocols import ChatResult

log = logging.getLogger(__name__)
T = TypeVar("T")

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
MAX_RETRY_AFTER_S = 600.0  # a server asking for more than 10 minutes is treated as 10 minutes


class LLMError(KgragError):
    """The endpoint gave no usable answer. ``retryable`` says whether trying again later may
    succeed (rate limits, outages) or not (bad request, auth, wrong model)."""

    def __init__(self, reason: str, *, retryable: bool, attempts: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.attempts = attempts


# ---- retry policy ------------------------------------------------------------------------


def is_retryable(exc: BaseException) -> bool:
    """429, 408/409/425, 5xx, timeouts and connection errors may pass; other errors will not."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRYABLE_STATUS or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError | TimeoutError | ConnectionError)


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` as seconds or
    an HTTP date), or None."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 6
    base_s: float = 0.5  # first backoff; doubles each attempt
    max_s: float = 30.0  # cap of the exponential backoff (Retry-After is not capped by it)

    def wait(self, state: RetryCallState) -> float:
        """Retry-After plus up to 10% jitter when given, else full-jitter exponential backoff."""
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after_s(exc) if exc is not None else None
        if asked is not None:
            asked = min(asked, MAX_RETRY_AFTER_S)
            return asked + random.uniform(0, 0.1 * asked)
        ceiling = min(self.max_s, self.base_s * 2 ** (state.attempt_number - 1))
        return random.uniform(0, ceiling)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


# ---- metrics -------------------------------------------------------------------------------


class BusyMeter:
    """In-flight requests integrated over time, to tell how busy the concurrency was kept.

    ``utilisation()`` = (∫ in_flight dt) / (elapsed × capacity) since the last ``reset()``.
    """

    def __init__(self, capacity: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._start = self._last = self._clock()
            self._area = 0.0

    def _advance(self) -> None:
        now = self._clock()
        self._area += self.in_flight * (now - self._last)
        self._last = now

    def enter(self) -> None:
        with self._lock:
            self._advance()
            self.in_flight += 1

    def leave(self) -> None:
        with self._lock:
            self._advance()
            self.in_flight -= 1

    def utilisation(self) -> float:
        with self._lock:
            self._advance()
            elapsed = self._last - self._start
            return 0.0 if elapsed <= 0 else self._area / (elapsed * self.capacity)


@dataclass(frozen=True, slots=True)
class LLMStats:
    calls: int  # logical requests sent to the endpoint (cache misses); retries not included
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    retries: int  # extra HTTP attempts after a retryable failure
    failures: int  # requests given up (LLMError raised)
    in_flight: int
    utilisation: float  # see BusyMeter


class _Metrics:
    """Plain counters for reading in-process, mirrored to prometheus for scraping."""

    def __init__(self, prefix: str, registry: CollectorRegistry | None, capacity: int) -> None:
        reg = registry if registry is not None else CollectorRegistry()
        self.counts = dict.fromkeys(
            ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "retries", "failures"),
            0,
        )
        self._prom = {
            name: Counter(f"{prefix}_{name}", f"{prefix} {name.replace('_', ' ')}", registry=reg)
            for name in self.counts
        }
        self.in_flight_gauge = Gauge(f"{prefix}_in_flight", "requests in flight", registry=reg)
        self.busy = BusyMeter(capacity)

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] += n
        self._prom[name].inc(n)

    def stats(self) -> LLMStats:
        return LLMStats(
            **self.counts, in_flight=self.busy.in_flight, utilisation=self.busy.utilisation()
        )


# ---- persistent response cache --------------------------------------------------------------


def cache_key(model: str, messages: Sequence[dict[str, str]], params: dict[str, Any]) -> str:
    """SHA-256 over a canonical JSON of what determines the answer."""
    blob = orjson.dumps(
        {"model": model, "messages": list(messages), "params": params},
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.sha256(blob).hexdigest()


class ResponseCache:
    """Chat responses in one SQLite file. WAL mode lets several processes read while one
    writes; writes are single ``INSERT OR REPLACE`` statements, so a crash leaves no partial
    entry. Calls run in a worker thread so a busy lock never stalls the event loop."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "responses.sqlite"
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, text TEXT NOT NULL,"
                " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL)"
            )
            self._db.commit()
        except sqlite3.Error as e:
            raise LLMError(
                f"LLM response cache {self.path} is unusable ({e}); delete it or set "
                "KGRAG_LLM__CACHE_DIR elsewhere",
                retryable=False,
            ) from e

    def _get(self, key: str) -> ChatResult | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens FROM responses WHERE key = ?",
                (key,),
            ).fetchone()
        return None if row is None else ChatResult(row[0], row[1], row[2], cached=True)

    def _put(self, key: str, result: ChatResult) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (key, result.text, result.prompt_tokens, result.completion_tokens, time.time()),
            )
            self._db.commit()

    def _delete(self, key: str) -> bool:
        with self._lock:
            cur = self._db.execute("DELETE FROM responses WHERE key = ?", (key,))
            self._db.commit()
        return cur.rowcount > 0

    async def get(self, key: str) -> ChatResult | None:
        """The cached answer, or None (also when the cache cannot be read: a broken cache
        costs LLM calls, never answers)."""
        try:
            return await asyncio.to_thread(self._get, key)
        except sqlite3.Error as e:
            log.warning("LLM cache %s unreadable (%s); asking the model", self.path, e)
            return None

    async def put(self, key: str, result: ChatResult) -> None:
        try:
            await asyncio.to_thread(self._put, key, result)
        except sqlite3.Error as e:
            log.warning("LLM cache %s not written (%s); the answer is still used", self.path, e)

    async def delete(self, key: str) -> bool:
        return await asyncio.to_thread(self._delete, key)

    def close(self) -> None:
        with self._lock:
            self._db.close()


# ---- shared request machinery ------------------------------------------------------------------


class _Caller:
    """Bounded concurrency + retries + metrics around one kind of HTTP request."""

    def __init__(self, concurrency: int, policy: RetryPolicy, metrics: _Metrics) -> None:
        self._semaphore = asyncio.Semaphore(concurrency)
        self.policy = policy
        self.metrics = metrics

    async def _attempt(self, request: Callable[[], Awaitable[T]]) -> T:
        async with self._semaphore:
            self.metrics.busy.enter()
            self.metrics.in_flight_gauge.inc()
            try:
                return await request()
            finally:
                self.metrics.in_flight_gauge.dec()
                self.metrics.busy.leave()

    def _count_retry(self, state: RetryCallState) -> None:
        self.metrics.add("retries")
        exc = state.outcome.exception() if state.outcome else None
        log.info("LLM attempt %d failed (%s); retrying", state.attempt_number, exc)

    async def call(self, request: Callable[[], Awaitable[T]]) -> T:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.policy.max_retries + 1),
            wait=self.policy.wait,
            retry=retry_if_exception(is_retryable),
            before_sleep=self._count_retry,
            reraise=True,
        )
        try:
            return await retrying(self._attempt, request)
        except Exception as exc:
            self.metrics.add("failures")
            attempts = retrying.statistics.get("attempt_number", 1)
            raise LLMError(
                f"gave up after {attempts} attempt(s): {_describe(exc)}",
                retryable=is_retryable(exc),
                attempts=attempts,
            ) from exc


def _client(base_url: str | None, api_key: str | None, timeout_s: float) -> openai.AsyncOpenAI:
    if not base_url:
        raise LLMError("no endpoint configured (base_url is unset)", retryable=False)
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or "unused", timeout=timeout_s, max_retries=0
    )


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
        self._client = _client(settings.base_url, settings.api_key, settings.timeout_s)
        directory = cache_dir or settings.cache_dir
        self.cache = ResponseCache(directory) if directory is not None else None
        self.metrics = _Metrics("kgrag_llm", registry, settings.concurrency)
        policy = RetryPolicy(settings.max_retries, backoff_base_s, backoff_max_s)
        self._caller = _Caller(settings.concurrency, policy, self.metrics)
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
            try:
                return await asyncio.shield(pending)
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
        self._client = _client(settings.base_url, settings.api_key, timeout_s)
        self.batch_size = batch_size
        self._send_dims = (
            settings.model.startswith("text-embedding-3")
            if request_dimensions is None
            else request_dimensions
        )
        self.metrics = _Metrics("kgrag_embed", registry, concurrency)
        policy = RetryPolicy(max_retries, backoff_base_s, backoff_max_s)
        self._caller = _Caller(concurrency, policy, self.metrics)

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
