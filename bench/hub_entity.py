"""A hub entity with 10,000 mentions: its row stays small and its merge time flat.

Applies 10,000 contributions (distinct chunks, 3,000 documents, two years of days, a few
hundred distinct descriptions) to one entity through the merger's own rule
(``graph.merge.rules.absorb_entity``), and reports, per block of 1,000 mentions, the time of one
apply and the serialised size of the aggregate row. Each block is applied ``--repeat`` times
from the same rows (the rows are immutable; the last repeat's are carried on): ``apply_us`` is
the median with min and max, and ``first_block_vs_last_block_time_ratio`` (the last block's
time over the first's) the ratio of those timings. The quick run repeats each block 3 times,
``--full`` 9 times; both apply all 10,000 mentions. No limit is set on these figures.
Writes its run into ``bench/results/hub_entity.json`` (``bench.record``).

Usage: ``.venv/bin/python bench/hub_entity.py [--full] [--repeat R] [--out PATH]``
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.record import Target, mode_argument, ratio, record, timing
from graph.merge.codec import to_dict
from graph.merge.contributions import EntityContribution
from graph.merge.rules import EntityRows, absorb_entity

MENTIONS = 10_000
BLOCK = 1_000
MAX_DESCRIPTIONS = 12
REPEAT = {"quick": 3, "full": 9}

TARGETS: dict[str, Target] = {}  # none: neither the code nor the issue sets a limit here


def contribution(i: int) -> EntityContribution:
    day = date(1987, 1, 1) + timedelta(days=i % 730)
    return EntityContribution(
        key="federal reserve",
        name="Federal Reserve" if i % 3 else "FEDERAL RESERVE",
        type="organization",
        descriptions=(f"The Federal Reserve said something about rates, statement {i % 300}.",),
        chunk_id=f"chunk-{i:06d}",
        document_id=f"doc-{i % 3000:05d}",
        day=day,
    )


def apply_block(
    rows: EntityRows, doc_chunks: dict[str, int], block: list[EntityContribution]
) -> tuple[EntityRows, dict[str, int], float]:
    """``block`` applied in order from ``rows``; the rows after, the per-document chunk
    counts after (a new dict), and the seconds it took."""
    doc_chunks = dict(doc_chunks)
    t0 = time.perf_counter()
    for c in block:
        current = EntityRows(rows.aggregate, None, doc_chunks.get(c.document_id))
        rows = absorb_entity(current, c, max_descriptions=MAX_DESCRIPTIONS).rows
        doc_chunks[c.document_id] = rows.document_chunks or 0
    return rows, doc_chunks, time.perf_counter() - t0


def figures(repeat: int) -> dict[str, Any]:
    rows = EntityRows()
    doc_chunks: dict[str, int] = {}
    blocks: list[dict[str, Any]] = []
    started = time.perf_counter()
    for block in range(MENTIONS // BLOCK):
        contributions = [contribution(i) for i in range(block * BLOCK, (block + 1) * BLOCK)]
        start = (rows, doc_chunks)
        seconds = []
        for _ in range(repeat):  # each from the same rows: the repeats apply the same block
            rows, doc_chunks, s = apply_block(*start, contributions)
            seconds.append(s)
        apply_us = timing([s / BLOCK * 1e6 for s in seconds], 1)
        assert rows.aggregate is not None
        size = len(orjson.dumps(to_dict(rows.aggregate)))
        blocks.append({"mentions": (block + 1) * BLOCK, "apply_us": apply_us, "row_bytes": size})
        print(f"{(block + 1) * BLOCK:>6} mentions: {apply_us} µs/apply, row {size} B")
    assert rows.aggregate is not None
    agg = rows.aggregate
    return {
        "mentions": agg.mention_count,
        "documents": agg.document_count,
        "blocks": blocks,
        "first_block_vs_last_block_time_ratio": ratio(
            blocks[-1]["apply_us"], blocks[0]["apply_us"]
        ),
        "final_row_bytes": blocks[-1]["row_bytes"],
        "total_s": round(time.perf_counter() - started, 2),  # all repeats included
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    mode_argument(parser)
    parser.add_argument("--repeat", type=int, default=None, help="default: 3 quick, 9 full")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    mode = "full" if args.full else "quick"
    repeat = args.repeat or REPEAT[mode]
    settings = {
        "mentions": MENTIONS,
        "block": BLOCK,
        "repeat": repeat,
        "max_descriptions": MAX_DESCRIPTIONS,
        "contributions": "distinct chunks, 3,000 documents, 730 days, 300 descriptions",
    }
    record("hub_entity", mode, figures(repeat), TARGETS, settings, path=args.out)


if __name__ == "__main__":
    main()
