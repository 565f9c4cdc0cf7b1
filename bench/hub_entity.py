"""A hub entity with 10,000 mentions: its row stays small and its merge time flat.

Applies 10,000 contributions (distinct chunks, 3,000 documents, two years of days, a few
hundred distinct descriptions) to one entity through the merger's own rule
(``graph.merge.absorb_entity``), and reports, per block of 1,000 mentions, the mean time of
one apply and the serialised size of the aggregate row. Writes bench/results/hub_entity.json.

Usage: ``.venv/bin/python bench/hub_entity.py``
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import date, timedelta
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.results_io import RESULTS, machine, now_zulu, write_result
from graph.contributions import EntityContribution
from graph.merge import EntityRows, absorb_entity
from graph.merge_codec import to_dict

MENTIONS = 10_000
BLOCK = 1_000


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


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None).parse_args()
    rows = EntityRows()
    doc_chunks: dict[str, int] = {}
    blocks = []
    started = time.perf_counter()
    for block in range(MENTIONS // BLOCK):
        t0 = time.perf_counter()
        for i in range(block * BLOCK, (block + 1) * BLOCK):
            c = contribution(i)
            current = EntityRows(rows.aggregate, None, doc_chunks.get(c.document_id))
            step = absorb_entity(current, c, max_descriptions=12)
            rows = step.rows
            doc_chunks[c.document_id] = rows.document_chunks or 0
        per_apply_us = (time.perf_counter() - t0) / BLOCK * 1e6
        assert rows.aggregate is not None
        size = len(orjson.dumps(to_dict(rows.aggregate)))
        blocks.append(
            {"mentions": (block + 1) * BLOCK, "apply_us": round(per_apply_us, 1), "row_bytes": size}
        )
        print(f"{(block + 1) * BLOCK:>6} mentions: {per_apply_us:6.1f} µs/apply, row {size} B")
    assert rows.aggregate is not None
    agg = rows.aggregate
    result = {
        "machine": machine("cores", "python", "platform"),
        "date": now_zulu(),
        "mentions": agg.mention_count,
        "documents": agg.document_count,
        "blocks": blocks,
        "first_block_vs_last_block_time_ratio": round(
            blocks[-1]["apply_us"] / blocks[0]["apply_us"], 2
        ),
        "final_row_bytes": blocks[-1]["row_bytes"],
        "total_s": round(time.perf_counter() - started, 2),
    }
    out = RESULTS / "hub_entity.json"
    write_result(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
