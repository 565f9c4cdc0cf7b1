"""An offline index of a JSONL news file, built in-process for the query bench.

The same steps as the stream, minus Kafka: chunk every article (600/100 tokens, o200k_base),
extract offline, fold each chunk's contributions through the merge rules
(``graph.merge.rules.absorb_entity`` / ``absorb_relationship``) into a ``GraphView`` exactly as the
merger's ``graph-changes`` would, run the community job once (offline summaries and reports),
and write text-unit, entity and report vectors with the offline hashing embedder into Weaviate
under the bench's own namespace (dropped first). ``prepare`` reuses an index built earlier for the
same articles when its snapshot and vector counts are still there (``--rebuild`` forces).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agents.community.runner import Runner
from agents.community.vectors import upsert_report_vectors
from agents.embedder import entity_text, text_unit_properties, top_descriptions
from core.clients import build_embedder
from core.settings import Settings
from core.tables.opening import open_graph_store
from core.tokenizer import get_encoding
from core.vector_store import WeaviateStore
from graph.extraction.chunking import chunk_document
from graph.extraction.documents import document_from_obj
from graph.job.state import JobState
from graph.merge.local import LocalMerger
from graph.merge.view import GraphView
from graph.versions.model import Snapshot
from offline.extraction import extract_offline

BATCH = 500


def build_view(
    articles: Sequence[dict[str, Any]], settings: Settings, merger: LocalMerger | None = None
) -> GraphView:
    """The merged graph of ``articles`` (folded into ``merger``'s when given)."""
    enc = get_encoding(settings.chunking.encoding)
    merger = merger or LocalMerger(max_descriptions=settings.extraction.max_descriptions)
    for a in articles:
        doc = document_from_obj(a, max_chars=settings.chunking.max_document_chars)
        merger.add_document(doc)
        for chunk in chunk_document(
            doc,
            encode=enc.encode_ordinary,
            decode=enc.decode,
            size=settings.chunking.size,
            overlap=settings.chunking.overlap,
        ):
            merger.absorb(extract_offline(chunk))
    return merger.view


async def write_vectors(settings: Settings, view: GraphView) -> dict[str, int]:
    """Drop the namespace's collections, then upsert text units and entities in batches."""
    embedder = build_embedder(settings)
    units = [
        (c.id, f"{c.title}\n{c.text}", text_unit_properties(c)) for c in view.text_units.values()
    ]
    ents = [
        (
            a.key,
            entity_text(a),
            {"name": a.name, "type": a.type, "description": top_descriptions(a.descriptions)},
        )
        for a in view.entities.values()
    ]
    async with WeaviateStore(settings) as store:
        await store.drop_namespace()
        for kind, rows in (("text_unit", units), ("entity", ents)):
            for i in range(0, len(rows), BATCH):
                part = rows[i : i + BATCH]
                vectors = await embedder.embed([text for _, text, _ in part])
                await store.upsert(
                    kind, [(k, v, p) for (k, _, p), v in zip(part, vectors, strict=True)]
                )
        return {"text_unit": await store.count("text_unit"), "entity": await store.count("entity")}


async def write_report_vectors(settings: Settings, snapshot: Snapshot) -> int:
    """The community reports' vectors, as the community job writes them (title and summary)."""
    embedder = build_embedder(settings)
    reports = snapshot.community_reports
    async with WeaviateStore(settings) as store:
        await upsert_report_vectors(store, embedder, reports, BATCH)
        return await store.count("report")


async def vector_counts(settings: Settings) -> dict[str, int]:
    async with WeaviateStore(settings) as store:
        return {kind: await store.count(kind) for kind in ("text_unit", "entity", "report")}


def _marker(settings: Settings) -> Path:
    return settings.data_dir / settings.namespace / "bench-index.json"


async def prepare(
    settings: Settings, articles: Sequence[dict[str, Any]], *, rebuild: bool
) -> tuple[Snapshot, dict[str, Any]]:
    """The snapshot of ``articles`` (built, or reused when the marker, the snapshot and the
    vectors all still agree) and the build's figures. The snapshot is read back from the
    namespace's graph tables, which the community job writes."""
    store = open_graph_store(settings)
    marker = _marker(settings)
    ids = [str(a["id"]) for a in articles]
    if not rebuild and marker.exists() and store.latest_version() is not None:
        built = json.loads(marker.read_text(encoding="utf-8"))
        if built.get("ids_hash") == hash_ids(ids) and built.get("vectors") == await vector_counts(
            settings
        ):
            return store.load(), {**built, "reused": True}
    if not settings.tables.uri:  # a local namespace: start from no graph version at all
        shutil.rmtree(settings.data_dir / settings.namespace, ignore_errors=True)
        store = open_graph_store(settings)
    marker.unlink(missing_ok=True)
    t0 = time.perf_counter()
    view = build_view(articles, settings)
    t1 = time.perf_counter()
    state = JobState(view=view)
    run = await Runner(settings, state, write_vectors=False).run()
    while run.reports_deferred:  # reports put off (``reports_per_run``): the index is whole
        run = await Runner(settings, state, write_vectors=False).run()  # once they are written
    t2 = time.perf_counter()
    vectors = await write_vectors(settings, view)
    snapshot = store.load()
    vectors["report"] = await write_report_vectors(settings, snapshot)
    t3 = time.perf_counter()
    built = {
        "ids_hash": hash_ids(ids),
        "articles": len(articles),
        "vectors": vectors,
        "seconds": {
            "chunk_extract_merge": round(t1 - t0, 1),
            "community_job": round(t2 - t1, 1),
            "embed_and_upsert": round(t3 - t2, 1),
        },
        "community_job_timings": run.timings,
    }
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(built, indent=2), encoding="utf-8")
    return snapshot, {**built, "reused": False}


def hash_ids(ids: Sequence[str]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
