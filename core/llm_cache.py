"""Chat responses cached on disk, so replaying a topic or restarting a worker costs no LLM calls.

One SQLite file in WAL mode, safe for several processes, keyed by a SHA-256 of model, messages
and parameters (:func:`cache_key`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from core.errors import LLMError
from graph.protocols import ChatResult

log = logging.getLogger(__name__)


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
