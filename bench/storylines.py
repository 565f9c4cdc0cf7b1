"""Storylines bench: are the top trend rows distinct stories, and are the headlines news?

Usage: ``.venv/bin/python bench/storylines.py [--full] [--split 1987-03-24]
[--history-from DAY] [--keep] [--out PATH]``

On the local Kafka and Weaviate (``kgrag services up``; reused, never stopped), offline mode,
default settings: a fresh namespace, ``kgrag worker`` and ``kgrag api`` as subprocesses, as a
user runs them. The worker indexes the history: the Reuters dev articles published from
``--history-from`` until ``--split`` (to 23 March 1987); once a community run holds them all
and every stage has caught up, the articles of the split day onwards (24–26 March, the new
window) are published, and the bench waits for a run holding everything. Then:

* **Surging groups** (ground truth, from the gold topics alone): topics are grouped
  (currency = money-fx, dlr, yen, stg, dmk; grain = grain, wheat, corn, barley, rice,
  sorghum, oilseed, soybean; energy = crude, nat-gas, gas, fuel; every other topic its own
  group); a group's ratio is its share of the window's articles over its share of the
  history's; the surging groups are the top 3 by ratio among groups with at least 5
  articles in the window.
* **Trend rows**: ``GET /v1/trends?since=<split>&until=<last day>&limit=10``. A row's group is
  the dominant group of its top documents' gold topics (most articles; ties by name; "-"
  when they carry none). ``top5_covered``: how many surging groups the top 5 rows cover.
  ``duplicates_in_top10``: pairs of top-10 rows sharing more than half of the members of
  the smaller of the two (stricter than "of both": a row nested in another counts).
* **Headlines**: every ``headline`` event the community runs published on the
  community-events topic after the window began (the runs that took the window's articles;
  a storyline is headlined again only when it grows further, so the final run alone may hold
  few), each with its group (of its top documents). ``headline_precision``: the share whose
  group has a ratio of at least 1.5. ``events_raw``: the lineage and alias events published
  over the same runs, for scale.

Targets (judged on the full run): the top 5 rows cover at least 2 surging groups, no
duplicates in the top 10, headline precision at least 0.6. ``seconds`` has the two indexing
times (one each) and ``trends_request_s``, the trends request repeated 3 times (median, min,
max; the first one is cold).

The quick run takes a short history, from 19 March 1987 (``--history-from``); ``--full`` every
article before the split (a month of news). The surging groups are computed from the same
history. What it does not model: gold topics describe articles, not stories (a storyline
about one company's takeover is "acq" like every other takeover); the window is three days
of a month of news. Skips cleanly (exit 0) when the data file is absent. Writes its run into
``bench/results/storylines.json`` (``bench.record``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import orjson

from bench.freshness import caught_up
from bench.live import (
    api_ready,
    free_port,
    fresh_namespace,
    start_api,
    start_worker,
    stop,
    wait_ready,
)
from bench.record import Target, mode_argument, record, timing
from bench.results_io import REUTERS_DEV, ROOT, read_jsonl
from core.publish import publish
from core.settings import Settings, load_settings
from core.tables.opening import open_graph_store
from query.index import QueryIndex
from query.sse import event_feed

CACHE = ROOT / "bench" / ".cache" / "storylines"
GROUPS = {
    "currency": ("money-fx", "dlr", "yen", "stg", "dmk"),
    "grain": ("grain", "wheat", "corn", "barley", "rice", "sorghum", "oilseed", "soybean"),
    "energy": ("crude", "nat-gas", "gas", "fuel"),
}
GROUP_OF = {t: g for g, topics in GROUPS.items() for t in topics}
MIN_WINDOW_ARTICLES = 5
SURGING = 3
PRECISE_RATIO = 1.5
# the first day of the history indexed before the split (None: every article before it)
HISTORY_FROM = {"quick": "1987-03-19", "full": None}
TRENDS_REPEAT = 3
MEASURES = ("bench/live.py", "bench/freshness.py")

# the limits this bench has always set
TARGETS = {
    "top5_covered": Target("/top5_covered", ">=", 2),
    "duplicates_in_top10": Target("/duplicates_in_top10", "<=", 0),
    "headline_precision": Target("/headline_precision", ">=", 0.6),
}


# ---- ground truth ----


def groups_of(article: Mapping[str, Any]) -> set[str]:
    return {GROUP_OF.get(t, t) for t in article.get("topics", ())}


def surging_groups(
    before: Sequence[Mapping[str, Any]], window: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Every group with at least ``MIN_WINDOW_ARTICLES`` articles in the window: its share
    there over its share before (a group absent before counts half an article)."""
    was = Counter(g for a in before for g in groups_of(a))
    now = Counter(g for a in window for g in groups_of(a))
    out = {}
    for g, n in now.items():
        if n >= MIN_WINDOW_ARTICLES:
            ratio = (n / len(window)) / (max(was[g], 0.5) / len(before))
            out[g] = {"ratio": round(ratio, 3), "window": n, "before": was[g]}
    return dict(sorted(out.items(), key=lambda kv: (-kv[1]["ratio"], kv[0])))


