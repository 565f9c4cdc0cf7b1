"""Opening a namespace's graph tables from the settings, for the writer or for queries."""

from __future__ import annotations

from collections.abc import Mapping

from core.object_store import delta_storage_options
from core.settings import Settings
from core.tables.migration import convert_legacy_snapshots
from core.tables.store import GraphTables

# what answering questions never reads: a report's Markdown (``full_content``) repeats its
# title, summary and findings and is built from them on demand (``SnapshotReport.body``), and
# its JSON form (a third copy) is only for GraphRAG's export
QUERY_OMITS: Mapping[str, tuple[str, ...]] = {
    "community_reports": ("full_content", "full_content_json"),
    # searches reach relationships and claims through entities
    "text_units": ("relationship_ids", "covariate_ids"),
    # answers quote text units; a document's text and raw fields are the export's
    "documents": ("text", "raw_data"),
    # derived, not stored: a community's relationships, text units and mentions per day are
    # its members' (``QueryIndex.community_daily``), and a relationship's combined degree its
    # ends' degrees (``QueryIndex.combined_degree``)
    "communities": ("relationship_ids", "text_unit_ids", "size_history", "mentions_per_day"),
    "relationships": ("combined_degree", "strength"),
}


def open_graph_store(
    settings: Settings, *, convert: bool = False, for_queries: bool = False
) -> GraphTables:
    """The namespace's graph tables. ``convert`` (writers: the community job, ``kgrag
    migrate``) first converts a data directory that still holds only the JSON-lines snapshots
    of earlier releases (its latest snapshot becomes the first graph version).
    ``for_queries``: a reader for the query index, which leaves ``QUERY_OMITS`` unread."""
    store = GraphTables(
        settings.tables_uri,
        keep=settings.community.keep_snapshots,
        storage_options=delta_storage_options(settings.tables),
        compact_every=settings.community.compact_every,
        omit=QUERY_OMITS if for_queries else None,
    )
    if convert:
        convert_legacy_snapshots(settings, store)
    return store
