"""Offline mode: the NLP that stands in for the LLM and the embedding model when none is set.

Rule-based entity and relationship extraction (``extraction``, built from ``text``,
``phrases``, ``context`` and the word lists of ``lexicon``), extractive description summaries
(``summary``) and community reports (``report``), and the hashing embedder (``embedding``).
All of it is pure and deterministic, so redelivery and replays change nothing downstream.

It is a package of its own, a floor above ``graph/``, so that ``graph/`` stays the GraphRAG
core alone: ``offline`` produces what an LLM would (``graph.model`` extractions, report JSON
from a ``graph.reports.context`` context, ``graph.protocols.Embedder`` vectors) and may import
``graph``; ``graph`` never imports ``offline``. Its users sit above it: ``core.clients`` (the
embedder), the extractor agent and the community job's writers (extraction, summaries and
reports), and ``query.offline_answers`` (the embedder's word tokens).
"""
