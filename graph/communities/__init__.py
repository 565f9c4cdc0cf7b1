"""Communities: hierarchical Leiden, stable community ids and their lineage."""
