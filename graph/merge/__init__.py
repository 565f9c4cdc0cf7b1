"""Merging: extraction records folded into the graph, per-source contributions and changes."""
