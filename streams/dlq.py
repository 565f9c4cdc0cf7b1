"""Building dead-letter records from the event that could not be processed."""

from __future__ import annotations

import base64
import logging
import time
from typing import Any

from streams.records import DeadLetter

log = logging.getLogger(__name__)

# A dead letter must always fit in a message, even for an oversized payload; the original
# is still in the source topic at the recorded partition and offset.
MAX_PAYLOAD_CHARS = 64 * 1024


def _text(value: Any) -> tuple[str, str]:
    if value is None:
        return "", "utf-8"
    if isinstance(value, str):
        return value, "utf-8"
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii"), "base64"
    if hasattr(value, "dumps"):
        return value.dumps().decode("utf-8"), "utf-8"
    return repr(value), "utf-8"


def dead_letter(
    *,
    reason: str,
    stage: str,
    topic: str,
    partition: int,
    offset: int,
    key: Any,
    value: Any,
) -> DeadLetter:
    payload, encoding = _text(value)
    size = len(value) if isinstance(value, bytes | str) else len(payload)
    truncated = len(payload) > MAX_PAYLOAD_CHARS
    if truncated:
        payload = payload[:MAX_PAYLOAD_CHARS]
    key_text, _ = _text(key)
    return DeadLetter(
        reason=reason,
        source_topic=topic,
        partition=partition,
        offset=offset,
        key=key_text or None,
        payload=payload,
        payload_encoding=encoding,
        failed_at=time.time(),
        stage=stage,
        payload_bytes=size,
        payload_truncated=truncated,
    )


async def send_dead_letter(dlq: Any, event: Any, *, reason: str, stage: str) -> Any:
    """Log why ``event`` cannot be processed and send it to ``dlq``; returns the pending
    delivery, which the caller awaits with the rest of its batch (``streams.batching``)."""
    msg = event.message
    log.warning(
        "%s: %s[%d]@%d sent to %s: %s",
        stage,
        msg.topic,
        msg.partition,
        msg.offset,
        getattr(dlq, "get_topic_name", lambda: "dead letters")(),
        reason,
    )
    letter = dead_letter(
        reason=reason,
        stage=stage,
        topic=msg.topic,
        partition=msg.partition,
        offset=msg.offset,
        key=event.key,
        value=event.value,
    )
    return await dlq.send(key=event.key, value=letter)
