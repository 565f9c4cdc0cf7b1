"""A scripted, fault-injecting OpenAI-compatible server for tests and benchmarks.

It serves ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` in OpenAI's wire format
(usage included) and behaves like a strict but cheap model:

- **Request kinds** are recognised by the first line of the prompt, ``TASK: ...``
  (``prompts.TASK_MARKERS``): the last user message is looked at first (extraction,
  gleaning, claims, summaries, reports, rating, questions), then the system messages (local,
  basic, global map and reduce, DRIFT primer, follow-up and reduce answers, whose user
  message is the question), and Microsoft GraphRAG's own local and basic search prompts
  (``---Role---`` … ``---Data tables---``: kind ``graphrag_search``, for running GraphRAG on
  an export). Anything else is kind ``unknown`` and is refused with a 400.
- **Strictness.** 400 with an OpenAI error body when an extraction prompt lacks its entity
  types, the three delimiters, a worked example or the chunk text, when a gleaning turn is
  not preceded by the earlier answer as an assistant message, or when a DRIFT prompt lacks
  its data section (reports, tables, intermediate answers), the overall question or the JSON
  shape and follow-up count it must ask for.
- **Answers are derived from the input** (``kgrag.testing.scripted_answers`` dispatches to
  the ``answer_*`` functions of ``scripted_extraction`` and ``scripted_contexts``):
  capitalised phrases become typed entities, entities of one sentence are related, the
  first extraction holds back a quarter of the entities for gleaning, the YES/NO loop says
  YES while some are still missing, reports and answers cite only ids present in their input,
  map scores follow the word overlap with the question (0 when none).
- **Everything is recorded** (``GET``/``DELETE /_calls``, ``calls()``), with in-flight
  statistics (``GET /_stats``).
- **Faults on demand** (``POST /_faults`` or ``set_faults``, JSON of :class:`FaultConfig`):
  429 with Retry-After, 400 (as a content filter answers), 500, hangs past the client's
  timeout, malformed and truncated output, a fixed latency per call (an ``asyncio.sleep``: it
  never blocks other requests), and scripted answers (``POST /_script``: the next answer of a
  kind is a given text).

Run it in a background thread (``with ScriptedLLMServer() as srv: srv.base_url``) or as its
own process: ``python -m kgrag.testing.scripted_llm --port 8089 --latency-ms 200``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import json
import math
import random
import re
import struct
import threading
import time
from collections import Counter, defaultdict, deque
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from aiohttp import web

from kgrag.testing.scripted_answers import KINDS, answer, classify, embed_text, malform, truncate
from kgrag.testing.scripted_text import RequestRejected, content_text, n_tokens

# ==== fault configuration and call records ====================================================


@dataclass
class FaultConfig:
    """What can go wrong, as probabilities per call (JSON body of ``POST /_faults``)."""

    rate_limit: float = 0.0  # answer 429 with Retry-After
    bad_request: float = 0.0  # answer 400, as a content filter or an over-long context does
    retry_after_s: float = 1.0  # sent as retry-after-ms and (rounded up) Retry-After
    server_error: float = 0.0  # answer 500
    timeout: float = 0.0  # hang for hang_s (longer than the client's timeout)
    hang_s: float = 120.0
    malformed: float = 0.0  # 200 with output that does not follow the requested format
    truncated: float = 0.0  # 200 with output cut mid-record, no completion delimiter
    latency_s: float = 0.0  # added to every call (also to unfaulted ones)
    stream_piece_s: float = 0.0  # a streamed answer waits this long before each piece
    kinds: list[str] | None = None  # restrict faults (not latency) to these kinds
    max_faults: int | None = None  # stop injecting after this many faults
    seed: int | None = None  # seed of the fault dice

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault settings {sorted(unknown)}; known: {sorted(known)}")
        cfg = cls(**data)
        for name in (
            "rate_limit",
            "bad_request",
            "server_error",
            "timeout",
            "malformed",
            "truncated",
        ):
            if not 0.0 <= getattr(cfg, name) <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1]")
        return cfg


@dataclass
class RecordedCall:
    kind: str
    messages: list[dict[str, Any]]
    timestamp: float
    status: int
    path: str = "/v1/chat/completions"
    model: str = ""
    fault: str | None = None  # name of the injected fault, if any
    input: list[str] = field(default_factory=list)  # embedding inputs
    response: str = ""  # the answer's text (chat) when status is 200
    # seconds from the request's arrival to its response being ready (parsing, checks,
    # latency and the answer's computation): how long the call held one of the client's slots
    # here, at the least
    service_s: float = 0.0
    # the usage it answered with (chat, status 200)
    prompt_tokens: int = 0
    completion_tokens: int = 0


# ==== the server =============================================================================


class ScriptedLLMServer:
    """The HTTP server plus its in-process control surface (thread-safe)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        faults: FaultConfig | None = None,
        embedding_dim: int = 384,
    ) -> None:
        self.host, self.port = host, port
        self.embedding_dim = embedding_dim
        self._lock = threading.Lock()
        self._faults = faults or FaultConfig()
        self._rng = random.Random(self._faults.seed)
        self._faults_injected = 0
        self._calls: list[RecordedCall] = []
        self._scripts: dict[str, deque[str]] = defaultdict(deque)
        self.in_flight = 0
        self.max_in_flight = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None

    # ---- in-process control -------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def set_faults(self, faults: FaultConfig | dict[str, Any]) -> None:
        cfg = faults if isinstance(faults, FaultConfig) else FaultConfig.from_json(faults)
        with self._lock:
            self._faults = cfg
            self._rng = random.Random(cfg.seed)
            self._faults_injected = 0

    def faults(self) -> FaultConfig:
        with self._lock:
            return self._faults

    def script(self, kind: str, text: str, times: int = 1) -> None:
        """The next ``times`` answers of ``kind`` are ``text`` (e.g. a made-up citation)."""
        if kind not in KINDS and kind != "unknown":
            raise ValueError(f"unknown kind {kind!r}; known: {sorted(KINDS)}")
        with self._lock:
            self._scripts[kind].extend([text] * times)

    def calls(self, kind: str | None = None) -> list[RecordedCall]:
        with self._lock:
            return [c for c in self._calls if kind is None or c.kind == kind]

    def clear_calls(self) -> None:
        with self._lock:
            self._calls.clear()
            self.max_in_flight = self.in_flight

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": len(self._calls),
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "faults_injected": self._faults_injected,
                "by_kind": dict(Counter(c.kind for c in self._calls)),
            }

    # ---- fault dice -----------------------------------------------------------------------
    def _draw(self, kind: str, names: tuple[str, ...]) -> str | None:
        with self._lock:
            f = self._faults
            if f.kinds is not None and kind not in f.kinds:
                return None
            if f.max_faults is not None and self._faults_injected >= f.max_faults:
                return None
            roll, edge = self._rng.random(), 0.0
            for name in names:
                edge += getattr(f, name)
                if roll < edge:
                    self._faults_injected += 1
                    return name
            return None

    def _record(self, call: RecordedCall) -> None:
        with self._lock:
            self._calls.append(call)

    def _next_script(self, kind: str) -> str | None:
        with self._lock:
            queue = self._scripts.get(kind)
            return queue.popleft() if queue else None

    # ---- HTTP handlers ----------------------------------------------------------------------
    @staticmethod
    def _error(
        status: int, message: str, kind: str, headers: dict[str, str] | None = None
    ) -> web.Response:
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        return web.json_response(body, status=status, headers=headers)

    async def _http_fault(self, call: RecordedCall) -> web.Response | None:
        """429, 400, 500 or a hang, when the dice say so; recorded before any waiting, so a
        call the client abandons still shows its fault."""
        call.fault = self._draw(call.kind, ("rate_limit", "bad_request", "server_error", "timeout"))
        if call.fault is None:
            return None
        call.status = {"rate_limit": 429, "bad_request": 400, "server_error": 500, "timeout": 504}[
            call.fault
        ]
        if call.fault == "bad_request":
            return self._error(
                400,
                "The response was filtered due to the prompt triggering the content management "
                "policy (scripted)",
                "invalid_request_error",
            )
        if call.fault == "rate_limit":
            s = self._faults.retry_after_s
            headers = {"Retry-After": str(math.ceil(s)), "retry-after-ms": str(int(s * 1000))}
            return self._error(429, "Rate limit reached (scripted)", "rate_limit", headers)
        if call.fault == "server_error":
            return self._error(500, "The server had an error (scripted)", "server_error")
        await asyncio.sleep(self._faults.hang_s)
        return self._error(504, "Timed out (scripted)", "timeout")

    async def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            latency = self._faults.latency_s
        if latency > 0:
            await asyncio.sleep(latency)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    async def chat(self, request: web.Request) -> web.StreamResponse:
        arrived, arrived_at = time.monotonic(), time.time()
        try:
            body = await request.json()
            messages = list(body["messages"])
        except (ValueError, KeyError, TypeError) as e:
            return self._error(400, f"invalid request body: {e}", "invalid_request_error")
        kind = classify(messages)
        call = RecordedCall(kind, messages, arrived_at, 200, model=str(body.get("model", "")))
        await self._enter()
        try:
            if (failure := await self._http_fault(call)) is not None:
                return failure
            try:
                wants = (body.get("response_format") or {}).get("type") == "json_object"
                text = self._next_script(kind) or answer(kind, messages, json_mode=wants)
            except RequestRejected as e:
                call.status = 400
                return self._error(400, str(e), "invalid_request_error")
            call.fault = self._draw(kind, ("malformed", "truncated"))
            if call.fault == "malformed":
                text = malform(kind, text)
            elif call.fault == "truncated":
                text = truncate(text)
            call.response = text
            completion = self._completion(body, messages, text)
            call.prompt_tokens = completion["usage"]["prompt_tokens"]
            call.completion_tokens = completion["usage"]["completion_tokens"]
            if body.get("stream"):
                return await self._stream(request, body, messages, text)
            return web.json_response(completion)
        finally:
            self._leave()
            call.service_s = time.monotonic() - arrived
            self._record(call)

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        messages: list[dict[str, Any]],
        text: str,
    ) -> web.StreamResponse:
        """The answer as OpenAI's streamed chunks, a word at a time (``stream_piece_s``
        apart), then the usage when ``stream_options.include_usage`` asks for it."""
        whole = self._completion(body, messages, text)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        base = {k: whole[k] for k in ("id", "created", "model")}
        base["object"] = "chat.completion.chunk"

        async def send(chunk: dict[str, Any]) -> None:
            await response.write(b"data: " + json.dumps({**base, **chunk}).encode() + b"\n\n")

        for n, piece in enumerate(re.findall(r"\s*\S+", text) or [""]):
            await asyncio.sleep(self._faults.stream_piece_s)
            delta = {"role": "assistant", "content": piece} if n == 0 else {"content": piece}
            await send({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        await send({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            await send({"choices": [], "usage": whole["usage"]})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    @staticmethod
    def _completion(
        body: dict[str, Any], messages: list[dict[str, Any]], text: str
    ) -> dict[str, Any]:
        prompt_tokens = sum(n_tokens(content_text(m)) for m in messages)
        completion_tokens = n_tokens(text)
        return {
            "id": f"chatcmpl-{hashlib.sha1(text.encode()).hexdigest()[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    async def embeddings(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            raw = body["input"]
            inputs = [raw] if isinstance(raw, str) else [str(x) for x in raw]
            dim = int(body.get("dimensions") or self.embedding_dim)
        except (ValueError, KeyError, TypeError) as e:
            return self._error(400, f"invalid request body: {e}", "invalid_request_error")
        call = RecordedCall(
            "embeddings",
            [],
            time.time(),
            200,
            "/v1/embeddings",
            str(body.get("model", "")),
            input=inputs,
        )
        await self._enter()
        try:
            if (failure := await self._http_fault(call)) is not None:
                return failure
            b64 = body.get("encoding_format") == "base64"
            data = []
            for i, text in enumerate(inputs):
                vec: Any = embed_text(text, dim)
                if b64:
                    vec = base64.b64encode(struct.pack(f"<{dim}f", *vec)).decode()
                data.append({"object": "embedding", "index": i, "embedding": vec})
            tokens = sum(n_tokens(t) for t in inputs)
            return web.json_response(
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model", "scripted"),
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            )
        finally:
            self._leave()
            self._record(call)

    async def get_calls(self, request: web.Request) -> web.Response:
        kind = request.query.get("kind")
        return web.json_response([asdict(c) for c in self.calls(kind)])

    async def delete_calls(self, request: web.Request) -> web.Response:
        self.clear_calls()
        return web.json_response({"ok": True})

    async def get_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def post_faults(self, request: web.Request) -> web.Response:
        try:
            self.set_faults(await request.json())
        except (ValueError, TypeError) as e:
            return self._error(400, str(e), "invalid_request_error")
        return web.json_response(asdict(self.faults()))

    async def get_faults(self, request: web.Request) -> web.Response:
        return web.json_response(asdict(self.faults()))

    async def post_script(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            self.script(str(body["kind"]), str(body["text"]), int(body.get("times", 1)))
        except (ValueError, KeyError, TypeError) as e:
            return self._error(400, str(e), "invalid_request_error")
        return web.json_response({"ok": True})

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_get("/_calls", self.get_calls)
        app.router.add_delete("/_calls", self.delete_calls)
        app.router.add_get("/_stats", self.get_stats)
        app.router.add_get("/_faults", self.get_faults)
        app.router.add_post("/_faults", self.post_faults)
        app.router.add_post("/_script", self.post_script)
        return app

    # ---- lifecycle ---------------------------------------------------------------------------
    async def start_async(self) -> None:
        """Serve on the running loop (the ``port`` attribute gets the bound port)."""
        self._runner = web.AppRunner(
            self.app(), access_log=None, handler_cancellation=True, shutdown_timeout=1.0
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> ScriptedLLMServer:
        """Serve from a background thread with its own event loop."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as e:  # reported to the starting thread
                errors.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop_async())
            loop.close()

        self._thread = threading.Thread(target=run, name="scripted-llm", daemon=True)
        self._thread.start()
        ready.wait(30)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._thread = self._loop = None

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _serve_forever(server: ScriptedLLMServer) -> None:
    await server.start_async()
    print(f"scripted LLM listening on {server.base_url}", flush=True)  # the CLI's output
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop_async()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--faults", default="{}", help="FaultConfig as JSON")
    parser.add_argument("--embedding-dim", type=int, default=384)
    args = parser.parse_args(argv)
    faults = FaultConfig.from_json(json.loads(args.faults))
    if args.latency_ms:
        faults.latency_s = args.latency_ms / 1000.0
    server = ScriptedLLMServer(
        args.host, args.port, faults=faults, embedding_dim=args.embedding_dim
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(server))


if __name__ == "__main__":
    main()
