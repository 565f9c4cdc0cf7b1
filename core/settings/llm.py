"""LLM and embedding settings, with the model prices that turn token counts into dollars."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    input_per_million: float = Field(0.0, ge=0)
    output_per_million: float = Field(0.0, ge=0)


def cost_usd(price: ModelPrice | None, prompt_tokens: int, completion_tokens: int) -> float:
    """What the tokens cost at ``price`` (None: not priced, 0), in US dollars."""
    if price is None:
        return 0.0
    total = prompt_tokens * price.input_per_million + completion_tokens * price.output_per_million
    return round(total / 1_000_000, 6)


# list prices of common OpenAI models (USD per million tokens); any other model (a local one)
# costs 0 unless ``llm.prices`` names it. A dated snapshot ("gpt-4o-2024-08-06") takes the
# price of its longest listed prefix.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "gpt-4o": ModelPrice(input_per_million=2.50, output_per_million=10.00),
    "gpt-4o-mini": ModelPrice(input_per_million=0.15, output_per_million=0.60),
    "gpt-4.1": ModelPrice(input_per_million=2.00, output_per_million=8.00),
    "gpt-4.1-mini": ModelPrice(input_per_million=0.40, output_per_million=1.60),
    "gpt-4.1-nano": ModelPrice(input_per_million=0.10, output_per_million=0.40),
    "o3-mini": ModelPrice(input_per_million=1.10, output_per_million=4.40),
    "text-embedding-3-small": ModelPrice(input_per_million=0.02),
    "text-embedding-3-large": ModelPrice(input_per_million=0.13),
}


class LLMSettings(BaseModel):
    base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint; unset means offline mode"
    )
    api_key: str | None = Field(None, description="API key for the endpoint")
    model: str = Field("gpt-4o-mini", description="Chat model name")
    concurrency: int = Field(8, ge=1, le=512, description="Concurrent LLM requests per process")
    max_retries: int = Field(6, ge=0, le=50, description="Retries on 429/5xx/timeouts")
    rate_limit_budget_s: float = Field(
        300.0,
        ge=0,
        description="A request still rate-limited (429) after max_retries is retried until "
        "this many seconds have passed since its first attempt (honouring Retry-After), so "
        "a burst of rate limits delays a chunk instead of dead-lettering it; 0: no more",
    )
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout")
    temperature: float = Field(0.0, ge=0, le=2)
    cache_dir: Path | None = Field(
        None, description="Response cache directory (default: <data_dir>/llm-cache)"
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=lambda: dict(DEFAULT_PRICES),
        description="USD per million input and output tokens, by model name (JSON); models "
        "not listed (local ones) cost 0",
    )

    @property
    def offline(self) -> bool:
        return not self.base_url

    def price(self, model: str | None = None) -> ModelPrice | None:
        """The price of ``model`` (default: the chat model): listed exactly, else by its
        longest listed prefix; None when not listed."""
        name = model or self.model
        if name in self.prices:
            return self.prices[name]
        prefixes = [k for k in self.prices if name.startswith(f"{k}-")]
        return self.prices[max(prefixes, key=len)] if prefixes else None


class EmbeddingSettings(BaseModel):
    base_url: str | None = Field(
        None, description="OpenAI-compatible /embeddings endpoint; unset means offline hashing"
    )
    api_key: str | None = None
    model: str = Field("text-embedding-3-small", description="Embedding model name")
    dimensions: int = Field(1024, ge=8, le=8192, description="Vector size of the offline embedder")
    embed_relationships: bool = Field(False, description="Also embed relationships")
