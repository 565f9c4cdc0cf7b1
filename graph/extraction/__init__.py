"""Extraction: articles to documents and chunks, and an LLM's answer to graph records."""