def dominant_group(documents: Iterable[str], topics: Mapping[str, set[str]]) -> str:
    counted = Counter(g for d in documents for g in topics.get(d, ()))
    if not counted:
        return "-"
    return min(counted.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def duplicate_pairs(members: Sequence[frozenset[str]]) -> list[tuple[int, int]]:
    """Pairs (by position) sharing more than half of the smaller one's members."""
    return [
        (i, j)
        for i in range(len(members))
        for j in range(i + 1, len(members))
        if len(members[i] & members[j]) > 0.5 * min(len(members[i]), len(members[j]))
    ]


# ---- the live system ----


async def publish_file(settings: Settings, name: str, rows: Sequence[dict[str, Any]]) -> None:
    path = CACHE / f"{settings.namespace}-{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for d in rows))
    await publish(settings, path)


async def events_after(settings: Settings, version: int) -> list[dict[str, Any]]:
    """Every community event of a graph version after ``version``, read from the topic's
    beginning until it has been quiet for three polls."""
    out: list[dict[str, Any]] = []
    quiet = 0
    feed = event_feed(settings, start="earliest", poll_s=1.0)
    async with contextlib.aclosing(feed):
        ready = False
        async for batch in feed:
            if not ready:  # the first batch only says the start offsets are fixed
                ready = True
                continue
            quiet = 0 if batch else quiet + 1
            if quiet >= 3:
                break
            out += [
                e.payload for e in batch if int(e.payload.get("snapshot_version") or 0) > version
            ]
    return out


async def trends(url: str, since: str, until: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, timeout=120) as c:
        r = await c.get("/v1/trends", params={"since": since, "until": until, "limit": 10})
        r.raise_for_status()
        return dict(r.json())


# ---- the run ----


def history_and_window(
    articles: Iterable[Mapping[str, Any]], history_from: str | None, split: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The articles from ``history_from`` (None: the first) before ``split``, and those of
    ``split`` onwards, each in publication order."""
    rows = sorted(articles, key=lambda a: (str(a["published_at"]), a["id"]))
    day = [str(a["published_at"])[:10] for a in rows]
    before = [dict(a) for a, d in zip(rows, day, strict=True) if (history_from or d) <= d < split]
    window = [dict(a) for a, d in zip(rows, day, strict=True) if d >= split]
    return before, window


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    before, window = history_and_window(read_jsonl(REUTERS_DEV), args.history_from, args.split)
    rows = before + window
    until = str(window[-1]["published_at"])[:10]
    topics = {str(a["id"]): groups_of(a) for a in rows}
    surging_all = surging_groups(before, window)
    surging = dict(list(surging_all.items())[:SURGING])
    print("surging groups:", {g: v["ratio"] for g, v in surging.items()}, flush=True)
    base = load_settings()
    seconds: dict[str, Any] = {}
    async with fresh_namespace(base, "bench-story", CACHE, keep=args.keep) as settings:
        started_at = time.time()
        worker = start_worker(settings, {})
        api = None
        try:
            await wait_ready(settings, worker, timeout=300)
            await publish_file(settings, "before", before)
            seconds["index_before"] = round(
                await caught_up(settings, len(before), timeout=3600, worker_started_at=started_at),
                1,
            )
            print(f"indexed {len(before)} articles before {args.split}", flush=True)
            last_before = open_graph_store(settings).latest_version() or 0
            t = time.monotonic()
            await publish_file(settings, "window", window)
            await caught_up(settings, len(rows), timeout=3600, worker_started_at=started_at)
            seconds["index_window"] = round(time.monotonic() - t, 1)
            print(f"indexed {len(window)} articles {args.split}..{until}", flush=True)
            port = free_port()
            api = start_api(settings, port)
            url = f"http://127.0.0.1:{port}"
            await api_ready(url)
            took = []
            for _ in range(TRENDS_REPEAT):  # the same request; the last answer is kept
                t = time.monotonic()
                answer = await trends(url, args.split, until)
                took.append(time.monotonic() - t)
            seconds["trends_request_s"] = timing(took, 3)
            events = await events_after(settings, last_before)
            store = open_graph_store(settings, for_queries=True)
            index = QueryIndex.read(store, int(answer["snapshot_version"]))
        finally:
            stop(api, worker)
    figures = summarise(answer, events, index, topics, surging, surging_all)
    counts = {"until": until, "history": len(before), "window": len(window)}
    return {**counts, **figures, "seconds": seconds}


def summarise(
    answer: Mapping[str, Any],
    events: Sequence[Mapping[str, Any]],
    index: QueryIndex,
    topics: Mapping[str, set[str]],
    surging: Mapping[str, Any],
    surging_all: Mapping[str, Any],
) -> dict[str, Any]:
    rows = list(answer["communities"])
    shown = []
    for r in rows:
        docs = [d["id"] for d in r["top_documents"]]
        shown.append(
            {
                "title": r["title"],
                "community": r["community"],
                "level": r["level"],
                "group": dominant_group(docs, topics),
                "documents": r["documents"],
                "expected_documents": r["expected_documents"],
                "score": round(r["score"], 3),
                "top_documents": [f"{d['id']}: {d['title']}" for d in r["top_documents"]],
                "folded": len(r["folded"]),
                "within": len(r["within"]),
            }
        )
    members = [frozenset(index.communities[r["community"]].entity_ids) for r in rows[:10]]
    pairs = duplicate_pairs(members)
    top5 = [s["group"] for s in shown[:5]]
    covered = len(set(surging) & set(top5))
    precise = {g for g, v in surging_all.items() if v["ratio"] >= PRECISE_RATIO}
    headlines: list[dict[str, Any]] = []
    for e in events:
        if e.get("kind") == "headline":
            docs = [d["id"] for d in e.get("top_documents", [])]
            headlines.append(
                {
                    "title": e.get("title"),
                    "rank": e.get("rank"),
                    "snapshot_version": e.get("snapshot_version"),
                    "group": dominant_group(docs, topics),
                    "why": e.get("why"),
                    "top_documents": docs,
                }
            )
    headlines.sort(key=lambda h: (int(h["snapshot_version"] or 0), int(h["rank"] or 0)))
    final = max((int(h["snapshot_version"] or 0) for h in headlines), default=None)
    good = sum(1 for h in headlines if h["group"] in precise)
    raw = Counter(str(e.get("kind")) for e in events if e.get("kind") != "headline")
    return {
        "surging": surging,
        "groups_by_ratio": surging_all,
        "top5_groups": top5,
        "top5_covered": covered,
        "duplicates_in_top10": len(pairs),
        "duplicate_pairs": pairs,
        "rows": shown,
        "headlines": headlines,
        "headlines_final_run": sum(1 for h in headlines if h["snapshot_version"] == final),
        "headline_groups_precise": sorted(precise),
        "headline_precision": round(good / len(headlines), 3) if headlines else 0.0,
        "events_raw": sum(raw.values()),
        "events_raw_by_kind": dict(raw.most_common()),
    }


def _print(r: Mapping[str, Any]) -> None:
    print(f"surging: {r['surging']}")
    for i, s in enumerate(r["rows"], 1):
        print(
            f"{i:2d}. [{s['group']}] {s['title']} (L{s['level']}, {s['documents']} docs, "
            f"expected {s['expected_documents']})"
        )
    print(f"headlines ({len(r['headlines'])}, precision {r['headline_precision']}):")
    for h in r["headlines"]:
        print(f"  v{h['snapshot_version']} #{h['rank']} [{h['group']}] {h['title']}")
    print(f"raw events in the window: {r['events_raw']} {r['events_raw_by_kind']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    mode_argument(parser)
    parser.add_argument("--split", default="1987-03-24", help="first day of the new window")
    parser.add_argument(
        "--history-from",
        default=None,
        metavar="DAY",
        help="first day of the history (default: 1987-03-19 quick, the first article full)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the namespace in place")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    mode = "full" if args.full else "quick"
    args.history_from = args.history_from or HISTORY_FROM[mode]
    if not REUTERS_DEV.exists():
        print(f"skipped: {REUTERS_DEV} is absent")
        return 0
    figures = asyncio.run(main_async(args))
    _print(figures)
    settings = {
        "data": REUTERS_DEV.name,
        "extraction": "offline",
        "split": args.split,
        "history_from": args.history_from,
        "trends_repeat": TRENDS_REPEAT,
        "groups": GROUPS,
        "min_window_articles": MIN_WINDOW_ARTICLES,
        "surging": SURGING,
        "precise_ratio": PRECISE_RATIO,
    }
    record("storylines", mode, figures, TARGETS, settings, MEASURES, path=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
