"""What an answer's tokens cost: the price table (``llm.prices``) and the sum."""

from __future__ import annotations

import pytest

from core.settings.llm import LLMSettings, ModelPrice, cost_usd


def test_a_model_is_priced_by_name_or_by_its_longest_listed_prefix() -> None:
    llm = LLMSettings()
    assert llm.price() == llm.prices["gpt-4o-mini"]  # the default chat model
    assert llm.price("gpt-4o-mini-2024-07-18") == llm.prices["gpt-4o-mini"]
    assert llm.price("gpt-4o-2024-08-06") == llm.prices["gpt-4o"]
    assert llm.price("llama3.1:8b") is None  # a local model: not priced
    assert llm.price("gpt-4omni") is None  # a prefix counts only up to a dash


def test_a_price_table_of_ones_own_replaces_the_defaults() -> None:
    llm = LLMSettings.model_validate(
        {"model": "local", "prices": {"local": {"input_per_million": 1.0}}}
    )
    assert llm.price() == ModelPrice(input_per_million=1.0) and llm.price("gpt-4o") is None


def test_tokens_at_a_price() -> None:
    price = ModelPrice(input_per_million=2.5, output_per_million=10.0)
    assert cost_usd(price, 1_000_000, 100_000) == pytest.approx(3.5)
    assert cost_usd(price, 1234, 56) == pytest.approx((1234 * 2.5 + 56 * 10) / 1e6)
    assert cost_usd(None, 1_000_000, 1_000_000) == 0.0
