"""The private parts of faust, mode and aiokafka the exactly-once guards use are there in the
pinned versions, and a consumer without one stops the worker naming it and what to install.
(The check on a real consumer runs in every integration test: each worker makes one.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streams.internals import CONSUMER_ATTRIBUTES, InternalsError, check_consumer, check_modules


def test_the_pinned_versions_have_every_module_part_the_guards_use() -> None:
    check_modules()


def test_a_missing_consumer_part_is_named_with_the_versions_installed() -> None:
    complete = SimpleNamespace(**dict.fromkeys(CONSUMER_ATTRIBUTES))
    check_consumer(complete)
    del complete._read_offset
    with pytest.raises(InternalsError) as err:
        check_consumer(complete)
    message = str(err.value)
    assert "_read_offset" in message and "_thread" not in message
    assert "faust-streaming 0.15.3" in message and "pyproject.toml" in message
