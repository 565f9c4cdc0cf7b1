"""Helpers for integration tests: a real worker subprocess, raw produce, topic reads."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from kgrag.settings import Settings
from tests.conftest import settings_env


class WorkerProcess:
    """``kgrag worker`` as a real subprocess, logging to a file the test can show."""

    def __init__(self, settings: Settings, log_path: Path) -> None:
        self.settings = settings
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        with open(self.log_path, "ab") as log:  # the child keeps its own copy of the fd
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kgrag.cli", "worker", "--loglevel", "info"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=settings_env(self.settings),
            )
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log_tail(self, n: int = 40) -> str:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])


async def produce_raw(
    settings: Settings, topic: str, messages: list[tuple[bytes | None, bytes]]
) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers)
    await producer.start()
    try:
        for key, value in messages:
            await producer.send_and_wait(topic, value, key=key)
    finally:
        await producer.stop()


async def read_topic(
    settings: Settings, topic: str, *, expect: int, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Read JSON values from the start of a topic until ``expect`` arrived or time ran out."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=settings.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expect and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=1000)
            for msgs in batch.values():
                out.extend(orjson.loads(m.value) for m in msgs)
    finally:
        await consumer.stop()
    return out


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float, what: str, interval: float = 1.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


async def fold_graph(settings: Settings, *, settle: float = 5.0, timeout: float = 120.0) -> Any:
    """Fold ``graph-changes`` from the start into a GraphView, until quiet for ``settle`` s."""
    from graph.graph_view import GraphView
    from streams.codecs import decode_graph_change

    view = GraphView()
    consumer = AIOKafkaConsumer(
        settings.topic("graph_changes"),
        bootstrap_servers=settings.kafka.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    await consumer.start()
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            got = sum(len(m) for m in batch.values())
            for msgs in batch.values():
                for m in msgs:
                    view.apply(decode_graph_change(m.value))
            if got:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= settle:
                break
    finally:
        await consumer.stop()
    return view


def graph_summary(view: Any) -> dict[str, tuple[int, int]]:
    """Entity key -> (mention count, document count): what two runs must agree on."""
    return {k: (a.mention_count, a.document_count) for k, a in view.entities.items()}
