"""The offline embedder: feature hashing of words and word pairs, no model download.

Each lower-cased word (and each adjacent pair, weighted lower), with sublinear term
frequency, is hashed with BLAKE2b into one of ``dimensions`` buckets with a sign bit; the
vector is L2-normalised, so cosine distance approximates weighted word overlap. It knows no
synonyms — that is the price of needing no download — but it is deterministic across
processes and machines, which makes Weaviate upserts idempotent and test results
reproducible. ``core.clients.build_embedder`` uses it when no embedding endpoint is set.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Sequence
from itertools import pairwise

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
_STOP = frozenset(
    (
        "a an and are as at be by for from has have he her his in is it its of on or said "
        "she that the their they this to was were will with would which who what when where "
        "why how do does did not no than then there these those been being also"
    ).split()
)


def _bucket(token: str, dimensions: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dimensions, (1.0 if (value >> 63) & 1 else -1.0)


def tokens(text: str) -> list[str]:
    return [w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if w not in _STOP]


def hash_embed(text: str, dimensions: int) -> list[float]:
    words = tokens(text)
    counts: dict[str, float] = {}
    for w in words:
        counts[w] = counts.get(w, 0.0) + 1.0
    for a, b in pairwise(words):
        pair = f"{a} {b}"
        counts[pair] = counts.get(pair, 0.0) + 0.5
    vec = [0.0] * dimensions
    for token, tf in counts.items():
        i, sign = _bucket(token, dimensions)
        # Sublinear term frequency: a word repeated ten times is not ten times the topic.
        vec[i] += sign * (1.0 + math.log(tf)) if tf >= 1 else sign * tf
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        # An empty or all-stopword text still needs a valid vector for cosine distance.
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


class HashingEmbedder:
    """graph.protocols.Embedder without a model: see the module docstring."""

    def __init__(self, dimensions: int = 1024) -> None:
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for i, text in enumerate(texts, 1):
            out.append(hash_embed(text, self._dimensions))
            if not i % 16:
                await asyncio.sleep(0)  # a text unit costs ~0.5 ms: let the event loop in
        return out
