"""Server-sent events: the wire format, answers in pieces, and community events from Kafka.

Answers are streamed as the model writes them: the stream starts at once with a ``status``
event, then carries the model's text in ``chunk`` events as it arrives (OpenAI streaming,
``core.llm.OpenAILLM.chat_stream``), then a ``done`` event with everything else of the result.
A citation can only be judged once the whole answer is known (an id is checked against the
context, "+more" is decided per group), so the checks run on the completed text, and when
they changed it (a made-up citation removed) ``done`` carries the checked text as
``answer``. An answer no model wrote piece by piece (offline, or nothing relevant found) is
sent in ``chunk`` events cut from the complete text (``answer_pieces``).

Community events are read from ``<namespace>.community-events`` with a consumer of no group
(nothing is committed, every listener sees everything). The start offsets are fixed before
the ``ready`` event is sent: a client that waits for ``ready`` misses no event produced after
it, whatever partition the event lands on.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from core.settings import Settings

log = logging.getLogger(__name__)

MEDIA_TYPE = "text/event-stream"
# one server-sent event, as the OpenAPI document describes the items of a stream
EVENT_SCHEMA = {
    "type": "object",
    "properties": {"event": {"type": "string"}, "data": {"type": "string"}},
    "required": ["data"],
}
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_BOUNDARY = re.compile(r"(?<=\s)(?=\S)")
StartAt = Literal["earliest", "latest"]


def sse_event(data: Any, *, event: str | None = None, event_id: str | None = None) -> bytes:
    """One event; ``data`` is sent as JSON on one line (JSON never holds a raw line break)."""
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.append("data: " + orjson.dumps(data).decode())
    return ("\n".join(lines) + "\n\n").encode()


def sse_comment(text: str) -> bytes:
    """A comment line: ignored by clients, keeps proxies from closing an idle stream."""
    return f": {text}\n\n".encode()


def answer_pieces(text: str, size: int = 80) -> Iterator[str]:
    """The text in pieces of about ``size`` characters, cut only where a word starts; the
    pieces concatenate to ``text`` exactly."""
    piece = ""
    for word in _BOUNDARY.split(text):
        if piece and len(piece) + len(word) > size:
            yield piece
            piece = ""
        piece += word
    if piece:
        yield piece


def decode_event(raw: bytes | None) -> dict[str, Any] | None:
    """A community event, or ``None`` when the payload is not a JSON object with a kind."""
    if not raw:
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("kind"), str) else None


@dataclass(frozen=True, slots=True)
class CommunityEvent:
    partition: int
    offset: int
    payload: dict[str, Any]  # at least "kind", "community_id", "level", "title", "size", ...


async def start_reader(settings: Settings) -> AIOKafkaConsumer:
    """A started consumer outside any group (it assigns partitions itself); one that could not
    start is closed before the error goes on, or it warns when collected."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka.bootstrap_servers, enable_auto_commit=False, group_id=None
    )
    try:
        await consumer.start()
    except BaseException:
        await consumer.stop()
        raise
    return consumer


async def event_feed(
    settings: Settings, *, start: StartAt = "latest", poll_s: float = 1.0
) -> AsyncGenerator[list[CommunityEvent], None]:
    """Batches of community events, forever. The first batch is empty and comes once the
    start offsets are fixed ("ready"); later batches are empty when nothing arrived within
    ``poll_s``, so a reader can send keep-alives or notice it should stop."""
    topic = settings.topic("community_events")
    consumer = await start_reader(settings)
    try:
        parts = [TopicPartition(topic, p) for p in range(settings.kafka.partitions)]
        consumer.assign(parts)
        if start == "earliest":
            await consumer.seek_to_beginning(*parts)
        else:
            for tp, offset in (await consumer.end_offsets(parts)).items():
                consumer.seek(tp, offset)
        yield []
        while True:
            batch = await consumer.getmany(timeout_ms=int(poll_s * 1000))
            out = []
            for tp, messages in batch.items():
                for m in messages:
                    event = decode_event(m.value)
                    if event is None:
                        log.warning("skipping malformed community event at %s@%d", tp, m.offset)
                    else:
                        out.append(CommunityEvent(tp.partition, m.offset, event))
            yield out
    finally:
        await consumer.stop()


async def community_events(
    settings: Settings,
    *,
    start: StartAt = "latest",
    kinds: frozenset[str] | None = None,
    keepalive_s: float = 15.0,
) -> AsyncIterator[bytes]:
    """SSE bytes of the community-events topic until the client goes away (the caller
    cancels the iteration): ``ready`` first, then one event per community event (its
    ``event:`` field is the kind); ``kinds`` keeps only those kinds."""
    topic = settings.topic("community_events")
    quiet_since = time.monotonic()
    first = True
    async for batch in event_feed(settings, start=start):
        if first:
            first = False
            yield sse_event({"topic": topic, "from": start}, event="ready")
        for e in batch:
            if kinds is None or e.payload["kind"] in kinds:
                quiet_since = time.monotonic()
                yield sse_event(
                    e.payload, event=e.payload["kind"], event_id=f"{e.partition}-{e.offset}"
                )
        if time.monotonic() - quiet_since >= keepalive_s:
            quiet_since = time.monotonic()
            yield sse_comment("keep-alive")
