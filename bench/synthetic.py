"""A synthetic news corpus larger than the dev set, for benchmarks past its 8,107 articles.

Copy ``k`` (k ≥ 1) of a dev article is the same article with its people and companies renamed
for that copy, while the entities many articles share stay as they are: places (``geo``),
events, and the ``hubs`` (the persons and organisations named by the most articles: central
banks, ministries, exchanges, the big companies). The graph so keeps realistic hubs and
cross-links between copies, and each copy adds its own long tail of new entities, as a new
month of news would. Copy 0 is the dev corpus itself. Dates move forward by ``k`` years, so
the corpus stays in time order copy after copy.

What it does not model: copies are near-identical to their originals (same sentence shapes,
same relationship patterns between renamed entities), which flatters any method that reuses
structure; the topics do not drift; the hubs do not change over time; no article is ever
updated or deleted.

Which names to rename is decided with the offline extractor (``offline.extraction``), the same
one the benchmarks index with. Usage, to look at a few copies:
``.venv/bin/python bench/synthetic.py --copies 2 --show 3``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph.model import Chunk, Document
from offline.extraction import extract_offline

RENAMED_TYPES = frozenset({"person", "organization"})
DEFAULT_HUBS = 300
_SYLLABLES = ("ka", "lo", "ven", "dra", "mi", "tor", "sa", "bel", "ru", "nix", "ota", "fen")


def copy_word(k: int) -> str:
    """A made-up capitalised word naming copy ``k`` (distinct for every k ≥ 1)."""
    parts = []
    n = k
    while True:
        parts.append(_SYLLABLES[n % len(_SYLLABLES)])
        n //= len(_SYLLABLES)
        if n == 0:
            break
    return "".join(parts).capitalize() + "ex"


def names(doc: Document) -> dict[str, str]:
    """Entity name → type, as the offline extractor finds them in the whole article."""
    chunk = Chunk(doc.id, doc.id, doc.title, doc.published_at, 0, f"{doc.title}\n{doc.text}", 0)
    return {e.name: e.type for e in extract_offline(chunk).entities}


class Corpus:
    """The dev articles, the names to rename in each, and the copies."""

    def __init__(self, originals: Sequence[Document], hubs: int = DEFAULT_HUBS) -> None:
        self.originals = list(originals)
        found = [names(d) for d in self.originals]
        frequency = Counter(n for f in found for n, t in f.items() if t in RENAMED_TYPES)
        self.hubs = frozenset(n for n, _ in frequency.most_common(hubs))
        self._renamed = [
            sorted(
                (n for n, t in f.items() if t in RENAMED_TYPES and n not in self.hubs),
                key=len,
                reverse=True,  # longer names first, so "Bank of Tokyo Ltd" is one match
            )
            for f in found
        ]

    def article(self, i: int) -> Document:
        """Article ``i`` of the endless corpus: copy ``i // len(originals)`` of an original."""
        k, j = divmod(i, len(self.originals))
        doc = self.originals[j]
        if k == 0:
            return doc
        word = copy_word(k)
        pattern = self._pattern(j)
        if pattern is None:
            title, text = doc.title, doc.text
        else:
            title = pattern.sub(lambda m: f"{m.group(0)} {word}", doc.title)
            text = pattern.sub(lambda m: f"{m.group(0)} {word}", doc.text)
        return replace(
            doc,
            id=f"{doc.id}~{k}",
            title=title,
            text=text,
            published_at=_later(doc.published_at, k),
        )

    def articles(self, start: int, count: int) -> Iterator[Document]:
        for i in range(start, start + count):
            yield self.article(i)

    def _pattern(self, j: int) -> re.Pattern[str] | None:
        renamed = self._renamed[j]
        if not renamed:
            return None
        return re.compile(r"\b(?:" + "|".join(map(re.escape, renamed)) + r")\b")


def _later(published_at: str, years: int) -> str:
    try:
        when = datetime.fromisoformat(published_at.replace("Z", "+00:00"))
    except ValueError:
        return published_at
    shifted = when + timedelta(days=365 * years)
    return shifted.strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv: list[str] | None = None) -> None:
    from bench.incremental import DATA, load_documents

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--originals", type=int, default=2000)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--show", type=int, default=2)
    args = parser.parse_args(argv)
    corpus = Corpus(load_documents(DATA, args.originals))
    print(f"{len(corpus.hubs)} hub names kept, e.g. {sorted(corpus.hubs)[:12]}")
    for k in range(args.copies + 1):
        for j in range(args.show):
            doc = corpus.article(k * len(corpus.originals) + j)
            print(f"--- {doc.id} {doc.published_at} {doc.title!r}\n{doc.text[:300]}")


if __name__ == "__main__":
    main()
