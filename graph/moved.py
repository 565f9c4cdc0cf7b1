"""Where modules of ``graph/`` moved, so a pickle that names an old path still loads.

The community job's checkpoint (``agents.community.state``) is a pickle, and a pickle names each
class by its module path: a checkpoint written before a module moved names the old one. These
tables are written with the moves themselves, so every move is here.
"""

from __future__ import annotations

# old module -> its module now
MODULES: dict[str, str] = {
    "graph.aggregates": "graph.merge.aggregates",
    "graph.alias_indexes": "graph.aliases.indexes",
    "graph.alias_names": "graph.aliases.names",
    "graph.alias_rules": "graph.aliases.rules",
    "graph.alias_view": "graph.aliases.view",
    "graph.aliases": "graph.aliases.resolution",
    "graph.chunking": "graph.extraction.chunking",
    "graph.cluster_input": "graph.communities.cluster_input",
    "graph.community_ids": "graph.communities.ids",
    "graph.community_run": "graph.job.run",
    "graph.contributions": "graph.merge.contributions",
    "graph.documents": "graph.extraction.documents",
    "graph.emerging": "graph.trends.emerging",
    "graph.evidence": "graph.reports.evidence",
    "graph.extraction_parsing": "graph.extraction.parsing",
    "graph.graph_changes": "graph.merge.changes",
    "graph.graph_view": "graph.merge.view",
    "graph.human_ids": "graph.communities.human_ids",
    "graph.job_state": "graph.job.state",
    "graph.leiden": "graph.communities.leiden",
    "graph.leiden_assembly": "graph.communities.leiden_assembly",
    "graph.leiden_graph": "graph.communities.leiden_graph",
    "graph.leiden_local": "graph.communities.leiden_local",
    "graph.leiden_moves": "graph.communities.leiden_moves",
    "graph.leiden_partition": "graph.communities.leiden_partition",
    "graph.leiden_split": "graph.communities.leiden_split",
    "graph.leiden_subgraphs": "graph.communities.leiden_subgraphs",
    "graph.leiden_volumes": "graph.communities.leiden_volumes",
    "graph.lineage": "graph.communities.lineage",
    "graph.llm_extraction": "graph.extraction.llm",
    "graph.local_merge": "graph.merge.local",
    "graph.merge": "graph.merge.rules",
    "graph.merge_codec": "graph.merge.codec",
    "graph.merge_errors": "graph.merge.errors",
    "graph.report_context": "graph.reports.context",
    "graph.report_context_builder": "graph.reports.context_builder",
    "graph.report_rows": "graph.reports.rows",
    "graph.snapshot_assembly": "graph.job.version_tables",
    "graph.snapshot_model": "graph.versions.model",
    "graph.snapshots": "graph.versions.legacy_format",
    "graph.story_detail": "graph.trends.story_detail",
    "graph.storylines": "graph.trends.storylines",
    "graph.summaries": "graph.job.summaries",
    "graph.tally": "graph.merge.tally",
    "graph.version_rows": "graph.versions.rows",
}

# (old module, name) -> the module that holds the name now, for names that left their module
NAMES: dict[tuple[str, str], str] = {
    ("graph.community_run", "JobState"): "graph.job.state",
    ("graph.snapshots", "KnownRows"): "graph.versions.rows",
    ("graph.aliases", "NameIndexes"): "graph.aliases.indexes",
    ("graph.aliases", "Related"): "graph.aliases.indexes",
    ("graph.aliases", "AliasState"): "graph.aliases.indexes",
    ("graph.community_ids", "HumanIds"): "graph.communities.human_ids",
}


def moved(module: str, name: str) -> str:
    """The module that holds ``name``, pickled as a member of ``module``, now."""
    return NAMES.get((module, name)) or MODULES.get(module, module)
