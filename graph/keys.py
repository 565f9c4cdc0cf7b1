"""Merge keys: which extracted names denote the same entity or relationship.

An entity key is the normalised name: case-folded, punctuation and whitespace collapsed,
a leading "the" dropped ("The Federal Reserve" and "FEDERAL RESERVE." share a key). The type
is an attribute of the merged entity, not part of its key. A relationship key is the sorted
pair of its endpoint keys, so A→B and B→A merge (GraphRAG's graph is undirected).
"""

from __future__ import annotations

import re
import unicodedata

_PUNCT = re.compile(r"[^\w\s&]+", re.UNICODE)
_SPACE = re.compile(r"\s+")
_POSSESSIVE = re.compile(r"['\u2019]s\b")
_LEADING_THE = re.compile(r"^the\s+")
REL_SEPARATOR = "\u241e"  # a character names never contain after normalisation


def entity_key(name: str) -> str:
    """Normalised entity name; empty when the name has no letters or digits."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _POSSESSIVE.sub("", text)
    text = _PUNCT.sub(" ", text)
    text = _SPACE.sub(" ", text).strip()
    text = _LEADING_THE.sub("", text)
    return text


def relationship_key(source: str, target: str) -> str:
    """Undirected key of the pair of entity names (or keys)."""
    a, b = sorted((entity_key(source), entity_key(target)))
    return f"{a}{REL_SEPARATOR}{b}"


def split_relationship_key(key: str) -> tuple[str, str]:
    a, _, b = key.partition(REL_SEPARATOR)
    return a, b
