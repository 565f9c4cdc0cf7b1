"""The model clients a process builds once from settings: chat LLM and embedder.

Offline and LLM implementations are chosen here, once, so the code that uses them never
branches on the provider: with no ``llm.base_url`` there is no chat model (offline mode), and
with no ``embeddings.base_url`` the offline hashing embedder stands in (no download).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from core.llm import OpenAIEmbedder, OpenAILLM
from core.settings import Settings
from graph.protocols import LLM, Embedder
from offline.embedding import HashingEmbedder


def build_embedder(settings: Settings) -> Embedder:
    cfg = settings.embeddings
    if cfg.base_url:
        return OpenAIEmbedder(cfg)
    return HashingEmbedder(cfg.dimensions)


def build_llm(settings: Settings, registry: CollectorRegistry | None = None) -> LLM | None:
    """The configured chat model, or ``None`` (offline mode) when ``llm.base_url`` is unset."""
    if settings.llm.offline:
        return None
    return OpenAILLM(settings.llm, settings.llm_cache_dir, registry=registry)


@dataclass(frozen=True, slots=True)
class Clients:
    """The clients one process shares: built once by its composition root and passed to what
    needs them (``kgrag.worker`` for the stream agents)."""

    llm: LLM | None  # None: offline mode
    embedder: Embedder

    @classmethod
    def from_settings(
        cls, settings: Settings, registry: CollectorRegistry | None = None
    ) -> Clients:
        """The clients; the LLM's counters (``kgrag_llm_*``) go to ``registry`` when given."""
        return cls(build_llm(settings, registry), build_embedder(settings))
