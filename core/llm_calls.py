"""How one request to an OpenAI-compatible endpoint is made: bounded concurrency, retries and
counters, the same for chat and embeddings.

Retries are ours (tenacity), not the ``openai`` client's (built with ``max_retries=0``):
- one predicate, :func:`is_retryable`, decides for chat and embeddings alike;
- ``Retry-After`` (and OpenAI's ``retry-after-ms``) is always honoured, whereas the client's
  own loop ignores values above 60 s and falls back to its short backoff;
- every retry is counted, which the benchmarks need, and the number of attempts is exactly
  ``LLMSettings.max_retries + 1``;
- the concurrency slot is released while we back off, so a throttled request does not hold
  capacity that other requests could use.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import openai
from prometheus_client import CollectorRegistry, Counter, Gauge
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from core.errors import LLMError

log = logging.getLogger(__name__)
T = TypeVar("T")

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
MAX_RETRY_AFTER_S = 600.0  # a server asking for more than 10 minutes is treated as 10 minutes

# ---- retry policy ------------------------------------------------------------------------


def is_retryable(exc: BaseException) -> bool:
    """429, 408/409/425, 5xx, timeouts and connection errors may pass; other errors will not."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRYABLE_STATUS or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError | TimeoutError | ConnectionError)


def is_rate_limited(exc: BaseException | None) -> bool:
    return isinstance(exc, openai.APIStatusError) and exc.status_code == 429


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
    rate_limit_budget_s: float = 0.0  # a 429 is retried past max_retries until this long

    def stop(self, state: RetryCallState) -> bool:
        """Stop after ``max_retries`` retries, except that a request still rate-limited (429:
        the server says "later", never "no") goes on until ``rate_limit_budget_s`` have
        passed since its first attempt: a burst of 429s must not cost a chunk."""
        if state.attempt_number < self.max_retries + 1:
            return False
        exc = state.outcome.exception() if state.outcome else None
        if is_rate_limited(exc):
            return (state.seconds_since_start or 0.0) >= self.rate_limit_budget_s
        return True

    def wait(self, state: RetryCallState) -> float:
        """Retry-After plus up to 10% jitter when given, else full-jitter exponential backoff."""
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after_s(exc) if exc is not None else None
        if asked is not None:
            asked = min(asked, MAX_RETRY_AFTER_S)
            return asked + random.uniform(0, 0.1 * asked)
        ceiling = min(self.max_s, self.base_s * 2 ** (state.attempt_number - 1))
        return random.uniform(0, ceiling)


def describe(exc: BaseException) -> str:
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


class Metrics:
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


# ---- shared request machinery ------------------------------------------------------------------


class Caller:
    """Bounded concurrency + retries + metrics around one kind of HTTP request."""

    def __init__(self, concurrency: int, policy: RetryPolicy, metrics: Metrics) -> None:
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
            stop=self.policy.stop,
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
                f"gave up after {attempts} attempt(s): {describe(exc)}",
                retryable=is_retryable(exc),
                attempts=attempts,
            ) from exc


def openai_client(
    base_url: str | None, api_key: str | None, timeout_s: float
) -> openai.AsyncOpenAI:
    if not base_url:
        raise LLMError("no endpoint configured (base_url is unset)", retryable=False)
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or "unused", timeout=timeout_s, max_retries=0
    )
