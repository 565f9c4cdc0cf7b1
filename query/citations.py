"""Citation checking: an answer may cite only records the model was shown.

Answers cite ``[Data: Entities (1, 2); Relationships (3, +more); Sources (5)]``. Every cited
id is checked against the ids of the context given to the model, per dataset; an id that was
not there (made up, or from another dataset) is removed from the text and counted, so the
reader can follow every citation that remains back to a record. A dataset group left without
ids is dropped, and so is a whole ``[Data: …]`` left without groups. At most five ids per
dataset stay in the text, followed by "+more" when there were more (GraphRAG's convention).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

DATASETS: tuple[str, ...] = ("Entities", "Relationships", "Claims", "Reports", "Sources")
MAX_IDS = 5

_BLOCK = re.compile(r"[ \t]*\[\s*Data\s*:\s*([^\[\]]*)\]", re.IGNORECASE)
_GROUP = re.compile(r"([A-Za-z][A-Za-z _-]*?)\s*\(([^()]*)\)")
_MORE = re.compile(r"^\+?\s*more$|^\.\.\.$|^…$", re.IGNORECASE)
_ALIASES = {
    "entities": "Entities",
    "entity": "Entities",
    "relationships": "Relationships",
    "relationship": "Relationships",
    "relations": "Relationships",
    "claims": "Claims",
    "claim": "Claims",
    "covariates": "Claims",
    "reports": "Reports",
    "report": "Reports",
    "sources": "Sources",
    "source": "Sources",
    "text units": "Sources",
    "text unit": "Sources",
}


class CitationCheck(NamedTuple):
    text: str
    removed: int
    cited: dict[str, list[int]]  # ids kept in the text, per dataset, first citation first


def format_citation(groups: Sequence[tuple[str, Sequence[int]]], max_ids: int = MAX_IDS) -> str:
    """``[Data: Entities (1, 2); Sources (3, 4, 5, 6, 7, +more)]``, empty groups left out."""
    parts = []
    for name, ids in groups:
        if ids:
            shown = [str(i) for i in ids[:max_ids]] + (["+more"] if len(ids) > max_ids else [])
            parts.append(f"{name} ({', '.join(shown)})")
    return f" [Data: {'; '.join(parts)}]" if parts else ""


def _dataset(name: str) -> str | None:
    return _ALIASES.get(" ".join(name.lower().replace("_", " ").split()))


def _parse_id(token: str) -> int | None:
    token = token.strip().lstrip("#")
    return int(token) if token.isascii() and token.isdigit() else None


class _Checker:
    def __init__(self, context: Mapping[str, Collection[int]], max_ids: int) -> None:
        self.allowed = {name: set(ids) for name, ids in context.items()}
        self.max_ids = max_ids
        self.removed = 0
        self.cited: dict[str, list[int]] = {}

    def group(self, raw_name: str, raw_ids: str) -> tuple[str, list[int], bool]:
        name = _dataset(raw_name) or raw_name.strip()
        allowed = self.allowed.get(name, set())
        kept: list[int] = []
        more = False
        for token in (t.strip() for t in raw_ids.split(",")):
            if not token:
                continue
            if _MORE.match(token):
                more = True
                continue
            value = _parse_id(token)
            if value is None or value not in allowed:
                self.removed += 1
            elif value not in kept:
                kept.append(value)
        return name, kept, more

    def block(self, match: re.Match[str]) -> str:
        groups: list[tuple[str, list[int], bool]] = []
        for g in _GROUP.finditer(match.group(1)):
            name, kept, more = self.group(g.group(1), g.group(2))
            if kept:
                groups.append((name, kept, more))
        if not groups:
            return ""
        parts = []
        for name, kept, more in groups:
            shown = kept[: self.max_ids]
            seen = self.cited.setdefault(name, [])
            seen.extend(i for i in shown if i not in seen)
            tail = ", +more" if more or len(kept) > self.max_ids else ""
            parts.append(f"{name} ({', '.join(map(str, shown))}{tail})")
        return f" [Data: {'; '.join(parts)}]"


def check_citations(
    text: str, context_ids: Mapping[str, Collection[int]], *, max_ids: int = MAX_IDS
) -> CitationCheck:
    """Remove cited ids absent from ``context_ids`` (dataset -> ids shown to the model),
    count them, and rewrite the citations (see the module docstring)."""
    checker = _Checker(context_ids, max_ids)
    cleaned = _BLOCK.sub(checker.block, text)
    cleaned = re.sub(r"^ (?=\[Data:)", "", cleaned, flags=re.MULTILINE)
    return CitationCheck(cleaned, checker.removed, checker.cited)


def cited_ids(text: str) -> dict[str, list[int]]:
    """Every well-formed id cited in ``text``, per dataset (no checking against a context)."""
    out: dict[str, list[int]] = {}
    for block in _BLOCK.finditer(text):
        for g in _GROUP.finditer(block.group(1)):
            name = _dataset(g.group(1)) or g.group(1).strip()
            ids = out.setdefault(name, [])
            for token in g.group(2).split(","):
                value = _parse_id(token)
                if value is not None and value not in ids:
                    ids.append(value)
    return out
