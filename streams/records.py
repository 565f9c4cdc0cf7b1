"""Dead letters, as a faust Record. The other payloads are orjson envelopes in
``streams.codecs``; the ``documents`` topic carries raw bytes on purpose: a producer we do not
control may send anything, and the chunker must route undecodable or malformed payloads to the
dead-letter topic with the original bytes intact.
"""

from __future__ import annotations

import faust


class DeadLetter(faust.Record, serializer="json"):
    """What could not be processed, why, and the original payload (``*.dlq`` topics)."""

    reason: str  # human-readable cause, e.g. "missing required field 'text'"
    source_topic: str  # where the payload was read from
    partition: int  # its partition there
    offset: int  # its offset there
    key: str | None  # its key, decoded as UTF-8 when possible
    payload: str  # the original value: UTF-8 text, or base64 when not decodable
    payload_encoding: str  # "utf-8" or "base64"
    failed_at: float  # wall-clock seconds since the epoch
    stage: str = ""  # which agent gave up: "chunker", "extractor", …
    payload_bytes: int = 0  # size of the original value
    payload_truncated: bool = False  # payload cut to fit a message; the original stays at offset
