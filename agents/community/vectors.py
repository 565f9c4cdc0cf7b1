"""Report vectors in Weaviate: regenerated reports embedded, dissolved communities' deleted.

The snapshot is what the query service reads; the vectors only find reports by meaning, so a
store that cannot be reached costs this run's vectors, not the run: they are rewritten with
the report's next change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from core.settings import Settings
from graph.model import Community
from graph.protocols import Embedder
from graph.versions.model import SnapshotReport

if TYPE_CHECKING:  # imported when vectors are written: the client's imports take a second
    from core.vector_store import WeaviateStore

log = logging.getLogger(__name__)

# reports embedded and sent at a time: a run may regenerate thousands, and their vectors as
# Python lists, the objects and the request built from them cost about 0.2 MiB a report
# (2,000 reports at 20,000 articles: 400 MiB more at once) where a chunk costs a few MiB
CHUNK = 200


async def write_report_vectors(
    settings: Settings,
    reports: Sequence[SnapshotReport],
    previous: Mapping[str, Community],
    current: Mapping[str, Community],
    regenerated: set[str],
) -> None:
    """Embed regenerated reports; delete the vectors of dissolved communities' reports."""
    fresh = [r for r in reports if r.id in regenerated]
    gone = [cid for cid in previous if cid not in current]
    if not fresh and not gone:
        return
    from core.clients import build_embedder  # the clients' imports take a second
    from core.vector_store import VectorStoreError, WeaviateStore

    embedder = build_embedder(settings)
    try:
        async with WeaviateStore(settings) as store:
            await upsert_report_vectors(store, embedder, fresh)
            await store.delete("report", gone)
    except VectorStoreError as e:
        # Reports stay in the snapshot; their vectors are rewritten with the next change.
        log.warning("report vectors not written this run: %s", e)
    finally:
        close = getattr(embedder, "aclose", None)  # its HTTP connections, when it has any
        if close is not None:
            await close()


async def upsert_report_vectors(
    store: WeaviateStore,
    embedder: Embedder,
    reports: Sequence[SnapshotReport],
    chunk: int | None = None,
) -> None:
    """Embed ``reports`` (title and summary) and upsert them, ``chunk`` (``CHUNK``) at a
    time: what a report's vector is, for the job and for benchmarks that index a snapshot."""
    size = chunk or CHUNK
    for start in range(0, len(reports), size):
        part = reports[start : start + size]
        vectors = await embedder.embed([f"{r.title}\n{r.summary}" for r in part])
        await store.upsert(
            "report",
            [
                (r.id, v, {"level": r.level, "title": r.title, "summary": r.summary})
                for r, v in zip(part, vectors, strict=True)
            ],
        )
