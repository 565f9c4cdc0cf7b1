"""Bursty log lines (faust's "producer buffer full" after a stall) are held to one per
interval, and the next one that passes says how many were held back."""

from __future__ import annotations

import logging

import pytest

from streams.log_limits import Throttle, quiet_bursts


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_becomes_one_line_then_a_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    logger = logging.getLogger("test.bursty")
    logger.addFilter(Throttle(30.0, ("producer buffer full",), clock))
    with caplog.at_level(logging.INFO, logger="test.bursty"):
        for i in range(500):
            clock.now = i * 0.01
            logger.warning("producer buffer full size %d", 1000 + i)
        logger.warning("something else")  # other messages are never held
        clock.now = 31.0
        logger.warning("producer buffer full size %d", 7)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "producer buffer full size 1000",
        "something else",
        "producer buffer full size 7 (499 more like this in the last 31 s)",
    ]


def test_the_worker_throttles_fausts_producer_once() -> None:
    quiet_bursts()
    quiet_bursts()
    throttles = [
        f for f in logging.getLogger("faust.transport.producer").filters if isinstance(f, Throttle)
    ]
    assert len(throttles) == 1
