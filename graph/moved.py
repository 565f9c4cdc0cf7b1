"""Where modules of ``graph/`` moved, so a pickle that names an old path still loads.

The community job's checkpoint (``agents.community.state``) is a pickle, and a pickle names each
class by its module path: a checkpoint written before a module moved names the old one. These
tables are written with the moves themselves, so every move is here.
"""

from __future__ import annotations

# old module -> its module now
MODULES: dict[str, str] = {}

# (old module, name) -> the module that holds the name now, for names that left their module
NAMES: dict[tuple[str, str], str] = {
    ("graph.community_run", "JobState"): "graph.job_state",
    ("graph.snapshots", "KnownRows"): "graph.version_rows",
    ("graph.aliases", "NameIndexes"): "graph.alias_indexes",
    ("graph.aliases", "Related"): "graph.alias_indexes",
    ("graph.aliases", "AliasState"): "graph.alias_indexes",
    ("graph.community_ids", "HumanIds"): "graph.human_ids",
}


def moved(module: str, name: str) -> str:
    """The module that holds ``name``, pickled as a member of ``module``, now."""
    return NAMES.get((module, name)) or MODULES.get(module, module)
